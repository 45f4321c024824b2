"""The default segmenter: the globally best cuts under the size contract (stage 3).

Dynamic programs score whole segmentations and return the best one, in two levels, so the size
rules never undo a good cut. **Topics** (the whole document): maximise the sum over chunks of
coherence minus `cut_cost` plus the evidence of each cut (minus `paragraph_cost` inside a
paragraph), where coherence is the share of the centred candidate vectors' spread a chunk's
centroid explains (`centred_units`, with the null model `null_spread`), and `chunk_size_min` is a
penalty larger than any evidence, except for a whole section (heading to heading, with
`split_on_headings`: a short section is its own chunk); a cut right after a heading or a lead-in (a
line ending in a colon before a list, table or code block) is impossible. **Sizes** (inside each
topic over `chunk_size_max` / `chunk_chars_max`, which are hard): the fewest pieces that fit, then
the fewest cuts inside paragraphs, then the pieces that score most, with `chunk_size_target`
pulling by `target_weight`. The search is exact (every feasible start of each end, vectorised over
starts), pure numpy and deterministic (ties go to the earliest start). The objective and why each
term is what it is: docs/architecture.md, "The optimal segmenter".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from seams.chunking.config import ChunkingConfig
from seams.chunking.segment import BINDS_NEXT, Candidate

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
    sections: np.ndarray | None = None
    """(n+1,) bool: a section opens at i (candidate i is a heading, or i == n, the end); a chunk
    that is a whole section, heading to heading, may be under `chunk_size_min`. None: no such
    exception (headings do not open chunks)."""

    @classmethod
    def of(
        cls, candidates: Sequence[Candidate], unit: str, *, sections: bool = False
    ) -> SizeLimits:
        """The limits of `candidates`; `sections`: a whole section may stand alone, however
        short (`split_on_headings`)."""
        opens = None
        if sections:
            opens = np.fromiter((c.kind == "heading" for c in candidates), bool, len(candidates))
            opens = np.concatenate((opens, [True]))
        starts = np.fromiter((c.start_char for c in candidates), np.int64, len(candidates))
        ends = np.fromiter((c.end_char for c in candidates), np.int64, len(candidates))
        if unit == "sentences":
            prefix = np.arange(len(candidates) + 1, dtype=np.int64)
        else:
            counts = np.fromiter((c.token_count for c in candidates), np.int64, len(candidates))
            prefix = np.concatenate(([0], np.cumsum(counts)))
        return cls(prefix, starts, ends, unit, opens)


def document_spread(vectors: np.ndarray) -> float:
    """Spread per candidate of unit rows, 1 - |mean|^2, made unbiased (x m / (m - 1)): lower for
    one subject than for unrelated topics; 0.0 for fewer than two rows."""
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
        if before.kind in BINDS_NEXT:
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
    introduced: np.ndarray | None = None,
) -> Cuts:
    """The best cuts under the size contract, in two levels (see module doc).

    `units`: (n, d) rows from `centred_units`; `evidence`: (n+1,) from `cut_evidence`;
    `inside`: (n+1,) from `inside_paragraphs` (None: every gap is inside the one paragraph);
    `introduced`: (n+1,) from `segment.introduced_gaps` (None: none), gaps inside a block a
    lead-in introduces: never a topic cut, and a size cut there costs as one inside a paragraph.
    """
    n = units.shape[0]
    if n <= 1:
        return Cuts([], [])
    if inside is None:
        inside = np.ones(n + 1, dtype=bool)
    search = _Search(units, limits, config)
    topic_evidence = evidence - config.paragraph_cost * inside
    bound = np.zeros(n + 1, dtype=bool) if introduced is None else introduced
    topic_evidence = np.where(bound, FORBIDDEN, topic_evidence)
    topics = search.run(0, n, topic_evidence, cost=config.cut_cost, capped=False)
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
    size_evidence = evidence - SPLIT_INSIDE_COST * (inside | bound)
    runs = list(zip(firsts[over].tolist(), stops[over].tolist(), strict=True))
    size_cuts = search.split_to_fit(runs, size_evidence)
    return Cuts(topics, size_cuts)


#: Chunk ends scored per block: the block's dot products come from one matrix product (BLAS),
#: and memory stays O(block * window) however long the document is. The block layout fixes the
#: rounding of the scores (each block sums its own prefix), so it must not change.
_BLOCK = 256
#: Memory for the prefix sums of the short topics split together (`_Search.split_to_fit`).
_PREFIX_BYTES = 16 << 20
#: Memory for the float32 prefix sums of the blocks of one run summed together.
_GROUP_BYTES = 4 << 20
#: Memory for the float64 rows being summed at a time (`_Search._stacked_prefixes`).
_STEP_BYTES = 256 << 10


class _Search:
    """One exact dynamic program over the candidates [first, stop) of a document."""

    def __init__(self, units: np.ndarray, limits: SizeLimits, config: ChunkingConfig):
        self.units = units
        self.limits = limits
        self.config = config
        # Sizes grow with every candidate added in front (counts >= 0, candidates in order):
        # then the chunks within the caps are the shortest ones (see `_feasible_widths`).
        self.monotone = bool(
            np.all(np.diff(limits.starts) >= 0)
            and (limits.unit == "chars" or np.all(np.diff(limits.unit_prefix) >= 0))
        )

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
        size = stop - first
        best = np.full(size + 1, -np.inf)
        best[0] = 0.0
        # best[local - 1], best[local - 2], ... (the prefixes before the chunk's possible
        # starts, shortest chunk first) are one slice of the reversed view.
        reverse = best[::-1]
        back = [0] * (size + 1)
        blocks = list(range(first + 1, stop + 1, _BLOCK))
        # Blocks whose prefix sums are summed together (one addition per row for all of them).
        group = max(1, _GROUP_BYTES // ((_BLOCK + window) * self.units.shape[1] * 4))
        for at in range(0, len(blocks), group):
            tops = blocks[at : at + group]
            spans = [(max(first, top - window), min(top + _BLOCK, stop + 1) - 1) for top in tops]
            for top, local in zip(tops, self._prefixes(spans), strict=True):
                ends = np.arange(top, min(top + _BLOCK, stop + 1))
                score = self._chunk_scores(ends, first, window, evidence, cost, capped, local)
                width = score.shape[1]
                for row, end in zip(score, ends.tolist(), strict=True):
                    local_end = end - first
                    offset = size - local_end + 1
                    if local_end >= width:
                        totals = reverse[offset : offset + width] + row
                    else:
                        totals = reverse[offset : offset + local_end] + row[:local_end]
                    j = int(totals.argmax())  # first maximum = shortest chunk: deterministic
                    best[local_end] = totals[j]
                    back[local_end] = end - 1 - j
        return _backtrack(back, first, stop)

    def _prefixes(self, spans: list[tuple[int, int]]) -> list[np.ndarray]:
        """For each (low, last): the prefix sums of units[low:last] from `low` (a zero row
        first), summed in float64 and stored as float32: the sums of `np.cumsum` in its order,
        for all spans at once (step t adds row t of every span in one call). Each is a
        C-ordered (last - low + 1, d) view of one array (`_stacked_prefixes`)."""
        stacked, offsets = self._stacked_prefixes(spans)
        return [stacked[a:b] for a, b in itertools.pairwise(offsets)]

    def _stacked_prefixes(self, spans: list[tuple[int, int]]) -> tuple[np.ndarray, list[int]]:
        """The prefix sums of `_prefixes`, one after the other: span k's are rows
        offsets[k]:offsets[k+1] of the returned float32 array.

        The float64 running sums of all spans advance together, `_STEP_BYTES` of rows at a
        time (one addition per row for all spans), each step converted to float32 as soon as
        it is summed: the same additions in the same order as `prefix_sums` of each span, but
        no float64 copy of them all (megabytes freshly paged in on every document)."""
        units = self.units
        d = units.shape[1]
        lows = np.array([low for low, _ in spans], dtype=np.int64)
        lengths = np.array([last - low for low, last in spans], dtype=np.int64)
        offsets = [0, *itertools.accumulate((lengths + 1).tolist())]
        stacked = np.empty((offsets[-1], d), dtype=np.float32)
        stacked[offsets[:-1]] = 0.0
        heads = np.array(offsets[:-1], dtype=np.int64) + 1  # each span's first sum
        longest = int(lengths.max())
        step = max(1, min(longest, _STEP_BYTES // (len(spans) * d * 8)))
        chunk = np.empty((step, len(spans), d), dtype=np.float64)
        views = list(chunk)  # row views made once: a row costs one addition for all spans
        carried = np.zeros((len(spans), d), dtype=np.float64)
        for t0 in range(0, longest, step):
            rows = min(step, longest - t0)
            t = np.arange(t0, t0 + rows)[:, None]
            live = t < lengths  # (rows, spans): the span still has row t
            # Row t of every span in one gather (a span that has ended reads some finite row:
            # its sums are never stored).
            chunk[:rows] = units[np.minimum(lows + t, units.shape[0] - 1)]
            before = carried if t0 else None  # a span's first row is its first sum as it is
            for row in views[:rows]:
                if before is not None:
                    row += before  # row + before == before + row, bit for bit
                before = row
            carried[...] = views[rows - 1]
            stacked[(heads + t)[live]] = chunk[:rows][live]  # float64 -> float32
        return stacked, offsets

    def split_to_fit(self, runs: list[tuple[int, int]], evidence: np.ndarray) -> list[int]:
        """The size cuts of every over-cap topic [first, stop) in `runs`, in order: exactly
        `run(first, stop, evidence, cost=PIECE_COST, capped=True)` for each. Topics that fit one
        block (all of them unless `max_chunk_candidates` exceeds it) are scored together, a
        few numpy calls for all of them instead of a few dozen per topic."""
        short = [(first, stop) for first, stop in runs if stop - first <= _BLOCK]
        together: dict[tuple[int, int], list[int]] = {}
        row_bytes = self.units.shape[1] * 8
        batch: list[tuple[int, int]] = []
        longest = 0
        for topic in [*short, None]:  # batches whose prefix sums fit `_PREFIX_BYTES`
            if topic is not None:
                longest_with = max(longest, topic[1] - topic[0] + 1)
                if not batch or longest_with * (len(batch) + 1) * row_bytes <= _PREFIX_BYTES:
                    batch.append(topic)
                    longest = longest_with
                    continue
            together.update(zip(batch, self._split_short(batch, evidence), strict=True))
            batch, longest = ([topic], topic[1] - topic[0] + 1) if topic is not None else ([], 0)
        cuts: list[int] = []
        for first, stop in runs:
            if (first, stop) in together:
                cuts += together[first, stop]
            else:
                cuts += self.run(first, stop, evidence, cost=PIECE_COST, capped=True)
        return cuts

    def _split_short(self, runs: list[tuple[int, int]], evidence: np.ndarray) -> list[list[int]]:
        """`split_to_fit` for topics of at most `_BLOCK` candidates, each one block of `run`
        (its ends first+1..stop, its prefix sums from `first`): the same arithmetic on every
        value, batched. Only the prefix sums' norms and the dot products are per topic, with
        the very calls `_chunk_scores` makes, so the scores are bit for bit the same."""
        if not runs:
            return []
        config = self.config
        firsts = np.array([first for first, _ in runs], dtype=np.int64)
        counts = np.array([stop - first for first, stop in runs], dtype=np.int64)
        rows_before = np.concatenate(([0], np.cumsum(counts)))  # batch row of each topic's end 1
        total = int(rows_before[-1])
        # One row per chunk end: its topic's first candidate and its own end.
        topic_of_row = np.repeat(np.arange(len(runs)), counts)
        row_first = firsts[topic_of_row]
        ends = np.arange(total) - rows_before[topic_of_row] + row_first + 1
        windows = np.minimum(config.max_chunk_candidates, counts)
        widths = self._feasible_widths(ends, row_first, rows_before, windows)
        width = int(widths.max())
        # Each topic's prefix sums from its first candidate, and all their norms in one call
        # (a row's norm does not depend on its neighbours): topic q's at rows_before[q] + q.
        stacked, offsets = self._stacked_prefixes(runs)
        norms = np.einsum("ij,ij->i", stacked, stacked, dtype=np.float64)
        dots = np.zeros((total, width), dtype=np.float64)
        for q, (count, topic_width) in enumerate(
            zip(counts.tolist(), widths.tolist(), strict=True)
        ):
            local = stacked[offsets[q] : offsets[q + 1]]
            at = int(rows_before[q])
            buffer = np.zeros(topic_width + count * count, dtype=np.float32)
            np.matmul(local[1:], local[:count].T, out=buffer[topic_width:].reshape(count, count))
            # dots[row, k-1] = gram[row, row + 1 - k] (the chunk's start in the topic)
            dots[at : at + count, :topic_width] = _band2d(
                buffer, topic_width, count + 1, count, topic_width
            )
        lengths = np.arange(1, width + 1)
        starts = ends[:, None] - lengths[None, :]
        first_col = row_first[:, None]
        valid = starts >= first_col
        safe = np.where(valid, starts, first_col)
        norm_at = (rows_before[topic_of_row] + topic_of_row - row_first)[:, None]
        spread = norms[norm_at[:, 0] + ends][:, None] + norms[norm_at + safe] - 2.0 * dots
        score = spread - PIECE_COST + np.where(safe > first_col, evidence[safe], 0.0)
        score, valid = self._size_terms(
            score, valid, ends, lambda values: values[safe], capped=True
        )
        score = np.where(valid, score, -np.inf)
        # The dynamic programme of `run`, in Python floats (the same IEEE sums; a few
        # candidates per chunk, where numpy's per-call cost would dominate).
        table = score.tolist()
        out = []
        for q, (first, stop) in enumerate(runs):
            size, at, topic_width = stop - first, int(rows_before[q]), int(widths[q])
            best = [0.0] + [-math.inf] * size
            back = [0] * (size + 1)
            for local in range(1, size + 1):
                row = table[at + local - 1]
                top, j = -math.inf, 0
                for k in range(min(topic_width, local)):
                    total_k = best[local - 1 - k] + row[k]
                    if total_k > top:  # strict: the first maximum, as argmax
                        top, j = total_k, k
                best[local] = top
                back[local] = first + local - 1 - j
            out.append(_backtrack(back, first, stop))
        return out

    def _feasible_widths(
        self, ends: np.ndarray, firsts: np.ndarray, starts_of: np.ndarray, windows: np.ndarray
    ) -> np.ndarray:
        """Per topic (rows `starts_of[q]:starts_of[q+1]`), the most candidates a capped chunk
        ending at any of its `ends` can hold, at least 1 and at most its window: sizes grow
        with every candidate added in front, so the chunks within the caps are the shortest
        ones, and every score column beyond this width would be -inf."""
        limits, config = self.limits, self.config
        if not self.monotone:  # no shortcut: every length up to the window
            return windows.copy()
        hi, max_chars = config.chunk_size_max, config.effective_chars_max()
        earliest = firsts.copy()
        if hi is not None:
            if limits.unit == "chars":
                bound = np.searchsorted(limits.starts, limits.ends[ends - 1] - hi, "left")
            else:
                bound = np.searchsorted(limits.unit_prefix, limits.unit_prefix[ends] - hi, "left")
            earliest = np.maximum(earliest, bound)
        if max_chars is not None:
            bound = np.searchsorted(limits.starts, limits.ends[ends - 1] - max_chars, "left")
            earliest = np.maximum(earliest, bound)
        longest = np.maximum.reduceat(ends - earliest, starts_of[:-1])
        return np.minimum(windows, np.maximum(1, longest))

    def _size_terms(
        self,
        score: np.ndarray,
        valid: np.ndarray,
        ends: np.ndarray,
        at_start: Callable[[np.ndarray], np.ndarray],
        *,
        capped: bool,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The size rules on scores of chunks [start, end), in place: `UNDERSIZED_PENALTY`
        under `chunk_size_min`; capped, the pull toward the target and chunks over a cap
        invalid. `at_start(values)`: a per-candidate array's value at each chunk's start (where
        `valid` is False, any value of it: those scores are discarded)."""
        config, limits = self.config, self.limits
        if limits.unit == "chars":
            size = limits.ends[ends - 1][:, None] - at_start(limits.starts)
        else:
            size = limits.unit_prefix[ends][:, None] - at_start(limits.unit_prefix)
        if config.chunk_size_min > 1:
            small = size < config.chunk_size_min
            if limits.sections is not None:  # a whole section stands alone, however short
                small &= ~(at_start(limits.sections) & limits.sections[ends][:, None])
            score -= UNDERSIZED_PENALTY * small
        target = config.chunk_size_target
        if capped and config.target_weight and target is not None:
            score -= config.target_weight * ((size - target) / target) ** 2
        if capped:
            hi, max_chars = config.chunk_size_max, config.effective_chars_max()
            over = np.zeros_like(valid)
            if hi is not None:
                over |= size > hi
            if max_chars is not None:
                chars = size
                if limits.unit != "chars":
                    chars = limits.ends[ends - 1][:, None] - at_start(limits.starts)
                over |= chars > max_chars
            over[:, 0] = False  # a single candidate is always allowed
            valid &= ~over
        return score, valid

    def _chunk_scores(
        self,
        ends: np.ndarray,
        first: int,
        window: int,
        evidence: np.ndarray,
        cost: float,
        capped: bool,
        local: np.ndarray,
    ) -> np.ndarray:
        """score[row, k-1]: the chunk [ends[row] - k, ends[row]) without the best prefix before
        it; -inf where the chunk would start before `first` or break a cap. Capped, only the
        columns of lengths that can fit are returned (the rest would be -inf). `ends` are
        consecutive, so every per-start value is a band of a vector: strided views, no gathers,
        and the arithmetic runs in place on one array (temporaries of this size are most of
        the segmenter's memory traffic).

        `local`: the prefix sums of the block's rows only, from its first possible start
        (`_prefixes`): exact in float64, small enough for the float32 product (~1e-5 absolute
        on the spreads), and nothing of the size of the document is ever allocated here.
        """
        rows, top, last = len(ends), int(ends[0]), int(ends[-1])
        width = window
        if capped:
            bounds = np.array([0, rows])
            firsts = np.full(rows, first, dtype=np.int64)
            width = int(self._feasible_widths(ends, firsts, bounds, np.array([window]))[0])
        # Every chunk of the block starts after `first` once its longest does: no masking.
        inside = top - width > first
        low = max(first, top - window)
        norms = np.einsum("ij,ij->i", local, local, dtype=np.float64)
        columns = last - low
        # gram[row, c] = <prefix at ends[row], prefix c>, one BLAS call, written after `width`
        # spare slots so that the band below never reads before the buffer.
        buffer = np.empty(width + rows * columns, dtype=np.float32)
        buffer[:width] = 0.0
        gram = buffer[width:].reshape(rows, columns)
        np.matmul(local[ends - low], local[:columns].T, out=gram)
        # dots[row, k-1] = gram[row, ends[row] - k - low]; where that start is before `first`
        # the view reads a neighbour (masked below).
        dots = _band2d(buffer, width + top - low - 1, columns + 1, rows, width).astype(np.float64)
        dots *= 2.0
        score = norms[ends - low][:, None] + _band(norms, top - low, rows, width)
        score -= dots  # the spread
        if not capped:
            score /= np.arange(1, width + 1)
        score -= cost
        starts = None
        if inside:
            score += _band(evidence, top, rows, width)
        else:
            starts = ends[:, None] - np.arange(1, width + 1)[None, :]  # (rows, width)
            score += np.where(starts > first, _band(evidence, top, rows, width), 0.0)
        valid = np.ones((rows, width), dtype=bool) if starts is None else starts >= first
        score, valid = self._size_terms(
            score, valid, ends, lambda values: _band(values, top, rows, width), capped=capped
        )
        if starts is None and not capped:
            return score  # every chunk valid
        return np.where(valid, score, -np.inf)


def _backtrack(back: list[int], first: int, stop: int) -> list[int]:
    """The cuts inside [first, stop) from `back` (the start of the best chunk ending at each
    candidate, indexed from `first`)."""
    cuts = []
    end = stop
    while end > first:
        begin = back[end - first]
        if begin > first:
            cuts.append(begin)
        end = begin
    return cuts[::-1]


def _band(values: np.ndarray, top: int, rows: int, width: int) -> np.ndarray:
    """(rows, width) view: [r, k-1] = values[top + r - k] (rows of consecutive ends, lengths
    1..width); where top + r - k < 0 it holds values[0] (a start before the range: masked by
    the caller). Only a band near the document's start is copied, so a block costs the same
    wherever it lies."""
    missing = width - top
    if missing <= 0:
        return _band2d(values, top - 1, 1, rows, width)
    padded = np.concatenate((np.repeat(values[:1], missing), values[: top + rows - 1]))
    return _band2d(padded, width - 1, 1, rows, width)


def _band2d(flat: np.ndarray, origin: int, row_step: int, rows: int, width: int) -> np.ndarray:
    """(rows, width) view of 1-D `flat`: [r, j] = flat[origin + r * row_step - j] (numpy checks
    that every element lies inside `flat`)."""
    flat = np.ascontiguousarray(flat)
    item = flat.itemsize
    return np.ndarray(
        (rows, width),
        flat.dtype,
        flat,
        offset=origin * item,
        strides=(row_step * item, -item),
    )
