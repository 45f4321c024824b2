"""What a search returns: each hit (a child chunk) with its scores and its context (parent
section or document, neighbours, the window of source text around it), and the response that
carries the hits with how they were found."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from seams.storage.search.context_budget import PackedContext


@dataclass(frozen=True)
class Neighbour:
    """A chunk next to the hit in its document version."""

    chunk_id: str
    chunk_index: int
    start_char: int
    end_char: int
    text: str


@dataclass(frozen=True)
class ParentContext:
    """The hit's parent: a section ("section") or the whole document ("document").

    `start_char:end_char` is the parent's span in the source; `text` is
    `source[text_start:text_end]`, the whole parent unless it is longer than the cap
    (`truncated`), then a window of the parent around the hit."""

    kind: str
    section: str
    title: str
    start_char: int
    end_char: int
    first_chunk_index: int
    last_chunk_index: int
    chunk_count: int
    text_start: int
    text_end: int
    text: str

    @property
    def truncated(self) -> bool:
        return self.text_start > self.start_char or self.text_end < self.end_char


@dataclass(frozen=True)
class HitContext:
    parent: ParentContext
    previous: Neighbour | None
    next: Neighbour | None
    window_start: int
    window_end: int
    window_text: str
    """source[previous.start_char : next.end_char]: the hit with its neighbours, exactly once."""


@dataclass(frozen=True)
class SearchHit:
    """One retrieved chunk (a child) with its score and context."""

    rank: int
    score: float
    """The score that ranked it: the fused score (`fuse_scores`) in hybrid search, the dense score
    in dense search, BM25 in lexical search."""
    chunk_id: str
    document_id: str
    batch_key: str
    chunk_index: int
    total_chunks: int
    source_uri: str
    title: str | None
    pages: tuple[int, int] | None
    section: str
    start_char: int
    end_char: int
    text: str
    context: HitContext
    dense_score: float | None = None
    """Cosine similarity between the query and the chunk's embedding, mixed with the best of its
    sentences' when sentence re-scoring is on (`sentence_rerank`); None in lexical
    search."""
    lexical_score: float | None = None
    """BM25 of the chunk for the query (0.0: no query lexeme in it); None in dense search."""
    matched_terms: tuple[str, ...] = ()
    """The query's lexemes (stemmed, as the index stores them) that the chunk contains."""
    dense_rank: int | None = None
    """Its rank among the dense search's nearest chunks (None: not among them)."""
    lexical_rank: int | None = None
    """Its rank among the BM25 search's best chunks (None: not among them)."""
    generation: int = 0
    """The published build of its batch that it was read from (`seams.publications`)."""
    published_seq: int | None = None
    """The publication its answer saw (`SearchResponse.published_seq`)."""
    collection: str = "default"
    """The collection of its batch (`seams.chunks.collection`; "default" without collections)."""
    passage_start: int | None = None
    """Start of its best passage in the source: whole sentences of the hit around its
    best-scoring sentence (by the fused lexical + dense evidence of each sentence). With a token
    budget, the part of the hit given to the reader. None when its sentences are unknown."""
    passage_end: int | None = None
    """End of that passage: `source[passage_start:passage_end]`, inside `start_char:end_char`."""

    @property
    def passage(self) -> str | None:
        """The best passage's text (`source[passage_start:passage_end]`), or None."""
        if self.passage_start is None or self.passage_end is None:
            return None
        return self.text[self.passage_start - self.start_char : self.passage_end - self.start_char]

    @property
    def matched(self) -> str:
        """Which parts found it: "dense", "lexical" or "dense+lexical" (dense: among the nearest
        chunk vectors; lexical: it contains query lexemes)."""
        parts = ["dense"] if self.dense_rank is not None else []
        if self.matched_terms:
            parts.append("lexical")
        return "+".join(parts) or "none"

    @property
    def file_name(self) -> str:
        """The source file's name (the URI's basename): what people call the document."""
        return unquote(urlparse(self.source_uri).path).rstrip("/").rsplit("/", 1)[-1]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["file_name"] = self.file_name
        out["matched"] = self.matched
        out["matched_terms"] = list(self.matched_terms)
        out["passage"] = self.passage
        out["context"]["parent"]["truncated"] = self.context.parent.truncated
        return out


@dataclass
class SearchResponse:
    """Hits plus what a caller (the CLI, a measurement) wants to know about how they were found."""

    query: str
    k: int
    mode: str
    model_id: str
    hits: list[SearchHit]
    notes: list[str] = field(default_factory=list)
    embed_ms: float = 0.0
    search_ms: float = 0.0
    pool_scanned: int = 0
    """How many nearest vectors the dense signal read for the pool."""
    search: str = "dense"
    lexemes: tuple[str, ...] = ()
    """The query's lexemes under the index's text search configuration."""
    context: PackedContext | None = None
    """With a token budget: the spans given to the reader (`context_budget`)."""
    published_seq: int | None = None
    """The newest publication (`seams.publications.seq`) the answer's snapshot saw: every hit
    comes from the corpus as published at it; None when nothing is published yet."""
    collections: tuple[str, ...] | None = None
    """The collections searched; None: every collection the connection may read."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "query": self.query,
            "k": self.k,
            "search": self.search,
            "mode": self.mode,
            "model_id": self.model_id,
            "lexemes": list(self.lexemes),
            "published_seq": self.published_seq,
            "collections": None if self.collections is None else list(self.collections),
            "notes": self.notes,
            "embed_ms": round(self.embed_ms, 3),
            "search_ms": round(self.search_ms, 3),
            "hits": [h.to_dict() for h in self.hits],
        }
        if self.context is not None:
            out["budget"] = self.context.budget
            out["tokens"] = self.context.tokens
            out["spans"] = [asdict(span) for span in self.context.spans]
            out["left_out"] = [asdict(x) for x in self.context.left_out]
            out["ranked"] = self.context.offered
        return out
