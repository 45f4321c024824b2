"""Hybrid ranking: one score from a dense (cosine) and a lexical (BM25) score per candidate.

`seams search` takes, per query, the union of the nearest chunks by vector and the best chunks by
BM25, scores every candidate by both (`seams.storage.search.pool`), and ranks by

    fused = (1 - lexical_weight) * norm(dense) + lexical_weight * norm(bm25)
    norm(x) = (x - min x) / (max x - min x)   over the query's candidate pool

Min-max over the query's own pool puts cosines and unbounded BM25 on one [0, 1] scale per query
(the "relative score" fusion of Weaviate, Elasticsearch's linear retriever with min-max). Where all
candidates score the same, norm is 1 if that score is positive, else 0: a pool in which no chunk
holds a query word adds nothing from BM25, so the dense order stands. `lexical_weight` 0 is the
dense order, 1 the BM25 order. Pure numpy, so evaluations can re-fuse stored candidates with any
weight without a database.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from seams.errors import InputError

LEXICAL_WEIGHT = 0.75
"""Default share of the normalised BM25 score in a hybrid score (`retrieval.lexical_weight`).

Chosen by leave-one-set-out over three public question sets (SQuAD, COVID-QA, a QASPER sample):
the best mean of recall at 500 and 1,000 tokens of context. The optimum is flat and the sets
disagree, so fusing at all matters far more than the weight (the figures:
docs/benchmarks-retrieval.md, "Fusion weight")."""


def check_lexical_weight(weight: float) -> float:
    """`weight` as a float when it lies within [0, 1], else an `InputError`."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 <= weight <= 1:
        raise InputError(
            f"retrieval.lexical_weight={weight!r}: must lie within [0, 1] "
            "(0 ranks by dense scores alone, 1 by BM25 alone)"
        )
    return float(weight)


def normalised(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Min-max normalisation over one query's pool (see the module doc for ties)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return x
    low, high = float(x.min()), float(x.max())
    if high > low:
        return (x - low) / (high - low)
    return np.full_like(x, 1.0 if high > 0 else 0.0)


def fuse_scores(
    dense: Sequence[float] | np.ndarray,
    lexical: Sequence[float] | np.ndarray,
    lexical_weight: float = LEXICAL_WEIGHT,
) -> np.ndarray:
    """The hybrid score of every candidate of one query's pool (see the module doc)."""
    return fuse_normalised(normalised(dense), normalised(lexical), lexical_weight)


def fuse_normalised(
    dense: np.ndarray, lexical: np.ndarray, lexical_weight: float = LEXICAL_WEIGHT
) -> np.ndarray:
    """`fuse_scores` of scores already `normalised`: a pool scaled once, fused at many weights."""
    weight = check_lexical_weight(lexical_weight)
    return (1.0 - weight) * dense + weight * lexical
