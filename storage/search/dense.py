"""The dense side of search, in SQL: which vectors the index holds (its mode and model), the
nearest current chunk vectors of a query (pgvector's HNSW index, cosine), the exact distances of
given chunks, and their re-score by their best sentence (`sentence_rerank`).

The index is over-fetched, since stale versions and other modes share it, and a fetch widens
only when too few of its rows survive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from seams.storage import schema
from seams.storage.connections import ConnectionSource, connection_lost
from seams.storage.search.lexical import DEFAULT_TEXT_SEARCH_CONFIG
from seams.storage.search.sentence_rerank import rerank_order

MIN_FETCH = 40
"""The fewest nearest vectors one ANN probe asks for (and HNSW's lowest `ef_search`)."""
MAX_FETCH = 4000
"""The most nearest vectors one ANN probe asks for, however often it widens."""


@dataclass(frozen=True)
class IndexTarget:
    """How the chunk index was built: the retrieval mode and the model of its vectors, and the
    text search configuration of its BM25 entries."""

    mode: str
    model_id: str
    text_search_config: str = DEFAULT_TEXT_SEARCH_CONFIG


def index_target(postgres: ConnectionSource, *, mode: str | None = None) -> IndexTarget | None:
    """The mode, model and text search configuration of the newest indexed batch (batch keys sort
    by registration time), optionally among the rows of `mode`; None when nothing is indexed.
    One index probe."""
    query = sql.SQL(
        "SELECT mode, model_id, text_search_config FROM {} {} ORDER BY batch_key DESC LIMIT 1"
    ).format(
        schema.CHUNK_INDEX.identifier(),
        sql.SQL("WHERE mode = %(mode)s") if mode else sql.SQL(""),
    )
    try:
        with postgres.connection() as conn:
            row = conn.execute(query, {"mode": mode}).fetchone()
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "reading the chunk index", exc) from exc
    return IndexTarget(*row) if row else None


def other_targets(postgres: ConnectionSource, target: IndexTarget) -> bool:
    """Whether some index rows were built in another mode or with another model."""
    query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE mode <> %s OR model_id <> %s)").format(
        schema.CHUNK_INDEX.identifier()
    )
    try:
        with postgres.connection() as conn:
            return bool(conn.execute(query, (target.mode, target.model_id)).fetchone()[0])
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "reading the chunk index", exc) from exc


def nearest_vectors(
    conn: psycopg.Connection[Any], vector: np.ndarray, model_id: str, mode: str, fetch: int
) -> list[tuple[str, str, str, float]]:
    """The `fetch` nearest index entries of (model, mode) by cosine distance, via HNSW.

    `ef_search` is raised to `fetch` (HNSW returns at most ef_search rows per scan) and
    iterative scanning lets the index keep going past rows the mode/model filter drops."""
    query = sql.SQL(
        "SELECT batch_key, document_id, chunk_id, embedding <=> %(q)s AS distance FROM {} "
        "WHERE mode = %(mode)s AND model_id = %(model)s ORDER BY embedding <=> %(q)s "
        "LIMIT %(fetch)s"
    ).format(schema.CHUNK_INDEX.identifier())
    with conn.transaction():
        conn.execute(
            "SELECT set_config('hnsw.ef_search', %s, true),"
            " set_config('hnsw.iterative_scan', 'relaxed_order', true)",
            (str(min(1000, max(MIN_FETCH, fetch))),),
        )
        params = {"q": vector, "mode": mode, "model": model_id, "fetch": fetch}
        return conn.execute(query, params, prepare=True).fetchall()


_CURRENT = """
SELECT n.pos
FROM unnest(%(batches)s::text[], %(docs)s::text[], %(ids)s::text[])
     WITH ORDINALITY AS n(batch_key, document_id, chunk_id, pos)
CROSS JOIN LATERAL (
    -- OFFSET 0: a per-candidate probe of the view (see hit_context.HITS)
    SELECT 1 FROM {current} AS c
    WHERE c.batch_key = n.batch_key AND c.document_id = n.document_id
      AND c.chunk_id = n.chunk_id
    OFFSET 0
) AS c
ORDER BY n.pos
"""


def current_nearest(
    conn: psycopg.Connection[Any], vector: np.ndarray, target: IndexTarget, pool: int
) -> tuple[list[tuple[str, str, str, float]], int]:
    """The current chunks among the `pool` nearest chunk vectors, and how many index entries
    were fetched. Stale versions take places in the pool; the fetch widens only when they took
    more than half of it, so a search costs one ANN probe unless old versions crowd the index."""
    fetch = max(pool, MIN_FETCH)
    statement = sql.SQL(_CURRENT).format(
        current=sql.Identifier(schema.SCHEMA, schema.CURRENT_CHUNKS_VIEW)
    )
    while True:
        nearest = nearest_vectors(conn, vector, target.model_id, target.mode, fetch)
        if not nearest:
            return [], 0
        batches, docs, ids, _ = (list(col) for col in zip(*nearest, strict=True))
        params = {"batches": batches, "docs": docs, "ids": ids}
        keep = [nearest[pos - 1] for (pos,) in conn.execute(statement, params, prepare=True)]
        if 2 * len(keep) >= pool or len(nearest) < fetch or fetch >= MAX_FETCH:
            return keep[:pool], len(nearest)
        fetch = min(MAX_FETCH, fetch * 4)


_DISTANCES = """
SELECT n.batch_key, n.document_id, n.chunk_id, i.embedding <=> %(q)s
FROM unnest(%(batches)s::text[], %(docs)s::text[], %(ids)s::text[])
     AS n(batch_key, document_id, chunk_id)
JOIN {index} AS i ON i.batch_key = n.batch_key AND i.document_id = n.document_id
                 AND i.chunk_id = n.chunk_id AND i.model_id = %(model)s AND i.mode = %(mode)s
"""


def chunk_distances(
    conn: psycopg.Connection[Any],
    vector: np.ndarray,
    target: IndexTarget,
    keys: Sequence[tuple[str, str, str]],
) -> list[tuple[str, str, str, float]]:
    """Cosine distances of the given chunks' vectors (chunks without one of the target's mode
    and model get distance 1: cosine 0)."""
    if not keys:
        return []
    statement = sql.SQL(_DISTANCES).format(index=schema.CHUNK_INDEX.identifier())
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
SELECT n.pos, max(1 - (s.embedding <=> %(q)s))
FROM unnest(%(batches)s::text[], %(docs)s::text[], %(ids)s::text[])
     WITH ORDINALITY AS n(batch_key, document_id, chunk_id, pos)
JOIN {chunks} AS c ON c.batch_key = n.batch_key AND c.document_id = n.document_id
                  AND c.chunk_id = n.chunk_id
JOIN {boundaries} AS s ON s.batch_key = c.batch_key AND s.document_id = c.document_id
                      AND s.start_char >= c.overlap_end AND s.start_char < c.end_char
                      AND s.end_char <= c.end_char
WHERE s.model_id = %(model)s AND s.embedding IS NOT NULL
GROUP BY n.pos
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
    model (the `fast` preset's static vectors do not)."""
    query = sql.SQL(_BEST_SENTENCES).format(
        chunks=schema.CHUNKS.identifier(), boundaries=schema.SEMANTIC_BOUNDARIES.identifier()
    )
    batches, docs, ids, distances = (list(col) for col in zip(*nearest, strict=True))
    params = {"q": vector, "batches": batches, "docs": docs, "ids": ids, "model": model_id}
    best: list[float | None] = [None] * len(nearest)
    for pos, score in conn.execute(query, params, prepare=True).fetchall():
        best[pos - 1] = score
    order, scores = rerank_order([1.0 - d for d in distances], best, sentence_weight)
    return [(*nearest[i][:3], 1.0 - float(scores[i])) for i in order]
