"""Fill a reader's context budget with ranked hits: merged spans, never a token over.

A RAG prompt has room for N tokens, not for k chunks. What `seams search --budget` does (and the
retrievers' `budget`, and `seams eval`) is `pack_passages`: each hit contributes whole sentences
around its best-scoring sentence, grown while that is the best use of the next tokens (see its
doc; the user's description is docs/operations.md, "Context budgets"). `pack_budget` packs whole
hits instead (`search_response(..., passages=False)`): it walks the hits best first and keeps
each one that still fits. Both share these rules:

- hits of one document version that overlap or touch (only whitespace between them, e.g.
  neighbouring chunks) become one span, `source[start:end]`, so no text is given twice and a
  passage cut across two chunks reads as one;
- a span's cost is the token count of its exact text (`count_tokens`, the embedding model's
  tokenizer by default); merging re-counts the merged span, so the total is exact, not a sum of
  chunk sizes;
- what does not fit is left out, never cut (`pack_budget`: the whole hit; `pack_passages`: the
  sentence), so a later, smaller piece may still fit and the reader never gets half a sentence.
  A piece already inside a kept span costs nothing.
- what was left out is said: each hit tried that did not fit, with what it needed and the room
  left at its turn (`left_out`), and how many were never reached (`unreached`).

The total of the spans' token counts never exceeds the budget.
"""

from __future__ import annotations

import bisect
import functools
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from seams.errors import InputError

TokenCounter = Callable[[list[str]], list[int]]
"""Token counts of texts (a `TokenizerCounter`, or any function of that shape)."""


PASSAGE_SHARE = 0.5
"""A hit's best passage without a budget: its best sentence and the neighbours next to it (in a
run) whose evidence is at least this share of the best sentence's."""


GROWTH_HIT_SHARE = 0.7
"""How much a passage's growth leans on its hit rather than on the next sentence: a growth step
is worth `value * (share + (1 - share) * evidence)`.

Evidence alone (0) stops a passage inside a paragraph whose other sentences share few words with
the question, though the paragraph is the answer (papers, long explanations); the hit alone (1)
grows the best hit whole before a weaker hit's best sentence is given, which wastes a small
budget. 0.7 was chosen by leaving one public question set out (SQuAD, COVID-QA, a QASPER sample:
mean recall at 250, 500 and 1,000 tokens; docs/benchmarks-retrieval.md): every set gains held
out, and 0.7 has the best mean and the smallest loss against any set's own best (0.012)."""


@dataclass(frozen=True)
class Sentence:
    """One sentence of a hit (`source[start:end]`, whole) with its evidence for the query: the
    fused lexical + dense score of the sentence, comparable across the hits of one answer."""

    start: int
    end: int
    score: float


@dataclass(frozen=True)
class BudgetItem:
    """One ranked hit as the packer sees it.

    `window_start` and `window_text` are a stretch of the source around the hit
    (`source[window_start : window_start + len(window_text)]`, the hit included), used to bridge
    the whitespace between it and a neighbouring span."""

    rank: int
    group: tuple[str, str]
    """The document version: (batch_key, document_id)."""
    chunk_id: str
    start_char: int
    end_char: int
    text: str
    window_start: int
    window_text: str
    sentences: tuple[Sentence, ...] = ()
    """The hit's sentences in order, inside `start_char:end_char` (empty: the hit is one unit)."""
    value: float = 1.0
    """The hit's weight among the answer's hits (its ranking score, scaled to [0, 1])."""


@dataclass(frozen=True)
class ContextSpan:
    """A stretch of one document version given to the reader, made of one or more hits."""

    batch_key: str
    document_id: str
    start_char: int
    end_char: int
    text: str
    """Exactly `source[start_char:end_char]`."""
    tokens: int
    ranks: tuple[int, ...]
    """The ranks of the hits it holds, best first."""
    chunk_ids: tuple[str, ...]

    @property
    def best_rank(self) -> int:
        return self.ranks[0]


@dataclass(frozen=True)
class LeftOut:
    """A hit the packer tried and left out: its smallest part (its best sentence, or the whole
    hit) needed `tokens` more than the `room` left at its turn."""

    rank: int
    tokens: int
    room: int


@dataclass(frozen=True)
class PackedContext:
    spans: list[ContextSpan]
    """In the order of their best hit."""
    tokens: int
    budget: int
    skipped: tuple[int, ...]
    """Ranks of hits left out because they did not fit (`left_out` says by how much)."""
    passages: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Per rank of a hit given to the reader: the (start, end) of the part of it that was given
    (its whole span when packed whole)."""
    left_out: tuple[LeftOut, ...] = ()
    """The hits of `skipped`, each with what it needed and the room left at its turn."""
    offered: int = 0
    """How many ranked hits were offered; those neither given nor `skipped` were not reached
    (the budget was full before their turn)."""

    @property
    def given(self) -> tuple[int, ...]:
        """Ranks of the hits given to the reader, best first."""
        return tuple(sorted(self.passages))

    @property
    def unreached(self) -> int:
        """Hits offered that were neither given nor tried (the budget was full first)."""
        return self.offered - len(self.passages) - len(self.skipped)


def check_budget(budget: object) -> int:
    """`budget` itself when it is a positive integer, else an `InputError`."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise InputError(f"budget must be a positive number of tokens, got {budget!r}")
    return budget


def pack_budget(
    items: Sequence[BudgetItem], budget: int, count_tokens: TokenCounter
) -> PackedContext:
    """The spans of `items` (best first) that fit `budget` tokens (see the module doc)."""
    check_budget(budget)
    spans: list[_Span] = []
    used = 0
    left_out: list[LeftOut] = []
    for item in items:
        touching = [s for s in spans if s.group == item.group and _touches(s, item)]
        inside = [s for s in touching if s.start <= item.start_char and item.end_char <= s.end]
        if inside:
            inside[0].add(item)  # already given: no new text, no cost
            continue
        start = min([item.start_char, *(s.start for s in touching)])
        end = max([item.end_char, *(s.end for s in touching)])
        pieces = [(s.start, s.text) for s in touching] + [(item.window_start, item.window_text)]
        text = _cover(start, end, pieces)
        tokens = count_tokens([text])[0]
        cost = tokens - sum(s.tokens for s in touching)
        if used + cost > budget:
            left_out.append(LeftOut(item.rank, cost, budget - used))
            continue
        used += cost
        merged = _Span(item.group, start, end, text, tokens)
        for s in touching:
            merged.members.extend(s.members)
            spans.remove(s)
        merged.add(item)
        spans.append(merged)
        if used == budget:
            break
    kept = {rank for s in spans for rank, _ in s.members}
    passages = {i.rank: (i.start_char, i.end_char) for i in items if i.rank in kept}
    return _packed(spans, used, budget, passages, left_out, len(items))


def bound_to_next(sentences: Sequence[Sentence], binds: Sequence[bool]) -> tuple[Sentence, ...]:
    """`sentences` with each one that `binds` (a heading, a lead-in) joined to the one after it
    into one unit scored by the better of the two: a passage that starts at a heading holds the
    sentence it introduces. The last one has nothing after it in the hit and stays alone."""
    out: list[Sentence] = []
    pending: Sentence | None = None
    for sentence, bound in zip(sentences, binds, strict=True):
        if pending is not None:
            score = max(pending.score, sentence.score)
            sentence = Sentence(pending.start, sentence.end, score)
        pending = sentence if bound else None
        if not bound:
            out.append(sentence)
    if pending is not None:
        out.append(pending)
    return tuple(out)


def best_sentence(sentences: Sequence[Sentence]) -> int:
    """The position of the best-scoring sentence (ties: the first)."""
    scores = [s.score for s in sentences]
    return scores.index(max(scores))


def best_passage(
    sentences: Sequence[Sentence], share: float = PASSAGE_SHARE
) -> tuple[int, int] | None:
    """(first, last) positions of a hit's best passage without a budget: its best sentence, grown
    to each side while the next sentence's evidence is at least `share` of the best's; None for
    a hit without sentences."""
    if not sentences:
        return None
    best = best_sentence(sentences)
    floor = share * sentences[best].score
    first = last = best
    while first > 0 and sentences[first - 1].score >= floor:
        first -= 1
    while last + 1 < len(sentences) and sentences[last + 1].score >= floor:
        last += 1
    return first, last


def pack_passages(
    items: Sequence[BudgetItem],
    budget: int,
    count_tokens: TokenCounter,
    hit_share: float = GROWTH_HIT_SHARE,
) -> PackedContext:
    """Passages of `items` (best first) that fit `budget` tokens: whole sentences of each hit
    around its best sentence, chosen by the value they add.

    A hit's best sentence is its seed; a passage grows by one neighbouring sentence at a time.
    A seed is worth its evidence times its hit's `value`; growing by the next sentence on either
    side is worth `value * (hit_share + (1 - hit_share) * evidence)` (`GROWTH_HIT_SHARE`): a
    strong hit's passage grows through the rest of its paragraph, a weak hit's only toward
    sentences that hold evidence. The packer takes the most valuable step that still fits, so
    the best hit's answer grows before a weak sentence of a tenth hit is given, and a strong
    sentence of a later hit beats padding around a weak one. Growth "pays" exactly while it is
    the best use of the next tokens. What was left out is recorded (`left_out`): each seed that
    did not fit at its turn, and each hit ranked above the last one given whose seed never had
    a turn before the budget was full, with the tokens it needed alone.

    As in `pack_budget`: passages of one document version that overlap or touch merge into one
    span whose tokens are recounted; a step that does not fit is dropped (a seed: the hit is
    skipped; growth: that side of the passage stops), never cut, so a span is always whole
    sentences; the total never exceeds the budget and no text is given twice. A hit without
    sentences is one unit (its whole span). Deterministic: ties go to the better rank, then the
    seed before growth, then the left side."""
    check_budget(budget)
    units = [_units(item) for item in items]
    passages: dict[int, tuple[int, int]] = {}  # item position -> (first, last) unit
    spans: list[_Span] = []
    used = 0
    left_out: list[LeftOut] = []
    closed: set[tuple[int, int]] = set()
    heap: list[tuple[float, int, int, int]] = []  # (-value, rank, side, position)

    seeds = [best_sentence(u) for u in units]
    sources: dict[tuple[str, str], _Source] = {}  # per document version, its known text
    for position, item in enumerate(items):
        value = item.value * units[position][seeds[position]].score
        heapq.heappush(heap, (-value, item.rank, 0, position))
    waiting = set(range(len(items)))  # positions whose seed has not had its turn
    while heap and used < budget:
        _, _, side, position = heapq.heappop(heap)
        item, sentences = items[position], units[position]
        if side == 0:
            first = last = seeds[position]
        else:
            first, last = passages[position]
            first, last = (first - 1, last) if side < 0 else (first, last + 1)
        start, end = sentences[first].start, sentences[last].end
        source = sources.get(item.group) or sources.setdefault(
            item.group, _source(tuple(sorted(_pieces(items, item.group))))
        )
        touching = [s for s in spans if s.group == item.group and _meets(s, start, end, source)]
        low = min([start, *(s.start for s in touching)])
        high = max([end, *(s.end for s in touching)])
        inside = [s for s in touching if s.start <= start and end <= s.end]
        if inside:
            tokens, cost = inside[0].tokens, 0
            touching = inside[:1]
        else:
            text = source.cover(low, high)
            tokens = count_tokens([text])[0]
            cost = tokens - sum(s.tokens for s in touching)
        if used + cost > budget:
            if side == 0:
                left_out.append(LeftOut(item.rank, cost, budget - used))
                waiting.discard(position)
            else:
                closed.add((position, side))
            continue
        used += cost
        if not inside:
            merged = _Span(item.group, low, high, text, tokens)
            for s in touching:
                merged.members.extend(s.members)
                spans.remove(s)
            spans.append(merged)
            target = merged
        else:
            target = inside[0]
        if side == 0:  # growth keeps the hit in the span that holds it
            target.add(item)
            waiting.discard(position)
        passages[position] = (first, last)
        for direction in (-1, 1) if side == 0 else (side,):
            nxt = first - 1 if direction < 0 else last + 1
            if 0 <= nxt < len(sentences) and (position, direction) not in closed:
                value = item.value * (hit_share + (1 - hit_share) * sentences[nxt].score)
                heapq.heappush(heap, (-value, item.rank, direction, position))
    for position in sorted(waiting):  # a seed already inside a given span costs nothing
        seed = units[position][seeds[position]]
        group = items[position].group
        holder = next(
            (x for x in spans if x.group == group and x.start <= seed.start and seed.end <= x.end),
            None,
        )
        if holder is not None:
            holder.add(items[position])
            passages[position] = (seeds[position], seeds[position])
            waiting.discard(position)
    unreached = sorted(p for p in waiting if p < max(passages, default=-1))
    need = _seed_tokens(
        [items[p] for p in unreached],
        [units[p] for p in unreached],
        [seeds[p] for p in unreached],
        count_tokens,
    )
    for position, tokens in zip(unreached, need, strict=True):  # the budget filled up first
        left_out.append(LeftOut(items[position].rank, tokens, budget - used))
    given = {
        items[p].rank: (units[p][first].start, units[p][last].end)
        for p, (first, last) in passages.items()
    }
    return _packed(spans, used, budget, given, left_out, len(items))


def _seed_tokens(
    items: Sequence[BudgetItem],
    units: Sequence[Sequence[Sentence]],
    seeds: Sequence[int],
    count_tokens: TokenCounter,
) -> list[int]:
    """Per item, the tokens its seed (its best sentence) needs alone."""
    texts = [
        item.text[u[i].start - item.start_char : u[i].end - item.start_char]
        for item, u, i in zip(items, units, seeds, strict=True)
    ]
    return count_tokens(texts) if texts else []


def _packed(
    spans: list[_Span],
    used: int,
    budget: int,
    passages: dict[int, tuple[int, int]],
    left_out: list[LeftOut],
    offered: int,
) -> PackedContext:
    spans.sort(key=lambda s: min(r for r, _ in s.members))
    return PackedContext(
        spans=[s.frozen() for s in spans],
        tokens=used,
        budget=budget,
        skipped=tuple(x.rank for x in left_out),
        passages=passages,
        left_out=tuple(left_out),
        offered=offered,
    )


def _units(item: BudgetItem) -> list[Sentence]:
    """The item's sentences, or the whole item as one unit when it has none."""
    if item.sentences:
        return list(item.sentences)
    return [Sentence(item.start_char, item.end_char, 0.0)]


def _pieces(items: Sequence[BudgetItem], group: tuple[str, str]) -> list[tuple[int, str]]:
    """The known stretches of one document version's source: every item's text and window."""
    out: list[tuple[int, str]] = []
    for item in items:
        if item.group == group:
            out += [(item.start_char, item.text), (item.window_start, item.window_text)]
    return out


def _meets(span: _Span, start: int, end: int, source: _Source) -> bool:
    """Whether `source[start:end]` overlaps or touches `span` (only whitespace between them,
    as far as the known pieces show)."""
    if start <= span.end and span.start <= end:
        return True
    low, high = (span.end, start) if span.end < start else (end, span.start)
    gap = source.known(low, high)
    return gap is not None and not gap.strip()


class _Source:
    """The known pieces `(offset, source[offset:offset+len])` of one document version, looked up
    by position: the piece reaching furthest among those starting at or before a position
    holds it if any piece does, so a lookup is a binary search, not a scan of the pieces."""

    def __init__(self, pieces: Sequence[tuple[int, str]]) -> None:
        ordered = sorted(pieces, key=lambda p: (p[0], -len(p[1])))
        self.offsets = [offset for offset, _ in ordered]
        self.furthest: list[tuple[int, int, str]] = []  # per prefix: (offset, end, text)
        for offset, text in ordered:
            if not self.furthest or offset + len(text) > self.furthest[-1][1]:
                self.furthest.append((offset, offset + len(text), text))
            else:
                self.furthest.append(self.furthest[-1])

    def _reaching(self, position: int) -> tuple[int, int, str]:
        at = bisect.bisect_right(self.offsets, position) - 1
        return self.furthest[at] if at >= 0 else (position, position, "")

    def known(self, start: int, end: int) -> str | None:
        """`source[start:end]` when one known piece holds it all, else None."""
        offset, stop, text = self._reaching(start)
        return text[start - offset : end - offset] if end <= stop else None

    def cover(self, start: int, end: int) -> str:
        """`source[start:end]` assembled from the known pieces."""
        out: list[str] = []
        position = start
        while position < end:
            offset, stop, text = self._reaching(position)
            if stop <= position:  # cannot happen for touching spans
                raise ValueError(f"no known text covers position {position} of {start}:{end}")
            stop = min(end, stop)
            out.append(text[position - offset : stop - offset])
            position = stop
        return out[0] if len(out) == 1 else "".join(out)


@functools.lru_cache(maxsize=64)
def _source(pieces: tuple[tuple[int, str], ...]) -> _Source:
    """The `_Source` of a document version's pieces, kept for the next packing of the same
    hits (another budget or weight of one answer)."""
    return _Source(pieces)


class _Span:
    def __init__(self, group: tuple[str, str], start: int, end: int, text: str, tokens: int):
        self.group, self.start, self.end, self.text, self.tokens = group, start, end, text, tokens
        self.members: list[tuple[int, str]] = []

    def add(self, item: BudgetItem) -> None:
        self.members.append((item.rank, item.chunk_id))

    def frozen(self) -> ContextSpan:
        members = sorted(self.members)
        return ContextSpan(
            batch_key=self.group[0],
            document_id=self.group[1],
            start_char=self.start,
            end_char=self.end,
            text=self.text,
            tokens=self.tokens,
            ranks=tuple(r for r, _ in members),
            chunk_ids=tuple(c for _, c in members),
        )


def _touches(span: _Span, item: BudgetItem) -> bool:
    """Overlapping, adjacent, or separated only by whitespace the item's window shows."""
    if item.start_char <= span.end and span.start <= item.end_char:
        return True
    window_end = item.window_start + len(item.window_text)
    if span.end < item.start_char and span.end >= item.window_start:
        gap = item.window_text[span.end - item.window_start : item.start_char - item.window_start]
        return not gap.strip()
    if span.start > item.end_char and span.start <= window_end:
        gap = item.window_text[item.end_char - item.window_start : span.start - item.window_start]
        return not gap.strip()
    return False


def _cover(start: int, end: int, pieces: Sequence[tuple[int, str]]) -> str:
    """`source[start:end]` assembled from known pieces `(offset, source[offset:offset+len])`."""
    out: list[str] = []
    position = start
    while position < end:
        best = max(
            ((o, t) for o, t in pieces if o <= position < o + len(t)),
            key=lambda p: p[0] + len(p[1]),
            default=None,
        )
        if best is None:  # cannot happen for touching spans; a clear error if it ever does
            raise ValueError(f"no known text covers position {position} of {start}:{end}")
        offset, text = best
        stop = min(end, offset + len(text))
        out.append(text[position - offset : stop - offset])
        position = stop
    return "".join(out)
