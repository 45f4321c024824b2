"""Sync and check a target: the difference between what its store holds and what is published.

What the store holds is known two ways: the ledger (`seams.target_records`: every record Seams
sent, with the fingerprint of what it sent, written only after the store confirmed it) and the
store's own ids (or only their count, when it equals the ledger's: `_present`). A sync sends
exactly the published records whose fingerprint differs from the ledger's or whose id the store
lacks, then deletes the ids the store or the ledger holds that are no longer published. With
`verify` (what `seams sync` and `seams sync --check` do) it also reads every stored record and
compares its fields and vector with Seams': a record altered by hand is found and rewritten.

Order, so that readers of the store never miss a document (`docs/targets.md` says what they
see): new and changed records first (an upsert replaces a record whole), deletes of retired ones
after. A changed chunk has a new chunk id, so between the two steps a reader may find both the
old and the new version of a changed document, never neither. A change of model or dimension
fills a new object beside the old one (`base.model_object`), then switches readers to it
(`TargetStore.switch`) and drops the old one.

A sync killed at any instant is repaired by the next: store writes are idempotent, the ledger
is written after the store and deleted after it, and the target's writer lock keeps two syncs
of one target apart (a killed process's session lock ends with its connection).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from seams.storage import writer_locks
from seams.storage.connections import ConnectionSource
from seams.storage.targets.base import (
    Record,
    TargetStore,
    cosine,
    differing_fields,
    model_object,
)
from seams.storage.targets.published import (
    PublishedState,
    published_records,
    published_state,
    snapshot,
)

BATCH_RECORDS = 500
"""Records per store write: a bounded request whatever the corpus size."""
VECTOR_COSINE = 0.9999
"""A stored vector within this cosine of Seams' is the same vector (stores may renormalise)."""
EXAMPLES = 5


@dataclass
class Difference:
    """A store compared with the published state (`seams sync --check`): records it holds,
    published ones it lacks (`missing`), ones it holds that are not published (`extra`) and ones
    whose fields or vector differ (`stale`), with a few examples of each."""

    records: int = 0
    missing: int = 0
    extra: int = 0
    stale: int = 0
    examples: dict[str, list[str]] = field(default_factory=dict)
    live: str | None = None
    model_id: str | None = None
    published_seq: int | None = None

    @property
    def exact(self) -> bool:
        return not (self.missing or self.extra or self.stale)

    def counts(self) -> dict[str, int]:
        return {
            "records": self.records,
            "missing": self.missing,
            "extra": self.extra,
            "stale": self.stale,
        }


@dataclass
class SyncResult:
    """What a sync did: records written and deleted, the object readers read afterwards,
    whether it moved readers from one model's object to another's (not on a first sync), and
    (with `verify`) what it found before repairing."""

    target: str
    written: int = 0
    deleted: int = 0
    records: int = 0
    live: str | None = None
    model_id: str | None = None
    published_seq: int | None = None
    switched: bool = False
    dropped: list[str] = field(default_factory=list)
    found: Difference | None = None
    seconds: float = 0.0


def sync_target(
    source: ConnectionSource,
    target: str,
    store: TargetStore,
    collections: Sequence[str],
    *,
    verify: bool = False,
    batch_records: int = BATCH_RECORDS,
) -> SyncResult:
    """Make `store` hold exactly the published current chunks of `collections`."""
    started = time.perf_counter()
    result = SyncResult(target)
    with source.connection() as ledger, source.connection() as reader:
        _lock(ledger, target)
        try:
            with snapshot(reader):
                state = published_state(reader, collections)
                result.model_id, result.published_seq = state.model_id, state.seq
                live = store.live()
                dest = _destination(ledger, target, store, state, live)
                if dest is None:  # nothing published and nothing stored
                    return result
                if state.dimension is not None:
                    store.ensure(dest, state.dimension)
                sent = _ledger(ledger, target, dest)
                present = _present(store, dest, sent, verify)
                stale: set[str] = set()
                if verify:
                    result.found = _compare(reader, store, dest, state, collections)
                    stale = set(result.found.examples.pop("_stale_all", []))
                wanted = state.fingerprints
                write = sorted(
                    cid
                    for cid, fp in wanted.items()
                    if sent.get(cid) != fp or cid not in present or cid in stale
                )
                remove = sorted((set(sent) | present) - set(wanted))
                for pairs in _to_send(reader, state, collections, write, batch_records):
                    store.upsert(dest, [record for record, _ in pairs])
                    _record(ledger, target, dest, [(r.chunk_id, fp) for r, fp in pairs])
                    result.written += len(pairs)
                for ids in _batches(remove, batch_records):
                    store.delete(dest, ids)
                    _forget(ledger, target, dest, ids)
                    result.deleted += len(ids)
            result.live = dest
            if dest != live:
                result.live = store.switch(dest)
                result.switched = live is not None  # a first sync gives readers their first object
                _adopt(ledger, target, dest, result.live)
            _save_state(ledger, target, store, result, state, len(wanted))
            result.records = len(wanted)
            for obj in store.objects():
                if obj != result.live:
                    store.drop(obj)
                    _forget_object(ledger, target, obj)
                    result.dropped.append(obj)
        finally:
            _unlock(ledger, target)
    result.seconds = time.perf_counter() - started
    return result


def check_target(
    source: ConnectionSource, target: str, store: TargetStore, collections: Sequence[str]
) -> Difference:
    """Compare the object readers read with the published state; writes nothing."""
    with source.connection() as reader, snapshot(reader):
        state = published_state(reader, collections)
        live = store.live()
        if live is None:
            found = Difference(missing=len(state.fingerprints))
            found.examples["missing"] = sorted(state.fingerprints)[:EXAMPLES]
        else:
            found = _compare(reader, store, live, state, collections)
            found.examples.pop("_stale_all", None)
    found.live, found.model_id, found.published_seq = live, state.model_id, state.seq
    return found


# --- internals -------------------------------------------------------------------------------


def _destination(
    ledger: psycopg.Connection[Any],
    target: str,
    store: TargetStore,
    state: PublishedState,
    live: str | None,
) -> str | None:
    """The object this sync writes: the live one when it holds the serving model's records,
    else the serving model's object beside it (a switch); None when there is nothing to do."""
    if state.model_id is None or state.dimension is None:
        return live
    row = ledger.execute(
        "SELECT live, model_id, dimension FROM seams.target_states WHERE target = %s", (target,)
    ).fetchone()
    if (
        live is not None
        and row is not None
        and row[0] == live
        and (row[1], row[2]) == (state.model_id, state.dimension)
    ):
        return live
    return model_object(store.name, state.model_id, state.dimension)


def _compare(
    reader: psycopg.Connection[Any],
    store: TargetStore,
    obj: str,
    state: PublishedState,
    collections: Sequence[str],
) -> Difference:
    """Every record of `obj` against the published records: counts, examples, and under the
    key `_stale_all` every stale id (for the sync that repairs them)."""
    expected = {r.chunk_id: r for r, _ in published_records(reader, state, collections)}
    found = Difference()
    seen: set[str] = set()
    stale: list[str] = []
    extra: list[str] = []
    for record in store.read(obj):
        found.records += 1
        cid = record.chunk_id
        seen.add(cid)
        published = expected.get(cid)
        if published is None:
            extra.append(cid)
            continue
        fields = differing_fields(published.fields, record.fields)
        if cosine(published.vector, record.vector) < VECTOR_COSINE:
            fields.append("vector")
        if fields:
            stale.append(cid)
            found.examples.setdefault("stale", []).append(f"{cid} ({', '.join(fields)})")
    missing = sorted(set(expected) - seen)
    found.missing, found.extra, found.stale = len(missing), len(extra), len(stale)
    found.examples["missing"] = missing[:EXAMPLES]
    found.examples["extra"] = sorted(extra)[:EXAMPLES]
    found.examples["stale"] = sorted(found.examples.get("stale", []))[:EXAMPLES]
    found.examples = {k: v for k, v in found.examples.items() if v}
    found.examples["_stale_all"] = stale
    return found


def _to_send(
    reader: psycopg.Connection[Any],
    state: PublishedState,
    collections: Sequence[str],
    write: Sequence[str],
    size: int,
) -> Iterator[list[tuple[Record, str]]]:
    """The published records of `write`, `size` at a time: fetched by id when they are few,
    else picked from one pass over every published record (a first sync, a model switch),
    which reads the chunks once instead of once per batch."""
    if len(write) * 10 < len(state.fingerprints):
        for ids in _batches(write, size):
            yield list(published_records(reader, state, collections, ids))
        return
    wanted, batch = set(write), []
    for pair in published_records(reader, state, collections):
        if pair[0].chunk_id in wanted:
            batch.append(pair)
            if len(batch) == size:
                yield batch
                batch = []
    if batch:
        yield batch


def _present(store: TargetStore, obj: str, sent: dict[str, str], verify: bool) -> set[str]:
    """The ids `obj` holds: the ledger's when `obj` holds as many records as the ledger lists
    (a count, where listing every id is slow: Milvus), else the store's own list. A sync that
    died part-way leaves the two apart (the ledger is written after the store and deleted after
    it), as does a record deleted or added by hand; `verify` always lists."""
    if not verify and store.count(obj) == len(sent):
        return set(sent)
    return store.ids(obj)


def _batches(ids: Sequence[str], size: int) -> Iterator[list[str]]:
    iterator = iter(ids)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def _lock(conn: psycopg.Connection[Any], target: str) -> None:
    writer_locks.hold(conn, f"seams.target:{target}", f"seams sync {target}")


def _unlock(conn: psycopg.Connection[Any], target: str) -> None:
    writer_locks.release(conn, f"seams.target:{target}")


def _ledger(conn: psycopg.Connection[Any], target: str, obj: str) -> dict[str, str]:
    rows = conn.execute(
        "SELECT chunk_id, fingerprint FROM seams.target_records"
        " WHERE target = %s AND store_object = %s",
        (target, obj),
    )
    return {str(cid): str(fp) for cid, fp in rows}


def _record(
    conn: psycopg.Connection[Any], target: str, obj: str, sent: Iterable[tuple[str, str]]
) -> None:
    ids, fingerprints = zip(*sent, strict=True) if sent else ((), ())
    conn.execute(
        "INSERT INTO seams.target_records (target, store_object, chunk_id, fingerprint)"
        " SELECT %s, %s, v.c, v.f FROM unnest(%s::text[], %s::text[]) AS v(c, f)"
        " ON CONFLICT (target, store_object, chunk_id)"
        " DO UPDATE SET fingerprint = EXCLUDED.fingerprint",
        (target, obj, list(ids), list(fingerprints)),
    )


def _forget(conn: psycopg.Connection[Any], target: str, obj: str, ids: Sequence[str]) -> None:
    conn.execute(
        "DELETE FROM seams.target_records WHERE target = %s AND store_object = %s"
        " AND chunk_id = ANY(%s)",
        (target, obj, list(ids)),
    )


def _forget_object(conn: psycopg.Connection[Any], target: str, obj: str) -> None:
    conn.execute(
        "DELETE FROM seams.target_records WHERE target = %s AND store_object = %s", (target, obj)
    )


def _adopt(conn: psycopg.Connection[Any], target: str, built: str, live: str) -> None:
    """After a switch: the records sent to `built` are those of `live` (the same object, or
    the readers' object a store without aliases copied them into); no other object's count."""
    with conn.transaction():
        conn.execute(
            "DELETE FROM seams.target_records WHERE target = %s AND store_object <> %s",
            (target, built),
        )
        if built != live:
            conn.execute(
                "UPDATE seams.target_records SET store_object = %s"
                " WHERE target = %s AND store_object = %s",
                (live, target, built),
            )


def _save_state(
    conn: psycopg.Connection[Any],
    target: str,
    store: TargetStore,
    result: SyncResult,
    state: PublishedState,
    records: int,
) -> None:
    conn.execute(
        "INSERT INTO seams.target_states (target, kind, live, model_id, dimension,"
        " published_seq, records, synced_at) VALUES (%s, %s, %s, %s, %s, %s, %s, now())"
        " ON CONFLICT (target) DO UPDATE SET kind = EXCLUDED.kind, live = EXCLUDED.live,"
        " model_id = EXCLUDED.model_id, dimension = EXCLUDED.dimension,"
        " published_seq = EXCLUDED.published_seq, records = EXCLUDED.records,"
        " synced_at = EXCLUDED.synced_at",
        (
            target,
            store.kind,
            result.live,
            state.model_id or "",
            state.dimension or 0,
            state.seq,
            records,
        ),
    )
