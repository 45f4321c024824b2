"""Rank retrieved chunks by their chunk vector *and* their best sentence (`seams search`).

A question is usually answered by one sentence. A chunk's single vector (pooled, text or late)
averages that sentence with its neighbours, so a chunk holding the exact answer can rank below
a chunk that is merely about the same subject. `seams search` therefore re-scores the chunks
the HNSW index returned (its over-fetched pool) as

    score = (1 - sentence_weight) * cos(query, chunk vector)
            + sentence_weight * max over the chunk's candidates of cos(query, candidate vector)

using the candidate (sentence) vectors the pipeline already stored in `semantic_boundaries`:
no model call and no extra index. A chunk without candidate vectors of the query's model (the
`fast` preset's static vectors, the lexical fallback) keeps its chunk score.

The default share sits mid-plateau of a flat optimum on public data (SQuAD; the figures are in
the docs, next to the chunkers' recall). `sentence_weight: 0` in seams.yaml turns it off.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from seams.errors import InputError
from seams.storage.search.fusion import normalised

SENTENCE_WEIGHT = 0.7
"""Default share of the best sentence in a chunk's search score (seams.yaml
`retrieval.sentence_weight`)."""


def check_sentence_weight(sentence_weight: float) -> float:
    """`sentence_weight` itself, or an `InputError` when it lies outside [0, 1] (NaN included):
    callers check before deciding whether to re-score at all, so a bad weight never passes as
    "off"."""
    if not 0.0 <= sentence_weight <= 1.0:
        raise InputError(
            f"retrieval.sentence_weight={sentence_weight!r}: must lie within [0, 1] "
            "(0 ranks by chunk vectors alone)"
        )
    return sentence_weight


def reranked_scores(
    chunk_scores: Sequence[float] | np.ndarray,
    best_sentence_scores: Sequence[float | None] | np.ndarray,
    sentence_weight: float = SENTENCE_WEIGHT,
) -> np.ndarray:
    """Per chunk: the weighted mix of its chunk score and its best sentence's score.

    Scores are cosine similarities to the query. A best-sentence score of None or NaN (no
    candidate vectors) leaves that chunk's score as it was, so a pool may mix chunks that have
    sentence vectors with chunks that have none."""
    check_sentence_weight(sentence_weight)
    chunk = np.asarray(chunk_scores, dtype=np.float64)
    best = np.array(
        [np.nan if s is None else s for s in best_sentence_scores], dtype=np.float64
    ).reshape(chunk.shape)
    mixed = (1.0 - sentence_weight) * chunk + sentence_weight * best
    return np.where(np.isnan(best), chunk, mixed)


def rerank_order(
    chunk_scores: Sequence[float] | np.ndarray,
    best_sentence_scores: Sequence[float | None] | np.ndarray,
    sentence_weight: float = SENTENCE_WEIGHT,
) -> tuple[np.ndarray, np.ndarray]:
    """(order, scores): the pool's positions best first, and the re-scored values.

    Ties keep the pool's own order (a stable sort), so equal scores rank deterministically."""
    scores = reranked_scores(chunk_scores, best_sentence_scores, sentence_weight)
    return np.argsort(-scores, kind="stable"), scores


def sentence_scales(
    dense: Sequence[float | None], lexical: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    """The two scales of the evidence of each sentence of one answer's hits, comparable across
    its hits: min-max of the cosine with the query and of the summed IDF of the query lexemes a
    sentence holds, as `fusion.fuse_scores` scales a pool; `fusion.fuse_normalised` mixes them
    by `lexical_weight` (0 for dense search, 1 for lexical; `weighing`). A sentence without a
    vector of the query's model counts as the least similar; a search without vectors therefore
    ranks sentences by their words."""
    cosines = np.array([np.nan if d is None else d for d in dense], dtype=np.float64)
    if not len(cosines) or np.isnan(cosines).all():
        cosines = np.zeros_like(cosines)
    else:
        cosines = np.where(np.isnan(cosines), np.nanmin(cosines), cosines)
    return normalised(cosines), normalised(np.asarray(lexical, dtype=np.float64))
