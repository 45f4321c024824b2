"""What a target must hold: Seams' published current chunks with the serving model's vectors.

The same rows `seams export --current --vectors` reads (`seams.current_chunks`, each chunk's
vector of its batch's published build in `seams.chunk_index`), restricted to the serving model
(`publication.serving_model`) and to the collections the target receives. Nothing of a build in
progress or held for a model switch is ever read: a store is a reader of published data.

Every read of one sync runs inside `snapshot`: one read-only REPEATABLE READ transaction, so the
ids, fingerprints and records a sync compares and sends are of one publication, even when
another is published meanwhile (the next sync sends that one).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from seams.storage import publication
from seams.storage.targets.base import FIELD_NAMES, Record

_CHUNK_FIELDS = tuple(n for n in FIELD_NAMES if n not in ("source_uri", "vector_model_id"))

_FROM = """
FROM seams.current_chunks AS c
JOIN seams.current_documents AS cd ON cd.document_id = c.document_id
JOIN seams.chunk_index AS i
  ON i.batch_key = c.batch_key AND i.generation <= cd.generation
 AND i.document_id = c.document_id AND i.chunk_id = c.chunk_id AND i.model_id = %(model)s
LEFT JOIN seams.batch_documents AS d
  ON d.batch_key = c.batch_key AND d.document_id = c.document_id
WHERE c.collection = ANY(%(collections)s)
"""


def _fingerprint() -> sql.Composable:
    """sha256 of every field as PostgreSQL writes them and of the vector's binary form: what a
    record was, to tell whether the store's copy is still Seams' (computed by PostgreSQL, no
    vector leaves it for the comparison, none is written out as text)."""
    values = [sql.SQL("c.{}").format(sql.Identifier(n)) for n in _CHUNK_FIELDS]
    values += [sql.SQL("d.source_uri"), sql.SQL("i.model_id")]
    return sql.SQL(
        "encode(sha256(convert_to(row({})::text, 'UTF8') || vector_send(i.embedding)), 'hex')"
    ).format(sql.SQL(", ").join(values))


@dataclass(frozen=True)
class PublishedState:
    """The published state a target mirrors: its publication, model and each chunk's
    fingerprint (chunk id -> sha256)."""

    seq: int | None
    model_id: str | None
    """The serving model (None: nothing published holds a vector)."""
    dimension: int | None
    fingerprints: dict[str, str]


@contextlib.contextmanager
def snapshot(conn: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    """One read-only REPEATABLE READ transaction: every read inside sees one publication."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield conn


def published_state(conn: psycopg.Connection[Any], collections: Sequence[str]) -> PublishedState:
    """The published state of `collections` (call inside `snapshot`)."""
    seq_row = conn.execute("SELECT max(seq) FROM seams.publications").fetchone()
    seq = None if seq_row is None or seq_row[0] is None else int(seq_row[0])
    model = publication.serving_model(conn)
    if model is None:
        return PublishedState(seq, None, None, {})
    params = {"model": model, "collections": list(collections)}
    query = sql.SQL("SELECT c.chunk_id, {} ").format(_fingerprint()) + sql.SQL(_FROM)
    fingerprints = {str(cid): str(fp) for cid, fp in conn.execute(query, params)}
    row = conn.execute(
        "SELECT vector_dims(embedding) FROM seams.chunk_index WHERE model_id = %s LIMIT 1",
        (model,),
    ).fetchone()
    dimension = None if row is None else int(row[0])
    return PublishedState(seq, model, dimension, fingerprints)


def published_records(
    conn: psycopg.Connection[Any],
    state: PublishedState,
    collections: Sequence[str],
    chunk_ids: Sequence[str] | None = None,
) -> Iterator[tuple[Record, str]]:
    """The records of `chunk_ids` (all: None) with their fingerprints, as `state`'s model
    publishes them (call inside the `snapshot` that read `state`)."""
    if state.model_id is None:
        return
    selected = [sql.SQL("c.{}").format(sql.Identifier(n)) for n in _CHUNK_FIELDS]
    selected += [sql.SQL("d.source_uri"), sql.SQL("i.model_id")]
    selected += [sql.SQL("vector_send(i.embedding)")]
    query = sql.SQL("SELECT {}, {} ").format(sql.SQL(", ").join(selected), _fingerprint())
    query += sql.SQL(_FROM)
    params: dict[str, Any] = {"model": state.model_id, "collections": list(collections)}
    if chunk_ids is not None:
        query += sql.SQL(" AND c.chunk_id = ANY(%(ids)s)")
        params["ids"] = list(chunk_ids)
    names = (*_CHUNK_FIELDS, "source_uri", "vector_model_id")
    # Bounded memory (a few pages at a time); binary rows, so a vector arrives as pgvector's
    # own bytes, never as text to parse.
    with conn.cursor(name="seams_target_published", binary=True) as cursor:
        cursor.itersize = 1000
        cursor.execute(query, params)
        for row in cursor:
            fields = dict(zip(names, row[: len(names)], strict=True))
            yield Record(fields, _vector(row[len(names)])), str(row[-1])


def _vector(data: bytes) -> np.ndarray:
    """A float32 vector from pgvector's binary form (`vector_send`): int16 dimension, int16
    unused, then big-endian float4 values."""
    dimension = int.from_bytes(data[:2], "big")
    return np.frombuffer(data, dtype=">f4", count=dimension, offset=4).astype(np.float32)
