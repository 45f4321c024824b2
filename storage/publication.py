"""Publication: readers see only complete, published builds of each batch, switched to in one step.

The `chunk_index` write completes a batch's build (`seams.storage.builds`) and publishes it in
its own transaction (`complete_and_publish`), under the collection's publication lock: the build
becomes published, older generations go, each document's newest published version becomes
current (`seams.current_documents`), the BM25 statistics follow, `seams.publications` records
it. A model switch is held, then published whole (`ModelSwitch`, `serving_model`): readers flip
from the complete old index to the complete new one, and the retired models' HNSW indexes are
dropped after the commit (`drop_retired_indexes`). Why held rather than per batch, and the lock
order every writer follows: docs/architecture.md, "Builds and publication".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import psycopg
from psycopg import sql

from seams.errors import counted
from seams.storage import schema, vector_indexes, writer_locks
from seams.storage.builds import (
    BUILD_SELECT,
    Build,
    build_from_row,
    in_pipeline_order,
    locked_open_build,
)
from seams.storage.schema import BATCH_ASSETS, OPEN_STATES_SQL, BuildState

COLLECTION = schema.DEFAULT_COLLECTION


@dataclass(frozen=True)
class Unpublished:
    """A batch readers do not see as built: never published, or a newer build left open."""

    batch_key: str
    source: str
    generation: int | None
    """The open build (None: no build was ever opened)."""
    parts: tuple[str, ...]
    state: BuildState | Literal["unbuilt"]
    """`building`, `complete` (ready, held) or `unbuilt` (registered, nothing written)."""
    run_id: str | None
    started_at: datetime | None
    published_generation: int | None
    reason: str


@dataclass(frozen=True)
class Publication:
    """What a `complete_and_publish` did: the publication (None if none) and, per batch, the
    generation published or why it was held back."""

    seq: int | None = None
    published: dict[str, int] = field(default_factory=dict)
    held: dict[str, str] = field(default_factory=dict)
    retired_models: tuple[str, ...] = ()
    """The models a completed model switch replaced (their vectors deleted, but for those of an
    open build): the writer drops their HNSW indexes once its transaction committed
    (`drop_retired_indexes`)."""


@dataclass(frozen=True)
class ModelSwitch:
    """A model switch in progress: builds of `target` complete and held until every batch with
    current chunks has one; readers search `serving` meanwhile."""

    serving: str
    target: str
    ready: tuple[str, ...]
    """Batches with a complete build of `target`, held."""
    waiting: tuple[str, ...]
    """Batches whose current chunks have vectors of another model and no such build yet."""
    collections: Mapping[str, str] = field(default_factory=dict)
    """The collection of each waiting batch (a collection the settings no longer declare is
    built by `seams backfill`, not by a job)."""

    @property
    def total(self) -> int:
        return len(self.ready) + len(self.waiting)

    def waiting_for(self, most: int = 5) -> str:
        """`batch K (collection default), batch L (collection notes)` (and how many more)."""
        named = [
            f"batch {b} (collection {self.collections.get(b, COLLECTION)})"
            for b in self.waiting[:most]
        ]
        more = f" and {len(self.waiting) - most} more" if len(self.waiting) > most else ""
        return ", ".join(named) + more

    def describe(self, command: str = "seams backfill") -> str:
        """`held: waiting for batch K (collection default) to switch models from ab12 to cd34
        (2 of 3 batch(es) ready; search answers with ab12 until every batch is): run `seams
        backfill``."""
        return (
            f"held: waiting for {self.waiting_for() or 'the other held builds'} to switch "
            f"models from {self.serving[:12]} to {self.target[:12]} ({len(self.ready)} of "
            f"{counted(self.total, 'batch')} ready; search answers with {self.serving[:12]} until "
            f"every batch is): run `{command}`"
        )


# --- publication -------------------------------------------------------------------------------


def publish_lock_name(collection: str) -> str:
    """The writer lock that serialises the publications and retirements of `collection`
    (they move its current documents and BM25 counters); another collection's publication
    does not wait for it."""
    return f"seams.publish:{collection}"


def lock_collections(conn: psycopg.Connection[Any], collections: Iterable[str]) -> None:
    """Take the publication locks of `collections` (transaction-scoped, reentrant), in one
    order every writer uses, `lexical_sync` too (for the collections whose BM25 counters it
    changes): the others sorted, the default collection's last."""
    names = sorted(set(collections) - {COLLECTION})
    if COLLECTION in set(collections):
        names.append(COLLECTION)
    for collection in names:
        writer_locks.lock(conn, publish_lock_name(collection))


def complete_and_publish(
    conn: psycopg.Connection[Any], builds: Mapping[str, Build], *, run_id: str | None = None
) -> Publication:
    """Publish the builds among `builds` that are complete (in the caller's transaction: the
    `chunk_index` write); the others stay open, each with the reason why. A complete build
    whose vectors are not the serving model's is held for the model switch, unless it completes
    the switch: then every held build of its model is published with it (module doc), and the
    result names the models it replaced for `drop_retired_indexes`."""
    held = incomplete(conn, builds)
    ready = {b: build.generation for b, build in builds.items() if b not in held}
    if not ready:
        return Publication(held=held)
    # Under the publication lock before the serving model is read: concurrent completions of
    # one switch run one after the other, and the last sees every other's held build.
    lock_collections(conn, {builds[b].collection for b in ready})
    serving = serving_model(conn)
    models = build_models(conn, ready)
    plain = {b: g for b, g in ready.items() if models.get(b) in (None, serving)}
    switching = sorted({m for b, m in models.items() if m is not None and m != serving})
    if serving is None or not switching:
        return Publication(publish(conn, ready, run_id=run_id), ready, held)
    seq = publish(conn, plain, run_id=run_id) if plain else None
    published = dict(plain)
    retired: tuple[str, ...] = ()
    for target in switching:
        mine = {b: g for b, g in ready.items() if models.get(b) == target}
        group, runs, waiting = _switch_group(conn, target, mine)
        if waiting or len(switching) > 1:  # two new models at once: neither is the switch
            state = ModelSwitch(serving, target, tuple(sorted(group)), tuple(waiting), waiting)
            _hold(conn, mine)
            held.update(dict.fromkeys(mine, state.describe()))
            continue
        seq = publish(conn, group, run_id=run_id, runs=runs)
        published.update(group)
        retired = tuple(sorted({serving, *_retire_other_models(conn, target)}))
    return Publication(seq, published, held, retired)


def serving_model(conn: psycopg.Connection[Any]) -> str | None:
    """The model of the published index (None: no published batch with current documents holds
    a vector): that of the newest published batch that holds current documents. Every batch
    with current chunks has vectors of it, except in a database published before switches were
    held, where it is still the model readers were answered with."""
    row = conn.execute(
        "SELECT i.model_id FROM seams.batch_builds AS b"
        " CROSS JOIN LATERAL (SELECT i.model_id FROM seams.chunk_index AS i"
        "     WHERE i.batch_key = b.batch_key AND i.generation <= b.generation LIMIT 1) AS i"
        " WHERE b.state = 'published' AND EXISTS ("
        "     SELECT 1 FROM seams.current_documents AS d WHERE d.batch_key = b.batch_key)"
        " ORDER BY b.batch_key DESC LIMIT 1",
        prepare=True,
    ).fetchone()
    return None if row is None else str(row[0])


def build_models(conn: psycopg.Connection[Any], builds: Mapping[str, int]) -> dict[str, str]:
    """Per build (batch -> generation) that wrote vectors, their model (a build without any:
    absent). One `chunk_index` write embeds with one model, so one row tells."""
    keys = sorted(builds)
    rows = conn.execute(
        "SELECT v.b, i.model_id FROM unnest(%s::text[], %s::int[]) AS v(b, g)"
        " CROSS JOIN LATERAL (SELECT i.model_id FROM seams.chunk_index AS i"
        "     WHERE i.batch_key = v.b AND i.generation = v.g LIMIT 1) AS i",
        (keys, [builds[k] for k in keys]),
    ).fetchall()
    return {str(b): str(m) for b, m in rows}


def _waiting_batches(conn: psycopg.Connection[Any], target: str) -> dict[str, str]:
    """Published batches with current documents whose visible vectors are of another model than
    `target`, with their collections: each needs a complete build of `target` before the switch
    is published."""
    rows = conn.execute(
        "SELECT b.batch_key, b.collection FROM seams.batch_builds AS b"
        " WHERE b.state = 'published'"
        " AND EXISTS (SELECT 1 FROM seams.current_documents AS d WHERE d.batch_key = b.batch_key)"
        " AND EXISTS (SELECT 1 FROM seams.chunk_index AS i WHERE i.batch_key = b.batch_key"
        "             AND i.generation <= b.generation AND i.model_id <> %s)"
        " ORDER BY b.batch_key",
        (target,),
    ).fetchall()
    return {str(b): str(c) for b, c in rows}


def _switch_group(
    conn: psycopg.Connection[Any], target: str, mine: Mapping[str, int]
) -> tuple[dict[str, int], dict[str, str | None], dict[str, str]]:
    """The builds a switch to `target` would publish together (`mine`, the caller's complete
    builds of it, and every other complete build of it whose row is free, now locked), the runs
    that wrote those others, and the batches still waiting for one (with their collections)."""
    others = conn.execute(
        BUILD_SELECT + f" WHERE o.state IN {OPEN_STATES_SQL} AND 'chunk_index' = ANY(o.parts)"
        " AND o.batch_key <> ALL(%s)"
        " ORDER BY o.batch_key FOR UPDATE OF o SKIP LOCKED",
        (sorted(mine),),
    ).fetchall()
    candidates = {row[0]: build_from_row(row) for row in others}
    models = _complete_models(conn, candidates)
    others = {b: candidates[b].generation for b, m in models.items() if m == target}
    group = {**mine, **others}
    waiting = {b: c for b, c in _waiting_batches(conn, target).items() if b not in group}
    return group, {b: candidates[b].run_id for b in others}, waiting


def _complete_models(conn: psycopg.Connection[Any], builds: Mapping[str, Build]) -> dict[str, str]:
    """Per build among `builds` that is complete (`incomplete` finds nothing missing), the
    model of its vectors."""
    reasons = incomplete(conn, builds) if builds else {}
    complete = {b: build.generation for b, build in builds.items() if b not in reasons}
    return build_models(conn, complete) if complete else {}


def _hold(conn: psycopg.Connection[Any], builds: Mapping[str, int]) -> None:
    """Mark complete builds held for a model switch (`complete`), so `unpublished` and the
    switch's last write find them."""
    keys = sorted(builds)
    conn.execute(
        "UPDATE seams.batch_builds AS o SET state = 'complete', completed_at = now()"
        " FROM unnest(%s::text[], %s::int[]) AS v(b, g)"
        " WHERE o.batch_key = v.b AND o.generation = v.g",
        (keys, [builds[k] for k in keys]),
    )


def _retire_other_models(conn: psycopg.Connection[Any], serving: str) -> tuple[str, ...]:
    """After a switch to `serving` is published (which removed the switched batches' older
    generations): delete every other model's vectors left, but those of open builds (a later
    switch being built), e.g. a batch none of whose documents is current; the models deleted."""
    rows = conn.execute(
        "DELETE FROM seams.chunk_index AS i WHERE i.model_id <> %s AND NOT EXISTS ("
        "    SELECT 1 FROM seams.batch_builds AS o WHERE o.batch_key = i.batch_key"
        f"    AND o.generation = i.generation AND o.state IN {OPEN_STATES_SQL})"
        " RETURNING i.model_id",
        (serving,),
    ).fetchall()
    return tuple(sorted({str(r[0]) for r in rows}))


def model_switch(conn: psycopg.Connection[Any]) -> ModelSwitch | None:
    """The model switch in progress (None: none): the model of the held complete builds, the
    batches ready in it and those still waiting, what `seams check` reports."""
    serving = serving_model(conn)
    if serving is None:
        return None
    rows = conn.execute(
        BUILD_SELECT
        + " WHERE o.state = 'complete' AND 'chunk_index' = ANY(o.parts) ORDER BY o.batch_key"
    ).fetchall()
    models = _complete_models(conn, {row[0]: build_from_row(row) for row in rows})
    targets = sorted({m for m in models.values() if m != serving})
    if not targets:
        return None
    target = max(targets, key=lambda m: sum(v == m for v in models.values()))
    ready = tuple(sorted(b for b, m in models.items() if m == target))
    waiting = {b: c for b, c in _waiting_batches(conn, target).items() if b not in ready}
    return ModelSwitch(serving, target, ready, tuple(waiting), waiting)


def incomplete(conn: psycopg.Connection[Any], builds: Mapping[str, Build]) -> dict[str, str]:
    """Per build that cannot be published, why: a part upstream of one it did not rewrite,
    `chunk_index` not written, or chunks without their vector."""
    reasons: dict[str, str] = {}
    check: dict[str, Build] = {}
    for batch, build in builds.items():
        if schema.CHUNK_INDEX.name not in build.parts:
            reasons[batch] = (
                f"build {build.generation} stopped after {build.last_part}"
                if build.parts
                else f"build {build.generation} has written nothing yet"
            )
            continue
        first = BATCH_ASSETS.index(build.parts[0])
        skipped = [t for t in BATCH_ASSETS[first:] if t not in build.parts]
        if skipped:
            reasons[batch] = (
                f"build {build.generation} rewrote {build.parts[0]} but not {skipped[0]} after "
                f"it: materialize {', '.join(skipped)} (and what follows) for this batch"
            )
            continue
        check[batch] = build
    if not check:
        return reasons
    keys = sorted(check)
    rows = conn.execute(
        "SELECT v.b, count(c.chunk_id), count(c.chunk_id) FILTER (WHERE NOT EXISTS ("
        "    SELECT 1 FROM seams.chunk_index AS i"
        "    WHERE i.batch_key = c.batch_key AND i.generation = v.g"
        "      AND i.document_id = c.document_id AND i.chunk_id = c.chunk_id)"
        "  AND NOT (c.boundary_method = 'jaccard' AND EXISTS ("
        "    SELECT 1 FROM seams.chunk_index AS i"
        "    WHERE i.batch_key = c.batch_key AND i.generation = v.g AND i.mode = 'pooled')))"
        " FROM unnest(%s::text[], %s::int[], %s::bool[]) AS v(b, g, exact)"
        " LEFT JOIN seams.chunks AS c ON c.batch_key = v.b"
        "  AND (c.generation = v.g OR (NOT v.exact AND c.generation <= v.g))"
        " GROUP BY v.b",
        (
            keys,
            [check[k].generation for k in keys],
            [schema.CHUNKS.name in check[k].parts for k in keys],
        ),
    ).fetchall()
    for batch, chunks, missing in rows:
        if missing:
            reasons[batch] = (
                f"build {check[batch].generation}: chunk_index holds no vector for {missing} of "
                f"{counted(chunks, 'chunk')} (was the embedding model unavailable?): rematerialize "
                "chunk_index for this batch"
            )
    return reasons


def publish(
    conn: psycopg.Connection[Any],
    builds: Mapping[str, int],
    *,
    run_id: str | None = None,
    runs: Mapping[str, str | None] | None = None,
) -> int:
    """Make the given builds (batch -> generation) what readers see, in the caller's
    transaction; returns the publication's `seq`. The builds must be complete. Each batch's
    publication names `run_id`, or its entry in `runs` (a held build names the run that wrote
    it, not the one whose write completed the switch)."""
    keys = sorted(builds)
    gens = [builds[k] for k in keys]
    collections = _build_collections(conn, keys, gens)
    lock_collections(conn, collections)
    seq = conn.execute("SELECT nextval('seams.publication_seq')").fetchone()[0]
    pairs = "unnest(%(b)s::text[], %(g)s::int[]) AS v(b, g)"
    args: dict[str, Any] = {"b": keys, "g": gens, "seq": seq, "run": run_id}
    conn.execute(
        "UPDATE seams.batch_builds SET state = 'superseded'"
        " WHERE batch_key = ANY(%(b)s) AND state = 'published'",
        args,
    )
    conn.execute(
        "UPDATE seams.batch_builds AS o SET state = 'published',"
        " completed_at = coalesce(o.completed_at, now()), published_at = now()"
        f" FROM {pairs} WHERE o.batch_key = v.b AND o.generation = v.g",
        args,
    )
    # Per table and batch only the newest generation at or below the published one stays:
    # a table the build rewrote loses its older rows, one it inherited keeps them.
    for table in schema.ASSET_TABLES.values():
        conn.execute(
            sql.SQL(
                "DELETE FROM {} AS t USING seams.batch_builds AS o"
                " WHERE o.batch_key = ANY(%(b)s) AND o.state = 'published'"
                " AND %(table)s = ANY(o.parts)"
                " AND t.batch_key = o.batch_key AND t.generation < o.generation"
            ).format(table.identifier()),
            {**args, "table": table.name},
        )
    documents = [
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT document_id FROM seams.batch_documents WHERE batch_key = ANY(%s)"
            " ORDER BY 1",
            (keys,),
        )
    ]
    _make_current(conn, documents, seq)
    _sync_lexical(conn, documents, keys)
    conn.execute(
        "INSERT INTO seams.publications (seq, batch_key, generation, kind, run_id, collection)"
        " SELECT %(seq)s, v.b, v.g, 'batch', v.r, v.c"
        " FROM unnest(%(b)s::text[], %(g)s::int[], %(r)s::text[], %(c)s::text[])"
        " AS v(b, g, r, c)",
        {
            **args,
            "r": [(runs or {}).get(k, run_id) for k in keys],
            "c": [collections.get(k, COLLECTION) for k in keys],
        },
    )
    return int(seq)


def _build_collections(
    conn: psycopg.Connection[Any], keys: Sequence[str], generations: Sequence[int]
) -> dict[str, str]:
    """Batch -> collection of the given builds (from `seams.batch_builds`)."""
    rows = conn.execute(
        "SELECT o.batch_key, o.collection FROM seams.batch_builds AS o"
        " JOIN unnest(%s::text[], %s::int[]) AS v(b, g)"
        " ON o.batch_key = v.b AND o.generation = v.g",
        (list(keys), list(generations)),
    ).fetchall()
    return {str(b): str(c) for b, c in rows}


# The rule of what is current, over published batches: per document its newest registered
# version (registered_at, ties by batch_key), unless retired after it was registered.
# The key is (document_id, collection), so a document that moved to another collection gets a
# new row and loses its old one in the same statement (the DELETE reads the statement's
# snapshot, which holds the old row and not the new one): one current row per document.
_CURRENT = """
WITH latest AS (
    SELECT DISTINCT ON (d.document_id) d.document_id, d.batch_key, b.generation,
           d.source_sha256, d.registered_at, b.collection
    FROM seams.batch_documents AS d
    JOIN seams.batch_builds AS b ON b.batch_key = d.batch_key AND b.state = 'published'
    WHERE d.document_id = ANY(%(docs)s)
    ORDER BY d.document_id, d.registered_at DESC, d.batch_key DESC
), live AS (
    SELECT l.* FROM latest AS l
    WHERE NOT EXISTS (SELECT 1 FROM seams.document_tombstones AS t
                      WHERE t.document_id = l.document_id AND t.retired_at >= l.registered_at)
), upserted AS (
    INSERT INTO seams.current_documents AS c
        (document_id, batch_key, generation, source_sha256, registered_at, published_seq,
         collection)
    SELECT document_id, batch_key, generation, source_sha256, registered_at, %(seq)s,
           collection FROM live
    ON CONFLICT (document_id, collection) DO UPDATE
    SET batch_key = excluded.batch_key, generation = excluded.generation,
        source_sha256 = excluded.source_sha256, registered_at = excluded.registered_at,
        published_seq = excluded.published_seq
    WHERE (c.batch_key, c.generation, c.source_sha256, c.registered_at)
          IS DISTINCT FROM (excluded.batch_key, excluded.generation, excluded.source_sha256,
                            excluded.registered_at)
)
DELETE FROM seams.current_documents AS c
WHERE c.document_id = ANY(%(docs)s)
  AND NOT EXISTS (SELECT 1 FROM live
                  WHERE live.document_id = c.document_id AND live.collection = c.collection)
"""


def _make_current(conn: psycopg.Connection[Any], documents: list[str], seq: int) -> None:
    if documents:
        conn.execute(_CURRENT, {"docs": documents, "seq": seq})


def _sync_lexical(conn: psycopg.Connection[Any], documents: list[str], batches: list[str]) -> None:
    """`seams.lexical_sync` (see `seams.storage.search.lexical_index`)."""
    if documents:
        conn.execute("SELECT seams.lexical_sync(%s::text[], %s::text[])", (documents, batches))


def publish_ready(
    conn: psycopg.Connection[Any],
    batches: Sequence[str] | None = None,
    *,
    run_id: str | None = None,
) -> Publication:
    """Publish every open build (of `batches`, or of all) whose `chunk_index` is written and
    which is complete: what a rerun does for a build that became publishable without a new
    write. One transaction; on an autocommit connection, the HNSW indexes of the models a
    completed switch retired are then dropped concurrently (`drop_retired_indexes`)."""
    result = _publish_ready(conn, batches, run_id=run_id)
    drop_retired_indexes(conn, result)
    return result


def drop_retired_indexes(conn: psycopg.Connection[Any], result: Publication) -> list[str]:
    """After `result`'s transaction committed: drop the HNSW index of each model its switch
    retired (none of its vectors left), `DROP INDEX CONCURRENTLY` on an autocommit connection,
    so no search waits; the names dropped. A writer calls it once its publishing write
    committed."""
    dropped: list[str] = []
    for model_id in result.retired_models:
        dropped.extend(vector_indexes.drop_model_indexes(conn, model_id))
    return dropped


def _publish_ready(
    conn: psycopg.Connection[Any], batches: Sequence[str] | None, *, run_id: str | None
) -> Publication:
    with conn.transaction():
        rows = conn.execute(
            f"SELECT batch_key FROM seams.batch_builds WHERE state IN {OPEN_STATES_SQL}"
            " AND 'chunk_index' = ANY(parts) AND (%(all)s OR batch_key = ANY(%(b)s))"
            " ORDER BY batch_key",
            {"all": batches is None, "b": list(batches or [])},
        ).fetchall()
        builds = {}
        for (batch,) in rows:
            build = locked_open_build(conn, batch)
            if build is not None and schema.CHUNK_INDEX.name in build.parts:
                builds[batch] = build
        if not builds:
            return Publication()
        return complete_and_publish(conn, builds, run_id=run_id)


def retire(conn: psycopg.Connection[Any], documents: Sequence[str]) -> int | None:
    """Documents whose files are gone leave what readers see now, in the caller's transaction
    (after their tombstones were written); returns the publication's `seq` (None: none was
    current)."""
    docs = sorted(set(documents))
    if not docs:
        return None
    # The collections the documents were ever registered in (a publication of any of them
    # could make one current again): their locks, before anything is read.
    collections = conn.execute(
        "SELECT DISTINCT collection FROM seams.batch_documents WHERE document_id = ANY(%s)",
        (docs,),
    ).fetchall()
    lock_collections(conn, [COLLECTION, *(c for (c,) in collections)])
    gone = conn.execute(
        "DELETE FROM seams.current_documents WHERE document_id = ANY(%s)"
        " RETURNING batch_key, generation, collection",
        (docs,),
    ).fetchall()
    if not gone:
        return None
    seq = int(conn.execute("SELECT nextval('seams.publication_seq')").fetchone()[0])
    _sync_lexical(conn, docs, [])
    batches = sorted(set(gone))
    conn.execute(
        "INSERT INTO seams.publications (seq, batch_key, generation, kind, collection)"
        " SELECT %s, b, g, 'retire', c"
        " FROM unnest(%s::text[], %s::int[], %s::text[]) AS v(b, g, c)"
        " ON CONFLICT DO NOTHING",
        (seq, [b for b, _, _ in batches], [g for _, g, _ in batches], [c for *_, c in batches]),
    )
    return seq


# --- what is (not) published -------------------------------------------------------------------


def unpublished(conn: psycopg.Connection[Any]) -> list[Unpublished]:
    """Every batch readers do not see as built, in key order: registered but never built,
    or with an open build (left by a crash, a held model, a step not yet run), and why."""
    rows = conn.execute(
        "WITH keys AS (SELECT batch_key FROM seams.batches"
        "              UNION SELECT batch_key FROM seams.batch_builds)"
        " SELECT k.batch_key, coalesce(s.source, ''), o.generation, o.state, o.parts, o.run_id,"
        "        o.started_at, p.generation"
        " FROM keys AS k"
        " LEFT JOIN seams.batches AS s ON s.batch_key = k.batch_key"
        " LEFT JOIN seams.batch_builds AS o ON o.batch_key = k.batch_key"
        f"      AND o.state IN {OPEN_STATES_SQL}"
        " LEFT JOIN seams.batch_builds AS p ON p.batch_key = k.batch_key"
        "      AND p.state = 'published'"
        " WHERE o.batch_key IS NOT NULL OR p.batch_key IS NULL"
        " ORDER BY k.batch_key"
    ).fetchall()
    builds = {
        batch: Build(batch, g, state, in_pipeline_order(parts), run, started, published)
        for batch, _, g, state, parts, run, started, published in rows
        if g is not None
    }
    reasons = incomplete(conn, builds) if builds else {}
    switch = model_switch(conn) if builds else None
    if switch is not None:
        reasons.update(dict.fromkeys((b for b in switch.ready if b in builds), switch.describe()))
    out = []
    for batch, source, g, state, parts, run, started, published in rows:
        if g is None:
            out.append(
                Unpublished(batch, source, None, (), "unbuilt", None, None, None, "not built yet")
            )
            continue
        reason = reasons.get(batch, f"build {g} is complete but not published yet")
        out.append(
            Unpublished(
                batch, source, g, in_pipeline_order(parts), state, run, started, published, reason
            )
        )
    return out


def published_seqs(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """Collection -> the newest publication (`seams.publications.seq`) of it, for the
    collections the connection may read (a tenant's: its own)."""
    rows = conn.execute(
        sql.SQL("SELECT collection, max(seq) FROM {} GROUP BY collection").format(
            schema.PUBLICATIONS.identifier()
        )
    ).fetchall()
    return {str(collection): int(seq) for collection, seq in rows}
