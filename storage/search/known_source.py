"""The text known around a set of hits in one document version, looked up by position, with
the token count of every stretch counted: what the context packer reads and counts."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence


class KnownSource:
    """The known pieces `(offset, source[offset:offset+len])` of one document version, looked up
    by position: the piece reaching furthest among those starting at or before a position
    holds it if any piece does, so a lookup is a binary search, not a scan of the pieces.

    Two stretches touch when they overlap or only whitespace lies between them, as far as the
    known pieces show: `a` and a later `b` touch when `b.start <= reach(a.end)`."""

    def __init__(
        self, pieces: Sequence[tuple[int, str]], count_tokens: Callable[[list[str]], list[int]]
    ) -> None:
        self.count_tokens = count_tokens
        # Pieces at one offset of one length are the same text; ordered by text too, so pieces
        # that disagree (text edited under its offsets) read alike in any order of the hits.
        ordered = sorted(pieces, key=lambda p: (p[0], -len(p[1]), p[1]))
        self.offsets = [offset for offset, _ in ordered]
        self.furthest: list[tuple[int, int, str]] = []  # per prefix: (offset, end, text)
        for offset, text in ordered:
            if not self.furthest or offset + len(text) > self.furthest[-1][1]:
                self.furthest.append((offset, offset + len(text), text))
            else:
                self.furthest.append(self.furthest[-1])
        self.reaches: dict[int, int] = {}
        self.counts: dict[tuple[int, int], int] = {}

    def _reaching(self, position: int) -> tuple[int, int, str]:
        at = bisect.bisect_right(self.offsets, position) - 1
        return self.furthest[at] if at >= 0 else (position, position, "")

    def reach(self, position: int) -> int:
        """The end of the known whitespace that follows `position` (`position` itself when a
        non-blank character or the end of what is known follows)."""
        found = self.reaches.get(position)
        if found is None:
            offset, stop, text = self._reaching(position)
            after = text[position - offset : stop - offset]
            found = self.reaches[position] = position + len(after) - len(after.lstrip())
        return found

    def tokens(self, start: int, end: int) -> int:
        """The token count of `source[start:end]`, counted once: the packings of one set of
        hits at several budgets and weights try the same stretches."""
        key = (start, end)
        found = self.counts.get(key)
        if found is None:
            found = self.counts[key] = self.count_tokens([self.cover(start, end)])[0]
        return found

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
