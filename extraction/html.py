"""HTML to Markdown-flavoured text: the main content, its headings, lists and tables.

Parsed by lxml (libxml2's HTML parser, already required by python-docx, so no extra dependency,
and fast). The output uses the Markdown the chunker's
segmenter understands (`#` headings, `- `/`1. ` items, pipe tables, fenced code, blank lines
between paragraphs), so tables stay atomic and a list follows its lead-in sentence.

Noise removed: scripts, styles, templates, forms, embedded objects, navigation and sidebars,
hidden elements, and page-level header/footer. When the page marks its content with `<main>` or
a single `<article>`, only that is read.
"""

from __future__ import annotations

import codecs
import re

import lxml.html
from lxml import etree

from seams.extraction.document import (
    MIME_HTML,
    ExtractedDocument,
    clean,
    failed,
    first_line_title,
    pipe_table,
    short_title,
)
from seams.extraction.html_depth import MAX_DEPTH, flatten_deep_markup, too_deep
from seams.extraction.limits import Budget, ExtractionLimits
from seams.extraction.text import decode_text, nul_warning

_DROP = frozenset(
    [
        "script",
        "style",
        "noscript",
        "template",
        "svg",
        "math",
        "iframe",
        "object",
        "embed",
        "canvas",
        "video",
        "audio",
        "map",
        "form",
        "button",
        "select",
        "input",
        "textarea",
        "label",
        "nav",
        "aside",
        "dialog",
        "menu",
        "head",
        "title",
        "meta",
        "link",
        "base",
    ]
)
_CHROME = frozenset({"header", "footer"})  # dropped unless inside the main content
_CHROME_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "search"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCKS = frozenset(
    [
        "p",
        "div",
        "section",
        "article",
        "main",
        "header",
        "footer",
        "blockquote",
        "figure",
        "figcaption",
        "address",
        "details",
        "summary",
        "dl",
        "dt",
        "dd",
        "center",
        "fieldset",
        "legend",
        "caption",
        "hgroup",
    ]
)
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_WHITESPACE = re.compile(r"\s+")
_LINE_BREAK = "\u2028"  # stands for <br> while whitespace is collapsed; never left in output


def extract_html(content: bytes, name: str, budget: Budget | None = None) -> ExtractedDocument:
    """The main text of an HTML page as Markdown-flavoured text (no pages); `budget` is checked
    per element. Nesting deeper than `html_depth.MAX_DEPTH` is flattened (all text kept)."""
    budget = budget or Budget(ExtractionLimits())
    markup, warnings = _decode_html(content)
    try:
        root = _parse(markup)
        if too_deep(root):
            markup, dropped = flatten_deep_markup(markup)
            root = _parse(markup)
            warnings.append(
                f"elements nested deeper than {MAX_DEPTH} levels were flattened into their "
                f"level-{MAX_DEPTH} ancestor ({dropped} tags unwrapped): all text is kept, "
                "structure below that depth is not"
            )
    except (etree.ParserError, ValueError) as exc:
        return failed(
            MIME_HTML, f"{name}: unreadable HTML ({exc}); check that the file is a web page"
        )
    budget.check()
    body = _content_root(root)
    converter = _Converter(inside_main=body.tag in {"main", "article"}, budget=budget)
    if body.tag in {"html", "body"}:
        converter.children(body)
    else:
        converter.element(body)
    text = clean("\n\n".join(converter.finish()))
    title = short_title(root.findtext(".//title")) or _first_heading(text) or first_line_title(text)
    return ExtractedDocument(text=text, mime=MIME_HTML, title=title, warnings=warnings)


def _parse(markup: str) -> lxml.html.HtmlElement:
    parser = lxml.html.HTMLParser(remove_comments=True, remove_pis=True)
    return lxml.html.document_fromstring(markup, parser=parser)


def _decode_html(content: bytes) -> tuple[str, list[str]]:
    """Decode with the page's declared charset when Python knows it, else by detection. NUL
    characters (never content, and PostgreSQL cannot store them) are removed with a warning."""
    if not content.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        declared = _META_CHARSET.search(content[:4096])
        if declared:
            encoding = declared.group(1).decode("ascii").lower()
            try:
                text = content.decode(encoding, errors="replace")
            except LookupError:
                pass
            else:
                nuls = text.count("\x00")
                markup = _XML_DECLARATION.sub("", text.replace("\x00", ""))
                replaced = text.count("\ufffd")
                return markup, _replaced_warning(replaced, encoding) + nul_warning(nuls)
    decoded = decode_text(content)
    nuls = decoded.nul_removed + decoded.text.count("\x00")
    markup = _XML_DECLARATION.sub("", decoded.text.replace("\x00", ""))
    return markup, _replaced_warning(decoded.replaced, decoded.encoding) + nul_warning(nuls)


def _replaced_warning(replaced: int, encoding: str) -> list[str]:
    if not replaced:
        return []
    return [f"{replaced} undecodable byte sequence(s) replaced with U+FFFD (read as {encoding})"]


def _content_root(root: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    """`<main>`, else the only `<article>`, else `<body>` (else the whole document)."""
    mains = root.xpath("//main | //*[@role='main']")
    if mains:
        return mains[0]
    articles = root.xpath("//article")
    if len(articles) == 1:
        return articles[0]
    body = root.find("body")
    return body if body is not None else root


def _first_heading(text: str) -> str | None:
    match = re.search(r"^#{1,6} (.+)$", text, re.MULTILINE)
    return match.group(1)[:200] if match else None


def _hidden(element: lxml.html.HtmlElement) -> bool:
    if element.get("hidden") is not None or element.get("aria-hidden") == "true":
        return True
    if (element.get("role") or "").lower() in _CHROME_ROLES:
        return True
    style = element.get("style")
    return bool(style and _HIDDEN_STYLE.search(style))


class _Converter:
    """Walks elements in document order, collecting Markdown blocks.

    Inline text accumulates until a block element starts or ends; then it becomes one paragraph.
    """

    def __init__(self, inside_main: bool = False, budget: Budget | None = None) -> None:
        self.blocks: list[str] = []
        self.inline: list[str] = []
        self.inside_main = inside_main
        self.budget = budget or Budget(ExtractionLimits())

    # -- driving --------------------------------------------------------------------------
    def finish(self) -> list[str]:
        self.flush()
        return self.blocks

    def flush(self) -> None:
        text = _inline("".join(self.inline))
        self.inline = []
        if text:
            self.blocks.append(text)

    def children(self, element: lxml.html.HtmlElement) -> None:
        if element.text:
            self.inline.append(element.text)
        for child in element:
            self.element(child)
            if child.tail:
                self.inline.append(child.tail)

    def element(self, element: lxml.html.HtmlElement) -> None:
        self.budget.check()
        tag = element.tag
        if not isinstance(tag, str):  # comments, processing instructions, entities
            return
        tag = tag.lower()
        if tag in _DROP or _hidden(element):
            return
        if tag in _CHROME and not self.inside_main:
            return
        if tag in _HEADINGS:
            self.flush()
            title = self.sub_inline(element)
            if title:
                self.blocks.append("#" * _HEADINGS[tag] + " " + title)
        elif tag in {"ul", "ol"}:
            self.flush()
            rendered = self.list(element, ordered=tag == "ol")
            if rendered:
                self.blocks.append(rendered)
        elif tag == "table":
            self.flush()
            self.table(element)
        elif tag == "pre":
            self.flush()
            self.code(element)
        elif tag == "hr":
            self.flush()
        elif tag == "br":
            self.inline.append(_LINE_BREAK)
        elif tag in _BLOCKS or tag == "li":
            self.flush()
            self.children(element)
            self.flush()
        else:
            self.children(element)

    def sub(self, element: lxml.html.HtmlElement) -> list[str]:
        """The blocks of `element`'s content, rendered on their own."""
        converter = _Converter(inside_main=self.inside_main, budget=self.budget)
        converter.children(element)
        return converter.finish()

    def sub_inline(self, element: lxml.html.HtmlElement) -> str:
        """`element`'s content as one line (headings, table cells)."""
        return " ".join(" ".join(block.split()) for block in self.sub(element))

    # -- structures -----------------------------------------------------------------------
    def list(self, element: lxml.html.HtmlElement, ordered: bool) -> str:
        """Items one per line (`- ` or `1. `), nested lists indented under their item."""
        number = _int(element.get("start"), 1)
        lines: list[str] = []
        for item in element:
            if not isinstance(item.tag, str) or item.tag.lower() != "li" or _hidden(item):
                continue
            blocks = self.sub(item)
            if not blocks:
                continue
            marker = f"{number}. " if ordered else "- "
            number += 1
            indent = " " * len(marker)
            first, *rest = blocks
            item_lines = [marker + first.replace("\n", "\n" + indent)]
            item_lines += [indent + block.replace("\n", "\n" + indent) for block in rest]
            lines.extend(item_lines)
        return "\n".join(lines)

    def table(self, element: lxml.html.HtmlElement) -> None:
        """A data table becomes one pipe table; a layout table (one column, or nesting tables)
        is read as ordinary content."""
        rows = element.xpath("./tr | ./thead/tr | ./tbody/tr | ./tfoot/tr")
        grid: list[list[str]] = []
        for row in rows:
            cells: list[str] = []
            for cell in row.xpath("./th | ./td"):
                text = self.sub_inline(cell)
                cells.append(text)
                cells.extend([""] * (_int(cell.get("colspan"), 1) - 1))
            grid.append(cells)
        layout = max((len(r) for r in grid), default=0) <= 1 or element.xpath(".//table")
        if layout:
            self.children(element)
            self.flush()
            return
        caption = element.find("caption")
        if caption is not None:
            text = self.sub_inline(caption)
            if text:
                self.blocks.append(text)
        rendered = pipe_table(grid)
        if rendered:
            self.blocks.append(rendered)

    def code(self, element: lxml.html.HtmlElement) -> None:
        code = element.text_content().strip("\n")
        if not code.strip():
            return
        fence = "~~~~" if "```" in code else "```"
        classes = element.get("class") or ""
        inner = element.find("code")
        if inner is not None:
            classes += " " + (inner.get("class") or "")
        language = next(
            (c.split("-", 1)[1] for c in classes.split() if c.startswith("language-")), ""
        )
        self.blocks.append(f"{fence}{language}\n{code}\n{fence}")


def _inline(raw: str) -> str:
    """Collapse HTML whitespace; `<br>` becomes a line break inside the paragraph."""
    lines = (_WHITESPACE.sub(" ", part).strip() for part in raw.split(_LINE_BREAK))
    return "\n".join(line for line in lines if line)


def _int(value: str | None, default: int) -> int:
    try:
        number = int(value) if value is not None else default
    except ValueError:
        return default
    return number if 0 < number < 1000 else default
