"""`SeamsLlamaIndexRetriever`: the Seams index as a LlamaIndex retriever.

Install with `pip install "seams-chunking[llama-index]"`. It returns `seams search`'s hits, in its
order, as `NodeWithScore`s: one `TextNode` per hit (`id_` the chunk id, `text` the chunk's text,
`start_char_idx`/`end_char_idx` its offsets in the source, the component scores, which parts
matched and the matched words in the metadata), or with a token `budget` one node per merged span
(`seams.storage.search.context_budget`). Settings default to seams.yaml's `retrieval`:

    from seams.integrations.llama_index_retriever import SeamsLlamaIndexRetriever

    retriever = SeamsLlamaIndexRetriever(k=5)
    nodes = retriever.retrieve("how do bees choose a new queen?")
"""

from __future__ import annotations

from typing import Any

from seams.errors import missing_extra

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra(__name__, "LlamaIndex", "llama-index", "llama-index-core") from exc

from seams.integrations.retrieval import SeamsSearch, hit_metadata, span_metadata
from seams.settings import SeamsSettings

__all__ = ["SeamsLlamaIndexRetriever"]


class SeamsLlamaIndexRetriever(BaseRetriever):
    """Top-`k` hits (or hits until `budget` tokens) of `seams search` as LlamaIndex nodes.

    Arguments left None take seams.yaml's values; `postgres` and `embedder` default to those
    `seams search` uses; `collections` keeps only those collections' chunks (None: every
    collection the database user may read)."""

    def __init__(
        self,
        k: int = 5,
        *,
        search: str | None = None,
        lexical_weight: float | None = None,
        sentence_weight: float | None = None,
        budget: int | None = None,
        collections: list[str] | None = None,
        settings: SeamsSettings | None = None,
        postgres: Any = None,
        embedder: Any = None,
        **kwargs: Any,
    ) -> None:
        self._search = SeamsSearch.from_settings(
            settings,
            postgres=postgres,
            embedder=embedder,
            k=k,
            search=search,
            lexical_weight=lexical_weight,
            sentence_weight=sentence_weight,
            budget=budget,
            collections=collections,
        )
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        response = self._search.response(query_bundle.query_str)
        if response.context is None:
            nodes = [
                TextNode(
                    id_=h.chunk_id,
                    text=h.text,
                    metadata=hit_metadata(h),
                    start_char_idx=h.start_char,
                    end_char_idx=h.end_char,
                )
                for h in response.hits
            ]
            return [
                NodeWithScore(node=n, score=h.score)
                for n, h in zip(nodes, response.hits, strict=True)
            ]
        hits = {h.chunk_id: h for h in response.hits}
        out = []
        for span in response.context.spans:
            meta = span_metadata(span, hits)
            node = TextNode(
                text=span.text,
                metadata=meta,
                start_char_idx=span.start_char,
                end_char_idx=span.end_char,
            )
            out.append(NodeWithScore(node=node, score=meta["score"]))
        return out
