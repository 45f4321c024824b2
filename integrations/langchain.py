"""`SeamsTextSplitter`: Seams' semantic chunking as a LangChain `TextSplitter`.

Install with `pip install "seams-chunking[langchain]"`. Every `Document` it returns is one Seams
chunk: `page_content == source[start_char:end_char]`, `Document.id` is the chunk id, and the
metadata holds Seams' fields (`CHUNK_METADATA_KEYS`: chunk_id, document_id, chunk_index,
total_chunks, start_char, end_char, overlap_start, overlap_end, section, boundary_reason,
boundary_method, token_count) on top of a copy of the input document's metadata.

    from seams.integrations.langchain import SeamsTextSplitter

    splitter = SeamsTextSplitter("technical_docs")   # the packaged ONNX model
    docs = splitter.split_documents(loader.load())
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

from seams.errors import missing_extra

try:
    from langchain_core.documents import Document
    from langchain_text_splitters import TextSplitter
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra(
        __name__, "LangChain", "langchain", "langchain-text-splitters and langchain-core"
    ) from exc

from seams.chunking import Chunk, ChunkingConfig
from seams.integrations.chunker import (
    PACKAGED_MODEL,
    AdapterChunker,
    chunk_metadata,
    document_id_of,
    text_document_id,
)

__all__ = ["SeamsTextSplitter"]


class SeamsTextSplitter(TextSplitter):
    """A LangChain `TextSplitter` backed by `seams.chunk_text`.

    `config`: a preset name ("default", "technical_docs", "narrative", "fast") or a
    `ChunkingConfig`; sizes come from it, not from LangChain's `chunk_size`/`chunk_overlap`.
    `embedder`: `seams.OnnxEmbedder()` (the default, `PACKAGED_MODEL`; `StaticEmbedder` for a
    config whose `boundary_model` is "static"), any embedder `chunk_text` accepts, or None for
    lexical boundaries. `add_start_index=True` also writes LangChain's `start_index` (equal to
    `start_char`).

    A document's chunk ids are namespaced by its id (`seams.integrations.chunker.document_id_of`:
    `metadata["document_id"]`, `Document.id`, `metadata["source"]`, else the text's sha256).
    """

    def __init__(
        self,
        config: ChunkingConfig | str = "default",
        *,
        embedder: Any = PACKAGED_MODEL,
        add_start_index: bool = False,
    ) -> None:
        self._seams = AdapterChunker(config, embedder)
        # LangChain's own size knobs are unused; record Seams' max so the attribute is honest.
        super().__init__(
            chunk_size=self._seams.config.chunk_size_max,
            chunk_overlap=0,
            add_start_index=add_start_index,
            strip_whitespace=False,
        )

    @property
    def config(self) -> ChunkingConfig:
        return self._seams.config

    @property
    def embedder(self) -> Any:
        return self._seams.embedder

    def split_text(self, text: str) -> list[str]:
        """The chunks' texts (exact slices of `text`); ids namespaced by the text's sha256."""
        return [chunk.text for chunk in self._seams.chunk(text, text_document_id(text))]

    def create_documents(
        self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None
    ) -> list[Document]:
        """One `Document` per chunk of each text, with a deep copy of that text's metadata."""
        if metadatas is not None and len(metadatas) != len(texts):
            raise ValueError(
                f"metadatas: {len(metadatas)} entries for {len(texts)} texts; give one per text"
            )
        documents: list[Document] = []
        for index, text in enumerate(texts):
            metadata = metadatas[index] if metadatas is not None else {}
            documents.extend(self._documents(text, metadata, document_id_of(text, metadata)))
        return documents

    def split_documents(self, documents: Iterable[Document]) -> list[Document]:
        """Chunk each document; every chunk keeps (a deep copy of) its document's metadata."""
        out: list[Document] = []
        for document in documents:
            text = document.page_content
            document_id = document_id_of(text, document.metadata, document.id)
            out.extend(self._documents(text, document.metadata, document_id))
        return out

    def transform_documents(self, documents: Sequence[Document], **kwargs: Any) -> list[Document]:
        """LangChain's `BaseDocumentTransformer` entry: the same as `split_documents`."""
        return self.split_documents(list(documents))

    def _documents(self, text: str, metadata: dict[Any, Any], document_id: str) -> list[Document]:
        return [
            Document(
                id=chunk.chunk_id,
                page_content=chunk.text,
                metadata=self._metadata(chunk, metadata),
            )
            for chunk in self._seams.chunk(text, document_id)
        ]

    def _metadata(self, chunk: Chunk, inherited: dict[Any, Any]) -> dict[Any, Any]:
        metadata = copy.deepcopy(inherited)
        metadata.update(chunk_metadata(chunk))
        if self._add_start_index:
            metadata["start_index"] = chunk.start_char
        return metadata
