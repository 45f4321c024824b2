"""Two views of search below its readers' API, for the tests and the benchmarks that measure its
parts: a query's candidate pool on its own, and the hits of an already-embedded query. Both read
through the package's own steps (`SearchRequest`, `search_snapshot`, `read_pool`, `hit_rows`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from seams.storage.connections import ConnectionSource
from seams.storage.search.dense import MIN_FETCH, IndexTarget, nearest_vectors, rescored
from seams.storage.search.hit_context import hit_from_row, hit_rows
from seams.storage.search.hits import SearchHit
from seams.storage.search.pool import SearchPool, read_pool
from seams.storage.search.query import QueryEmbedder, SearchKind
from seams.storage.search.request import PARENT_CHARS, SearchRequest, pool_size
from seams.storage.search.sentence_rerank import SENTENCE_WEIGHT, check_sentence_weight
from seams.storage.search.snapshot import search_snapshot


def candidate_pool(
    postgres: ConnectionSource,
    embedder: QueryEmbedder,
    query: str,
    *,
    pool: int = MIN_FETCH,
    search: SearchKind = "hybrid",
    mode: str | None = None,
    model_id: str | None = None,
    sentence_weight: float = SENTENCE_WEIGHT,
    collections: Sequence[str] | None = None,
) -> SearchPool:
    """The candidate pool of `query`: the visible chunks among the `pool` nearest by dense score
    and the `pool` best by BM25 (one side only for "dense" or "lexical"), each scored by both,
    unordered; `fuse_scores(dense, lexical, w)` over it reproduces `search_response`'s hybrid
    order (sorted by fused score, then chunk_id)."""
    request = SearchRequest.of(
        query, search=search, sentence_weight=sentence_weight, mode=mode, model_id=model_id,
        collections=collections, pool=pool,
    )  # fmt: skip
    with search_snapshot(postgres) as snapshot:
        return read_pool(snapshot, embedder, request)


def search_vector(
    postgres: ConnectionSource,
    vector: np.ndarray,
    k: int,
    *,
    model_id: str,
    mode: str,
    parent_chars: int = PARENT_CHARS,
    sentence_weight: float = SENTENCE_WEIGHT,
) -> tuple[list[SearchHit], int]:
    """Hits for an already-embedded query (nearest vectors, re-scored by the best sentence),
    and how many index entries were fetched for them; one snapshot, as `search_response`."""
    check_sentence_weight(sentence_weight)
    query_vector = np.asarray(vector, dtype=np.float32)
    target = IndexTarget(mode=mode, model_id=model_id)
    with search_snapshot(postgres) as snapshot:
        conn = snapshot.conn
        nearest = nearest_vectors(conn, query_vector, target, pool_size(k))
        if nearest and sentence_weight > 0:
            nearest = rescored(conn, query_vector, nearest, model_id, sentence_weight)
        distances = {(b, d, c): float(dist) for b, d, c, dist in nearest}
        # Equal distances share a rank, so the rows order them by document and position.
        ranks = {dist: rank for rank, dist in enumerate(sorted(set(distances.values())))}
        keys = list(distances)
        ordered = [ranks[distances[key]] for key in keys]
        rows = hit_rows(conn, keys, ordered, k, parent_chars) if keys else []
    hits = [
        hit_from_row(rank, row, 1.0 - distances[row.key], published_seq=snapshot.published_seq)
        for rank, row in enumerate(rows, 1)
    ]
    return hits, len(nearest)
