"""Page numbers for character offsets, from the page spans text extraction records."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import NamedTuple

from seams.errors import InputError


class PageSpan(NamedTuple):
    """Page `page` covers `text[start_char:end_char]` (plain `(page, start, end)` tuples do too)."""

    page: int
    start_char: int
    end_char: int


class PageIndex:
    """Looks up the page of an offset; offsets between pages belong to the page before."""

    def __init__(self, spans: Sequence[tuple[int, int, int]]):
        ordered = sorted((int(s), int(e), int(p)) for p, s, e in (tuple(x) for x in spans))
        for start, end, page in ordered:
            if end < start:
                raise InputError(f"page_spans: page {page} ends ({end}) before it starts ({start})")
        self._starts = [start for start, _, _ in ordered]
        self._pages = [page for _, _, page in ordered]

    def page_at(self, offset: int) -> int | None:
        """The page holding `offset` (the first page for offsets before every span)."""
        if not self._pages:
            return None
        position = bisect.bisect_right(self._starts, offset) - 1
        return self._pages[max(position, 0)]
