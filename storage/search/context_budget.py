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

import heapq
import operator
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from seams.errors import InputError
from seams.storage.search.known_source import KnownSource

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


class Sentence(NamedTuple):
    """One sentence of a hit (`source[start:end]`, whole) with its evidence for the query: the
    fused lexical + dense score of the sentence, comparable across the hits of one answer (a
    tuple: an answer weighed at many fusion weights makes many)."""

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
    into one unit scored by the best of them (`bound_runs`)."""
    if len(sentences) != len(binds):
        raise ValueError(f"{len(sentences)} sentences, {len(binds)} binds")
    return tuple(
        Sentence(sentences[first].start, sentences[last].end,
                 max(s.score for s in sentences[first : last + 1]))
        for first, last in bound_runs(binds)
    )  # fmt: skip


def bound_runs(binds: Sequence[bool]) -> list[tuple[int, int]]:
    """The units of a hit's sentences as (first, last) positions: each sentence that `binds` (a
    heading, a lead-in) is one unit with the ones after it up to the first that does not, so a
    passage that starts at a heading holds the sentence it introduces. The last one has nothing
    after it in the hit and stays alone."""
    out: list[tuple[int, int]] = []
    first = 0
    for position, bound in enumerate(binds):
        if not bound:
            out.append((first, position))
            first = position + 1
    if first < len(binds):
        out.append((first, len(binds) - 1))
    return out


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
    *,
    known: KnownText | None = None,
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
    the best use of the next tokens, with one exception: a step of a hit that would merge into a
    better hit's span waits while it would leave too little room for the seed of a better hit
    not yet tried, so a hit is never displaced by a lower-ranked neighbour (a merged span saves
    tokens only for hits that earned their place). What was left out is recorded (`left_out`):
    each seed that did not fit at its turn, and each hit ranked above the last one given whose
    seed never had a turn before the budget was full, with the tokens it needed alone.

    As in `pack_budget`: passages of one document version that overlap or touch merge into one
    span whose tokens are recounted; a step that does not fit is dropped (a seed: the hit is
    skipped; growth: that side of the passage stops), never cut, so a span is always whole
    sentences; the total never exceeds the budget and no text is given twice. A hit without
    sentences is one unit (its whole span). Deterministic: ties go to the better rank, then the
    seed before growth, then the left side.

    `known`: the `KnownText` of these items (any order) counted by `count_tokens`, for packings
    of one set of hits that share their token counts; made here when None."""
    check_budget(budget)
    if known is not None and known.count_tokens is not count_tokens:
        raise ValueError("the known text counts tokens with another counter than count_tokens")
    packing = _Packing(_plan_of(items, known, count_tokens), budget)
    packing.grow(hit_share)
    packing.give_covered_seeds()
    packing.note_unreached()
    return packing.packed()


class KnownText:
    """The text known around a set of items, per document version (each item's text and window,
    looked up by position: `KnownSource`), with the token count of every stretch counted so far.
    It depends on which items there are, not on their order or values, so the packings of one
    set of hits at every budget and every fusion weight share one and count each stretch once."""

    def __init__(self, items: Sequence[BudgetItem], count_tokens: TokenCounter) -> None:
        self.count_tokens = count_tokens
        pieces: dict[tuple[str, str], list[tuple[int, str]]] = {}
        for item in items:
            known = pieces.setdefault(item.group, [])
            known += [(item.start_char, item.text), (item.window_start, item.window_text)]
        self._pieces = pieces
        self._sources: dict[tuple[str, str], KnownSource] = {}

    def source(self, group: tuple[str, str]) -> KnownSource:
        """The known text of one document version, made on first use."""
        found = self._sources.get(group)
        if found is None:
            found = self._sources[group] = KnownSource(self._pieces[group], self.count_tokens)
        return found


class _Plan:
    """What packing `items` needs at any budget: each hit's units, its seed (best unit) and its
    document version's known text, and the seeds' heap entries. It depends on the items alone,
    so one answer packed at several budgets plans once."""

    def __init__(self, items: Sequence[BudgetItem], known: KnownText) -> None:
        self.items = tuple(items)
        self.known = known
        self.entries = []
        """Per item position: the item, its units, its seed's position among them and the
        known text of its document version."""
        for item in self.items:
            units = _units(item)
            self.entries.append((item, units, best_sentence(units), known.source(item.group)))
        self.heap = [
            (-(item.value * units[seed].score), item.rank, 0, position)
            for position, (item, units, seed, _) in enumerate(self.entries)
        ]
        heapq.heapify(self.heap)


_last_plan: _Plan | None = None
"""The plan of the items packed last: an answer is packed at each budget in turn."""


def _plan_of(
    items: Sequence[BudgetItem], known: KnownText | None, count_tokens: TokenCounter
) -> _Plan:
    """The plan of `items`, the last one's when they are the very same items with the same
    known text (a `BudgetItem` is frozen, so the same objects in the same order plan the same)."""
    global _last_plan
    last = _last_plan
    if last is not None and len(last.items) == len(items):
        same = known is last.known if known is not None else last.known.count_tokens is count_tokens
        if same and all(map(operator.is_, last.items, items)):
            return last
    _last_plan = plan = _Plan(items, known or KnownText(items, count_tokens))
    return plan


class _Packing:
    """One packing of a plan into `budget` tokens, in named steps (see `pack_passages`)."""

    def __init__(self, plan: _Plan, budget: int) -> None:
        self.plan, self.budget = plan, budget
        self.used = 0
        self.spans: defaultdict[tuple[str, str], list[_Span]] = defaultdict(list)  # per version
        self.passages: dict[int, tuple[int, int]] = {}  # item position -> (first, last) unit
        self.left_out: list[LeftOut] = []
        self.waiting = set(range(len(plan.items)))  # positions whose seed has not had its turn

    def grow(self, hit_share: float) -> None:
        """Take the most valuable step that fits, seed or growth, until the budget is full. A
        step that would crowd out a better hit's seed by merging into a better hit's span waits
        (`_crowds`) until a seed has had its turn, then is tried again."""
        plan, passages, waiting, budget = self.plan, self.passages, self.waiting, self.budget
        heap = list(plan.heap)
        held: list[tuple[float, int, int, int]] = []
        rest = 1 - hit_share
        while heap and self.used < budget:
            step = heapq.heappop(heap)
            _, rank, side, position = step
            item, units, seed, source = plan.entries[position]
            if side == 0:
                first = last = seed
            elif side < 0:
                first, last = passages[position]
                first -= 1
            else:
                first, last = passages[position]
                last += 1
            start, end = units[first].start, units[last].end
            if self._crowds(position, source, item.group, start, end):
                held.append(step)
                continue
            span, cost = self._give(source, item.group, start, end)
            if side == 0:  # the seed had its turn: held steps are tried again
                waiting.discard(position)
                for waited in held:
                    heapq.heappush(heap, waited)
                held.clear()
            if span is None:  # a seed that does not fit skips its hit; growth stops that side
                if side == 0:
                    self.left_out.append(LeftOut(rank, cost, budget - self.used))
                continue
            if side == 0:  # growth keeps the hit in the span that holds it
                span.add(item)
            passages[position] = (first, last)
            if side <= 0 and first > 0:
                grown = item.value * (hit_share + rest * units[first - 1].score)
                heapq.heappush(heap, (-grown, rank, -1, position))
            if side >= 0 and last + 1 < len(units):
                grown = item.value * (hit_share + rest * units[last + 1].score)
                heapq.heappush(heap, (-grown, rank, 1, position))

    def _crowds(
        self, position: int, source: KnownSource, group: tuple[str, str], start: int, end: int
    ) -> bool:
        """Whether giving `source[start:end]` of the hit at `position` would merge it into the
        span of a better hit and leave too little room for the seed of a better hit that has
        not had its turn and fits now: a hit is never displaced by a lower-ranked neighbour,
        and merging saves tokens only for hits that earned their place."""
        better = [p for p in self.waiting if p < position]
        touching = self._touching(source, group, start, end) if better else ()
        rank = self.plan.entries[position][0].rank
        if not any(r < rank for s in touching for r, _ in s.members):
            return False
        if _holding(touching, start, end) is not None:
            return False  # already given: it costs nothing
        _, _, _, cost = _merged(source, touching, start, end)
        room = self.budget - self.used
        needs = (self._seed_tokens(p) for p in better)
        return cost <= room and any(cost + need > room for need in needs if need <= room)

    def _seed_tokens(self, position: int) -> int:
        """The tokens the seed of the hit at `position` needs alone."""
        _, units, seed, source = self.plan.entries[position]
        return source.tokens(units[seed].start, units[seed].end)

    def _touching(
        self, source: KnownSource, group: tuple[str, str], start: int, end: int
    ) -> list[_Span]:
        """The spans of document version `group` that `source[start:end]` overlaps or touches."""
        spans = self.spans.get(group)
        if not spans:
            return []
        reach = source.reach(end)
        return [s for s in spans if start <= s.reach and s.start <= reach]

    def _give(
        self, source: KnownSource, group: tuple[str, str], start: int, end: int
    ) -> tuple[_Span | None, int]:
        """`source[start:end]` (of document version `group`) given: the span now holding it and
        what it cost, merged with the spans it overlaps or touches and recounted; (None, cost)
        when it does not fit."""
        spans = self.spans[group]
        touching = self._touching(source, group, start, end)
        holder = _holding(touching, start, end)
        if holder is not None:
            return holder, 0  # already given: no new text, no cost
        low, high, tokens, cost = _merged(source, touching, start, end)
        if self.used + cost > self.budget:
            return None, cost
        self.used += cost
        merged = _Span(group, low, high, "", tokens)  # its text once packing is done
        merged.reach = source.reach(high)
        for s in touching:
            merged.members.extend(s.members)
            spans.remove(s)
        spans.append(merged)
        return merged, cost

    def give_covered_seeds(self) -> None:
        """A hit whose seed never had a turn but lies inside a given span is given: free."""
        for position in sorted(self.waiting):
            item, units, seed, _ = self.plan.entries[position]
            for span in self.spans.get(item.group, ()):
                if span.start <= units[seed].start and units[seed].end <= span.end:
                    span.add(item)
                    self.passages[position] = (seed, seed)
                    self.waiting.discard(position)
                    break

    def note_unreached(self) -> None:
        """Each hit ranked above the last one given whose seed never had a turn (the budget
        was full first) is left out, with the tokens its seed needs alone."""
        last_given = max(self.passages, default=-1)
        room = self.budget - self.used
        for position in sorted(self.waiting):
            if position < last_given:
                rank = self.plan.entries[position][0].rank
                self.left_out.append(LeftOut(rank, self._seed_tokens(position), room))

    def packed(self) -> PackedContext:
        entries = self.plan.entries
        given = {
            entries[p][0].rank: (entries[p][1][first].start, entries[p][1][last].end)
            for p, (first, last) in self.passages.items()
        }
        spans = [s for per_group in self.spans.values() for s in per_group]
        for span in spans:
            span.text = self.plan.known.source(span.group).cover(span.start, span.end)
        return _packed(spans, self.used, self.budget, given, self.left_out, len(entries))


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


def _holding(spans: Sequence[_Span], start: int, end: int) -> _Span | None:
    """The first of `spans` that already holds `start:end`."""
    return next((s for s in spans if s.start <= start and end <= s.end), None)


def _merged(
    source: KnownSource, touching: Sequence[_Span], start: int, end: int
) -> tuple[int, int, int, int]:
    """`start:end` merged with the `touching` spans: (start, end, tokens, cost), the cost
    being the tokens the merged span adds to those spans'."""
    low = min([start, *(s.start for s in touching)])
    high = max([end, *(s.end for s in touching)])
    tokens = source.tokens(low, high)
    return low, high, tokens, tokens - sum(s.tokens for s in touching)


def _units(item: BudgetItem) -> tuple[Sentence, ...]:
    """The item's sentences, or the whole item as one unit when it has none."""
    return item.sentences or (Sentence(item.start_char, item.end_char, 0.0),)


class _Span:
    def __init__(self, group: tuple[str, str], start: int, end: int, text: str, tokens: int):
        self.group, self.start, self.end, self.text, self.tokens = group, start, end, text, tokens
        self.reach = end
        """Where a stretch after it may start and still touch it (`KnownSource.reach`)."""
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
