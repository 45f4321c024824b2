"""`SeamsNodeParser`: Seams' semantic chunking as a LlamaIndex `NodeParser`.

Install with `pip install "seams-chunking[llama-index]"`. Every `TextNode` it returns is one Seams
chunk: `id_` is the chunk id (stable across runs when the document's id is), `start_char_idx` /
`end_char_idx` are the chunk's exact offsets in the parsed document's text, SOURCE points at that
document and PREVIOUS/NEXT at the neighbouring chunks. Seams' fields (`CHUNK_METADATA_KEYS`) sit in
the metadata, hidden from the embedding and LLM views except `section`. It is a
`TransformComponent`, so it slots into an `IngestionPipeline`:

    from llama_index.core.ingestion import IngestionPipeline
    from seams.integrations.llama_index import SeamsNodeParser

    pipeline = IngestionPipeline(transformations=[SeamsNodeParser("default")])
    nodes = pipeline.run(documents=documents)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from seams.errors import missing_extra

try:
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.node_parser import NodeParser
    from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship, TextNode
    from llama_index.core.utils import get_tqdm_iterable
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra(__name__, "LlamaIndex", "llama-index", "llama-index-core") from exc

from seams.chunking import ChunkingConfig
from seams.integrations.chunker import (
    CHUNK_METADATA_KEYS,
    PACKAGED_MODEL,
    AdapterChunker,
    chunk_metadata,
    document_id_of,
)

__all__ = ["SeamsNodeParser"]

#: Seams' bookkeeping is for filtering and tracing, not for the embedding or the LLM to read.
HIDDEN_KEYS = tuple(key for key in CHUNK_METADATA_KEYS if key != "section")


class SeamsNodeParser(NodeParser):
    """A LlamaIndex `NodeParser` backed by `seams.chunk_text`.

    `config`: a preset name ("default", "technical_docs", "narrative", "fast") or a
    `ChunkingConfig`. `embedder`: `seams.OnnxEmbedder()` (the default, `PACKAGED_MODEL`;
    `StaticEmbedder` for a config whose `boundary_model` is "static"), any embedder `chunk_text`
    accepts, or None for lexical boundaries. Node ids are chunk ids, so `id_func` is not used.

    A document's chunk ids are namespaced by `metadata["document_id"]` when set, else by its
    `id_`: give documents stable ids (e.g. `SimpleDirectoryReader(filename_as_id=True)`) and the
    node ids stay the same across runs.
    """

    config: ChunkingConfig = Field(
        default_factory=ChunkingConfig, description="Seams chunking settings (sizes, boundaries)."
    )
    embedder_id: str = Field(
        default="",
        description="The embedder's type and model_id: part of IngestionPipeline cache keys.",
    )
    _seams: AdapterChunker = PrivateAttr()

    def __init__(
        self,
        config: ChunkingConfig | str | Mapping[str, Any] = "default",
        *,
        embedder: Any = PACKAGED_MODEL,
        **kwargs: Any,
    ) -> None:
        if isinstance(config, Mapping):  # from `to_dict()` / a serialized pipeline
            config = ChunkingConfig.model_validate(dict(config))
        kwargs.pop("embedder_id", None)  # derived from `embedder`, never taken on trust
        if not callable(kwargs.get("id_func", len)):
            kwargs.pop("id_func")  # to_dict() writes its name; node ids are chunk ids anyway
        seams = AdapterChunker(config, embedder)
        super().__init__(config=seams.config, embedder_id=seams.label, **kwargs)
        self._seams = seams

    @classmethod
    def from_defaults(
        cls,
        config: ChunkingConfig | str = "default",
        embedder: Any = PACKAGED_MODEL,
        **kwargs: Any,
    ) -> SeamsNodeParser:
        """LlamaIndex's usual constructor spelling."""
        return cls(config, embedder=embedder, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "SeamsNodeParser"

    @property
    def embedder(self) -> Any:
        return self._seams.embedder

    def _parse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        parsed: list[BaseNode] = []
        for node in get_tqdm_iterable(nodes, show_progress, "Chunking with Seams"):
            parsed.extend(self._chunk_node(node))
        return parsed

    def _chunk_node(self, node: BaseNode) -> list[TextNode]:
        """One TextNode per chunk, complete: offsets, metadata, SOURCE and PREVIOUS/NEXT."""
        text = node.get_content(metadata_mode=MetadataMode.NONE)
        document_id = document_id_of(text, node.metadata, node.node_id)
        # As LlamaIndex's own parsers: a document that came from elsewhere passes its source on.
        source = node.source_node or node.as_related_node_info()
        inherited = dict(node.metadata) if self.include_metadata else {}
        hidden_embed = list(dict.fromkeys([*node.excluded_embed_metadata_keys, *HIDDEN_KEYS]))
        hidden_llm = list(dict.fromkeys([*node.excluded_llm_metadata_keys, *HIDDEN_KEYS]))
        chunks = [
            TextNode(
                id_=chunk.chunk_id,
                text=chunk.text,
                start_char_idx=chunk.start_char,
                end_char_idx=chunk.end_char,
                metadata={**inherited, **chunk_metadata(chunk)},
                excluded_embed_metadata_keys=hidden_embed,
                excluded_llm_metadata_keys=hidden_llm,
                metadata_separator=node.metadata_separator,
                metadata_template=node.metadata_template,
                text_template=node.text_template,
                relationships={NodeRelationship.SOURCE: source},
            )
            for chunk in self._seams.chunk(text, document_id)
        ]
        if self.include_prev_next_rel:
            related = [chunk.as_related_node_info() for chunk in chunks]  # one hash per node
            for index, chunk in enumerate(chunks):
                if index > 0:
                    chunk.relationships[NodeRelationship.PREVIOUS] = related[index - 1]
                if index + 1 < len(chunks):
                    chunk.relationships[NodeRelationship.NEXT] = related[index + 1]
        return chunks

    def _postprocess_parsed_nodes(
        self, nodes: list[BaseNode], parent_doc_map: dict[str, Any]
    ) -> list[BaseNode]:
        """Nothing left to do: `_chunk_node` already set what the base pass would (SOURCE,
        PREVIOUS/NEXT, the parent's metadata). The base pass would also re-find each node's text
        in its document with `str.find`, which can pick an earlier copy of repeated text, while
        Seams knows the offsets; and it hashes every node twice (about 80 % of the parser's own
        cost on 10k words with the `fast` preset)."""
        return nodes
