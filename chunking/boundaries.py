"""Boundary detection: which gaps between candidates are topic shifts (stage 3).

One `Boundary` per gap, so the `semantic_boundaries` asset has a row per gap and the UI can show
why each cut was or was not made. For every threshold type the rule reads the same way:
`is_boundary` when `similarity < threshold` (and, with `local_minima`, the similarity is a local
minimum of the document's curve), or the gap is structural.

Threshold types (statistics over the document's own gaps, so they adapt to each document):

- fixed: `boundary_threshold`.
- percentile: the `percentile`-th percentile, capped by `boundary_threshold` (the dynamic and the
  fixed threshold combine by taking the lower, so the fixed one bounds how similar a cut may be).
- stddev: mean - `stddev_factor` * standard deviation.
- interquartile: Q1 - `iqr_factor` * (Q3 - Q1).
- gradient: TextTiling's depth score, the drop into a gap from the highest similarity within
  `window_size` gaps on its left plus the rise out of it on its right; a gap is a boundary when
  its depth reaches the `gradient_percentile`-th percentile of depths. Expressed per gap as the
  similarity below which the depth is reached, so `threshold` is comparable to `similarity`.

Structure: the gap before a heading is a boundary (reason "structural") when `split_on_headings`;
the gap right after a heading never is (a heading belongs to what follows it). With lexical
(Jaccard) similarities the reason is "fallback", and absolute thresholds (fixed, the cap of
percentile) are not used, because Jaccard values live on another scale than cosines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Literal

import numpy as np

from seams.chunking.config import ChunkingConfig
from seams.chunking.optimal import (
    SizeLimits,
    centred_units,
    cut_evidence,
    inside_paragraphs,
    optimal_cuts,
)
from seams.chunking.segment import BINDS_NEXT, Candidate, introduced_gaps

Reason = Literal["semantic", "structural", "size", "fallback"]


@dataclass(frozen=True, slots=True)
class Boundary:
    """The gap before candidate `index`: its similarity, the threshold it was held to, and the
    verdict. `reason` is None for gaps that are not boundaries."""

    index: int
    similarity: float
    threshold: float
    is_boundary: bool
    reason: Reason | None


# One Boundary per gap, made in bulk: a frozen dataclass's __init__ sets each field through
# object.__setattr__, slower than the slots' own setters used here (as `segment._candidate`).
_BOUNDARY_FIELDS = ("index", "similarity", "threshold", "is_boundary", "reason")
if tuple(f.name for f in fields(Boundary)) != _BOUNDARY_FIELDS:  # pragma: no cover
    raise RuntimeError("Boundary's fields changed: update _BOUNDARY_FIELDS and _boundaries")
_set_index, _set_similarity, _set_threshold, _set_is_boundary, _set_reason = (
    getattr(Boundary, name).__set__ for name in _BOUNDARY_FIELDS
)


def _boundaries(
    similarities: list[float], thresholds: list[float], reasons: Sequence[Reason | None]
) -> list[Boundary]:
    """`[Boundary(gap + 1, similarity, threshold, reason is not None, reason), ...]` per gap,
    made faster (see `_BOUNDARY_FIELDS`)."""
    new = object.__new__
    out = []
    append = out.append
    for index, (similarity, threshold, reason) in enumerate(
        zip(similarities, thresholds, reasons, strict=True), start=1
    ):
        boundary = new(Boundary)
        _set_index(boundary, index)
        _set_similarity(boundary, similarity)
        _set_threshold(boundary, threshold)
        _set_is_boundary(boundary, reason is not None)
        _set_reason(boundary, reason)
        append(boundary)
    return out


def detect_boundaries(
    similarities: np.ndarray | Sequence[float],
    candidates: Sequence[Candidate],
    config: ChunkingConfig,
    *,
    method: Literal["semantic", "jaccard"] = "semantic",
    vectors: np.ndarray | None = None,
) -> list[Boundary]:
    """One `Boundary` per gap (len(candidates) - 1 of them) from the gaps' similarities.

    With `config.segmenter == "optimal"` and the candidates' embeddings (`vectors`, one row per
    candidate), the verdicts are the cuts of the best segmentation under the size contract
    (`chunking.optimal`); `similarity` and `threshold` stay as the per-gap evidence. Without
    vectors (the lexical fallback) the threshold rule decides.
    """
    sims = np.asarray(similarities, dtype=np.float64)
    n_gaps = max(len(candidates) - 1, 0)
    if sims.shape != (n_gaps,):
        raise ValueError(
            f"similarities has shape {sims.shape}; expected ({n_gaps},), one per candidate gap"
        )
    if n_gaps == 0:
        return []
    sims = np.nan_to_num(sims, nan=0.0, posinf=1.0, neginf=-1.0)
    thresholds = gap_thresholds(sims, config, lexical=method == "jaccard")
    below = sims < thresholds
    if config.local_minima and n_gaps > 1:
        previous = np.concatenate(([np.inf], sims[:-1]))
        following = np.concatenate((sims[1:], [np.inf]))
        below &= (sims <= previous) & (sims <= following)
    if config.segmenter == "optimal" and method == "semantic" and vectors is not None:
        reasons = _optimal_reasons(sims, candidates, config, vectors)
        return _boundaries(sims.tolist(), thresholds.tolist(), reasons)
    semantic_reason: Reason = "fallback" if method == "jaccard" else "semantic"
    kinds = [c.kind for c in candidates]
    introduced = introduced_gaps(candidates)
    dips = below.tolist()
    verdicts: list[Reason | None] = []
    for gap in range(n_gaps):
        index = gap + 1
        reason: Reason | None = None
        if kinds[index - 1] in BINDS_NEXT or introduced[index]:
            reason = None  # never separate a heading or a lead-in from what it introduces
        elif config.split_on_headings and kinds[index] == "heading":
            reason = "structural"
        elif dips[gap]:
            reason = semantic_reason
        verdicts.append(reason)
    return _boundaries(sims.tolist(), thresholds.tolist(), verdicts)


def _optimal_reasons(
    sims: np.ndarray, candidates: Sequence[Candidate], config: ChunkingConfig, vectors: np.ndarray
) -> list[Reason | None]:
    """Each gap's reason under the optimal segmenter: None (no cut), "structural" (a heading
    opens the chunk), "semantic" (a topic shift), "size" (a cut inside one topic that a size cap
    forces)."""
    n = len(candidates)
    array = np.asarray(vectors, dtype=np.float32)
    if array.shape[0] != n:
        raise ValueError(f"vectors has {array.shape[0]} rows for {n} candidates")
    depths = gap_depths(sims, config.window_size) if config.boundary_weight else None
    evidence = cut_evidence(candidates, depths, config)
    limits = SizeLimits.of(candidates, config.size_unit, sections=config.split_on_headings)
    units = centred_units(array, config.null_spread)
    introduced = np.array(introduced_gaps(candidates), dtype=bool)
    cuts = optimal_cuts(units, limits, evidence, config, inside_paragraphs(candidates), introduced)
    reasons: list[Reason | None] = [None] * (n - 1)
    for cut in cuts.topic:
        heading = config.split_on_headings and candidates[cut].kind == "heading"
        reasons[cut - 1] = "structural" if heading else "semantic"
    for cut in cuts.size:
        reasons[cut - 1] = "size"
    return reasons


def gap_thresholds(
    sims: np.ndarray, config: ChunkingConfig, *, lexical: bool = False
) -> np.ndarray:
    """The similarity threshold of each gap under `config.threshold_type` (see module doc)."""
    kind = config.threshold_type
    n = sims.shape[0]
    if kind == "fixed":
        if lexical:
            return np.full(n, float(np.percentile(sims, config.percentile)))
        return np.full(n, config.boundary_threshold)
    if kind == "percentile":
        value = float(np.percentile(sims, config.percentile))
        if not lexical:
            value = min(value, config.boundary_threshold)
        return np.full(n, value)
    if kind == "stddev":
        return np.full(n, float(sims.mean() - config.stddev_factor * sims.std()))
    if kind == "interquartile":
        q1, q3 = np.percentile(sims, [25.0, 75.0])
        return np.full(n, float(q1 - config.iqr_factor * (q3 - q1)))
    # gradient: depth_i = (left peak - s_i) + (right peak - s_i) >= D  <=>  s_i <= (L + R - D) / 2
    left, right = _peaks(sims, max(1, config.window_size))
    depth = left + right - 2 * sims
    cutoff = float(np.percentile(depth, config.gradient_percentile))
    # A flat curve has no valleys: no depth-based boundaries at all.
    if cutoff <= 0:
        return np.full(n, -np.inf)
    return (left + right - cutoff) / 2 + 1e-12


def gap_depths(sims: np.ndarray, horizon: int) -> np.ndarray:
    """TextTiling's depth of each gap: the drop into it from the highest similarity within
    `horizon` gaps on its left plus the rise out of it on its right (0 on a flat curve)."""
    sims = np.asarray(sims, dtype=np.float64)
    if sims.shape[0] == 0:
        return sims
    left, right = _peaks(sims, max(1, horizon))
    return left + right - 2 * sims


def _peaks(sims: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """Highest similarity within `horizon` gaps on each side (the gap itself included)."""
    n = sims.shape[0]
    padded = np.concatenate((np.full(horizon, -np.inf), sims, np.full(horizon, -np.inf)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, horizon + 1)
    left = windows[:n].max(axis=1)  # sims[i-h .. i]
    right = windows[horizon : horizon + n].max(axis=1)  # sims[i .. i+h]
    return left, right
