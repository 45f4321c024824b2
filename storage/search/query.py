"""What a query is before it reaches the index: its text checked and capped, the kind of search
that ranks it, and the embedder that turns it into a vector.

`prepare_query` is the one gate query text passes: every text search is built as a
`seams.storage.search.request.SearchRequest`, whose constructor ends with this check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, Protocol, get_args

import numpy as np

from seams.errors import InputError


class QueryEmbedder(Protocol):
    """What embeds a query: `OnnxEmbedder` (the resource), or anything with its interface."""

    @property
    def model_id(self) -> str: ...

    def embed(self, texts: list[str]) -> np.ndarray: ...

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """`embed` with the model's query prompt (e5's "query: "; none for MiniLM)."""
        ...

    def for_model(self, model_id: str) -> QueryEmbedder:
        """The same embedder running the model whose id is `model_id` (or a clear error)."""
        ...


SearchKind = Literal["hybrid", "dense", "lexical"]
"""Which scores rank the hits (seams.yaml `retrieval.search`)."""
SEARCH_KINDS: tuple[str, ...] = get_args(SearchKind)

MAX_QUERY_CHARS = 4096
"""Longer queries are cut (at a word boundary) with a note: a query is a question, not a
document, and a few model windows of it already average into one vector."""


@dataclass(frozen=True)
class PreparedQuery:
    text: str
    original_chars: int
    notes: tuple[str, ...] = ()


def check_kind(search: object) -> None:
    """An `InputError` unless `search` names one of `SEARCH_KINDS`."""
    if search not in SEARCH_KINDS:
        raise InputError(f"retrieval.search={search!r}: must be one of {', '.join(SEARCH_KINDS)}")


def check_query(text: object) -> str:
    """`text` itself when it can be searched for; `InputError` saying what to change when it is
    not a string or holds a NUL character. Called by the search entry points before they embed
    or connect, so a bad query costs nothing."""
    if not isinstance(text, str):
        raise InputError(f"the query must be a string, got {type(text).__name__}")
    position = text.find("\x00")
    if position >= 0:
        raise InputError(
            f"the query contains a NUL character (\\x00) at position {position}: PostgreSQL "
            "text cannot hold one; remove it and search again"
        )
    return text


def prepare_query(query: object, max_chars: int = MAX_QUERY_CHARS) -> PreparedQuery:
    """Validate a query: a non-blank str; lone surrogates replaced; over `max_chars` cut at a
    word boundary (with a note). Raises `InputError` saying what to pass instead."""
    query = check_query(query)  # a str without NUL, before any embedding or connection
    original = len(query)
    # Lone surrogates (from a bad decode) cannot reach the tokenizer; everything else can.
    text = query.encode("utf-8", "replace").decode("utf-8").strip()
    if not text or not any(ch.isprintable() and not ch.isspace() for ch in text):
        raise InputError("the query is empty: pass some words to search for")
    notes: list[str] = []
    if len(text) > max_chars:
        cut = text.rfind(" ", max_chars // 2, max_chars + 1)
        text = text[: cut if cut > 0 else max_chars].rstrip()
        notes.append(
            f"query truncated from {original:,} to {len(text):,} characters (max {max_chars:,})"
        )
    return PreparedQuery(text, original, tuple(notes))


def check_collections(collections: object) -> tuple[str, ...] | None:
    """The collections a search reads, sorted and without repeats; None (every collection the
    connection may read) stays None. An `InputError` for an empty list (which would search
    nothing) or a name that is not a string."""
    if collections is None:
        return None
    if isinstance(collections, str):
        collections = [collections]
    names = list(collections)  # type: ignore[call-overload]
    if not names:
        raise InputError("collections: name at least one collection, or None for every one")
    bad = [n for n in names if not isinstance(n, str) or not n]
    if bad:
        raise InputError(f"collections: {bad[0]!r} is not a collection name")
    return tuple(sorted(set(names)))


def known_collections(
    requested: object,
    known: Iterable[str],
    *,
    option: str,
    stored: Callable[[], Iterable[str]] | None = None,
) -> tuple[str, ...]:
    """`requested` checked (`check_collections`) against the collections the settings
    declare and, for a name they do not, those the data holds (`stored`: a collection removed
    from the settings stays searchable, so it can be named): an `InputError` naming the first
    unknown one and the known ones."""
    names = check_collections(requested) or ()
    declared = list(known)
    held: list[str] | None = None
    for name in names:
        if name in declared:
            continue
        if held is None:
            held = sorted(stored()) if stored is not None else []
        if name not in held:
            others = [n for n in held if n not in declared]
            also = f" (and in the data: {', '.join(repr(n) for n in others)})" if others else ""
            raise InputError(
                f"{option} {name!r}: no such collection; the settings declare "
                f"{', '.join(repr(n) for n in declared)}{also}"
            )
    return names
