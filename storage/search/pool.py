"""A query's candidate pool: the union of the dense and the lexical best chunks, every entry
scored by both sides, and the order that ranks it (dense, BM25, or the two fused).

Both scores are exact for every entry (a chunk found by one side is scored by the other too), so
a caller can re-rank a stored pool with any fusion weight without a database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg

from seams.storage.search import lexical
from seams.storage.search.dense import (
    MIN_FETCH,
    IndexTarget,
    chunk_distances,
    nearest_vectors,
    rescored,
)
from seams.storage.search.fusion import LEXICAL_WEIGHT, fuse_scores


def pool_size(k: int) -> int:
    """How many nearest chunk vectors a top-`k` search fetches first (and re-scores)."""
    return max(MIN_FETCH, 4 * k)


def exact_size(pool: int) -> int:
    """How many of a pool's best chunks by BM25 are proven to be the exhaustive ones: a quarter
    of it, which covers the search's k (`pool_size(k)` >= 4 k). The rest of the pool has exact
    scores too; proving its order as well would cost several times more (the last ranks'
    scores are close to many chunks' bounds)."""
    return max(1, pool // 4)


@dataclass(frozen=True)
class PoolEntry:
    """One current chunk of a query's candidate pool, with both component scores."""

    batch_key: str
    document_id: str
    chunk_id: str
    dense_score: float | None
    """Cosine of the query with the chunk vector, mixed with its best sentence's
    (`sentence_weight`); None when the search is lexical."""
    lexical_score: float | None
    """Exact BM25 (0.0 when the chunk holds no query lexeme); None when the search is dense."""
    matched_terms: tuple[str, ...]
    dense_rank: int | None
    """Rank (1-based) among the `pool` nearest current chunk vectors; None if not among them."""
    lexical_rank: int | None
    """Rank (1-based) among the `pool` best current chunks by BM25 (the first `exact_k` of
    `fill_pool` exactly the exhaustive ones); None if not among them."""
    lexical_group: tuple[str, str] | None = None
    """(collection, text search configuration) of its BM25 entry, whose statistics scored it;
    None when it has none (or the search is dense)."""


@dataclass
class CandidatePool:
    """A query's candidates: the union of the dense and the lexical top `pool`, each scored by
    both parts, so any fusion (`fuse_scores`, rank fusion on the ranks) can be computed from it."""

    query: str
    search: str
    target: IndexTarget | None
    lexemes: tuple[str, ...]
    candidates: list[PoolEntry]
    notes: list[str] = field(default_factory=list)
    embed_ms: float = 0.0
    search_ms: float = 0.0
    scanned: int = 0
    published_seq: int | None = None
    """The publication the pool's snapshot saw (see `SearchResponse.published_seq`)."""
    collections: tuple[str, ...] | None = None
    """The collections searched (None: every collection the connection may read)."""
    terms: tuple[lexical.QueryTerms, ...] = ()
    """The query's terms in each BM25 group searched (empty for a dense search)."""
    lexical_exact: bool = True
    """Whether the BM25 side's first `exact_k` are proven to be the exhaustive ones (False:
    its read stopped at `lexical.MAX_DEPTH` postings per word first)."""


def fill_pool(
    conn: psycopg.Connection[Any],
    result: CandidatePool,
    vector: np.ndarray | None,
    pool: int,
    sentence_weight: float,
    exact_k: int | None = None,
) -> None:
    """Both sides' top `pool`, then the missing component of every candidate; `conn` is in
    the answer's snapshot, so both sides read one published state. The BM25 side proves its
    first `exact_k` (a search's k; default `exact_size(pool)`) to be the exhaustive ones."""
    target = result.target
    assert target is not None
    groups: list[lexical.QueryTerms] | None = None
    if result.search != "dense":
        groups = lexical.group_terms(conn, result.query, result.collections)
        result.terms = tuple(groups)
        if not groups:
            among = (
                f" in collection(s) {', '.join(result.collections)}"
                if result.collections is not None
                else ""
            )
            result.notes.append(
                f"no chunk is indexed for BM25{among}: `seams backfill` re-indexes every batch"
            )
        else:
            result.lexemes = tuple(sorted({t for g in groups for t in g.lexemes}))
            if not result.lexemes:
                result.notes.append("the query has no searchable words (only stop words?)")
            elif not any(g.known for g in groups):
                result.notes.append("no query word occurs in the indexed chunks")
    dense: list[tuple[str, str, str, float]] = []
    if vector is not None:
        dense = nearest_vectors(conn, vector, target, pool, result.collections)
        result.scanned = len(dense)
    found: list[lexical.LexicalScore] = []
    if groups:
        proven = exact_size(pool) if exact_k is None else exact_k
        read = lexical.exact_read_of(conn, groups, pool, exact_k=proven)
        found, result.lexical_exact = read.hits, read.exact
        if not read.exact:
            result.notes.append(
                "BM25: the query's words are in too many chunks to prove its best "
                f"{proven} within "
                f"{lexical.MAX_DEPTH:,} postings per word; the hits are the best of those "
                "read, scored exactly"
            )
    keys = {(b, d, c): None for b, d, c, _ in dense}
    keys.update({(h.batch_key, h.document_id, h.chunk_id): None for h in found})
    dense_scores: dict[tuple[str, str, str], float] = {}
    dense_ranks: dict[tuple[str, str, str], int] = {}
    if vector is not None and keys:
        have = {(b, d, c) for b, d, c, _ in dense}
        extra = chunk_distances(conn, vector, target, [k for k in keys if k not in have])
        every = dense + extra
        if sentence_weight > 0:
            every = rescored(conn, vector, every, target.model_id, sentence_weight)
        dense_scores = {(b, d, c): 1.0 - dist for b, d, c, dist in every}
        ranked = sorted(dense, key=lambda r: (-dense_scores[r[:3]], r[2], r[0]))
        dense_ranks = {r[:3]: rank for rank, r in enumerate(ranked, 1)}
    lexical_scores: dict[tuple[str, str], lexical.LexicalScore] = {}
    lexical_ranks: dict[tuple[str, str, str], int] = {}
    if groups is not None:
        lexical_scores = {(h.batch_key, h.chunk_id): h for h in found}
        missing = [(b, c) for b, _, c in keys if (b, c) not in lexical_scores]
        lexical_scores.update(lexical.score_chunks_of(conn, groups, missing))
        lexical_ranks = {
            (h.batch_key, h.document_id, h.chunk_id): r
            for r, h in enumerate(found, 1)
            if h.score > 0
        }
    for key in keys:
        hit = lexical_scores.get((key[0], key[2]))
        result.candidates.append(
            PoolEntry(
                *key,
                dense_score=dense_scores.get(key) if vector is not None else None,
                lexical_score=(hit.score if hit else 0.0) if groups is not None else None,
                matched_terms=hit.matched_terms if hit else (),
                dense_rank=dense_ranks.get(key),
                lexical_rank=lexical_ranks.get(key),
                lexical_group=(hit.collection, hit.text_search_config) if hit else None,
            )
        )


def ranked_candidates(
    pool: CandidatePool, lexical_weight: float = LEXICAL_WEIGHT
) -> list[tuple[PoolEntry, float]]:
    """The pool's candidates with the score that ranks them, best first (ties: chunk_id)."""
    found = pool.candidates
    if pool.search == "dense":
        scores = np.array([c.dense_score for c in found], dtype=np.float64)
    elif pool.search == "lexical":
        scores = np.array([c.lexical_score for c in found], dtype=np.float64)
    else:
        scores = fuse_scores(
            [c.dense_score for c in found], [c.lexical_score for c in found], lexical_weight
        )
    order = sorted(
        range(len(found)), key=lambda i: (-scores[i], found[i].chunk_id, found[i].batch_key)
    )
    if pool.search == "lexical":  # a chunk without any query lexeme is no lexical hit
        order = [i for i in order if scores[i] > 0]
    return [(found[i], float(scores[i])) for i in order]
