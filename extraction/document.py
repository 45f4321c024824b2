"""The extraction result and the small text tools every format shares.

Every extractor builds its text from pieces (a page, a paragraph, a table) and records where each
page starts and ends; `PagedText` does that bookkeeping once, so page spans always index the final
text exactly. `clean` makes any piece safe for PostgreSQL `text` (no NUL, no lone surrogates)
without changing its length, so offsets taken before cleaning stay valid after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MIME_TEXT = "text/plain"
MIME_MARKDOWN = "text/markdown"
MIME_HTML = "text/html"
MIME_PDF = "application/pdf"
MIME_DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
MIME_UNKNOWN = "application/octet-stream"

# NUL (PostgreSQL text cannot hold it) and lone surrogates (not encodable as UTF-8, so psycopg
# would fail the whole batch): each becomes one U+FFFD, so lengths and offsets do not move.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_TRAILING_SPACE = re.compile(r"[ \t]+(?=\n)")
_MAX_TITLE = 200


@dataclass(frozen=True)
class ExtractedDocument:
    """One document's text, or why there is none (contract).

    `page_spans` holds `(page_number, start_char, end_char)` per page, pages numbered from 1,
    offsets into `text` (None when the format has no pages). `error` set means `text == ""` and
    the document is skipped downstream; `warnings` are problems that did not stop extraction
    (pages without a text layer, undecodable bytes replaced).
    """

    text: str
    mime: str
    title: str | None = None
    page_spans: list[tuple[int, int, int]] | None = None
    error: str | None = None
    warnings: list[str] = field(default_factory=list)


def failed(mime: str, error: str, warnings: list[str] | None = None) -> ExtractedDocument:
    """A document that yields no text: `error` says which file and what to do about it."""
    return ExtractedDocument(text="", mime=mime, error=error, warnings=list(warnings or []))


def unreadable(mime: str, kind: str, name: str, exc: Exception, remedy: str) -> ExtractedDocument:
    """A `kind` file its reader failed on: `failed` with the reader's error (cut to 300
    characters) and `remedy`, what to do before adding it again."""
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return failed(mime, f"{name}: corrupt or unreadable {kind} ({detail[:300]}); {remedy}")


def clean(text: str) -> str:
    """Make `text` storable in PostgreSQL without changing its length (NUL/surrogates -> U+FFFD)."""
    return _UNSTORABLE.sub("\ufffd", text)


def tidy_lines(text: str) -> str:
    """Unify line ends and drop trailing blanks on each line (extractors' layout padding)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _TRAILING_SPACE.sub("", text).strip()


def first_line_title(text: str) -> str | None:
    """The first non-blank line (without Markdown heading marks), cut to 200 characters."""
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return line[:_MAX_TITLE]
    return None


def short_title(title: str | None) -> str | None:
    """A metadata title worth keeping: stripped, non-empty, at most 200 characters."""
    if title is None:
        return None
    title = " ".join(str(title).split())
    return title[:_MAX_TITLE] or None


def page_ranges(pages: list[int]) -> str:
    """`[1, 2, 3, 5]` -> "1-3, 5": short page lists for messages."""
    parts: list[str] = []
    start = previous = None
    for page in sorted(pages):
        if start is None:
            start = previous = page
        elif page == previous + 1:  # type: ignore[operator]
            previous = page
        else:
            parts.append(f"{start}" if start == previous else f"{start}-{previous}")
            start = previous = page
    if start is not None:
        parts.append(f"{start}" if start == previous else f"{start}-{previous}")
    return ", ".join(parts)


class PagedText:
    """Joins page texts with separators and records each page's exact span in the result.

    A page's span covers its own text only; the separator before it belongs to no page (the
    chunker's `PageIndex` gives such offsets to the page before). An empty page gets a
    zero-length span at the current end, so page numbers never shift.
    """

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0
        self.spans: list[tuple[int, int, int]] = []

    def add_page(self, page: int, text: str, separator: str = "\n\n") -> None:
        """Append page `page` (already cleaned); `separator` goes before it unless it is first."""
        if text and self._length:
            self._parts.append(separator)
            self._length += len(separator)
        start = self._length
        self._parts.append(text)
        self._length += len(text)
        self.spans.append((page, start, self._length))

    @property
    def last_char(self) -> str:
        """The last character so far ("" when nothing was added)."""
        for part in reversed(self._parts):
            if part:
                return part[-1]
        return ""

    def text(self) -> str:
        """The joined text."""
        return "".join(self._parts)


def pipe_table(rows: list[list[str]]) -> str:
    """A Markdown pipe table (first row as header), or "" when no cell has text.

    Cells are single lines with `|` escaped, rows padded to the widest, so the chunker's table
    rule sees one atomic unit with a header row and a `|---|` separator.
    """
    cells = [[_cell(c) for c in row] for row in rows if row]
    if not cells or not any(c for row in cells for c in row):
        return ""
    width = max(len(row) for row in cells)
    lines = []
    for i, row in enumerate(cells):
        row = row + [""] * (width - len(row))
        lines.append("| " + " | ".join(row) + " |")
        if i == 0:
            lines.append("|" + "|".join(["---"] * width) + "|")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
