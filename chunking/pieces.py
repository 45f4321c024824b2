"""Cutting one too-long unit (a table, code, a sentence) into the fewest pieces that fit.

A unit bigger than the limit is split into length-bounded pieces at the best gaps first: tables
and code by lines, sentences at clause punctuation, then at whitespace, then between characters
(text without spaces, e.g. CJK or Thai). Every gap is whitespace only (possibly empty), so a cut
never drops a visible character, and every piece is trimmed to non-whitespace ends.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence

from seams.chunking.tokens import count_tokens

Span = tuple[int, int]
TokenCounterFn = Callable[[list[str]], list[int]]

# --- oversize splitting: where a too-long unit may be cut, best first ------------------------
_LINE_GAP = re.compile(r"[^\S\n]*\n\s*")
_SENTENCE_GAP = re.compile(r"(?<=[.!?。！？])\s+")
# Gaps are whitespace only (possibly empty): a cut never drops a visible character.
_CLAUSE_GAP = re.compile(r"(?<=[,;:，；：、])\s*|(?<=[)\]])\s+|\s+(?=[(\[])|(?<=\s[-–—])\s+")
_SPACE_GAP = re.compile(r"\s+")
_SPLIT_LEVELS: dict[str, tuple[re.Pattern[str], ...]] = {
    "table": (_LINE_GAP, _SPACE_GAP),
    "code": (_LINE_GAP, _SPACE_GAP),
    "list_item": (_SENTENCE_GAP, _CLAUSE_GAP, _SPACE_GAP),
    "heading": (_CLAUSE_GAP, _SPACE_GAP),
    "sentence": (_CLAUSE_GAP, _SPACE_GAP),
    "rule": (_SPACE_GAP,),
}


_NON_SPACE = re.compile(r"\S")


def skip_space(text: str, pos: int, stop: int) -> int:
    """The first non-space position in `text[pos:stop]`, else `stop`."""
    found = _NON_SPACE.search(text, pos, stop)
    return found.start() if found else stop


def trim(text: str, start: int, end: int) -> Span:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


class PieceSplitter:
    """Cuts one too-long unit into the fewest greedy pieces that fit, at the best gaps."""

    def __init__(
        self, text: str, unit: str, limit: int, max_chars: int, counter: TokenCounterFn
    ) -> None:
        self.text = text
        self.unit = unit
        self.limit = limit
        self.max_chars = max_chars
        self.counter = counter

    def fits(self, start: int, end: int, tokens: int) -> bool:
        if end - start > self.max_chars:
            return False
        return not (self.unit == "tokens" and tokens > self.limit)

    def split(self, start: int, end: int, kind: str, header: Span | None) -> list[Span]:
        levels = _SPLIT_LEVELS.get(kind, (_SPACE_GAP,))
        if kind == "table" and header is not None:
            # The header and its delimiter row are one row: never separated from each other.
            rows = [header, *_pieces_between(self.text, header[1], end, levels[0])]
            return self._pack(rows, levels[1:])
        return self._split(start, end, levels)

    def _fits_span(self, start: int, end: int) -> bool:
        tokens = count_tokens(self.counter, [self.text[start:end]])[0]
        return self.fits(start, end, tokens)

    def _split(self, start: int, end: int, levels: Sequence[re.Pattern[str]]) -> list[Span]:
        start, end = trim(self.text, start, end)
        if start >= end:
            return []
        if not levels:
            return self._split_chars(start, end)
        pieces = _pieces_between(self.text, start, end, levels[0])
        if len(pieces) <= 1:
            return self._split(start, end, levels[1:])
        return self._pack(pieces, levels[1:])

    def _pack(self, pieces: list[Span], finer: Sequence[re.Pattern[str]]) -> list[Span]:
        """Greedy: consecutive pieces share a span while it fits; too-big pieces go finer."""
        counts = count_tokens(self.counter, [self.text[s:e] for s, e in pieces])
        out: list[Span] = []
        group_start = group_end = -1
        group_tokens = 0
        for (s, e), tokens in zip(pieces, counts, strict=True):
            if not self.fits(s, e, tokens):
                if group_start >= 0:
                    out.append((group_start, group_end))
                    group_start = -1
                out.extend(self._split(s, e, finer))
                continue
            if group_start >= 0 and self.fits(group_start, e, group_tokens + tokens):
                group_end = e
                group_tokens += tokens
            else:
                if group_start >= 0:
                    out.append((group_start, group_end))
                group_start, group_end, group_tokens = s, e, tokens
        if group_start >= 0:
            out.append((group_start, group_end))
        return out

    def _split_chars(self, start: int, end: int) -> list[Span]:
        """Last resort for text without usable gaps: the longest prefix that fits, repeatedly."""
        text = self.text
        out: list[Span] = []
        while start < end:
            lo, hi = start + 1, min(end, start + self.max_chars)
            if self._fits_span(start, hi):
                cut = hi
            else:
                while lo < hi:  # largest cut in [start+1, hi) that fits
                    mid = (lo + hi + 1) // 2
                    if self._fits_span(start, mid):
                        lo = mid
                    else:
                        hi = mid - 1
                cut = lo
            if cut < end:
                cut = _safe_cut(text, start, cut)
            piece = trim(text, start, cut)
            if piece[0] < piece[1]:
                out.append(piece)
            start = skip_space(text, cut, end)
        return out


def _safe_cut(text: str, start: int, cut: int) -> int:
    """Move a cut back so it does not separate a combining mark or CRLF from what precedes it."""
    probe = cut
    while probe > start + 1 and (
        unicodedata.category(text[probe])[0] == "M" or (text[probe - 1 : probe + 1] == "\r\n")
    ):
        probe -= 1
    return probe


def _pieces_between(text: str, start: int, end: int, gap: re.Pattern[str]) -> list[Span]:
    pieces: list[Span] = []
    position = start
    for match in gap.finditer(text, start, end):
        if match.start() > position:
            pieces.append((position, match.start()))
        position = max(position, match.end())
    if position < end:
        pieces.append((position, end))
    return [p for p in (trim(text, s, e) for s, e in pieces) if p[0] < p[1]]
