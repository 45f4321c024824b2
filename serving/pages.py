"""The pages people look at: a search box with its hits and packed passages, and one document
drawn with every chunk boundary (its reason, similarity and size) and a plot of chunk sizes.

Server-rendered HTML with the style inline: no JavaScript, no build step, nothing fetched from
elsewhere, so the pages work offline and behind any proxy. Every piece of text that comes from a
document, a file name or the query is escaped (`html.escape`).
"""

from __future__ import annotations

from html import escape
from urllib.parse import quote, urlencode

from seams.errors import counted
from seams.storage.document_view import ChunkView, DocumentView
from seams.storage.search import SearchHit, SearchResponse

STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; margin: 0 auto; max-width: 72rem; padding: 1rem 2rem;
       color: #1d2430; background: #fbfbfd; }
h1 { font-size: 1.4rem; margin: .2rem 0 1rem; } h1 a { color: inherit; text-decoration: none; }
form.search { display: flex; gap: .5rem; flex-wrap: wrap; margin-bottom: 1rem; }
form.search input[type=text] { flex: 1 1 24rem; font-size: 1rem; padding: .45rem .6rem; }
form.search input, form.search select, form.search button { font-size: .95rem; padding: .4rem; }
.note { color: #7a4b00; background: #fff6e0; padding: .3rem .6rem; border-radius: 4px; }
.hit { background: #fff; border: 1px solid #dde2ea; border-radius: 6px; padding: .6rem .9rem;
       margin: .7rem 0; }
.meta { color: #566070; font-size: .85rem; }
.text { white-space: pre-wrap; font-family: ui-serif, Georgia, serif; }
mark { background: #ffe169; padding: 0 .1rem; }
.span { border-left: 4px solid #e0a800; padding-left: .7rem; margin: .6rem 0; }
.chunk { border-top: 3px solid #8aa0c8; margin-top: .9rem; padding-top: .2rem; }
.chunk.semantic { border-color: #3b7dd8; } .chunk.structural { border-color: #2e9e6b; }
.chunk.size { border-color: #d9822b; } .chunk.fallback { border-color: #b04a9a; }
.chunk.document_start { border-color: #6b7380; }
.boundary { font-size: .82rem; color: #334; background: #eef2f8; display: inline-block;
            padding: .05rem .5rem; border-radius: 0 0 4px 4px; margin-bottom: .3rem; }
.reason { font-weight: 600; }
svg text { font: 10px system-ui, sans-serif; fill: #566070; }
"""

REASON_COLOURS = {
    "semantic": "#3b7dd8",
    "structural": "#2e9e6b",
    "size": "#d9822b",
    "fallback": "#b04a9a",
    "document_start": "#6b7380",
}


def page(title: str, body: str) -> str:
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f'<h1><a href="/">Seams</a></h1>{body}</body></html>'
    )


def search_form(query: str = "", k: int = 5, budget: int | None = None, search: str = "") -> str:
    kinds = "".join(
        f"<option value={v!s}{' selected' if v == search else ''}>{label}</option>"
        for v, label in (("", "default search"), ("hybrid", "hybrid"), ("dense", "dense"),
                         ("lexical", "lexical"))
    )  # fmt: skip
    return (
        '<form class=search method=get action="/">'
        f'<input type=text name=q value="{escape(query)}" placeholder="Ask a question" autofocus>'
        f'<label>k <input type=number name=k min=1 max=100 value="{k}" style="width:4rem">'
        "</label>"
        f'<label>budget <input type=number name=budget min=1 value="{budget or ""}" '
        'placeholder="tokens" style="width:6rem"></label>'
        f"<select name=search>{kinds}</select><button>Search</button></form>"
    )


def view_link(document_id: str, start: int | None = None, end: int | None = None) -> str:
    """The document page of `document_id`, with `start:end` marked when given."""
    link = f"/view/{quote(document_id, safe='')}"
    if start is not None and end is not None:
        link += "?" + urlencode({"mark": f"{start}:{end}"}) + f"#at-{start}"
    return link


def marked(text: str, offset: int, start: int | None, end: int | None) -> str:
    """`text` (which starts at `offset` in its document) escaped, its `start:end` in <mark>."""
    if start is None or end is None or end <= offset or start >= offset + len(text):
        return escape(text)
    a, b = max(0, start - offset), min(len(text), end - offset)
    return f"{escape(text[:a])}<mark id=at-{start}>{escape(text[a:b])}</mark>{escape(text[b:])}"


def search_page(
    response: SearchResponse | None, *, query: str, k: int, budget: int | None, search: str,
    error: str | None = None,
) -> str:  # fmt: skip
    """The search page: the form, then the notes, the hits (each with its best passage marked
    and a link to it in its document) and, with a budget, the packed spans."""
    parts = [search_form(query, k, budget, search)]
    if error:
        parts.append(f"<p class=note>{escape(error)}</p>")
    if response is not None:
        parts.extend(f"<p class=note>{escape(n)}</p>" for n in response.notes)
        parts.append(
            f"<p class=meta>{counted(len(response.hits), 'hit')}; "
            f"search {escape(response.search)}, "
            f"mode {escape(response.mode)}; embedding {response.embed_ms:.0f} ms, search "
            f"{response.search_ms:.0f} ms; publication {response.published_seq}</p>"
        )
        if response.context is not None:
            packed = response.context
            parts.append(
                f"<h2>Context: {packed.tokens} of {packed.budget} tokens in "
                f"{counted(len(packed.spans), 'span')}</h2>"
            )
            by_document = {h.document_id: h for h in response.hits}
            for span in packed.spans:
                hit = by_document.get(span.document_id)
                name = escape(hit.file_name) if hit else escape(span.document_id[:12])
                link = view_link(span.document_id, span.start_char, span.end_char)
                ranks = ", ".join(str(r) for r in span.ranks)
                parts.append(
                    f'<div class=span><div class=meta><a href="{link}">{name}</a> '
                    f"{span.start_char}:{span.end_char} &middot; {span.tokens} tokens &middot; "
                    f"hits {ranks}</div><div class=text><mark>{escape(span.text)}</mark></div>"
                    "</div>"
                )
            parts.append("<h2>Hits</h2>")
        parts.extend(_hit(hit) for hit in response.hits)
    return page(f"{query} - Seams" if query else "Seams", "".join(parts))


def _hit(hit: SearchHit) -> str:
    where = f"chunk {hit.chunk_index + 1}/{hit.total_chunks}"
    if hit.section:
        where += f" &middot; {escape(hit.section)}"
    scores = [f"score {hit.score:.3f}", f"matched {escape(hit.matched)}"]
    if hit.dense_score is not None:
        scores.append(f"dense {hit.dense_score:.3f}")
    if hit.lexical_score is not None:
        scores.append(f"bm25 {hit.lexical_score:.2f}")
    if hit.passage_start is not None:
        link = view_link(hit.document_id, hit.passage_start, hit.passage_end)
    else:
        link = view_link(hit.document_id, hit.start_char, hit.end_char)
    return (
        f'<div class=hit><div class=meta>{hit.rank}. <a href="{link}">'
        f"{escape(hit.file_name)}</a> &middot; {escape(hit.collection)} &middot; {where} "
        f"&middot; {' &middot; '.join(scores)}</div><div class=text>"
        f"{marked(hit.text, hit.start_char, hit.passage_start, hit.passage_end)}</div></div>"
    )


def document_page(view: DocumentView, mark: tuple[int, int] | None = None) -> str:
    """One document: its chunk sizes plotted, then its text cut where its chunks start, each cut
    labelled with the boundary's reason, similarity and the chunk's size."""
    start, end = mark if mark else (None, None)
    title = view.title or view.file_name
    reasons: dict[str, int] = {}
    for chunk in view.chunks:
        reasons[chunk.reason] = reasons.get(chunk.reason, 0) + 1
    summary = ", ".join(f"{n} {escape(r or 'unknown')}" for r, n in sorted(reasons.items()))
    parts = [
        f"<h2>{escape(title)}</h2><p class=meta>{escape(view.file_name)} &middot; collection "
        f"{escape(view.collection)} &middot; {view.char_count:,} characters &middot; "
        f"{counted(len(view.chunks), 'chunk')}: {summary} &middot; "
        f"publication {view.published_seq}</p>",
        size_plot(view.chunks),
    ]
    text = view.text or ""
    cuts = [c.overlap_end for c in view.chunks] + [len(text)]
    for i, chunk in enumerate(view.chunks):
        begin = 0 if i == 0 else cuts[i]
        piece = text[begin : cuts[i + 1]] if text else chunk.text
        offset = begin if text else chunk.start_char
        parts.append(
            f'<div class="chunk {escape(chunk.reason)}" id=chunk-{chunk.chunk_index} '
            f"data-reason={escape(chunk.reason or 'unknown')}>"
            f"<div class=boundary>{_boundary_label(chunk)}</div>"
            f"<div class=text>{marked(piece, offset, start, end)}</div></div>"
        )
    return page(f"{title} - Seams", "".join(parts))


def _boundary_label(chunk: ChunkView) -> str:
    label = [f"chunk {chunk.chunk_index + 1}", f"<span class=reason>{escape(chunk.reason)}</span>"]
    if chunk.similarity is not None:
        label.append(f"similarity {chunk.similarity:.3f}")
    if chunk.threshold is not None:
        label.append(f"threshold {chunk.threshold:.3f}")
    label.append(
        f"{counted(chunk.token_count, 'token')}, {counted(chunk.sentence_count, 'sentence')}"
    )
    if chunk.section:
        label.append(escape(chunk.section))
    return " &middot; ".join(label)


def size_plot(chunks: list[ChunkView], width: int = 720, height: int = 120) -> str:
    """An inline SVG bar per chunk, its height the chunk's tokens, its colour its reason."""
    if not chunks:
        return "<p class=meta>no chunks</p>"
    top = max(c.token_count for c in chunks) or 1
    left, bottom = 34, 16
    bar = (width - left) / len(chunks)
    shapes = [
        f'<line x1={left} y1={height - bottom} x2={width} y2={height - bottom} stroke="#99a"/>',
        f"<text x=0 y=10>{top}</text><text x=0 y={height - bottom}>0</text>",
        f"<text x={left} y={height - 2}>chunk sizes in tokens (colour: the reason it starts)"
        "</text>",
    ]
    for i, chunk in enumerate(chunks):
        h = (height - bottom - 4) * chunk.token_count / top
        x = left + i * bar
        colour = REASON_COLOURS.get(chunk.reason, "#8aa0c8")
        shapes.append(
            f'<a href="#chunk-{chunk.chunk_index}"><rect x="{x + 1:.1f}" '
            f'y="{height - bottom - h:.1f}" width="{max(bar - 2, 1):.1f}" height="{h:.1f}" '
            f'fill="{colour}"><title>chunk {chunk.chunk_index + 1}: {chunk.token_count} tokens, '
            f"{escape(chunk.reason)}</title></rect></a>"
        )
    return (
        f'<svg class=sizes role=img aria-label="chunk sizes" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">{"".join(shapes)}</svg>'
    )


def error_page(message: str) -> str:
    return page("Seams", f"{search_form()}<p class=note>{escape(message)}</p>")
