"""The dense side of search, in SQL: which vectors the published index holds (its mode and
model), the nearest visible chunk vectors of a query (pgvector's HNSW index, cosine), the exact
distances of given chunks, and their re-score by their best sentence (`sentence_rerank`).

One answer reads one model's vectors, the serving model's (`index_target`): every statement
filters by the target's model id, so vectors of another model (another dimension too:
`chunk_index.embedding` is a `vector` of any dimension) never meet the query. The
nearest-vector probe names the model by a literal and casts to its dimension, exactly as that
model's HNSW index is declared (`schema.chunk_index_hnsw`), so PostgreSQL uses that index, and
only that model's rows are walked. A search of exactly one collection names it by a literal
too, as the model's index over that collection's rows alone is declared (`vector_indexes`), so
the planner can walk that small graph instead of the whole model's.

Visible = published and current: a `chunk_index` row counts only when its document's current
version (`seams.current_documents`, written only when a build is published) is in the row's batch
and the row's generation is at most that build's. Rows of a build still being written, of a
batch never published, and of a document's older versions are filtered inside the HNSW scan
itself, as a per-row scalar subquery (one primary-key probe): with pgvector's iterative scan the
index walks on until the LIMIT is met by visible rows, so hidden rows cost tuples scanned, never
recall, and a search is one ANN probe whatever a writer is doing.

Every function takes the connection of the answer's snapshot (`snapshot.published_snapshot`).
A tenant's connection may not read the chunk vectors: its nearest vectors and distances come
from `tenant_search`'s functions, which search its own collections only (`configure_scan` says
which way a connection reads).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
import psycopg.errors
from psycopg import sql

from seams.errors import InputError
from seams.storage import schema, tenant_search, vector_indexes
from seams.storage.search.lexical import DEFAULT_TEXT_SEARCH_CONFIG
from seams.storage.search.sentence_rerank import rerank_order

MIN_FETCH = 40
"""The fewest nearest vectors one ANN probe asks for (and HNSW's lowest `ef_search`)."""
MAX_FETCH = 4000
"""The most nearest vectors one ANN probe asks for."""


@dataclass(frozen=True)
class IndexTarget:
    """How the published chunk index was built: the retrieval mode and the model of its vectors,
    and the text search configuration of its BM25 entries."""

    mode: str
    model_id: str
    text_search_config: str = DEFAULT_TEXT_SEARCH_CONFIG


_TARGET = """
SELECT i.mode, i.model_id, i.text_search_config
FROM {builds} AS b
CROSS JOIN LATERAL (
    SELECT i.mode, i.model_id, i.text_search_config FROM {index} AS i
    WHERE i.batch_key = b.batch_key AND i.generation <= b.generation {filters}
    LIMIT 1
) AS i
WHERE b.state = 'published' {among}
  AND EXISTS (SELECT 1 FROM {current} AS d WHERE d.batch_key = b.batch_key)
ORDER BY b.batch_key DESC
LIMIT 1
"""


def index_target(
    conn: psycopg.Connection[Any],
    *,
    mode: str | None = None,
    model_id: str | None = None,
    collections: Sequence[str] | None = None,
) -> IndexTarget | None:
    """The mode, model and text search configuration of the published index: those of the
    newest published batch that holds current documents (batch keys sort by registration time),
    optionally among the rows of `mode` and of `model_id`; None when nothing of it is published.

    Without `model_id` this is the serving model (`publication.serving_model`): a build of
    another model is held until every batch with current chunks has one, then all are published
    at once (`publication`'s model switch), so every current chunk has a vector of it and the
    BM25 side, which reads the same published chunks, never brings in a chunk of another
    model. A build not yet published never decides it, and neither does a batch none of whose
    documents is current (its leftover vectors are not searched). `collections`: among their
    batches only (a collection may index in another mode than the newest batch's)."""
    query = sql.SQL(_TARGET).format(
        builds=schema.BATCH_BUILDS.identifier(),
        index=schema.CHUNK_INDEX.identifier(),
        current=schema.CURRENT_DOCUMENTS.identifier(),
        filters=sql.SQL(" ").join(
            [
                sql.SQL("AND i.mode = %(mode)s") if mode else sql.SQL(""),
                sql.SQL("AND i.model_id = %(model)s") if model_id else sql.SQL(""),
            ]
        ),
        among=sql.SQL("AND b.collection = ANY(%(collections)s::text[])")
        if collections is not None
        else sql.SQL(""),
    )
    params = {"mode": mode, "model": model_id, "collections": list(collections or ())}
    row = conn.execute(query, params).fetchone()
    return IndexTarget(*row) if row else None


_OTHER_TARGETS = """
SELECT EXISTS (
    SELECT 1 FROM {builds} AS b
    JOIN {index} AS i ON i.batch_key = b.batch_key AND i.generation <= b.generation
    WHERE b.state = 'published' AND (i.mode <> %s OR i.model_id <> %s)
)
"""


def other_targets(conn: psycopg.Connection[Any], target: IndexTarget) -> bool:
    """Whether some published index rows were built in another mode or with another model."""
    query = sql.SQL(_OTHER_TARGETS).format(
        builds=schema.BATCH_BUILDS.identifier(), index=schema.CHUNK_INDEX.identifier()
    )
    return bool(conn.execute(query, (target.mode, target.model_id)).fetchone()[0])


VISIBLE = """i.generation <= (
    SELECT d.generation FROM {current} AS d
    WHERE d.document_id = i.document_id AND d.batch_key = i.batch_key
)"""
"""The visibility of a `chunk_index` row `i`, as a scalar subquery: PostgreSQL keeps it as a
per-row filter of the ordered HNSW scan (an EXISTS would be pulled up into a join, which loses
the index order). NULL, so false, for a batch or version that is not current."""

_NEAREST = """
SELECT i.batch_key, i.document_id, i.chunk_id, {vector} <=> {query} AS distance
FROM {index} AS i
WHERE i.model_id = {model} AND i.mode = %(mode)s AND {visible}{among}
ORDER BY {vector} <=> {query}
LIMIT %(fetch)s
"""


def nearest_statement(
    model_id: str,
    dimension: int,
    *,
    among: bool = False,
    collection: str | None = None,
    collection_key: int | None = None,
) -> sql.Composed:
    """The dense pool's statement over `model_id`'s vectors of `dimension` (params q, mode,
    fetch; `among`: only the rows of the collections of param `collections`; `collection`:
    only that one collection's rows), for EXPLAIN as well.

    The model id is a literal, not a parameter: the planner must prove the model's partial
    index applies, which a generic plan of a prepared statement could not do with `$1`. One
    statement text per model, so each is prepared once. `collection` and its number
    `collection_key` are literals for the same reason: the model's index over that collection's
    rows (`schema.chunk_index_hnsw`) applies only to a statement that states its predicate (one
    statement per model and collection)."""
    visible = sql.SQL(VISIBLE).format(current=schema.CURRENT_DOCUMENTS.identifier())
    if collection is not None:
        restrict: sql.Composable = sql.SQL(" AND i.collection = {}").format(sql.Literal(collection))
        if collection_key is not None:
            restrict = sql.SQL("{} AND {} = {}").format(
                restrict,
                schema.collection_key_sql(sql.SQL("i.collection")),
                sql.Literal(collection_key),
            )
    elif among:
        restrict = sql.SQL(" AND i.collection = ANY(%(collections)s::text[])")
    else:
        restrict = sql.SQL("")
    return sql.SQL(_NEAREST).format(
        vector=schema.model_vector(sql.SQL("i.embedding"), dimension),
        query=schema.model_vector(sql.Placeholder("q"), dimension),
        index=schema.CHUNK_INDEX.identifier(),
        model=sql.Literal(model_id),
        visible=visible,
        among=restrict,
    )


def configure_scan(conn: psycopg.Connection[Any], fetch: int) -> bool:
    """HNSW settings of the current transaction: `ef_search` raised to `fetch` (HNSW returns
    at most ef_search rows per scan) and iterative scanning, so the index keeps going past rows
    the mode and visibility filters drop (the model's own index holds no other model's rows).
    Returns whether the connection's role reads chunk vectors itself: a tenant does not, and
    searches them through `tenant_search`'s functions (which set these settings themselves)."""
    row = conn.execute(
        "SELECT set_config('hnsw.ef_search', %s, true),"
        " set_config('hnsw.iterative_scan', 'relaxed_order', true),"
        " has_column_privilege(%s, 'embedding', 'SELECT')",
        (str(min(1000, max(MIN_FETCH, fetch))), schema.CHUNK_INDEX.qualified_name),
    ).fetchone()
    return bool(row and row[2])


def nearest_vectors(
    conn: psycopg.Connection[Any],
    vector: np.ndarray,
    target: IndexTarget,
    fetch: int,
    collections: Sequence[str] | None = None,
    *,
    direct: bool | None = None,
) -> list[tuple[str, str, str, float]]:
    """The `fetch` nearest visible index entries of the target's model and mode by cosine
    distance, via the model's HNSW index (nearest first, up to the iterative scan's relaxed
    order), among the rows of `collections` (None: every row the connection may read; a filter
    of the scan, so the iterative scan walks on past other collections' rows; exactly one: its
    own index when it has one, `vector_indexes`). The query
    vector's length is the dimension read: a vector of another dimension than the model's is an
    `InputError` naming both. `direct`: what `configure_scan` returned, when the caller ran it
    (None: it runs here); False reads through `tenant_search.nearest_vectors`."""
    dimension = int(np.shape(vector)[-1])
    if direct is None:
        direct = configure_scan(conn, fetch)
    try:
        if not direct:
            return tenant_search.nearest_vectors(
                conn, vector, target.model_id, target.mode, fetch, collections
            )
        return _nearest_direct(conn, vector, dimension, target, fetch, collections)
    except psycopg.errors.DataException as exc:
        if "dimensions" not in str(exc):
            raise
        raise InputError(
            f"the query vector has {dimension} dimensions, but model {target.model_id[:12]}'s "
            f"vectors do not ({str(exc).strip()}): embed the query with the model that built "
            "the index"
        ) from exc


def _nearest_direct(
    conn: psycopg.Connection[Any],
    vector: np.ndarray,
    dimension: int,
    target: IndexTarget,
    fetch: int,
    collections: Sequence[str] | None,
) -> list[tuple[str, str, str, float]]:
    params = {
        "q": vector,
        "mode": target.mode,
        "fetch": fetch,
        "collections": list(collections or ()),
    }
    named = set(collections) if collections is not None else set()
    collection = named.pop() if len(named) == 1 else None
    key = None  # a collection with an index of its own has a number (`vector_indexes`)
    if collection is not None and collection != schema.DEFAULT_COLLECTION:
        key = vector_indexes.collection_key(conn, collection)
    statement = nearest_statement(
        target.model_id,
        dimension,
        among=collections is not None,
        collection=collection,
        collection_key=key,
    )
    return conn.execute(statement, params, prepare=True).fetchall()


_DISTANCES = """
SELECT n.batch_key, n.document_id, n.chunk_id, i.embedding <=> %(q)s
FROM unnest(%(batches)s::text[], %(docs)s::text[], %(ids)s::text[])
     AS n(batch_key, document_id, chunk_id)
JOIN {current} AS d ON d.document_id = n.document_id AND d.batch_key = n.batch_key
JOIN {index} AS i ON i.batch_key = n.batch_key AND i.document_id = n.document_id
                 AND i.chunk_id = n.chunk_id AND i.model_id = %(model)s AND i.mode = %(mode)s
                 AND i.generation <= d.generation
"""


def chunk_distances(
    conn: psycopg.Connection[Any],
    vector: np.ndarray,
    target: IndexTarget,
    keys: Sequence[tuple[str, str, str]],
    *,
    direct: bool = True,
) -> list[tuple[str, str, str, float]]:
    """Cosine distances of the given visible chunks' vectors (chunks without a visible one of
    the target's mode and model get distance 1: cosine 0). `direct`: False for a role that
    does not read chunk vectors itself (`configure_scan`), whose distances come from
    `tenant_search.chunk_distances`."""
    if not keys:
        return []
    if not direct:
        rows = tenant_search.chunk_distances(conn, vector, target.model_id, target.mode, keys)
        known = {(b, d, c): float(dist) for b, d, c, dist in rows}
        return [(*key, known.get(key, 1.0)) for key in keys]
    statement = sql.SQL(_DISTANCES).format(
        current=schema.CURRENT_DOCUMENTS.identifier(), index=schema.CHUNK_INDEX.identifier()
    )
    batches, docs, ids = (list(col) for col in zip(*keys, strict=True))
    params = {
        "q": vector,
        "batches": batches,
        "docs": docs,
        "ids": ids,
        "model": target.model_id,
        "mode": target.mode,
    }
    found = {
        (b, d, c): float(dist)
        for b, d, c, dist in conn.execute(statement, params, prepare=True).fetchall()
    }
    return [(*key, found.get(key, 1.0)) for key in keys]


_BEST_SENTENCES = """
WITH spans AS MATERIALIZED (
    -- The pooled chunks' cores first (one key probe each), then only the candidates inside
    -- each core: planned as one join, PostgreSQL misjudges the unnest's matches and walks every
    -- candidate of each document, probing the chunks once per candidate.
    SELECT n.pos, c.batch_key, c.document_id, c.overlap_end, c.end_char, d.generation
    FROM unnest(%(batches)s::text[], %(docs)s::text[], %(ids)s::text[])
         WITH ORDINALITY AS n(batch_key, document_id, chunk_id, pos)
    JOIN {current} AS d ON d.document_id = n.document_id AND d.batch_key = n.batch_key
    JOIN {chunks} AS c ON c.batch_key = n.batch_key AND c.document_id = n.document_id
                      AND c.chunk_id = n.chunk_id AND c.generation <= d.generation
)
SELECT p.pos, max(1 - (s.embedding <=> %(q)s))
FROM spans AS p
JOIN {boundaries} AS s ON s.batch_key = p.batch_key AND s.document_id = p.document_id
                      AND s.generation <= p.generation
                      AND s.start_char >= p.overlap_end AND s.start_char < p.end_char
                      AND s.end_char <= p.end_char
WHERE s.model_id = %(model)s AND s.embedding IS NOT NULL
GROUP BY p.pos
"""


def rescored(
    conn: psycopg.Connection[Any],
    vector: np.ndarray,
    nearest: list[tuple[str, str, str, float]],
    model_id: str,
    sentence_weight: float,
) -> list[tuple[str, str, str, float]]:
    """`nearest` re-ordered by `sentence_rerank`, its distances replaced by 1 - the new score.

    The best sentence of every pooled chunk is one grouped query: pgvector computes the cosines
    next to the rows (no vectors travel), over the candidates lying in the chunk's core (its span
    without the overlap it repeats from the previous chunk) whose vectors come from the query's
    model (the `fast` preset's static vectors do not), each table read at the generation the
    chunk's published build sees."""
    query = sql.SQL(_BEST_SENTENCES).format(
        current=schema.CURRENT_DOCUMENTS.identifier(),
        chunks=schema.CHUNKS.identifier(),
        boundaries=schema.SEMANTIC_BOUNDARIES.identifier(),
    )
    batches, docs, ids, distances = (list(col) for col in zip(*nearest, strict=True))
    params = {"q": vector, "batches": batches, "docs": docs, "ids": ids, "model": model_id}
    best: list[float | None] = [None] * len(nearest)
    for pos, score in conn.execute(query, params, prepare=True).fetchall():
        best[pos - 1] = score
    order, scores = rerank_order([1.0 - d for d in distances], best, sentence_weight)
    return [(*nearest[i][:3], 1.0 - float(scores[i])) for i in order]
