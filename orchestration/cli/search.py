"""`seams search QUERY`: the top-k current chunks for a query, with their parent section and
neighbouring chunks, as lines for a person or (`--json`) as `response.to_dict()`.

The response itself (hits, scores, notes, packed context) is `seams.storage.search`'s; this module
only decides how a person reads it.
"""

from __future__ import annotations

import argparse
import json

from seams.errors import counted
from seams.orchestration.cli.terminal import printable, printable_json
from seams.orchestration.shell_commands import seams_command
from seams.resources.readers import Readers
from seams.storage.search import SearchHit, SearchResponse
from seams.storage.search.context_budget import PackedContext
from seams.storage.search.query import check_query


def run(args: argparse.Namespace) -> int:
    """Top-k chunks for a query, with their parent section and neighbouring chunks."""
    check_query(args.query)  # before the settings' models and the database
    # A reader: the pool and the query embedder, without the definitions (nor Dagster).
    readers = Readers.for_environment(args.settings, args.environment)
    response = readers.search(
        args.settings,
        args.query,
        args.k,
        budget=args.budget,
        collections=getattr(args, "collection", None),
        search=args.search,
        run_hint=seams_command(),
    )
    if args.json:
        print(printable_json(json.dumps(response.to_dict(), ensure_ascii=False)))
    else:
        per_collection = args.settings.collection_settings()
        print(format_response(response, collections=len(per_collection) > 1))
    return 0


def format_response(
    response: SearchResponse, *, width: int = 100, collections: bool = False
) -> str:
    """Human-readable hits for `seams search` (the --json output is `response.to_dict()`): each
    hit says which parts matched it (dense, lexical and the query words it contains) with both
    component scores and its best passage (with a budget: the part of it given); with a budget,
    the merged spans follow. `collections` (a project with several): each hit names its
    collection. Text from the documents (file names, section titles, chunk text)
    and the query shows its control characters escaped."""
    lines = [f"note: {printable(n)}" for n in response.notes]
    for hit in response.hits:
        pages = ""
        if hit.pages:
            first, last = hit.pages
            pages = f"  p.{first}" if first == last else f"  pp.{first}-{last}"
        parent = hit.context.parent
        where = f"{parent.kind} '{parent.title}'" if parent.title else parent.kind
        collection = f"{hit.collection}: " if collections else ""
        lines.append(
            f"{hit.rank}. {hit.score:.3f}  {collection}{printable(hit.file_name)}{pages}  "
            f"[chunk {hit.chunk_index + 1}/{hit.total_chunks}, {printable(where)}, "
            f"chunks {parent.first_chunk_index + 1}-{parent.last_chunk_index + 1}]"
        )
        lines.append(f"   {_matched(hit)}")
        lines.append(f"   {_snippet(hit.text, width)}")
        if hit.passage is not None and hit.passage != hit.text:
            where = f"{hit.passage_start}:{hit.passage_end}"
            lines.append(f"   best passage {where}: {_snippet(hit.passage, width - 20)}")
    count = counted(len(response.hits), "hit")
    if response.context is not None:
        packed = response.context
        lines.append(
            f"context: {packed.tokens} of {packed.budget} tokens in "
            f"{counted(len(packed.spans), 'span')}"
        )
        files = {hit.rank: hit.file_name for hit in response.hits}
        for span in packed.spans:
            ranks = ", ".join(str(r) for r in span.ranks)
            named = next((files[r] for r in span.ranks if r in files), span.document_id[:12])
            where = f"{printable(named)} {span.start_char}:{span.end_char}"
            lines.append(
                f"  [{where}, {span.tokens} tokens, hits {ranks}] {_snippet(span.text, width - 40)}"
            )
        lines += _left_out(packed)
        count = f"{len(response.hits)} of {counted(packed.offered, 'ranked hit')} given"
    lines.append(
        f"({count}; embedding {response.embed_ms:.1f} ms, "
        f"search {response.search_ms:.1f} ms; search {response.search}, mode {response.mode})"
    )
    return "\n".join(lines)


def _left_out(packed: PackedContext) -> list[str]:
    """What the budget left out, so the hits' numbering (their ranks) reads true: the hits
    ranked above the last one given that did not fit, and how many were never reached."""
    last = max(packed.given, default=0)
    lines = [
        f"left out: hit {x.rank} (needs {x.tokens} tokens, {x.room} left)"
        for x in packed.left_out
        if x.rank < last
    ]
    below = packed.offered - last
    if below > 0:
        lines.append(f"left out: {counted(below, 'lower-ranked hit')}, no room left for them")
    return lines


def _matched(hit: SearchHit) -> str:
    parts = [f"matched: {hit.matched}"]
    if hit.dense_score is not None:
        parts.append(f"dense {hit.dense_score:.3f}")
    if hit.lexical_score is not None:
        parts.append(f"bm25 {hit.lexical_score:.2f}")
    if hit.matched_terms:
        parts.append("words: " + printable(" ".join(hit.matched_terms)))
    return "; ".join(parts)


def _snippet(text: str, width: int) -> str:
    """`text` on one line (whitespace runs as one space), cut at a word boundary to `width`,
    then its other control characters escaped (a cut never splits an escape)."""
    snippet = " ".join(text.split())
    if len(snippet) > width - 3:  # cut at a word boundary
        cut = snippet.rfind(" ", 0, width - 6)
        snippet = snippet[: cut if cut > 0 else width - 6] + "..."
    return printable(snippet)
