"""`StaticEmbedder` (contract): the fast boundary model as a Dagster resource.

The interface of `OnnxEmbedder` over `seams.models.static_runtime` (numpy lookups over MiniLM's
tokenizer, ~100x cheaper than the transformer): `token_count` equals `OnnxEmbedder.token_count`,
since both count with MiniLM's tokenizer.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import numpy as np
from pydantic import Field

from seams.chunking.tokens import TokenizerCounter, shared_token_counter
from seams.models.inputs import check_texts
from seams.models.model_store import StaticManifest, default_static_dir, load_static_manifest
from seams.models.static_runtime import StaticRuntime, load_static_runtime


class StaticEmbedder(dg.ConfigurableResource):
    """Static sentence embeddings for boundary detection (contract): `embed(texts) -> (n, 256)`
    float32 unit rows, `token_count`, `model_id` -- the interface of `OnnxEmbedder`.

    ~100x cheaper than the transformer (design.md section 9) and deterministic: a text's vector
    does not depend on what it is batched with. Usable as `chunk_text(..., embed=StaticEmbedder())`
    and as the `candidate_embeddings` model when `ChunkingConfig.boundary_model == "static"`.
    """

    model_dir: str | None = Field(
        default=None,
        description="Folder of a distilled static model; default "
        "$SEAMS_DATA_DIR/models/all-MiniLM-L6-v2-static.",
    )

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed `texts` in order; InputError for non-str items, EmbeddingError on failure."""
        check_texts(texts)
        return self._runtime().embed(texts)

    __call__ = embed

    def token_count(self, texts: list[str]) -> list[int]:
        """Word pieces per text, without [CLS]/[SEP]: the chunker's `tokens` size unit."""
        check_texts(texts)
        return [len(ids) for ids in self._runtime().token_ids(texts)]

    @property
    def count_tokens(self) -> TokenizerCounter:
        """The chunker's token counter (the `Embedder` protocol): MiniLM's tokenizer, memoised
        per word; the same counter, and name, as `OnnxEmbedder.count_tokens`."""
        return shared_token_counter(self.manifest.tokenizer_path)

    @property
    def model_id(self) -> str:
        """sha256 of `embeddings.npy`: for lineage and embedding-cache keys."""
        return self.manifest.model_id

    @property
    def manifest(self) -> StaticManifest:
        return load_static_manifest(self.resolved_model_dir())

    @property
    def dims(self) -> int:
        return self.manifest.dims

    def resolved_model_dir(self) -> Path:
        return Path(self.model_dir).expanduser() if self.model_dir else default_static_dir()

    def _runtime(self) -> StaticRuntime:
        manifest = self.manifest
        return load_static_runtime(manifest.embeddings_path, manifest.tokenizer_path)
