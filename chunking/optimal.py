"""The default segmenter: the globally best cuts under the size contract (stage 3).

Why not local rules: cutting where a gap's similarity dips below a percentile and then letting a
greedy size pass add or move cuts over-segments text it was not tuned on (more than twice as many
chunks as true segments on Choi's public corpus; see the benchmarks page), because each decision
sees one gap. Here dynamic programs score whole segmentations and return the best one, in two
levels, so the size rules never undo a good cut.

**Topics** (the whole document):

    maximise   sum over chunks C of  (coherence(C) - cut_cost)
             + sum over cuts g of    (evidence(g) - paragraph_cost * inside(g))

- coherence(C) = ||sum of u_i over C||^2 / m for a chunk of m candidates, where u_i is candidate
  i's embedding minus the document's mean embedding, rescaled to unit length (so "similar" means
  similar *for this document*, not merely "English prose"). It is the share of the candidates'
  spread that the chunk's centroid explains (m * |centroid|^2): maximising its sum minus a cost
  per chunk is penalised k-means over contiguous runs -- a chunk must explain at least its cost
  to be worth its cut. O(d) per chunk from prefix sums.
- The null model (`null_spread`): rescaling every document to unit spread would make the small
  differences between the paragraphs of a one-subject text look as large as the seams between
  unrelated topics, so a one-subject text was cut apart. The spread per candidate of the
  *embeddings* (1 - |mean|^2, unbiased) says how much a document varies at all: a single-topic
  text of the model sits at ~0.5-0.7 for MiniLM, ten unrelated topics at ~0.9. A document whose
  spread s is below `null_spread` has its u_i scaled by sqrt(s / null_spread), so its cuts are
  judged against the variation of a single-topic text, not only against its own.
- Structure is a prior on *where*: a cut inside a paragraph pays `paragraph_cost` beyond
  `cut_cost`; a cut at a paragraph break (a blank line, a list item, a block) pays `cut_cost`
  alone. A document without breaks is one paragraph, so every cut in it costs `cut_cost +
  paragraph_cost`, as one flat cost did before. `paragraph_weight` (a bonus, off) stays for
  configs that set it.
- evidence(g): `boundary_weight` times the gap's depth (TextTiling's valley depth on the pooled
  gap similarities, `boundaries.gap_depths`), `paragraph_weight` at a paragraph break, and
  `HEADING_EVIDENCE` before a heading (when `split_on_headings`). A cut right after a heading is
  impossible: a heading belongs to what it introduces.
- `chunk_size_min` is a penalty larger than any evidence, so a chunk is only undersized when
  nothing else fits (a short document, a tiny section between two headings).

**Sizes** (inside each topic longer than `chunk_size_max` / `chunk_chars_max`, which are hard: a
chunk is never bigger, except a single candidate that cannot be cut): the topic is split into the
*fewest* pieces that fit, then among those splits the one with the fewest cuts inside paragraphs,
then the one whose pieces score most by ||S||^2 (not divided by m), with `chunk_size_target` pulling
by `target_weight` times the squared relative distance from the target. ||S||^2 grows faster than
linearly with a coherent piece, so it keeps a forced cut near a topic's edge, which costs topic
fidelity least (the per-candidate score put it mid-topic, and lost on Choi's sets: see the
segmentation benchmarks). The order is lexicographic (a piece costs `PIECE_COST`, a cut inside a
paragraph `SPLIT_INSIDE_COST`), so a one-topic text is never shredded toward `chunk_size_min` (its
centred vectors sum to ~0, so a score-only split gained from every extra piece) and a size cut lands
on a paragraph break whenever the fewest pieces allow one.

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
#: What one more piece costs in a size split: more than any coherence, evidence or heading, so a
#: topic over the cap is cut into the fewest pieces that fit (below `UNDERSIZED_PENALTY`: `min`
#: still wins).
PIECE_COST = 1e4
#: What a size cut inside a paragraph costs: more than any coherence, less than a piece, so among
#: the fewest pieces the split with the fewest cuts inside paragraphs wins.
SPLIT_INSIDE_COST = 1e2


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


def document_spread(vectors: np.ndarray) -> float:
    """Spread per candidate of unit rows, 1 - |mean|^2, made unbiased (x m / (m - 1)): ~0.5-0.7
    for one subject under MiniLM, ~0.9 for unrelated topics; 0.0 for fewer than two rows."""
    array = np.asarray(vectors, dtype=np.float64)
    m = array.shape[0]
    if m < 2:
        return 0.0
    mean = array.mean(axis=0)
    raw = float(np.mean(np.einsum("ij,ij->i", array, array))) - float(mean @ mean)
    return max(0.0, raw) * m / (m - 1)


def centred_units(vectors: np.ndarray, null_spread: float = 0.0) -> np.ndarray:
    """Rows minus the document's mean row, rescaled to unit length (zero rows stay zero), as
    float32: one copy of the embeddings, whatever the document's length.

    With `null_spread` > 0 (the null model, see the module doc), a document whose
    `document_spread` is below it has every row scaled by sqrt(spread / null_spread): its
    coherences shrink, so its cuts must beat what a single-topic text would show."""
    array = np.asarray(vectors, dtype=np.float32)
    centred = array - array.mean(axis=0, dtype=np.float64, keepdims=True).astype(np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", centred, centred, dtype=np.float64))[:, None]
    scale = 1.0
    if null_spread > 0:
        scale = float(np.sqrt(min(1.0, document_spread(array) / null_spread)))
    centred *= (scale / np.where(norms > 0, norms, 1.0)).astype(np.float32)
    return centred


def inside_paragraphs(candidates: Sequence[Candidate]) -> np.ndarray:
    """(n+1,) bool: True at i (1 <= i < n) when the gap before candidate i lies inside a
    paragraph (same `paragraph` value on both sides; `segment` gives every block, list item and
    blank-line paragraph its own)."""
    n = len(candidates)
    inside = np.zeros(n + 1, dtype=bool)
    if n > 1:
        paragraphs = np.fromiter((c.paragraph for c in candidates), np.int64, n)
        inside[1:n] = paragraphs[1:] == paragraphs[:-1]
    return inside


def cut_evidence(
    candidates: Sequence[Candidate], depths: np.ndarray | None, config: ChunkingConfig
) -> np.ndarray:
    """Evidence for cutting before candidate i (index i, 1 <= i < n); `FORBIDDEN` right after a
    heading. The cost of cutting inside a paragraph is not in here (see `optimal_cuts`).

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
    inside: np.ndarray | None = None,
) -> Cuts:
    """The best cuts under the size contract, in two levels (see module doc).

    `units`: (n, d) rows from `centred_units`; `evidence`: (n+1,) from `cut_evidence`;
    `inside`: (n+1,) from `inside_paragraphs` (None: every gap is inside the one paragraph).
    """
    n = units.shape[0]
    if n <= 1:
        return Cuts([], [])
    if inside is None:
        inside = np.ones(n + 1, dtype=bool)
    search = _Search(units, limits, config)
    topic_evidence = evidence - config.paragraph_cost * inside
    topics = search.run(0, n, topic_evidence, cost=config.cut_cost, capped=False)
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
    size_evidence = evidence - SPLIT_INSIDE_COST * inside
    for first, stop in zip(firsts[over].tolist(), stops[over].tolist(), strict=True):
        size_cuts += search.run(first, stop, size_evidence, cost=PIECE_COST, capped=True)
    return Cuts(topics, size_cuts)


#: Chunk ends scored per block: the block's dot products come from one matrix product (BLAS),
#: and memory stays O(block * window) however long the document is.
_BLOCK = 256


class _Search:
    """One exact dynamic program over the candidates [first, stop) of a document."""

    def __init__(self, units: np.ndarray, limits: SizeLimits, config: ChunkingConfig):
        self.units = units
        self.limits = limits
        self.config = config

    def run(
        self, first: int, stop: int, evidence: np.ndarray, *, cost: float, capped: bool
    ) -> list[int]:
        """Cuts inside [first, stop): each chunk scores the spread its centroid explains,
        ||S||^2 / m (topic level) or ||S||^2 (size level, `capped`), minus `cost`, plus the
        evidence of the cut that opens it, minus `UNDERSIZED_PENALTY` under `chunk_size_min`.
        `capped` forbids chunks over the caps and lets `target_weight` pull toward the target;
        its `cost` is `PIECE_COST`, so the fewest pieces come first.
        """
        window = min(self.config.max_chunk_candidates, stop - first)
        best = np.full(stop - first + 1, -np.inf)
        best[0] = 0.0
        back = np.zeros(stop - first + 1, dtype=np.int64)
        lengths = np.arange(1, window + 1)
        for block in range(first + 1, stop + 1, _BLOCK):
            ends = np.arange(block, min(block + _BLOCK, stop + 1))
            score = self._chunk_scores(ends, first, window, evidence, cost, capped)
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
        evidence: np.ndarray,
        cost: float,
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
        if not capped:
            spread = spread / lengths[None, :]
        score = spread - cost + np.where(safe > first, evidence[safe], 0.0)
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
