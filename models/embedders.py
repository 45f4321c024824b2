"""The embedders as plain classes: `OnnxEmbedder` and `StaticEmbedder` (contract names).

What a library user calls (`from seams import OnnxEmbedder`) and what the pipeline's Dagster
resources are made of: `seams.resources.OnnxEmbedderResource` is this class plus Dagster's
`ConfigurableResource`, with the same fields and methods. Nothing here imports Dagster, so
`chunk_text(..., embed=OnnxEmbedder())` works in an install without the pipeline.

`OnnxEmbedder` runs `seams.models.onnx_runtime` (sessions, windows, pooling) and adds
configuration, the verified model folder of the data dir, lineage (`model_id`) and the chunker's
token counter (`count_tokens`). `StaticEmbedder` has the same interface over
`seams.models.static_runtime` (numpy lookups over MiniLM's tokenizer, far cheaper); both count
tokens with MiniLM's tokenizer, so their `count_tokens` agree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Self

import numpy as np
from pydantic import BaseModel, Field

from seams.chunking.tokens import TokenizerCounter, shared_token_counter
from seams.errors import ConfigError, EmbeddingError
from seams.models.inputs import check_texts
from seams.models.model_store import (
    ModelManifest,
    StaticManifest,
    default_model_dir,
    default_static_dir,
    load_manifest,
    load_static_manifest,
    verify_file,
)
from seams.models.onnx_runtime import (
    MAX_POSITIONS,
    SPECIAL_TOKENS,
    EmbeddingRuntime,
    load_runtime,
)
from seams.models.static_runtime import StaticRuntime, load_static_runtime


class CheckedCounter:
    """An embedder's token counter: the process-wide `TokenizerCounter` of its `tokenizer.json`
    behind the embedder's own input check, so a str or a non-str item is an `InputError` naming
    it (a bare counter would count a str's characters). Everything else (`name`, the word cache)
    is the shared counter's."""

    __slots__ = ("_counter",)

    def __init__(self, counter: TokenizerCounter) -> None:
        self._counter = counter

    def __call__(self, texts: list[str], /) -> list[int]:
        check_texts(texts)
        return self._counter(texts)

    def __getattr__(self, attribute: str) -> Any:
        if attribute == "_counter":  # not set yet (copy, pickle): never recurse
            raise AttributeError(attribute)
        return getattr(self._counter, attribute)


class OnnxEmbedder(BaseModel):
    """Sentence embeddings for Seams (contract): `embed(texts) -> (n, 384) float32` unit rows.

    Matches sentence-transformers' `encode` of all-MiniLM-L6-v2 (cosine >= 0.999 for fp32)
    for texts within `max_tokens`. An empty string embeds as [CLS] [SEP], a fixed, valid unit
    vector (as in sentence-transformers). Results are deterministic for the same call; the same
    text batched with different neighbours can differ in the last float bits (padding changes
    the shapes onnxruntime multiplies), never beyond cosine 0.99999.
    """

    model_dir: str | None = Field(
        default=None,
        description="Folder of an exported model; default $SEAMS_DATA_DIR/models/all-MiniLM-L6-v2.",
    )
    variant: Literal["fp32", "int8"] = Field(
        default="fp32", description="Which exported graph to run (int8 exists only if it passed)."
    )
    batch_size: int = Field(default=32, description="Inputs per onnxruntime call (>= 1).")
    intra_op_threads: int = Field(default=0, description="onnxruntime threads; 0 = its default.")
    long_text: Literal["mean_of_windows", "truncate"] = Field(
        default="mean_of_windows",
        description="Texts over max_tokens: mean of window embeddings, or truncate like ST.",
    )
    max_tokens: int = Field(default=256, description="Model window incl. [CLS]/[SEP] (3-512).")

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed `texts` in order; InputError for non-str items, EmbeddingError on failure."""
        check_texts(texts)
        runtime, _ = self._load()
        return runtime.embed(
            texts, batch_size=self.batch_size, max_tokens=self.max_tokens, long_text=self.long_text
        )

    __call__ = embed

    @property
    def count_tokens(self) -> CheckedCounter:
        """The chunker's token counter for this model (the `Embedder` protocol): word pieces per
        text without [CLS]/[SEP] (the chunker's `tokens` size unit), memoised per word (~6x
        faster on prose), named after the sha256 of `tokenizer.json` so chunk lineage says which
        tokenizer sized it. Only the tokenizer is verified: a broken ONNX graph must not stop
        segmentation (the embedding step then falls back to lexical boundaries)."""
        manifest = load_manifest(self.resolved_model_dir(), verify=False)
        verify_file(manifest.tokenizer_path, manifest.tokenizer_sha256)
        return CheckedCounter(shared_token_counter(manifest.tokenizer_path))

    def for_model(self, model_id: str) -> Self:
        """This embedder running the exported variant whose sha256 is `model_id` (what a chunk
        index records), so a query is embedded by the model that built the index."""
        if self.model_id == model_id:
            return self
        manifest = self.manifest
        for name, variant in manifest.variants.items():
            if variant.sha256 == model_id:
                return type(self)(
                    model_dir=self.model_dir,
                    variant=name,
                    batch_size=self.batch_size,
                    intra_op_threads=self.intra_op_threads,
                    long_text=self.long_text,
                    max_tokens=self.max_tokens,
                )
        raise EmbeddingError(
            f"the chunk index was built with model {model_id[:12]}, which is not among the "
            f"models exported in {manifest.directory} ({', '.join(sorted(manifest.variants))}): "
            f"run `seams backfill` to re-index with the current one ({self.model_id[:12]})"
        )

    @property
    def model_id(self) -> str:
        """sha256 of the ONNX graph this embedder runs: for lineage and embedding-cache keys."""
        manifest = self.manifest
        return manifest.variant(self.variant).sha256

    @property
    def manifest(self) -> ModelManifest:
        return load_manifest(self.resolved_model_dir())

    @property
    def dims(self) -> int:
        return self.manifest.dims

    @property
    def providers(self) -> list[str]:
        """Execution providers in use, e.g. ['CPUExecutionProvider']."""
        return self._load()[0].providers

    def resolved_model_dir(self) -> Path:
        return Path(self.model_dir).expanduser() if self.model_dir else default_model_dir()

    def runtime(self) -> EmbeddingRuntime:
        """The loaded session + tokenizer behind this embedder (for late chunking)."""
        return self._load()[0]

    def _load(self) -> tuple[EmbeddingRuntime, ModelManifest]:
        self._check_config()
        manifest = load_manifest(self.resolved_model_dir())
        runtime = load_runtime(
            manifest.variant_path(self.variant),
            manifest.tokenizer_path,
            intra_op_threads=self.intra_op_threads,
            dims=manifest.dims,
        )
        return runtime, manifest

    def _check_config(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"OnnxEmbedder.batch_size must be >= 1, got {self.batch_size}")
        if self.intra_op_threads < 0:
            raise ConfigError(
                f"OnnxEmbedder.intra_op_threads must be >= 0 (0 = onnxruntime default), "
                f"got {self.intra_op_threads}"
            )
        if not SPECIAL_TOKENS < self.max_tokens <= MAX_POSITIONS:
            raise ConfigError(
                f"OnnxEmbedder.max_tokens must be in 3..{MAX_POSITIONS}, got {self.max_tokens}"
            )


class StaticEmbedder(BaseModel):
    """Static sentence embeddings for boundary detection (contract): `embed(texts) -> (n, 256)`
    float32 unit rows, `count_tokens`, `model_id` -- the interface of `OnnxEmbedder`.

    Far cheaper than the transformer (a lookup and a mean per text, no network to run; figures
    on the benchmarks page) and deterministic: a text's vector does not depend on what it is
    batched with. Usable as `chunk_text(..., embed=StaticEmbedder())`
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

    @property
    def count_tokens(self) -> CheckedCounter:
        """The chunker's token counter (the `Embedder` protocol): word pieces per text without
        [CLS]/[SEP], MiniLM's tokenizer memoised per word; the same counter, and name, as
        `OnnxEmbedder.count_tokens`."""
        return CheckedCounter(shared_token_counter(self.manifest.tokenizer_path))

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
