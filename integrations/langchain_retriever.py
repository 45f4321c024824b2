"""`SeamsRetriever`: the Seams index as a LangChain `BaseRetriever`.

Install with `pip install "seams-chunking[langchain]"`. It returns `seams search`'s hits, in its
order: one `Document` per hit (`page_content` the chunk's text, `id` its chunk id, the scores, which
parts matched and the matched words in the metadata), or with a token `budget` one `Document` per
merged span (`seams.storage.search.context_budget`). Settings default to seams.yaml's `retrieval`:

    from seams.integrations.langchain_retriever import SeamsRetriever

    retriever = SeamsRetriever(k=5)                  # or SeamsRetriever(budget=1000)
    handbook = SeamsRetriever(collections=["handbook"])  # one collection's chunks
    docs = retriever.invoke("how do bees choose a new queen?")
"""

from __future__ import annotations

from typing import Any

from seams.errors import missing_extra

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra(__name__, "LangChain", "langchain", "langchain-core") from exc

from seams.integrations.retrieval import SeamsSearch, hit_metadata, span_metadata
from seams.settings import SeamsSettings

__all__ = ["SeamsRetriever"]

SEARCH_ARGUMENTS = ("k", "search", "lexical_weight", "sentence_weight", "budget", "collections")
"""The retriever's fields that are `SeamsSearch` arguments."""


class SeamsRetriever(BaseRetriever):
    """Top-`k` hits (or hits until `budget` tokens) of `seams search` as LangChain Documents.

    Unset fields take seams.yaml's values; `postgres` and `embedder` default to those `seams
    search` uses."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    k: int = 5
    search: str | None = None
    lexical_weight: float | None = None
    sentence_weight: float | None = None
    budget: int | None = None
    collections: list[str] | None = None
    """Only these collections' chunks (None: every collection the database user may read)."""
    settings: SeamsSettings | None = None
    postgres: Any = None
    embedder: Any = None
    _search: SeamsSearch = PrivateAttr()

    def model_post_init(self, context: Any) -> None:
        arguments = self.model_dump(include=set(SEARCH_ARGUMENTS))
        self._search = SeamsSearch.from_settings(
            self.settings, postgres=self.postgres, embedder=self.embedder, **arguments
        )

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        response = self._search.response(query)
        if response.context is None:
            return [
                Document(page_content=h.text, id=h.chunk_id, metadata=hit_metadata(h))
                for h in response.hits
            ]
        hits = {h.chunk_id: h for h in response.hits}
        return [
            Document(page_content=s.text, metadata=span_metadata(s, hits))
            for s in response.context.spans
        ]
