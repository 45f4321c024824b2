"""DOCX: body paragraphs and tables in order, as Markdown-flavoured text.

Read with python-docx. Heading styles become `#` lines, list paragraphs (List Bullet/Number
styles or Word numbering) become `- `/`1. ` lines indented by level, tables become pipe tables,
so the chunker's segmenter sees the structure the author made.

A DOCX has no fixed pages: `page_spans` is None unless the file marks page breaks. Word records
where its own layout broke pages (`w:lastRenderedPageBreak`) when it saves; if those exist they
give the pages a reader saw, otherwise explicit page breaks (`w:br w:type="page"`,
"page break before") are used. Never both: in Word's files every explicit break also has a
rendered one, and counting both would double pages. Headers, footers, footnotes and comments are
left out (repeated boilerplate or side notes).
"""

from __future__ import annotations

import io
import re
import zipfile

from seams.extraction.document import (
    MIME_DOCX,
    ExtractedDocument,
    clean,
    first_line_title,
    pipe_table,
    short_title,
    unreadable,
)
from seams.extraction.limits import Budget, ExtractionLimits, LimitExceeded

# Page-break markers placed in the text while it is built, removed when spans are computed.
# Private-use characters; any in the document itself are replaced first (see _run_text).
_HARD_BREAK = "\ue000"
_RENDERED_BREAK = "\ue001"
_MARKERS = re.compile(f"[{_HARD_BREAK}{_RENDERED_BREAK}]")
_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)
_LIST_STYLE = re.compile(r"^list\s+(bullet|number)(?:\s+([2-9]))?$", re.IGNORECASE)


def extract_docx(content: bytes, name: str, budget: Budget | None = None) -> ExtractedDocument:
    """Paragraphs, headings, lists and tables of the main body, pages from marked breaks.

    The zip's sizes were checked by the caller (`containers.check_zip`); `budget` is checked
    per block of the body.
    """
    budget = budget or Budget(ExtractionLimits())
    try:
        import docx

        document = docx.Document(io.BytesIO(content))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        return _corrupt(name, exc)
    except Exception as exc:  # python-docx raises its own and lxml's errors for broken parts
        return _corrupt(name, exc)
    try:
        builder = _Builder(document, budget)
        builder.read()
    except LimitExceeded:
        raise
    except Exception as exc:
        return _corrupt(name, exc)
    marked = builder.text()
    text, page_spans = _pages(marked)
    text = clean(text)
    title = short_title(document.core_properties.title) or builder.title or first_line_title(text)
    return ExtractedDocument(text=text, mime=MIME_DOCX, title=title, page_spans=page_spans)


def _corrupt(name: str, exc: Exception) -> ExtractedDocument:
    remedy = "open and re-save it in Word or LibreOffice and add it again"
    return unreadable(MIME_DOCX, "DOCX", name, exc, remedy)


def _pages(marked: str) -> tuple[str, list[tuple[int, int, int]] | None]:
    """Remove the break markers; spans per page when there were any (trimmed of whitespace)."""
    kind = _RENDERED_BREAK if _RENDERED_BREAK in marked else _HARD_BREAK
    if kind not in marked:
        return _MARKERS.sub("", marked), None
    other = _HARD_BREAK if kind == _RENDERED_BREAK else _RENDERED_BREAK
    marked = marked.replace(other, "")
    pieces = marked.split(kind)
    text = "".join(pieces)
    spans: list[tuple[int, int, int]] = []
    offset = 0
    for page, piece in enumerate(pieces, start=1):
        start = offset + len(piece) - len(piece.lstrip())
        end = offset + len(piece.rstrip())
        spans.append((page, start, max(start, end)))
        offset += len(piece)
    # A break at the very end (or start) makes an empty last (first) page: not a page of text.
    while len(spans) > 1 and spans[-1][1] == spans[-1][2]:
        spans.pop()
    if spans and spans[0][1] == spans[0][2] and len(spans) > 1:
        spans = [(page - 1, start, end) for page, start, end in spans[1:]]
    return text, spans


class _Builder:
    """Walks the body once, producing Markdown blocks with page-break markers."""

    def __init__(self, document: object, budget: Budget) -> None:
        from docx.oxml.ns import qn

        self.document = document
        self.budget = budget
        self.qn = qn
        self.style_names, self.default_style = _paragraph_styles(document)
        self.blocks: list[tuple[str, str]] = []  # (kind, text): kind "item" joins tightly
        self.title: str | None = None
        self.counters: dict[tuple[str, int], int] = {}
        self.formats = _numbering_formats(document)

    def read(self) -> None:
        from docx.table import Table

        for part in self.document.iter_inner_content():  # type: ignore[attr-defined]
            self.budget.check()
            before = len(self.blocks)
            if isinstance(part, Table):
                self.table(part)
            else:
                self.paragraph(part)
            self.budget.add_chars(sum(len(text) + 2 for _, text in self.blocks[before:]))

    def text(self) -> str:
        out: list[str] = []
        previous = ""
        for kind, block in self.blocks:
            if out:
                out.append("\n" if kind == "item" and previous == "item" else "\n\n")
            out.append(block)
            previous = kind
        return "".join(out)

    # -- paragraphs -----------------------------------------------------------------------
    def paragraph(self, paragraph: object) -> None:
        p = paragraph._p  # type: ignore[attr-defined]
        text = self.run_text(p)
        if self._break_before(p):
            text = _HARD_BREAK + text
        if not _MARKERS.sub("", text).strip():
            if _MARKERS.search(text):
                self.blocks.append(("marker", "".join(_MARKERS.findall(text))))
            return
        style = self.style_names.get(p.style, self.default_style)
        heading = _HEADING_STYLE.match(style)
        if heading or style.lower() == "title":
            level = int(heading.group(1)) if heading else 1
            line = " ".join(text.split())
            self.blocks.append(("heading", "#" * min(level, 6) + " " + line))
            if self.title is None and (style.lower() == "title" or level == 1):
                self.title = _MARKERS.sub("", line)[:200] or None
            return
        listing = self._list_marker(p, style)
        if listing is not None:
            marker, level = listing
            line = " ".join(text.split())
            self.blocks.append(("item", "  " * level + marker + line))
            return
        self.counters.clear()  # a paragraph between lists restarts their numbering
        self.blocks.append(("text", text.strip()))

    def run_text(self, p: object) -> str:
        """Text of a paragraph element: runs, hyperlinks, tabs, line and page breaks."""
        qn = self.qn
        t, tab, br, cr = qn("w:t"), qn("w:tab"), qn("w:br"), qn("w:cr")
        rendered, hyphen, kind = qn("w:lastRenderedPageBreak"), qn("w:noBreakHyphen"), qn("w:type")
        out: list[str] = []
        for node in p.iter(t, tab, br, cr, rendered, hyphen):  # type: ignore[attr-defined]
            tag = node.tag
            if tag == t:
                out.append(_MARKERS.sub("\ufffd", node.text or ""))
            elif tag == tab:
                out.append("\t")
            elif tag == br:
                out.append(_HARD_BREAK if node.get(kind) == "page" else "\n")
            elif tag == cr:
                out.append("\n")
            elif tag == rendered:
                out.append(_RENDERED_BREAK)
            else:
                out.append("-")
        return "".join(out)

    def _break_before(self, p: object) -> bool:
        ppr = p.pPr  # type: ignore[attr-defined]
        if ppr is None:
            return False
        flag = ppr.find(self.qn("w:pageBreakBefore"))
        return flag is not None and flag.get(self.qn("w:val"), "true") not in {"0", "false"}

    def _list_marker(self, p: object, style: str) -> tuple[str, int] | None:
        """(`- ` or `N. `, level) for a list paragraph, else None."""
        styled = _LIST_STYLE.match(style)
        num_id, level = None, 0
        ppr = p.pPr  # type: ignore[attr-defined]
        numpr = ppr.find(self.qn("w:numPr")) if ppr is not None else None
        if numpr is not None:
            num = numpr.find(self.qn("w:numId"))
            ilvl = numpr.find(self.qn("w:ilvl"))
            num_id = num.get(self.qn("w:val")) if num is not None else None
            level = _int(ilvl.get(self.qn("w:val")) if ilvl is not None else None)
            if num_id == "0":  # numbering explicitly switched off
                num_id = None
        if styled:
            ordered = styled.group(1).lower() == "number"
            if numpr is None:
                level = int(styled.group(2) or 1) - 1
        elif num_id is not None:
            ordered = self.formats.get((num_id, level), "bullet") not in {"bullet", "none"}
        else:
            return None
        if not ordered:
            return "- ", level
        key = (num_id or style, level)
        self.counters[key] = self.counters.get(key, 0) + 1
        for other in [k for k in self.counters if k[0] == key[0] and k[1] > level]:
            del self.counters[other]  # a deeper level restarts under each new parent item
        return f"{self.counters[key]}. ", level

    # -- tables ---------------------------------------------------------------------------
    def table(self, table: object) -> None:
        rows: list[list[str]] = []
        markers = ""
        for row in table.rows:  # type: ignore[attr-defined]
            self.budget.check()
            cells: list[str] = []
            previous = None
            for cell in row.cells:
                if previous is not None and cell._tc is previous:
                    cells.append("")  # a horizontally merged cell: its text once
                    continue
                previous = cell._tc
                text = " ".join(self.run_text(p._p) for p in cell.paragraphs)
                markers += "".join(_MARKERS.findall(text))
                cells.append(_MARKERS.sub("", text))
            rows.append(cells)
        rendered = pipe_table(rows)
        if rendered:
            self.counters.clear()
            self.blocks.append(("table", rendered))
        if markers:
            self.blocks.append(("marker", markers))


def _paragraph_styles(document: object) -> tuple[dict[str | None, str], str]:
    """Paragraph style id -> name, and the default style's name, read once: python-docx's
    `paragraph.style` searches the styles part with XPath for every paragraph (70 % of the
    extraction time of a large document). An unknown id means the default, as in Word."""
    from docx.enum.style import WD_STYLE_TYPE

    try:
        styles = document.styles  # type: ignore[attr-defined]
        names = {
            style.style_id: style.name or ""
            for style in styles
            if style.type == WD_STYLE_TYPE.PARAGRAPH
        }
        default = styles.default(WD_STYLE_TYPE.PARAGRAPH)
        return names, (default.name or "") if default is not None else ""
    except Exception:  # no or broken styles part: no style names
        return {}, ""


def _numbering_formats(document: object) -> dict[tuple[str, int], str]:
    """(numId, level) -> numFmt ("bullet", "decimal", ...) from the numbering part."""
    from docx.oxml.ns import qn

    try:
        numbering = document.part.numbering_part.element  # type: ignore[attr-defined]
    except Exception:  # no numbering part: no Word lists
        return {}
    val = qn("w:val")
    abstract: dict[str, dict[int, str]] = {}
    for node in numbering.iterchildren(qn("w:abstractNum")):
        levels = {}
        for lvl in node.iterchildren(qn("w:lvl")):
            fmt = lvl.find(qn("w:numFmt"))
            levels[_int(lvl.get(qn("w:ilvl")))] = fmt.get(val) if fmt is not None else "decimal"
        abstract[node.get(qn("w:abstractNumId"))] = levels
    formats: dict[tuple[str, int], str] = {}
    for num in numbering.iterchildren(qn("w:num")):
        ref = num.find(qn("w:abstractNumId"))
        levels = abstract.get(ref.get(val) if ref is not None else "", {})
        for level, fmt in levels.items():
            formats[(num.get(qn("w:numId")), level)] = fmt
    return formats


def _int(value: str | None) -> int:
    try:
        return max(0, min(int(value), 8)) if value is not None else 0
    except ValueError:
        return 0
