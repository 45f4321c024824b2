"""Correctness of a chunker's output against its source text, scored the same way for everyone.

A chunker hands back chunk texts (and maybe offsets and ids); nothing it claims is trusted.
Every chunk is located in the source by its non-whitespace characters (`align`), in order, so a
chunker that collapses or trims whitespace is still located, and then scored:

- exact slice: the chunk's text, whitespace included, is `source[start:end]` at that place;
- same text up to whitespace: its non-whitespace characters are a contiguous run of the
  source's (the weaker claim most peers meet);
- text lost: share of the source's non-whitespace characters that no chunk covers;
- sentences broken: share of reference units (sentences, list items, table rows, headings,
  code blocks; `reference_units`) that a chunk boundary cuts, counted only over units that fit
  the model's window (a longer unit must be cut somewhere);
- over the window: share of chunks with more than 256 tokens for all-MiniLM-L6-v2 ([CLS] and
  [SEP] included), the part past 256 being invisible to the model;
- determinism: two runs give the same texts, and the same ids where the chunker gives ids.

The reference sentence splitter is deliberately simple and the same for every system, so no
chunker's own splitter is the judge: blank lines separate blocks; fenced code blocks, headings,
list items and table rows are units; in prose a sentence ends at . ! ? (plus closing quotes or
brackets) followed by whitespace and an upper-case letter, digit, quote or bracket, except after
a short list of abbreviations and single-letter initials. Line breaks inside a paragraph are
whitespace (hard-wrapped text), not sentence ends.
"""

from __future__ import annotations

import bisect
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MODEL_WINDOW = 256  # all-MiniLM-L6-v2 reads at most 256 tokens, [CLS] and [SEP] included
UNIT_BUDGET = MODEL_WINDOW - 2  # a unit longer than this has to be cut by any size-bounded chunker

_ABBREVIATED = "e.g i.e etc vs cf dr mr mrs ms prof st fig no approx inc ltd jr sr al u.s a.m p.m"
ABBREVIATIONS = frozenset(_ABBREVIATED.split(" "))
_BLOCK_SPLIT = re.compile(r"\n[ \t]*\n")
_FENCE = re.compile(r"^(```|~~~)[^\n]*\n.*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_LINE_UNIT = re.compile(r"^[ \t]*(?:#{1,6}\s|[-*+]\s|\d{1,3}[.)]\s|\|)")
_LAST_WORD = re.compile(r"\S*\Z")
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s+[\"'“‘(\[`A-Z0-9])")


@dataclass(frozen=True, slots=True)
class Piece:
    """One chunk as a chunker reports it: its text, and offsets/id if it gives them."""

    text: str
    start: int | None = None
    end: int | None = None
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a chunk was found: non-whitespace span [nw_start, nw_end) and char span."""

    found: bool
    nw_start: int = 0
    nw_end: int = 0
    start: int = 0  # char offset of the first non-whitespace character
    end: int = 0  # char offset just past the last non-whitespace character
    exact: bool = False


# --- reference units ---------------------------------------------------------------------------
def reference_units(text: str) -> list[tuple[int, int]]:
    """(start, end) char spans of the reference units, trimmed of whitespace, in order."""
    units: list[tuple[int, int]] = []
    cursor = 0
    for fence in _FENCE.finditer(text):
        units += _block_units(text, cursor, fence.start())
        units.append((fence.start(), fence.end()))
        cursor = fence.end()
    units += _block_units(text, cursor, len(text))
    return [u for u in units if u[1] > u[0]]


def _block_units(text: str, start: int, end: int) -> list[tuple[int, int]]:
    units: list[tuple[int, int]] = []
    cursor = start
    for gap in [*_BLOCK_SPLIT.finditer(text, start, end), None]:
        block_end = gap.start() if gap else end
        units += _lines_or_sentences(text, cursor, block_end)
        cursor = gap.end() if gap else end
    return units


def _lines_or_sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    block = text[start:end]
    if not block.strip():
        return []
    lines = block.split("\n")
    if any(_LINE_UNIT.match(line) for line in lines):
        # A list or table: each item/row (with its indented continuation lines) is a unit.
        units, offset, current = [], start, None
        for line in lines:
            if _LINE_UNIT.match(line) or current is None:
                if current is not None:
                    units.append(current)
                current = (offset, offset + len(line))
            else:
                current = (current[0], offset + len(line))
            offset += len(line) + 1
        units.append(current)
        return [_trim(text, a, b) for a, b in units]
    return _sentences(text, start, end)


def _sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    units, cursor = [], start
    for match in _SENTENCE_END.finditer(text, start, end):
        word = _LAST_WORD.search(text, cursor, match.start())
        core = word.group().lstrip("(\"'“").lower().rstrip(".") if word else ""
        if core in ABBREVIATIONS or (len(core) == 1 and core.isalpha()):
            continue
        units.append(_trim(text, cursor, match.end()))
        cursor = match.end()
    units.append(_trim(text, cursor, end))
    return units


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


# --- locating chunks ---------------------------------------------------------------------------
class Source:
    """The source text with an index of its non-whitespace characters."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.offsets = [i for i, ch in enumerate(text) if not ch.isspace()]
        self.squeezed = "".join(text[i] for i in self.offsets)

    def nw_index(self, char_offset: int) -> int:
        """Index of the first non-whitespace character at or after `char_offset`."""
        return bisect.bisect_left(self.offsets, char_offset)


def _squeeze(text: str) -> str:
    return "".join(text.split())


def align(source: Source, pieces: Sequence[Piece]) -> list[Placement]:
    """Locate each chunk, in order, by its non-whitespace characters.

    Chunks are searched from the previous chunk's start on (so overlapping chunks are found);
    a chunk that cannot be found (its text was changed beyond whitespace) or has no text at all
    (an empty or whitespace-only chunk) is `found=False`."""
    placements: list[Placement] = []
    cursor = 0
    for piece in pieces:
        needle = _squeeze(piece.text)
        where = source.squeezed.find(needle, cursor) if needle else -1
        if where < 0:
            placements.append(Placement(found=False))
            continue
        start = source.offsets[where]
        end = source.offsets[where + len(needle) - 1] + 1
        lead = len(piece.text) - len(piece.text.lstrip())
        trail = len(piece.text) - len(piece.text.rstrip())
        exact = start - lead >= 0 and source.text[start - lead : end + trail] == piece.text
        placements.append(Placement(True, where, where + len(needle), start, end, exact))
        cursor = where
    return placements


# --- metrics -----------------------------------------------------------------------------------
def lost_share(source: Source, placements: Sequence[Placement]) -> float:
    """Share of the source's non-whitespace characters that no located chunk covers."""
    total = len(source.squeezed)
    if not total:
        return 0.0
    spans = sorted((p.nw_start, p.nw_end) for p in placements if p.found)
    covered, reach = 0, 0
    for start, end in spans:
        start = max(start, reach)
        if end > start:
            covered += end - start
            reach = end
    return 1.0 - covered / total


def broken_units(
    source: Source,
    placements: Sequence[Placement],
    units: Sequence[tuple[int, int]],
    fits: Sequence[bool] | None = None,
) -> tuple[int, int]:
    """(units cut by a chunk boundary, units considered), over units that fit (`fits`)."""
    cuts = sorted(
        {p.nw_start for p in placements if p.found} | {p.nw_end for p in placements if p.found}
    )
    broken = considered = 0
    for number, (start, end) in enumerate(units):
        if fits is not None and not fits[number]:
            continue
        considered += 1
        a, b = source.nw_index(start), source.nw_index(end)
        i = bisect.bisect_right(cuts, a)
        if i < len(cuts) and cuts[i] < b:
            broken += 1
    return broken, considered


def offsets_correct(source_text: str, pieces: Sequence[Piece]) -> float | None:
    """Share of chunks whose reported offsets give back their text; None if none reported."""
    reported = [p for p in pieces if p.start is not None and p.end is not None]
    if not reported:
        return None
    good = sum(source_text[p.start : p.end] == p.text for p in reported)  # type: ignore[misc]
    return good / len(reported)


def score(
    text: str,
    runs: Sequence[Sequence[Piece]],
    token_counts: Callable[[list[str]], list[int]],
) -> dict:
    """All correctness numbers for one system on one text, from two (or more) runs' outputs.

    `token_counts(texts)` gives each text's model tokens, [CLS]/[SEP] included, untruncated."""
    pieces = list(runs[0])
    source = Source(text)
    placements = align(source, pieces)
    units = reference_units(text)
    unit_tokens = token_counts([text[a:b] for a, b in units]) if units else []
    fits = [t - 2 <= UNIT_BUDGET for t in unit_tokens]
    broken, considered = broken_units(source, placements, units, fits)
    tokens = token_counts([p.text for p in pieces]) if pieces else []
    n = len(pieces)
    nonblank = len(source.squeezed)
    lost = lost_share(source, placements)
    ids = [[p.id for p in run] for run in runs]
    return {
        "chunks": n,
        "empty": sum(not p.text.strip() for p in pieces),
        "exact": sum(p.exact for p in placements),
        "found": sum(p.found for p in placements),
        "exact_slices": sum(p.exact for p in placements) / n if n else 1.0,
        "same_up_to_whitespace": sum(p.found for p in placements) / n if n else 1.0,
        "text_lost": lost,
        "lost_chars": round(lost * nonblank),
        "nonblank_chars": nonblank,
        "sentences_broken": broken / considered if considered else 0.0,
        "broken": broken,
        "units_considered": considered,
        "units_too_long": len(units) - considered,
        "over_window": sum(t > MODEL_WINDOW for t in tokens) / n if n else 0.0,
        "over": sum(t > MODEL_WINDOW for t in tokens),
        "median_tokens": statistics.median(tokens) if tokens else 0,
        "max_tokens": max(tokens) if tokens else 0,
        "offsets_correct": offsets_correct(text, pieces),
        "deterministic_texts": all([p.text for p in r] == [p.text for p in pieces] for r in runs),
        "deterministic_ids": (
            None if all(i is None for i in ids[0]) else all(run == ids[0] for run in ids)
        ),
    }
