"""Assembly: candidates + boundaries -> size-bounded chunks with ids and metadata (stage 4).

Boundaries come first; size rules add or drop cuts only where the size caps force them:

1. Cut at every detected boundary (semantic and structural).
2. A segment bigger than max is split at its weakest gap (lowest similarity) that leaves both
   sides >= min, recursively, until every piece fits. `target_pull` > 0 adds a preference for
   cuts that make pieces close to the target size (how "aiming at target" enters); by default
   the target only matters through the count of pieces the max rule forces.
3. A segment smaller than min (a tail) merges into the neighbour it is most similar to, if the
   union fits max: across a semantic gap before a structural one, a heading or a lead-in always
   with what follows it, never across a heading that opens a section (`split_on_headings`: a
   short section is a chunk of its own). If no union fits, the cut between it and a neighbour
   moves to the weakest gap that leaves both within [min, max]. If nothing works, it stays small
   and is flagged `undersized` (a short document is one small chunk).
4. Optional overlap: whole candidates from the end of the previous chunk, up to `overlap_tokens`
   (or `overlap_ratio` of its tokens), only while the chunk stays within max, never across a
   heading.

Offsets (contract): `chunk.text == text[start_char:end_char]`, overlap included;
`overlap_start:overlap_end` is the overlapping prefix (empty at `start_char` without overlap), so
`overlap_end:end_char` is the chunk's core; every non-whitespace character is in exactly one core.

Sizes are measured on the whole chunk (overlap included) in `size_unit` and never exceed max
except when one candidate alone cannot be cut below it (flagged `oversized`).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from seams.chunking.boundaries import Boundary
from seams.chunking.config import ChunkingConfig
from seams.chunking.ids import assign_split_ids
from seams.chunking.pages import PageIndex
from seams.chunking.segment import BINDS_NEXT, Candidate
from seams.chunking.similarity import (
    candidate_vectors,
    expected_rows,
    normalise_rows,
    prefix_sums,
)
from seams.chunking.tokens import (
    BERT_MAX_WORD_CHARS,
    CL100K_NAME,
    HEURISTIC_COUNTER_NAME,
    HeuristicTokenCounter,
    TokenCounter,
    count_tokens,
    unknown_runs,
)

logger = logging.getLogger(__name__)

STRATEGY = "context_aware"
# Merge preferences: a heading belongs with what follows; structural cuts are kept over semantic.
_AFTER_HEADING_BONUS = 10.0
_STRUCTURAL_PENALTY = 10.0
_TIE_BREAK = 1e-9


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk of a document (contract). `text == source[start_char:end_char]`.

    `section` is the heading path of the chunk's first core candidate ("A > B", "" if none);
    `cohesion` is the mean pairwise cosine similarity of its candidates' embeddings (None with
    fewer than two candidates or without embeddings); `boundary_method` is "semantic" or
    "jaccard" (lexical fallback). `metadata` holds size_unit, size, token_counter (the unit of
    `token_count`), boundary_reason (why the chunk starts where it does), oversized, undersized,
    split_sentence, overlap_candidates and, for a continued table, table_header;
    tokens_estimated (True only) when the chunk holds a run the model's tokenizer reads as one
    `[UNK]`, counted one token per character (see `chunking.tokens`). With
    `tokenizer="cl100k_base"` it also holds model_tokens (the chunk in the embedding model's
    tokens) and exceeds_model_window (model_tokens > `model_window_tokens`).
    """

    chunk_id: str
    document_id: str
    chunk_index: int
    total_chunks: int
    text: str
    start_char: int
    end_char: int
    overlap_start: int
    overlap_end: int
    token_count: int
    sentence_count: int
    section: str
    page_start: int | None
    page_end: int | None
    cohesion: float | None
    boundary_method: str
    strategy: str = STRATEGY
    metadata: dict[str, Any] = field(default_factory=dict, hash=False, compare=True)

    @property
    def core_start(self) -> int:
        """Where the chunk's own text begins (after the overlap)."""
        return self.overlap_end

    def to_dict(self) -> dict[str, Any]:
        """A plain dict row (for a DataFrame)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True, slots=True)
class Segment:
    """Candidates [first, stop) form one chunk core; `reason` says why it starts there."""

    first: int
    stop: int
    reason: str


class _Sizes:
    """O(1) size of any candidate range in the configured unit."""

    def __init__(self, candidates: Sequence[Candidate], unit: str):
        self.unit = unit
        n = len(candidates)
        self.tokens = np.fromiter((c.token_count for c in candidates), np.int64, n)
        self.token_prefix = np.concatenate(([0], np.cumsum(self.tokens)))
        self.starts = np.fromiter((c.start_char for c in candidates), np.int64, n)
        self.ends = np.fromiter((c.end_char for c in candidates), np.int64, n)
        if unit == "sentences":
            self.prefix = np.arange(n + 1, dtype=np.int64)
        else:
            self.prefix = self.token_prefix

    def of(self, first: int, stop: int) -> int:
        if stop <= first:
            return 0
        if self.unit == "chars":
            return int(self.ends[stop - 1] - self.starts[first])
        return int(self.prefix[stop] - self.prefix[first])

    def of_all(self, firsts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """`of` of each range [firsts[i], stops[i]), at once."""
        if self.unit == "chars":
            size = self.ends[np.maximum(stops, 1) - 1] - self.starts[np.minimum(firsts, stops)]
        else:
            size = self.prefix[stops] - self.prefix[firsts]
        return np.where(stops > firsts, size, 0)

    def left_of_gaps(self, first: int, gaps: np.ndarray) -> np.ndarray:
        """Sizes of [first, g) for each gap g."""
        if self.unit == "chars":
            return self.ends[gaps - 1] - self.starts[first]
        return self.prefix[gaps] - self.prefix[first]

    def right_of_gaps(self, gaps: np.ndarray, stop: int) -> np.ndarray:
        """Sizes of [g, stop) for each gap g."""
        if self.unit == "chars":
            return self.ends[stop - 1] - self.starts[gaps]
        return self.prefix[stop] - self.prefix[gaps]

    def token_count(self, first: int, stop: int) -> int:
        return int(self.token_prefix[stop] - self.token_prefix[first])


def plan_segments(
    candidates: Sequence[Candidate], boundaries: Sequence[Boundary], config: ChunkingConfig
) -> list[Segment]:
    """The chunk cores: boundaries first, then only the cuts min/max force (see module doc)."""
    if not _check_gaps(candidates, boundaries):
        return []
    return _Planner(candidates, boundaries, config, _Sizes(candidates, config.size_unit)).plan()


class _Planner:
    def __init__(
        self,
        candidates: Sequence[Candidate],
        boundaries: Sequence[Boundary],
        config: ChunkingConfig,
        sizes: _Sizes,
    ):
        n = self.n = len(candidates)
        self.config = config
        self.sizes = sizes
        self.hi = size_cap(config)
        self.chars_max = config.effective_chars_max() or math.inf
        # gap i (1..n-1) lives at index i; index 0 and n are unused sentinels
        self.similarity = np.ones(n + 1, dtype=np.float64)
        if boundaries:
            index = np.fromiter((b.index for b in boundaries), np.int64, len(boundaries))
            self.similarity[index] = [b.similarity for b in boundaries]
        self.reasons: dict[int, str] = {
            b.index: b.reason for b in boundaries if b.is_boundary and b.reason
        }
        self.merge_preference = self.similarity.copy()
        self.split_score = self.similarity.copy()
        after_heading = np.zeros(n + 1, dtype=bool)
        after_heading[1:n] = [c.kind in BINDS_NEXT for c in candidates[: n - 1]]
        self.merge_preference[after_heading] += _AFTER_HEADING_BONUS
        self.split_score[after_heading] += _AFTER_HEADING_BONUS
        structural = [
            i
            for i, reason in self.reasons.items()
            if reason == "structural" and 0 < i < n and not after_heading[i]
        ]
        self.merge_preference[structural] -= _STRUCTURAL_PENALTY
        # A heading (with `split_on_headings`) opens its section's chunk: no merge crosses it,
        # so a short section stands alone instead of joining the previous section's chunk.
        self.opens = np.zeros(n + 1, dtype=bool)
        if config.split_on_headings:
            self.opens[1:n] = [c.kind == "heading" for c in candidates[1:]]

    def plan(self) -> list[Segment]:
        cuts = sorted(self.reasons)
        firsts, stops = [0, *cuts], [*cuts, self.n]
        # Which segments break a cap, all at once: only those are split (one by one).
        big = self._too_big_all(np.array(firsts), np.array(stops)).tolist()
        bounded: list[int] = []
        for first, stop, too_big in zip(firsts, stops, big, strict=True):
            if first > 0:
                bounded.append(first)
            if too_big:
                bounded.extend(self._split_to_max(first, stop))
        cuts = self._merge_small(bounded)
        return [
            Segment(
                first, stop, "document_start" if first == 0 else self.reasons.get(first, "size")
            )
            for first, stop in zip([0, *cuts], [*cuts, self.n], strict=True)
        ]

    # -- max --------------------------------------------------------------------------------
    def _split_to_max(self, first: int, stop: int) -> list[int]:
        config = self.config
        sizes = self.sizes
        out: list[int] = []
        stack = [(first, stop)]
        while stack:
            a, b = stack.pop()
            total = sizes.of(a, b)
            if b - a < 2 or not self._too_big(a, b):
                continue
            gaps = np.arange(a + 1, b)
            left = sizes.left_of_gaps(a, gaps)
            right = sizes.right_of_gaps(gaps, b)
            # Distance of each cut from the nearest multiple of the ideal piece size (pieces
            # near target): `target_pull` weighs it against similarity; a tiny weight always
            # breaks exact ties (flat similarities, lexical zeros) toward even, target-sized
            # pieces instead of peeling off minimum-sized ones.
            target = config.chunk_size_target or total / 2
            pieces = max(2, math.ceil(total / target))
            ratio = left / (total / pieces)
            off_target = 2 * np.abs(ratio - np.round(ratio))
            score = self.split_score[a + 1 : b] + (config.target_pull + _TIE_BREAK) * off_target
            both_big = (left >= config.chunk_size_min) & (right >= config.chunk_size_min)
            if both_big.any():
                score = np.where(both_big, score, np.inf)
            cut = a + 1 + int(np.argmin(score))
            out.append(cut)
            stack.append((a, cut))
            stack.append((cut, b))
        return sorted(out)

    # -- min --------------------------------------------------------------------------------
    def _merge_small(self, cuts: list[int]) -> list[int]:
        config = self.config
        sizes = self.sizes
        lo = config.chunk_size_min
        starts = [0, *cuts]
        stop_of = dict(zip(starts, [*cuts, self.n], strict=True))
        start_of_stop = {stop: start for start, stop in stop_of.items()}
        firsts = np.fromiter(stop_of, np.int64, len(stop_of))
        every = sizes.of_all(firsts, np.fromiter(stop_of.values(), np.int64, len(stop_of)))
        heap = [
            (size, a) for a, size in zip(firsts.tolist(), every.tolist(), strict=True) if size < lo
        ]
        heapq.heapify(heap)

        def push_if_small(a: int | None) -> None:
            if a is not None and a in stop_of and sizes.of(a, stop_of[a]) < lo:
                heapq.heappush(heap, (sizes.of(a, stop_of[a]), a))

        def replace(old: list[int], new: list[tuple[int, int]]) -> None:
            for a in old:
                b = stop_of.pop(a)
                start_of_stop.pop(b, None)
            for a, b in new:
                stop_of[a] = b
                start_of_stop[b] = a
                push_if_small(a)
            # A neighbour that was too small before may now be able to merge (a rebalance can
            # shrink the segment next to it): look at it again.
            push_if_small(start_of_stop.get(new[0][0]))
            push_if_small(new[-1][1] if new[-1][1] < self.n else None)

        while heap:
            size, a = heapq.heappop(heap)
            b = stop_of.get(a)
            if b is None or sizes.of(a, b) != size or size >= lo:
                continue
            left = start_of_stop.get(a)  # start of the segment before
            right = stop_of.get(b) if b < self.n else None  # stop of the segment after
            options = []
            if left is not None and not self.opens[a]:
                options.append((self.merge_preference[a], "left"))
            if right is not None and not self.opens[b]:
                options.append((self.merge_preference[b], "right"))
            options.sort(reverse=True)
            merged = False
            for _, side in options:
                if side == "left" and left is not None and not self._too_big(left, b):
                    replace([left, a], [(left, b)])
                    merged = True
                    break
                if side == "right" and right is not None and not self._too_big(a, right):
                    replace([a, b], [(a, right)])
                    merged = True
                    break
            if merged:
                continue
            for _, side in options:  # no union fits: move the shared cut instead
                union = (left, b) if side == "left" else (a, right)
                if union[0] is None or union[1] is None:
                    continue
                cut = self._rebalance(union[0], union[1])
                if cut is not None:
                    old = [left, a] if side == "left" else [a, b]
                    replace([x for x in old if x is not None], [(union[0], cut), (cut, union[1])])
                    break
        return sorted(a for a in stop_of if a > 0)

    def _too_big_all(self, firsts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """`_too_big` of each range [firsts[i], stops[i]) of two or more candidates (ranges
        of one are never split)."""
        sizes = self.sizes
        chars = sizes.ends[stops - 1] - sizes.starts[firsts]
        size = chars if sizes.unit == "chars" else sizes.prefix[stops] - sizes.prefix[firsts]
        return (stops - firsts >= 2) & ((size > self.hi) | (chars > self.chars_max))

    def _too_big(self, first: int, stop: int) -> bool:
        """Whether candidates [first, stop) exceed the size or the character cap."""
        chars = int(self.sizes.ends[stop - 1] - self.sizes.starts[first])
        return self.sizes.of(first, stop) > self.hi or chars > self.chars_max

    def _rebalance(self, first: int, stop: int) -> int | None:
        """The weakest gap in [first, stop) leaving both sides within [min, max], if any."""
        if stop - first < 2:
            return None
        config = self.config
        gaps = np.arange(first + 1, stop)
        left = self.sizes.left_of_gaps(first, gaps)
        right = self.sizes.right_of_gaps(gaps, stop)
        lo, hi = config.chunk_size_min, self.hi
        left_chars = self.sizes.ends[gaps - 1] - self.sizes.starts[first]
        right_chars = self.sizes.ends[stop - 1] - self.sizes.starts[gaps]
        ok = (left >= lo) & (left <= hi) & (right >= lo) & (right <= hi)
        ok &= (left_chars <= self.chars_max) & (right_chars <= self.chars_max)
        if not ok.any():
            return None
        score = np.where(ok, self.split_score[first + 1 : stop], np.inf)
        return first + 1 + int(np.argmin(score))


def assemble_chunks(
    text: str,
    candidates: Sequence[Candidate],
    boundaries: Sequence[Boundary],
    config: ChunkingConfig,
    *,
    document_id: str,
    embeddings: np.ndarray | None = None,
    page_spans: Sequence[tuple[int, int, int]] | None = None,
    boundary_method: str = "semantic",
    token_counter_name: str = HEURISTIC_COUNTER_NAME,
    window_counter: TokenCounter | None = None,
) -> list[Chunk]:
    """Chunks of `text` from its candidates and per-gap boundaries (see module doc).

    `embeddings`: the candidates' unit vectors (n, d) for cohesion (in "text" window mode, the
    window vectors are accepted too). `page_spans`: `(page, start_char, end_char)` per page.
    `window_counter`: the embedding model's token counter; with `tokenizer="cl100k_base"` every
    chunk is measured with it against `model_window_tokens` (the conservative heuristic if None).
    """
    if not _check_gaps(candidates, boundaries):
        return []
    sizes = _Sizes(candidates, config.size_unit)
    segments = _Planner(candidates, boundaries, config, sizes).plan()
    vectors = _cohesion_vectors(embeddings, len(candidates), config)
    pages = PageIndex(page_spans) if page_spans is not None else None
    lo, hi = config.chunk_size_min, size_cap(config)

    spans = _spans(segments, candidates, sizes, config)
    texts = [text[candidates[o].start_char : candidates[b - 1].end_char] for o, _, b in spans]
    cohesions = _cohesions(vectors, spans) if vectors is not None else [None] * len(spans)
    words = [t.split() for t in texts]
    ids = assign_split_ids(document_id, texts, words)
    total = len(spans)
    window_counts: list[int] | None = None
    if config.tokenizer == CL100K_NAME:
        token_counter_name = CL100K_NAME
        measure = window_counter if window_counter is not None else HeuristicTokenCounter()
        window_counts = count_tokens(measure, texts)
    estimated = _estimated_counts(texts, words, config, token_counter_name, document_id)
    # Per-candidate values as Python lists: the loop below reads a few per chunk.
    split_before = [0, *itertools.accumulate(c.split for c in candidates)]
    unit_prefix, token_prefix = sizes.prefix.tolist(), sizes.token_prefix.tolist()
    chars_unit = config.size_unit == "chars"
    chunks = []
    for k, ((o, a, b), seg, chunk_text, cid, cohesion) in enumerate(
        zip(spans, segments, texts, ids, cohesions, strict=True)
    ):
        start = candidates[o].start_char
        end = candidates[b - 1].end_char
        size = end - start if chars_unit else unit_prefix[b] - unit_prefix[o]
        metadata: dict[str, Any] = {
            "size_unit": config.size_unit,
            "size": size,
            "token_counter": token_counter_name,
            "boundary_reason": seg.reason,
            "oversized": size > hi,
            "undersized": size < lo,
            "split_sentence": split_before[b] > split_before[o],
            "overlap_candidates": a - o,
        }
        if estimated[k]:
            metadata["tokens_estimated"] = True
        if window_counts is not None:
            metadata["model_tokens"] = window_counts[k]
            metadata["exceeds_model_window"] = window_counts[k] > config.model_window_tokens
        head = candidates[a]
        if head.header_start is not None and head.header_end is not None:
            metadata["table_header"] = text[head.header_start : head.header_end]
        chunks.append(
            Chunk(
                chunk_id=cid,
                document_id=document_id,
                chunk_index=k,
                total_chunks=total,
                text=chunk_text,
                start_char=start,
                end_char=end,
                overlap_start=start,
                overlap_end=candidates[a].start_char if o < a else start,
                token_count=token_prefix[b] - token_prefix[o],
                sentence_count=b - o,
                section=head.section,
                page_start=pages.page_at(start) if pages else None,
                page_end=pages.page_at(end - 1) if pages else None,
                cohesion=cohesion,
                boundary_method=boundary_method,
                metadata=metadata,
            )
        )
    return chunks


def _check_gaps(candidates: Sequence[Candidate], boundaries: Sequence[Boundary]) -> int:
    """How many candidates there are, once there is one boundary per gap between them (else a
    ValueError naming both counts)."""
    n = len(candidates)
    if n and len(boundaries) != n - 1:
        raise ValueError(
            f"got {len(boundaries)} boundaries for {n} candidates; expected one per gap ({n - 1})"
        )
    return n


def _spans(
    segments: Sequence[Segment],
    candidates: Sequence[Candidate],
    sizes: _Sizes,
    config: ChunkingConfig,
) -> list[tuple[int, int, int]]:
    """Each chunk's (overlap first, core first, stop) candidate: its core is its segment, and
    with overlap configured it also repeats the end of the segment before it."""
    spans: list[tuple[int, int, int]] = []
    for k, seg in enumerate(segments):
        first = seg.first
        if k > 0 and (config.overlap_tokens or config.overlap_ratio):
            first = _overlap_start(segments[k - 1], seg, candidates, sizes, config)
        spans.append((first, seg.first, seg.stop))
    return spans


def _estimated_counts(
    texts: Sequence[str],
    words: Sequence[list[str]],
    config: ChunkingConfig,
    token_counter_name: str,
    document_id: str,
) -> list[bool]:
    """Per chunk, whether its token count is an estimate: a model tokenizer (not cl100k, not
    the heuristic) counted runs it reads as one [UNK] by their characters. Said once per
    document."""
    model_sized = config.size_unit == "tokens" and token_counter_name not in (
        CL100K_NAME,
        HEURISTIC_COUNTER_NAME,
    )
    # A run the tokenizer cannot read lies inside one word: most chunks are ruled out by their
    # longest word before the pattern looks at them.
    estimated = [
        bool(model_sized and max(map(len, w), default=0) > BERT_MAX_WORD_CHARS and unknown_runs(t))
        for t, w in zip(texts, words, strict=True)
    ]
    if any(estimated):
        logger.warning(
            "%s: %d chunk(s) hold runs of over 100 letters or digits without a space or "
            "punctuation, which the tokenizer reads as one unknown token ([UNK]): their token "
            "counts are estimated at one token per character (metadata tokens_estimated)",
            document_id,
            sum(estimated),
        )
    return estimated


def size_cap(config: ChunkingConfig) -> float:
    """`chunk_size_max`, or infinity when sizes are unbounded (`chunk_size_max=None`)."""
    return math.inf if config.chunk_size_max is None else config.chunk_size_max


def _overlap_start(
    previous: Segment,
    segment: Segment,
    candidates: Sequence[Candidate],
    sizes: _Sizes,
    config: ChunkingConfig,
) -> int:
    """First candidate of the overlap taken from `previous` (== segment.first for none)."""
    if segment.reason == "structural" or candidates[segment.first].kind == "heading":
        return segment.first
    budget = config.overlap_tokens or math.floor(
        config.overlap_ratio * sizes.token_count(previous.first, previous.stop)
    )
    first = segment.first
    used = 0
    while first - 1 > previous.first:  # keep at least one candidate the previous chunk's own
        tokens = int(sizes.tokens[first - 1])
        if used + tokens > budget or sizes.of(first - 1, segment.stop) > size_cap(config):
            break
        if candidates[first - 1].kind == "heading":
            break
        first -= 1
        used += tokens
    return first


def _cohesion_vectors(
    embeddings: np.ndarray | None, n: int, config: ChunkingConfig
) -> np.ndarray | None:
    """The candidates' vectors (n, d) as float32, not yet normalised (`_cohesions` normalises
    block by block, so a large document never holds a second n x d copy)."""
    if embeddings is None:
        return None
    array = np.asarray(embeddings, dtype=np.float32)
    if array.ndim != 2:
        raise ValueError(f"embeddings must be 2-D (n, d); got shape {array.shape}")
    if array.shape[0] != n:
        if config.window_mode == "text" and array.shape[0] == expected_rows(n, config):
            array = candidate_vectors(array, n, config)
        else:
            raise ValueError(f"embeddings has {array.shape[0]} rows for {n} candidates")
    return array


COHESION_BLOCK_SPANS = 1024
"""Chunks whose cohesion is computed together: memory stays that block's rows x d (float64),
whatever the document's length."""


def _cohesions(vectors: np.ndarray, spans: Sequence[tuple[int, int, int]]) -> list[float | None]:
    """Mean pairwise cosine of each chunk's candidate vectors: for unit rows v_1..v_m,
    (|sum v|^2 - sum |v|^2) / (m (m - 1)); None for m < 2. Prefix sums per block of chunks."""
    out: list[float | None] = []
    for g in range(0, len(spans), COHESION_BLOCK_SPANS):
        group = spans[g : g + COHESION_BLOCK_SPANS]
        firsts = np.array([o for o, _, _ in group])
        stops = np.array([b for _, _, b in group])
        lo, hi = int(firsts.min()), int(stops.max())
        rows = normalise_rows(vectors[lo:hi])
        cumulative = prefix_sums(rows, np.float64)
        squares = np.concatenate(([0.0], np.cumsum(np.einsum("ij,ij->i", rows, rows))))
        firsts, stops = firsts - lo, stops - lo
        sums = cumulative[stops] - cumulative[firsts]
        pair_sums = np.einsum("ij,ij->i", sums, sums) - (squares[stops] - squares[firsts])
        for count, value in zip((stops - firsts).tolist(), pair_sums.tolist(), strict=True):
            if count < 2 or not math.isfinite(value):
                out.append(None)
            else:
                out.append(max(-1.0, min(1.0, value / (count * (count - 1)))))
    return out
