"""The default segmenter: the globally best cuts under the size contract (stage 3).

Why not local rules: cutting where a gap's similarity dips below a percentile and then letting a
greedy size pass add or move cuts over-segments text it was not tuned on (24 chunks for 10 true
segments on Choi's public corpus), because each decision sees one gap. Here one dynamic program
scores whole segmentations and returns the best one, so the size rules never undo a good cut:

    maximise   sum over chunks C of  (coherence(C) - cut_cost - size_penalties(C))
             + sum over cuts g of    evidence(g)

- coherence(C) = ||sum of u_i over C||^2 / m for a chunk of m candidates, where u_i is candidate
  i's embedding minus the document's mean embedding, rescaled to unit length (so "similar" means
  similar *for this document*, not merely "English prose"). It is the share of the candidates'
  spread that the chunk's centroid explains (m * |centroid|^2): maximising its sum minus
  `cut_cost` per chunk is penalised k-means over contiguous runs -- a chunk must explain at least
  `cut_cost` to be worth its cut. O(d) per chunk from prefix sums; `cut_cost` is the one parameter
  that trades fewer, longer chunks against more, tighter ones (chosen by cross-validation on
  Choi's sets 2 and 3, see benchmarks/choi.py; a pairwise-cosine objective, sum of (c_ij - lambda),
  scored Pk 0.063 there against 0.051).
- evidence(g): `boundary_weight` times the gap's depth (TextTiling's valley depth on the pooled
  gap similarities, `boundaries.gap_depths`), `paragraph_weight` at a paragraph break, and
  `heading_weight` before a heading (when `split_on_headings`). A cut right after a heading is
  impossible: a heading belongs to what it introduces.
- size: `chunk_size_max` and `chunk_chars_max` are hard (a chunk is never bigger, except a single
  candidate that cannot be cut); `chunk_size_min` is a penalty larger than any evidence, so a
  chunk is only undersized when nothing else fits (a short document, a tiny section between two
  headings whose neighbours are full); `chunk_size_target` pulls with `target_weight` times the
  squared relative distance from the target.

The search is exact: for each end candidate every feasible start is tried (those within
`chunk_size_max`, or within `max_chunk_candidates` when sizes are unbounded), vectorised over
starts, so it costs O(n * starts per chunk * d) -- a few milliseconds for 10k words, far below
one embedding pass. Pure numpy; deterministic (ties go to the earliest start).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from seams.chunking.config import ChunkingConfig
from seams.chunking.segment import Candidate

#: Penalty for an undersized chunk: larger than any evidence a cut can collect, so `min` behaves
#: as a hard rule wherever a segmentation that keeps it exists.
UNDERSIZED_PENALTY = 1e6
#: Score of a cut that must not be made (right after a heading): finite, so that when a size cap
#: leaves no other choice the search still compares real alternatives.
FORBIDDEN = -1e9
#: Evidence for a cut before a heading; below `UNDERSIZED_PENALTY`, so a heading opens a chunk
#: unless that would leave a fragment smaller than `min`.
HEADING_EVIDENCE = 1e3


@dataclass(frozen=True, slots=True)
class SizeLimits:
    """Prefix sums that give any candidate range's size in the configured unit and in chars."""

    unit_prefix: np.ndarray  # (n+1,) tokens or candidates; empty for the chars unit
    starts: np.ndarray  # (n,) char offsets
    ends: np.ndarray  # (n,)
    unit: str

    @classmethod
    def of(cls, candidates: Sequence[Candidate], unit: str) -> SizeLimits:
        starts = np.fromiter((c.start_char for c in candidates), np.int64, len(candidates))
        ends = np.fromiter((c.end_char for c in candidates), np.int64, len(candidates))
        if unit == "sentences":
            prefix = np.arange(len(candidates) + 1, dtype=np.int64)
        else:
            counts = np.fromiter((c.token_count for c in candidates), np.int64, len(candidates))
            prefix = np.concatenate(([0], np.cumsum(counts)))
        return cls(prefix, starts, ends, unit)

    def sizes(self, firsts: np.ndarray, stop: int) -> np.ndarray:
        """Sizes of the ranges [first, stop) in the configured unit."""
        if self.unit == "chars":
            return self.ends[stop - 1] - self.starts[firsts]
        return self.unit_prefix[stop] - self.unit_prefix[firsts]

    def earliest_start(self, stop: int, max_size: int | None, max_chars: int | None) -> int:
        """The first candidate a chunk ending at `stop` may start at under both caps (a single
        candidate is always allowed)."""
        first = 0
        if max_size is not None:
            if self.unit == "chars":
                bound = int(np.searchsorted(self.starts, self.ends[stop - 1] - max_size, "left"))
            else:
                need = self.unit_prefix[stop] - max_size
                bound = int(np.searchsorted(self.unit_prefix, need, "left"))
            first = max(first, bound)
        if max_chars is not None:
            bound = int(np.searchsorted(self.starts, self.ends[stop - 1] - max_chars, "left"))
            first = max(first, bound)
        return min(first, stop - 1)


def centred_units(vectors: np.ndarray) -> np.ndarray:
    """Rows minus the document's mean row, rescaled to unit length (zero rows stay zero), as
    float32: one copy of the embeddings, whatever the document's length."""
    array = np.asarray(vectors, dtype=np.float32)
    centred = array - array.mean(axis=0, dtype=np.float64, keepdims=True).astype(np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", centred, centred, dtype=np.float64))[:, None]
    centred /= np.where(norms > 0, norms, 1.0).astype(np.float32)
    return centred


def cut_evidence(
    candidates: Sequence[Candidate], depths: np.ndarray | None, config: ChunkingConfig
) -> np.ndarray:
    """Evidence for cutting before candidate i (index i, 1 <= i < n); `FORBIDDEN` right after a
    heading.

    `depths[i - 1]` is gap i's valley depth (`boundaries.gap_depths`); None when
    `boundary_weight` is 0 (not computed)."""
    n = len(candidates)
    evidence = np.zeros(n + 1, dtype=np.float64)
    if n < 2:
        return evidence
    if depths is not None and config.boundary_weight:
        evidence[1:n] = config.boundary_weight * np.asarray(depths, dtype=np.float64)
    for i in range(1, n):
        before, here = candidates[i - 1], candidates[i]
        if before.kind == "heading":
            evidence[i] = FORBIDDEN
        elif config.split_on_headings and here.kind == "heading":
            evidence[i] += HEADING_EVIDENCE
        elif here.paragraph != before.paragraph:
            evidence[i] += config.paragraph_weight
    return evidence


@dataclass(frozen=True, slots=True)
class Cuts:
    """Where chunks start (candidate indices 1..n-1): at topic shifts, and inside topics only
    where a size cap forces it."""

    topic: list[int]
    size: list[int]

    @property
    def all(self) -> list[int]:
        return sorted(self.topic + self.size)


def optimal_cuts(
    units: np.ndarray,
    limits: SizeLimits,
    evidence: np.ndarray,
    config: ChunkingConfig,
) -> Cuts:
    """The best cuts under the size contract, in two levels (see module doc).

    `units`: (n, d) rows from `centred_units`; `evidence`: (n+1,) from `cut_evidence`.
    """
    n = units.shape[0]
    if n <= 1:
        return Cuts([], [])
    search = _Search(units, limits, evidence, config)
    topics = search.run(0, n, cost=config.cut_cost, spread_per_candidate=True, capped=False)
    size_cuts: list[int] = []
    hi, max_chars = config.chunk_size_max, config.effective_chars_max()
    firsts, stops = np.array([0, *topics]), np.array([*topics, n])
    if limits.unit == "chars":
        sizes = limits.ends[stops - 1] - limits.starts[firsts]
    else:
        sizes = limits.unit_prefix[stops] - limits.unit_prefix[firsts]
    chars = limits.ends[stops - 1] - limits.starts[firsts]
    over = np.zeros(len(firsts), dtype=bool)
    if hi is not None:
        over |= sizes > hi
    if max_chars is not None:
        over |= chars > max_chars
    for first, stop in zip(firsts[over].tolist(), stops[over].tolist(), strict=True):
        size_cuts += search.run(first, stop, cost=0.0, spread_per_candidate=False, capped=True)
    return Cuts(topics, size_cuts)


#: Chunk ends scored per block: the block's dot products come from one matrix product (BLAS),
#: and memory stays O(block * window) however long the document is.
_BLOCK = 256


class _Search:
    """One exact dynamic program over the candidates [first, stop) of a document."""

    def __init__(
        self, units: np.ndarray, limits: SizeLimits, evidence: np.ndarray, config: ChunkingConfig
    ):
        self.units = units
        self.limits = limits
        self.evidence = evidence
        self.config = config

    def run(
        self, first: int, stop: int, *, cost: float, spread_per_candidate: bool, capped: bool
    ) -> list[int]:
        """Cuts inside [first, stop).

        Topic level (`spread_per_candidate`, uncapped): each chunk scores the spread its
        centroid explains, ||S||^2 / m, minus `cost`. Size level (`capped`): each piece scores
        ||S||^2, which splits a topic into as few pieces as the caps allow and puts the cuts
        where the fewest similar pairs are separated; `target_weight` may pull pieces toward
        the target. Both add the evidence of the cuts they make and pay `UNDERSIZED_PENALTY`
        for a chunk under `chunk_size_min`.
        """
        window = min(self.config.max_chunk_candidates, stop - first)
        best = np.full(stop - first + 1, -np.inf)
        best[0] = 0.0
        back = np.zeros(stop - first + 1, dtype=np.int64)
        lengths = np.arange(1, window + 1)
        for block in range(first + 1, stop + 1, _BLOCK):
            ends = np.arange(block, min(block + _BLOCK, stop + 1))
            score = self._chunk_scores(ends, first, window, cost, spread_per_candidate, capped)
            for row, end in enumerate(ends.tolist()):
                local = end - first
                k = min(window, local)
                # candidates of the chunk's start: end-1, end-2, ..., end-k (lengths 1..k)
                totals = best[local - 1 :: -1][:k] + score[row, :k]
                j = int(np.argmax(totals))  # first maximum = shortest chunk: deterministic
                best[local] = totals[j]
                back[local] = end - lengths[j]
        cuts = []
        end = stop
        while end > first:
            begin = int(back[end - first])
            if begin > first:
                cuts.append(begin)
            end = begin
        return cuts[::-1]

    def _chunk_scores(
        self,
        ends: np.ndarray,
        first: int,
        window: int,
        cost: float,
        spread_per_candidate: bool,
        capped: bool,
    ) -> np.ndarray:
        """score[row, k-1]: the chunk [ends[row] - k, ends[row]) without the best prefix before
        it; -inf where the chunk would start before `first` or break a cap."""
        config, limits = self.config, self.limits
        lengths = np.arange(1, window + 1)
        starts = ends[:, None] - lengths[None, :]  # (rows, window)
        valid = starts >= first
        safe = np.where(valid, starts, first)
        # Prefix sums of the block's rows only (from its first possible start): exact in float64,
        # small enough for the float32 product (~1e-5 absolute on the spreads), and nothing of
        # the size of the document is ever allocated here.
        low = max(first, int(ends[0]) - window)
        local = np.zeros((int(ends[-1]) - low + 1, self.units.shape[1]), dtype=np.float64)
        np.cumsum(self.units[low : int(ends[-1])], axis=0, dtype=np.float64, out=local[1:])
        local = local.astype(np.float32)
        norms = np.einsum("ij,ij->i", local, local, dtype=np.float64)
        gram = local[ends - low] @ local[: int(ends[-1]) - low].T  # one BLAS call
        dots = np.take_along_axis(gram, safe - low, axis=1).astype(np.float64)
        spread = norms[ends - low][:, None] + norms[safe - low] - 2.0 * dots
        if spread_per_candidate:
            spread = spread / lengths[None, :]
        score = spread - cost + np.where(safe > first, self.evidence[safe], 0.0)
        size = limits.unit_prefix[ends][:, None] - limits.unit_prefix[safe]
        if limits.unit == "chars":
            size = limits.ends[ends - 1][:, None] - limits.starts[safe]
        if config.chunk_size_min > 1:
            score -= UNDERSIZED_PENALTY * (size < config.chunk_size_min)
        target = config.chunk_size_target
        if capped and config.target_weight and target is not None:
            score -= config.target_weight * ((size - target) / target) ** 2
        if capped:
            chars = limits.ends[ends - 1][:, None] - limits.starts[safe]
            hi, max_chars = config.chunk_size_max, config.effective_chars_max()
            over = np.zeros_like(valid)
            if hi is not None:
                over |= size > hi
            if max_chars is not None:
                over |= chars > max_chars
            over[:, 0] = False  # a single candidate is always allowed
            valid &= ~over
        return np.where(valid, score, -np.inf)
