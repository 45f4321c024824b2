"""Fill a reader's context budget with ranked hits: rank order, merged spans, never a token over.

A RAG prompt has room for N tokens, not for k chunks. `pack_budget` walks the hits best first and
keeps each one that still fits, so the reader gets as much of the best-ranked text as the budget
allows:

- hits of one document version that overlap or touch (only whitespace between them, e.g.
  neighbouring chunks) become one span, `source[start:end]`, so no text is given twice and a
  passage cut across two chunks reads as one;
- a span's cost is the token count of its exact text (`count_tokens`, the embedding model's
  tokenizer by default); merging re-counts the merged span, so the total is exact, not a sum of
  chunk sizes;
- a hit that does not fit whole is skipped, never cut: a later, smaller hit may still fit, and the
  reader never gets half a sentence of a hit. A hit already inside a kept span costs nothing.

The total of the spans' token counts never exceeds the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from seams.errors import InputError

TokenCounter = Callable[[list[str]], list[int]]
"""Token counts of texts (a `TokenizerCounter`, or any function of that shape)."""


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
class PackedContext:
    spans: list[ContextSpan]
    """In the order of their best hit."""
    tokens: int
    budget: int
    skipped: tuple[int, ...]
    """Ranks of hits left out because they did not fit."""


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
    skipped: list[int] = []
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
            skipped.append(item.rank)
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
    spans.sort(key=lambda s: min(r for r, _ in s.members))
    return PackedContext([s.frozen() for s in spans], used, budget, tuple(skipped))


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
