"""One HNSW index per embedding model over `seams.chunk_index`, made and dropped with its vectors.

`seams.chunk_index.embedding` is a `vector` of any dimension, so several models' vectors lie side
by side (a model switch builds the new index beside the one readers search); pgvector indexes
such a column per dimension, with a partial index per model (`schema.chunk_index_hnsw`). Beside
a model's index, every collection but `default` that wrote its vectors gets the model's index
over its rows alone, named by the collection's number (`seams.collection_keys`), never its name.
`ensure_model_index` makes a model's indexes before its vectors are written (the `chunk_index`
asset calls it); `drop_model_indexes` drops them, concurrently, when its last vectors are gone;
`adopt_fixed_dimension` and `adopt_collection_keys` migrate older shapes. A missing index costs
speed, never an answer: search filters by model id and orders by the exact cosine. Why each
step locks what it locks: docs/architecture.md, "Vector indexes".
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import psycopg
import psycopg.errors
from psycopg import sql
from psycopg.pq import TransactionStatus

from seams.storage import lock_waits, schema, writer_locks
from seams.storage.connections import describe_connection

log = logging.getLogger(__name__)

#: The writer lock every creator and dropper of a model's index takes (one at a time).
INDEX_LOCK = "seams:chunk_index_hnsw"
#: The writer lock of every giver of collection numbers (one number per collection, never two).
KEYS_LOCK = "seams:collection-keys"


@dataclass(frozen=True)
class ModelIndex:
    """A model's HNSW index over `seams.chunk_index`, as the catalog holds it."""

    name: str
    model_id: str
    """The model whose rows it indexes (the index's comment: the name holds only a hash)."""
    dimension: int
    """The dimension its vectors are cast to (the index column's type modifier)."""
    valid: bool = True
    """False for an index a failed concurrent build or drop left behind: never used."""
    collection: str | None = None
    """The collection whose rows alone it indexes; None for the model's index over all rows."""
    collection_key: int | None = None
    """That collection's number; None for a model's index, and for a collection index made
    before numbers, which names its collection (`adopt_collection_keys` rebuilds it)."""


def _comment(model_id: str, collection_key: int | None) -> str:
    """The index's comment, which tells its model (and collection): the name holds only a hash
    and a number. A model's index keeps the bare model id (what indexes made before collection
    indexes hold); a collection's index holds a JSON object of the model id and the number."""
    if collection_key is None:
        return model_id
    return json.dumps({"model_id": model_id, "collection_key": collection_key}, sort_keys=True)


def _described(comment: str) -> tuple[str, int | str | None]:
    """The model id and the collection's number (or, made before numbers, name) an index's
    comment (`_comment`) holds."""
    if comment.startswith("{"):
        try:
            found = json.loads(comment)
        except ValueError:
            found = None
        if isinstance(found, dict) and isinstance(found.get("model_id"), str):
            key = found.get("collection_key")
            if isinstance(key, int) and not isinstance(key, bool):
                return found["model_id"], key
            collection = found.get("collection")
            return found["model_id"], collection if isinstance(collection, str) else None
    return comment, None


def collection_key(conn: psycopg.Connection[Any], collection: str) -> int | None:
    """The number of `collection` (None: it has none yet)."""
    row = conn.execute(
        sql.SQL("SELECT key FROM {} WHERE collection = %s").format(
            schema.COLLECTION_KEYS.identifier()
        ),
        (collection,),
    ).fetchone()
    return None if row is None else int(row[0])


def _give_key(conn: psycopg.Connection[Any], collection: str) -> int:
    """The number of `collection`, given now (the next free one) if it has none; in the
    caller's transaction, under `KEYS_LOCK`."""
    writer_locks.lock(conn, KEYS_LOCK)
    conn.execute(
        sql.SQL(
            "INSERT INTO {table} (collection, key) SELECT %s, coalesce(max(key), 0) + 1"
            " FROM {table} ON CONFLICT (collection) DO NOTHING"
        ).format(table=schema.COLLECTION_KEYS.identifier()),
        (collection,),
    )
    key = collection_key(conn, collection)
    assert key is not None
    return key


def index_name(
    conn: psycopg.Connection[Any], model_id: str, dimension: int, collection: str | None = None
) -> str | None:
    """The name of `model_id`'s index (with `collection`: over that collection's rows; None
    while the collection has no number, hence no index)."""
    if collection is None:
        return schema.chunk_index_hnsw_name(model_id, dimension)
    key = collection_key(conn, collection)
    return None if key is None else schema.chunk_index_hnsw_name(model_id, dimension, key)


_MODEL_INDEXES = """
SELECT c.relname, coalesce(obj_description(c.oid, 'pg_class'), ''), a.atttypmod, i.indisvalid
FROM pg_index AS i
JOIN pg_class AS c ON c.oid = i.indexrelid
JOIN pg_namespace AS n ON n.oid = c.relnamespace
JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum = 1
WHERE n.nspname = %(schema)s AND i.indrelid = to_regclass(%(table)s)
  AND starts_with(c.relname, %(prefix)s)
ORDER BY c.relname
"""


def model_indexes(conn: psycopg.Connection[Any]) -> list[ModelIndex]:
    """Every model's HNSW indexes over `seams.chunk_index`, its collections' included (catalog
    reads, no table lock)."""
    params = {
        "schema": schema.SCHEMA,
        "table": schema.CHUNK_INDEX.qualified_name,
        "prefix": schema.CHUNK_INDEX_HNSW_PREFIX,
    }
    found = conn.execute(_MODEL_INDEXES, params).fetchall()
    names: dict[int, str] = {}
    if any(comment.startswith("{") for _, comment, _, _ in found):
        names = {
            int(key): str(collection)
            for collection, key in conn.execute(
                sql.SQL("SELECT collection, key FROM {}").format(
                    schema.COLLECTION_KEYS.identifier()
                )
            )
        }
    indexes = []
    for name, comment, dimension, valid in found:
        model_id, described = _described(comment)
        key = described if isinstance(described, int) else None
        collection = names.get(key) if key is not None else described
        indexes.append(
            ModelIndex(name, model_id, int(dimension), bool(valid), collection, key)  # type: ignore[arg-type]
        )
    return indexes


def ensure_model_index(
    conn: psycopg.Connection[Any],
    model_id: str,
    dimension: int,
    collection: str | None = None,
) -> bool:
    """Make `model_id`'s HNSW index for vectors of `dimension` unless it exists, and with
    `collection` (any but `schema.DEFAULT_COLLECTION`, whose searches use the model's index) the
    model's index over that collection's rows too; True when this call built one. Call it
    before the model's vectors are written: idempotent, a catalog lookup once the indexes are
    there, safe against concurrent callers (one builds, the others find it).

    A model of more than `schema.MAX_HNSW_DIMENSIONS` gets no index (pgvector's HNSW limit): its
    searches scan its rows exactly. Runs its own transaction: call it on a connection outside
    the write's transaction (inside one, the build's SHARE lock on `seams.chunk_index` would be
    held until that transaction ends, queueing every other writer of the table behind it).
    """
    schema.check_dimension(dimension)
    if dimension > schema.MAX_HNSW_DIMENSIONS:
        log.info(
            "model %s: %d dimensions, more than HNSW indexes (%d): searched exactly",
            model_id[:12],
            dimension,
            schema.MAX_HNSW_DIMENSIONS,
        )
        return False
    built = _ensure(conn, model_id, dimension, None)
    if collection is not None and collection != schema.DEFAULT_COLLECTION:
        built = _ensure(conn, model_id, dimension, collection) or built
    return built


def _ensure(
    conn: psycopg.Connection[Any], model_id: str, dimension: int, collection: str | None
) -> bool:
    """One index (`ensure_model_index`), in its own transaction under `INDEX_LOCK` (a
    collection's number given first, in a transaction of its own: committed before any row of
    the collection's index is written)."""
    name = index_name(conn, model_id, dimension, collection)
    if name is not None and _valid_index(conn, name):
        return False
    key = None
    if collection is not None:
        with conn.transaction():
            key = _give_key(conn, collection)
    name = schema.chunk_index_hnsw_name(model_id, dimension, key)
    with conn.transaction():
        writer_locks.lock(conn, INDEX_LOCK)
        existing = _index(conn, name)
        if existing is not None and existing.valid:
            return False
        if existing is not None:  # an invalid leftover of an interrupted concurrent drop
            with lock_waits.clearing_tenants(conn, describe_connection(conn), f"dropping {name}"):
                conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(schema.SCHEMA, name)))
        _create(conn, model_id, dimension, key)
    log.info(
        "created HNSW index %s for model %s (%d dimensions)%s",
        name,
        model_id[:12],
        dimension,
        f", collection {collection}" if collection is not None else "",
    )
    return True


def _create(
    conn: psycopg.Connection[Any], model_id: str, dimension: int, key: int | None = None
) -> None:
    """The index and its comment (`_comment`: the model id the name hashes, the collection's
    number)."""
    conn.execute(schema.chunk_index_hnsw(model_id, dimension, key))
    name = schema.chunk_index_hnsw_name(model_id, dimension, key)
    conn.execute(
        sql.SQL("COMMENT ON INDEX {} IS {}").format(
            sql.Identifier(schema.SCHEMA, name), sql.Literal(_comment(model_id, key))
        )
    )


def _index(conn: psycopg.Connection[Any], name: str) -> ModelIndex | None:
    return next((i for i in model_indexes(conn) if i.name == name), None)


def _valid_index(conn: psycopg.Connection[Any], name: str) -> bool:
    row = conn.execute(
        "SELECT i.indisvalid FROM pg_index AS i WHERE i.indexrelid = to_regclass(%s)",
        (f"{schema.SCHEMA}.{name}",),
    ).fetchone()
    return bool(row and row[0])


def has_vectors(conn: psycopg.Connection[Any], model_id: str) -> bool:
    """Whether `seams.chunk_index` holds any vector of `model_id` (any batch, any build)."""
    query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE {} = %s)").format(
        schema.CHUNK_INDEX.identifier(), sql.Identifier("model_id")
    )
    return bool(conn.execute(query, (model_id,)).fetchone()[0])


def drop_model_indexes(conn: psycopg.Connection[Any], model_id: str) -> list[str]:
    """Drop `model_id`'s HNSW indexes (its collections' included) if none of its vectors is
    left; the names dropped.

    On an autocommit connection outside a transaction (the Postgres resource's) the drop is
    `DROP INDEX CONCURRENTLY`: searches and writers never wait for it. Elsewhere it is a plain
    `DROP INDEX` in the caller's transaction, which waits for running searches. A tenant's
    session that blocks either is ended (`lock_waits.clearing_tenants`); a wait for any other
    past `lock_waits.LOCK_TIMEOUT` leaves the index for the next call (logged), never an error: the
    index only costs its space until then.
    """
    indexes = [i for i in model_indexes(conn) if i.model_id == model_id]
    if not indexes or has_vectors(conn, model_id):
        return []
    return [i.name for i in indexes if _drop(conn, i)]


def drop_unused_model_indexes(
    conn: psycopg.Connection[Any], keep: tuple[str, ...] | list[str] = ()
) -> list[str]:
    """Drop the HNSW index of every model (but those in `keep`) whose vectors are all gone; the
    names dropped. A model that still has vectors costs one short EXISTS probe."""
    dropped: list[str] = []
    for model_id in dict.fromkeys(i.model_id for i in model_indexes(conn)):
        if model_id not in keep:
            dropped.extend(drop_model_indexes(conn, model_id))
    return dropped


def _drop(conn: psycopg.Connection[Any], index: ModelIndex) -> bool:
    name = sql.Identifier(schema.SCHEMA, index.name)
    concurrently = conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE
    try:
        with lock_waits.clearing_tenants(conn, describe_connection(conn), f"dropping {index.name}"):
            if concurrently:
                conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(name))
            else:
                with conn.transaction():
                    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(name))
    except lock_waits.LockError:
        log.warning(
            "HNSW index %s of model %s: kept for now (table busy)", index.name, index.model_id[:12]
        )
        return False
    log.info("dropped HNSW index %s: model %s has no vectors left", index.name, index.model_id[:12])
    return True


def adopt_fixed_dimension(conn: psycopg.Connection[Any]) -> list[str]:
    """Bring a `chunk_index` whose vectors have one fixed dimension (`vector(n)`, one HNSW index
    over all rows) to one index per model over a `vector` column; the indexes built. Nothing to
    do (a fresh or already adopted table): one catalog lookup.

    For the migration's transaction (under its DDL lock): every row stays, with its exact
    values; each model present gets the index `ensure_model_index` would make, built over its
    rows, so searches are as fast as before once the migration commits.
    """
    row = conn.execute(
        "SELECT a.atttypmod FROM pg_attribute AS a"
        " WHERE a.attrelid = to_regclass(%s) AND a.attname = 'embedding' AND NOT a.attisdropped",
        (schema.CHUNK_INDEX.qualified_name,),
    ).fetchone()
    if row is None or row[0] <= 0:
        return []
    dimension = int(row[0])
    conn.execute(
        sql.SQL("DROP INDEX IF EXISTS {}").format(
            sql.Identifier(schema.SCHEMA, schema.LEGACY_CHUNK_INDEX_HNSW)
        )
    )
    conn.execute(
        sql.SQL("ALTER TABLE {} ALTER COLUMN {} TYPE vector").format(
            schema.CHUNK_INDEX.identifier(), sql.Identifier("embedding")
        )
    )
    models = conn.execute(
        sql.SQL("SELECT DISTINCT {} FROM {} ORDER BY 1").format(
            sql.Identifier("model_id"), schema.CHUNK_INDEX.identifier()
        )
    ).fetchall()
    built = []
    for (model_id,) in models:
        if dimension <= schema.MAX_HNSW_DIMENSIONS:
            _create(conn, model_id, dimension)
            built.append(schema.chunk_index_hnsw_name(model_id, dimension))
    return built


def adopt_collection_keys(conn: psycopg.Connection[Any]) -> list[str]:
    """Rebuild every collection index that names its collection (made before collection
    numbers: in its predicate and comment) under the collection's number, and drop it; the
    indexes built. Nothing to do: one catalog lookup. For the migration's transaction (under
    its DDL lock): searches of the collection walk the new index once it commits."""
    built = []
    for index in model_indexes(conn):
        if index.collection is None or index.collection_key is not None:
            continue
        key = _give_key(conn, index.collection)
        name = schema.chunk_index_hnsw_name(index.model_id, index.dimension, key)
        if _index(conn, name) is None:
            _create(conn, index.model_id, index.dimension, key)
            built.append(name)
        conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(schema.SCHEMA, index.name)))
    return built
