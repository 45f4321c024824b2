"""The embedders as plain classes: `OnnxEmbedder` and `StaticEmbedder` (contract names).

What a library user calls (`from seams import OnnxEmbedder`) and what the pipeline's Dagster
resources are made of: `seams.resources.OnnxEmbedderResource` is this class plus Dagster's
`ConfigurableResource`, with the same fields and methods. Nothing here imports Dagster, so
`chunk_text(..., embed=OnnxEmbedder())` works in an install without the pipeline.

`OnnxEmbedder` runs `seams.models.onnx_runtime` (sessions, windows, pooling) and adds
configuration, the model folder (the packaged all-MiniLM-L6-v2 export of the data dir by default,
or any sentence-transformers model: `seams.models.model_export.load_model_folder`), its prompts,
provenance (`model_id`) and the chunker's token counter (`count_tokens`). `StaticEmbedder` has
the same interface over `seams.models.static_runtime` (numpy lookups over MiniLM's tokenizer,
far cheaper); with the packaged model both count tokens with MiniLM's tokenizer, so their
`count_tokens` agree.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal, Self

import numpy as np
from pydantic import BaseModel, Field

from seams.chunking.tokens import TokenizerCounter, shared_token_counter
from seams.errors import ConfigError, EmbeddingError
from seams.models.inputs import check_texts
from seams.models.known_models import embedder_for, model_folder_kind
from seams.models.model_export import load_model_folder, source_fingerprint
from seams.models.model_store import (
    MODEL_NAME,
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
    """Sentence embeddings for Seams (contract): `embed(texts) -> (n, dims) float32` unit rows.

    By default the packaged all-MiniLM-L6-v2 (384 dims). `model_dir` may name any
    sentence-transformers folder (exported to ONNX once, with the `export` extra) or a folder
    with its own `model.onnx` + `tokenizer.json`; window, pooling, Dense layers, normalisation,
    special tokens and prompts are read from it. `embed` reads texts as documents (the model's
    document prompt), `embed_queries` as queries (its query prompt).

    Matches sentence-transformers' `encode` (cosine >= 0.999 for fp32) for texts within the
    window. An empty string embeds as the model's special tokens alone ([CLS] [SEP] for MiniLM),
    a fixed, valid unit vector (as in sentence-transformers). Results are deterministic for the
    same call; the same text batched with different neighbours can differ in the last float
    bits (padding changes the shapes onnxruntime multiplies), never beyond cosine 0.99999.
    """

    model_dir: str | None = Field(
        default=None,
        description="Model folder: a Seams export, a sentence-transformers folder or a folder "
        "with model.onnx + tokenizer.json; default $SEAMS_DATA_DIR/models/all-MiniLM-L6-v2.",
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
    max_tokens: int | None = Field(
        default=None,
        description="Window incl. special tokens; default the model's max_seq_length (256 for "
        "MiniLM), at most its position count.",
    )
    query_prompt: str | None = Field(
        default=None,
        description="Text put before each query; default the model's stored query prompt.",
    )
    document_prompt: str | None = Field(
        default=None,
        description="Text put before each document/chunk; default the model's stored one.",
    )
    models_dir: str | None = Field(
        default=None,
        description="Where sentence-transformers folders are exported to (and the models that "
        "built an index are remembered); default $SEAMS_DATA_DIR/models.",
    )

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed `texts` (documents, chunks, sentences) in order, each after the document
        prompt; InputError for non-str items, EmbeddingError on failure."""
        return self._embed(texts, "document")

    __call__ = embed

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """Embed search queries in order, each after the model's query prompt (e5's "query: ",
        an instruction), so they meet the documents `embed` indexed."""
        return self._embed(texts, "query")

    def resolved_query_prompt(self, manifest: ModelManifest | None = None) -> str:
        """`query_prompt`, else the prompt the model stores for queries."""
        if self.query_prompt is not None:
            return self.query_prompt
        return (manifest or self.manifest).recipe.query_prompt()

    def resolved_document_prompt(self, manifest: ModelManifest | None = None) -> str:
        """`document_prompt`, else the prompt the model stores for documents."""
        if self.document_prompt is not None:
            return self.document_prompt
        return (manifest or self.manifest).recipe.document_prompt()

    @property
    def window_tokens(self) -> int:
        """The window texts are embedded in: `max_tokens`, else the model's `max_seq_length`."""
        return self.max_tokens if self.max_tokens is not None else self.manifest.max_tokens

    def _embed(self, texts: list[str], role: Literal["query", "document"]) -> np.ndarray:
        check_texts(texts)
        runtime, manifest = self._load()
        prompt = (
            self.resolved_query_prompt(manifest)
            if role == "query"
            else self.resolved_document_prompt(manifest)
        )
        return runtime.embed(
            texts,
            batch_size=self.batch_size,
            max_tokens=self.max_tokens if self.max_tokens is not None else manifest.max_tokens,
            long_text=self.long_text,
            prompt=prompt,
        )

    @property
    def count_tokens(self) -> CheckedCounter:
        """The chunker's token counter for this model (the `Embedder` protocol): word pieces per
        text without [CLS]/[SEP] (the chunker's `tokens` size unit), memoised per word, named
        after the sha256 of `tokenizer.json` so chunk provenance says which
        tokenizer sized it. Only the tokenizer is verified: a broken ONNX graph must not stop
        segmentation (the embedding step then falls back to lexical boundaries)."""
        directory = self.resolved_model_dir()
        if (directory / "manifest.json").is_file():
            manifest = load_manifest(directory, verify=False)
            verify_file(manifest.tokenizer_path, manifest.tokenizer_sha256)
        else:
            manifest = self.manifest
        return CheckedCounter(shared_token_counter(manifest.tokenizer_path))

    def for_model(self, model_id: str) -> Self:
        """An embedder whose vectors carry `model_id` (what a chunk index records), so a query
        is embedded by the model that built the index: this one, another exported variant of
        its folder, a model that built an index before (remembered in `models_dir`), or the
        packaged model. See `seams.models.known_models.embedder_for`."""
        return embedder_for(model_id, self)  # type: ignore[return-value]

    def with_changes(self, **changes: Any) -> Self:
        """A copy with some fields changed, built through the constructor (so a Dagster
        resource subclass stays a valid resource)."""
        fields = {name: getattr(self, name) for name in OnnxEmbedder.model_fields}
        return type(self)(**{**fields, **changes})

    @property
    def model_id(self) -> str:
        """What makes this embedder's vectors, for provenance and embedding-cache keys: the
        sha256 of the ONNX graph it runs (the packaged model's id, unchanged), combined with the
        pooling, steps, window and document prompt for any model with another recipe or a
        document prompt."""
        return self._model_id(self.manifest, self.variant)

    def _model_id(self, manifest: ModelManifest, variant: str) -> str:
        graph = manifest.variant(variant).sha256
        prompt = self.resolved_document_prompt(manifest)
        if manifest.recipe.is_default and not prompt:
            return graph
        recipe = manifest.recipe.fingerprint(prompt)
        window = self.max_tokens if self.max_tokens is not None else manifest.max_tokens
        return hashlib.sha256(f"{graph}/{recipe}/{window}".encode()).hexdigest()

    @property
    def manifest(self) -> ModelManifest:
        if self.model_dir is None and self.models_dir is None:
            return load_manifest(default_model_dir())
        return load_model_folder(self.resolved_model_dir(), models_dir=self.resolved_models_dir())

    @property
    def dims(self) -> int:
        return self.manifest.dims

    @property
    def providers(self) -> list[str]:
        """Execution providers in use, e.g. ['CPUExecutionProvider']."""
        return self._load()[0].providers

    def resolved_model_dir(self) -> Path:
        if self.model_dir:
            return Path(self.model_dir).expanduser()
        if self.models_dir:
            return Path(self.models_dir).expanduser() / MODEL_NAME
        return default_model_dir()

    def resolved_models_dir(self) -> Path:
        """Where a sentence-transformers folder is exported to and indexed models are
        remembered: `models_dir`, else the data dir's `models`."""
        if self.models_dir:
            return Path(self.models_dir).expanduser()
        return default_model_dir().parent

    def runtime(self) -> EmbeddingRuntime:
        """The loaded session + tokenizer behind this embedder (for late chunking)."""
        return self._load()[0]

    def _load(self) -> tuple[EmbeddingRuntime, ModelManifest]:
        self._check_config()
        manifest = self.manifest
        runtime = load_runtime(
            manifest.variant_path(self.variant),
            manifest.tokenizer_path,
            intra_op_threads=self.intra_op_threads,
            dims=manifest.dims,
            recipe=manifest.recipe,
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
        if self.max_tokens is not None:
            limit = self._max_positions() if self.max_tokens > MAX_POSITIONS else MAX_POSITIONS
            if not SPECIAL_TOKENS < self.max_tokens <= limit:
                raise ConfigError(
                    f"OnnxEmbedder.max_tokens must be in 3..{limit} (the model's positions), "
                    f"got {self.max_tokens}"
                )

    def _max_positions(self) -> int:
        """The positions the model has (512 for MiniLM, and where no model can be read)."""
        try:
            return self.manifest.recipe.max_positions
        except (ConfigError, EmbeddingError):
            return MAX_POSITIONS


class StaticEmbedder(BaseModel):
    """Static sentence embeddings for boundary detection (contract): `embed(texts) -> (n, 256)`
    float32 unit rows, `count_tokens`, `model_id` -- the interface of `OnnxEmbedder`.

    Far cheaper than the transformer (a lookup and a mean per text, no network to run) and
    deterministic: a text's vector does not depend on what it is
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
        """sha256 of `embeddings.npy`: for chunk provenance and embedding-cache keys."""
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


def model_identity(
    folder: Path, *, document_prompt: str | None, variant: str = "fp32", **options: Any
) -> str:
    """What makes the vectors of the model in `folder` with `document_prompt` (None: the
    folder's own), as a hex digest, without exporting or running it: the embedder's `model_id`
    for a folder that holds its graph; for a sentence-transformers folder not exported yet, a
    hash of its files (weights, tokenizer, pooling, prompts) and the prompt override. Changes
    whenever the vectors would, and is the same in every process for the same files."""
    kind = model_folder_kind(folder)
    if kind != "sentence-transformers":
        embedder = OnnxEmbedder(
            model_dir=str(folder), variant=variant, document_prompt=document_prompt, **options
        )
        try:
            return embedder.model_id
        except EmbeddingError as exc:
            raise ConfigError(str(exc)) from None
    window = options.get("max_tokens")
    described = f"st:{source_fingerprint(folder)}/{document_prompt!r}/{window!r}"
    return hashlib.sha256(described.encode("utf-8")).hexdigest()
