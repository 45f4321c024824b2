"""What both adapters share: settings resolved once, one `chunk_text` call, one metadata layout.

The adapters are thin on purpose. Each chunk comes from `seams.chunk_text` with the same config,
embedder and token counter a direct call would use, so an adapter's chunk ids and offsets are
exactly `chunk_text`'s (the tests compare them). This module imports neither LangChain nor
LlamaIndex, and the embedders only when the packaged default is asked for.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from typing import Any, Final

from seams.chunking import Chunk, ChunkingConfig, chunk_text
from seams.errors import ConfigError


class DefaultEmbedder(enum.Enum):
    """Sentinel type: "use the packaged model", as opposed to None (no model: lexical cuts)."""

    PACKAGED_MODEL = "packaged_model"


PACKAGED_MODEL: Final = DefaultEmbedder.PACKAGED_MODEL
"""The default `embedder`: the packaged all-MiniLM-L6-v2 (`seams.OnnxEmbedder()`), or the
static model distilled from it (`seams.StaticEmbedder()`) when the config's `boundary_model` is
"static" (the `fast` preset). Both load from the data dir (`seams model export` makes them): a
library call is an entry point, so an embedder built without a folder resolves the process's
environment (`SeamsEnvironment.from_os()`) when it first needs the model."""

#: Keys every adapter writes into a chunk's metadata. Chunk-level values win over the input
#: document's metadata under the same key (a chunk's `start_char` is the chunk's, not the doc's).
CHUNK_METADATA_KEYS: Final = (
    "chunk_id",
    "document_id",
    "chunk_index",
    "total_chunks",
    "start_char",
    "end_char",
    "overlap_start",
    "overlap_end",
    "section",
    "boundary_reason",
    "boundary_method",
    "token_count",
)

#: The metadata keys read (in this order) to name a document when the caller gives no id.
DOCUMENT_ID_KEYS: Final = ("document_id", "source")


def resolve_config(config: ChunkingConfig | str) -> ChunkingConfig:
    """A `ChunkingConfig` as is, or a preset by name ("default", "technical_docs", ...)."""
    if isinstance(config, ChunkingConfig):
        return config
    if isinstance(config, str):
        return ChunkingConfig.preset(config)
    raise ConfigError(
        f"config: expected a preset name ({', '.join(ChunkingConfig.PRESETS)}) or a "
        f"ChunkingConfig, got {type(config).__name__}"
    )


def resolve_embedder(embedder: Any, config: ChunkingConfig) -> Any:
    """The embedder `chunk_text` gets: the packaged model for `PACKAGED_MODEL`, else as given
    (None means no model: lexical boundaries, `boundary_method="jaccard"`)."""
    if embedder is not PACKAGED_MODEL:
        return embedder
    if config.boundary_model == "static":
        from seams.models.embedders import StaticEmbedder

        return StaticEmbedder()
    from seams.models.embedders import OnnxEmbedder

    return OnnxEmbedder()


def embedder_label(embedder: Any) -> str:
    """What identifies the embedder in a cache key: its `model_id` (the weights' sha256) when it
    has one, else its type. Reading `model_id` also proves the packaged model is there, so a
    missing export fails when the adapter is built, with the `seams model export` hint."""
    if embedder is None:
        return "none"
    model_id = getattr(embedder, "model_id", None)
    kind = type(embedder).__qualname__
    return f"{kind}:{model_id}" if isinstance(model_id, str) else kind


def text_document_id(text: str) -> str:
    """A stable id for a text that came without one: its content hash."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def document_id_of(text: str, metadata: Mapping[str, Any], own_id: str | None = None) -> str:
    """The `document_id` chunk ids are namespaced by.

    In order: `metadata["document_id"]`, the document's own id (LangChain `Document.id`,
    LlamaIndex `id_`), `metadata["source"]` (set by LangChain's loaders), else the text's
    sha256. Give documents a stable id and their chunk ids stay the same across runs.
    """
    explicit = metadata.get(DOCUMENT_ID_KEYS[0])
    if isinstance(explicit, str) and explicit:
        return explicit
    if own_id:
        return own_id
    source = metadata.get(DOCUMENT_ID_KEYS[1])
    if isinstance(source, str) and source:
        return source
    return text_document_id(text)


def chunk_metadata(chunk: Chunk) -> dict[str, Any]:
    """The Seams metadata an adapter attaches to one chunk (keys: `CHUNK_METADATA_KEYS`)."""
    return {
        "chunk_id": chunk.chunk_id,
        "document_id": chunk.document_id,
        "chunk_index": chunk.chunk_index,
        "total_chunks": chunk.total_chunks,
        "start_char": chunk.start_char,
        "end_char": chunk.end_char,
        "overlap_start": chunk.overlap_start,
        "overlap_end": chunk.overlap_end,
        "section": chunk.section,
        "boundary_reason": chunk.metadata.get("boundary_reason", ""),
        "boundary_method": chunk.boundary_method,
        "token_count": chunk.token_count,
    }


class AdapterChunker:
    """One config and one embedder, fixed when an adapter is built.

    `config`: a preset name or a `ChunkingConfig`. `embedder`: anything `chunk_text` accepts as
    `embed` (`OnnxEmbedder`, `StaticEmbedder`, a callable), None for the lexical fallback, or
    `PACKAGED_MODEL` (default). `chunk_text` sizes chunks with the embedder's own counter
    (`count_tokens`), as the pipeline does.
    """

    def __init__(self, config: ChunkingConfig | str = "default", embedder: Any = PACKAGED_MODEL):
        self.config = resolve_config(config)
        self.embedder = resolve_embedder(embedder, self.config)
        self.label = embedder_label(self.embedder)

    def chunk(self, text: str, document_id: str) -> list[Chunk]:
        """`chunk_text` with this adapter's settings: the very chunks a direct call gives."""
        return chunk_text(
            text,
            document_id=document_id,
            config=self.config,
            embed=self.embedder,
        )
