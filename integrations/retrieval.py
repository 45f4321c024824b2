"""What the framework retrievers share: `seams search` as a callable, with the same defaults.

`SeamsSearch` holds the database, the query embedder and the search settings (seams.yaml's
`retrieval` section unless given), and returns exactly the `SearchResponse` that `seams search`
prints, so a LangChain or LlamaIndex retriever built on it returns `seams search`'s hits, in its
order, with its scores, all read from one published state of the corpus (a backfill or run
being written meanwhile is never seen half-way). No framework is imported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from seams.environment import SeamsEnvironment
from seams.settings import SeamsSettings, load_settings
from seams.storage.connections import ConnectionSource
from seams.storage.search import (
    LEXICAL_WEIGHT,
    SENTENCE_WEIGHT,
    ContextSpan,
    QueryEmbedder,
    SearchHit,
    SearchKind,
    SearchResponse,
)
from seams.storage.search import search_response as _search_response
from seams.storage.search.query import known_collections


@dataclass
class SeamsSearch:
    """`seams search` with fixed arguments: `k` hits, or hits until `budget` tokens are full."""

    postgres: ConnectionSource
    embedder: QueryEmbedder
    k: int = 5
    search: SearchKind = "hybrid"
    lexical_weight: float = LEXICAL_WEIGHT
    sentence_weight: float = SENTENCE_WEIGHT
    budget: int | None = None
    collections: tuple[str, ...] | None = None
    """Only these collections' chunks (None: every collection the database user may read)."""

    @classmethod
    def from_settings(
        cls,
        settings: SeamsSettings | None = None,
        *,
        postgres: ConnectionSource | None = None,
        embedder: QueryEmbedder | None = None,
        environment: SeamsEnvironment | None = None,
        collections: Sequence[str] | None = None,
        **overrides: Any,
    ) -> SeamsSearch:
        """Defaults from `settings` (seams.yaml when None) and the database `seams search` uses
        (`SEAMS_DATABASE_URL`, else the embedded server); `overrides` set k, search, budget...
        (one given as None keeps the default).

        `collections`: only those collections' chunks, names the settings declare (an unknown
        one is an `InputError` naming the known ones); with one, that collection's own
        `retrieval` settings are the defaults, as `seams search --collection` takes them.

        A library entry point: `environment` (where seams.yaml, the data and the model are)
        defaults to this process's, resolved once here and passed to everything built."""
        environment = environment or SeamsEnvironment.from_os()
        settings = settings or load_settings(environment=environment)
        if postgres is None:
            from seams.resources.postgres import PostgresResource

            postgres = PostgresResource.for_environment(environment)
        if embedder is None:  # the retrieval model with retrieval's prompts, as the index has
            from seams.resources.embedder import OnnxEmbedderResource, PipelineModels

            packaged = OnnxEmbedderResource.for_environment(environment, settings.embedder)
            embedder = PipelineModels.of(settings, environment).retrieval_resource(packaged)
        per_collection = settings.collection_settings()
        names = None
        if collections is not None:
            names = known_collections(
                collections,
                per_collection,
                option="collections",
                stored=lambda: _stored(postgres),
            )
        own = per_collection.get(names[0]) if names and len(names) == 1 else None
        retrieval = (own or settings).retrieval
        defaults: dict[str, Any] = {
            "search": retrieval.search,
            "lexical_weight": retrieval.lexical_weight,
            "sentence_weight": retrieval.sentence_weight,
        }
        given = {name: value for name, value in overrides.items() if value is not None}
        return cls(postgres, embedder, **{**defaults, **given, "collections": names})

    def response(self, query: str) -> SearchResponse:
        return _search_response(
            self.postgres,
            self.embedder,
            query,
            self.k,
            search=self.search,
            lexical_weight=self.lexical_weight,
            sentence_weight=self.sentence_weight,
            budget=self.budget,
            collections=self.collections,
        )


def hit_metadata(hit: SearchHit) -> dict[str, Any]:
    """A hit's fields for a framework document's metadata (flat, JSON-friendly).

    `published_seq` is the publication the answer read (`seams.publications.seq`) and
    `generation` the build of the hit's batch published then: every document of one answer
    carries the same `published_seq`."""
    return {
        "chunk_id": hit.chunk_id,
        "document_id": hit.document_id,
        "batch_key": hit.batch_key,
        "collection": hit.collection,
        "source_uri": hit.source_uri,
        "file_name": hit.file_name,
        "title": hit.title,
        "section": hit.section,
        "chunk_index": hit.chunk_index,
        "total_chunks": hit.total_chunks,
        "start_char": hit.start_char,
        "end_char": hit.end_char,
        "passage_start": hit.passage_start,
        "passage_end": hit.passage_end,
        "rank": hit.rank,
        "score": hit.score,
        "dense_score": hit.dense_score,
        "lexical_score": hit.lexical_score,
        "matched": hit.matched,
        "matched_terms": list(hit.matched_terms),
        "generation": hit.generation,
        "published_seq": hit.published_seq,
    }


def span_metadata(span: ContextSpan, hits: dict[str, SearchHit]) -> dict[str, Any]:
    """A budget span's fields: where it lies, its tokens and the hits (ranks, chunk ids) in it."""
    first = hits[span.chunk_ids[span.ranks.index(span.best_rank)]]
    return {
        "document_id": span.document_id,
        "batch_key": span.batch_key,
        "collection": first.collection,
        "source_uri": first.source_uri,
        "file_name": first.file_name,
        "start_char": span.start_char,
        "end_char": span.end_char,
        "tokens": span.tokens,
        "ranks": list(span.ranks),
        "chunk_ids": list(span.chunk_ids),
        "rank": span.best_rank,
        "score": first.score,
        "published_seq": first.published_seq,
    }


def _stored(postgres: ConnectionSource) -> list[str]:
    """The collections the data holds (one the settings dropped may still be searched)."""
    from seams.storage.batches import stored_collections

    with postgres.connection() as conn:
        return stored_collections(conn)
