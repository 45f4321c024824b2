"""HTML nested deeper than a tree should be: flattened below a depth, never cut off.

libxml2's HTML parser (lxml) stops building the tree at 256 levels and silently drops
everything after the first element that deep, and the converter in `html.py` walks the tree
recursively. So a page nested deeper than `MAX_DEPTH` is rewritten before lxml parses it: a
streaming tokenizer (the standard library's, which has no depth limit) keeps every tag down to
`MAX_DEPTH` levels and drops the start and end tags below it, leaving their text (and a line
break for block elements) in the deepest kept element. All text survives; structure below the
limit does not, and the caller warns about it. Real pages stay far above the limit (a few dozen
levels).
"""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

MAX_DEPTH = 128
"""Deepest element kept as an element; far below libxml2's 256 and Python's recursion limit."""

_VOID = frozenset({
    "area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link", "meta", "param",
    "source", "track", "wbr",
})  # fmt: skip
_BLOCK = frozenset({
    "address", "article", "aside", "blockquote", "dd", "details", "div", "dl", "dt", "fieldset",
    "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr",
    "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "td", "tfoot",
    "th", "thead", "tr", "ul",
})  # fmt: skip


def too_deep(root: Any, max_depth: int = MAX_DEPTH) -> bool:
    """Whether the parsed tree (`root`: any lxml element of it) has an element `max_depth` levels
    down; one XPath step per level, evaluated in C."""
    return bool(root.getroottree().xpath("boolean(" + "/*" * max_depth + ")"))


def flatten_deep_markup(markup: str, max_depth: int = MAX_DEPTH) -> tuple[str, int]:
    """`markup` with every element below `max_depth` levels unwrapped; (markup, tags dropped)."""
    flattener = _Flattener(max_depth=max_depth)
    flattener.feed(markup)
    flattener.close()
    return "".join(flattener.out), flattener.dropped


class _Flattener(HTMLParser):
    """Re-emits the markup verbatim, except start/end tags of elements deeper than `max_depth`.

    Depth follows the open elements: void elements never open one, an end tag closes everything
    opened after its start tag (how browsers recover from unclosed `<p>`/`<li>`), and a stray
    end tag is dropped.
    """

    def __init__(self, max_depth: int) -> None:
        super().__init__(convert_charrefs=False)
        self.max_depth = max_depth
        self.out: list[str] = []
        self.stack: list[tuple[str, bool]] = []  # (tag, kept)
        self.kept_depth = 0
        self.dropped = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raw = self.get_starttag_text() or f"<{tag}>"
        if tag in _VOID:
            self.out.append(raw)
            return
        keep = self.kept_depth < self.max_depth
        self.stack.append((tag, keep))
        if keep:
            self.kept_depth += 1
            self.out.append(raw)
        else:
            self.dropped += 1
            self.out.append("<br>" if tag in _BLOCK else " ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.out.append(self.get_starttag_text() or f"<{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        for position in range(len(self.stack) - 1, -1, -1):
            if self.stack[position][0] == tag:
                break
        else:
            return  # closes nothing that is open
        for _, kept in self.stack[position + 1 :]:
            self.kept_depth -= kept  # implicitly closed by this end tag
        _, kept = self.stack[position]
        del self.stack[position:]
        if kept:
            self.kept_depth -= 1
            self.out.append(f"</{tag}>")
        else:
            self.out.append("<br>" if tag in _BLOCK else " ")

    def handle_data(self, data: str) -> None:
        self.out.append(data)

    def handle_entityref(self, name: str) -> None:
        self.out.append(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self.out.append(f"&#{name};")

    def handle_comment(self, data: str) -> None:
        self.out.append(f"<!--{data}-->")

    def handle_decl(self, decl: str) -> None:
        self.out.append(f"<!{decl}>")

    def handle_pi(self, data: str) -> None:
        self.out.append(f"<?{data}>")

    def unknown_decl(self, data: str) -> None:
        self.out.append(f"<![{data}]>")
