"""Fixtures for the adapter, export and library-page tests: the real ONNX model, the bundled
sample corpus, and `chunk_text`'s own chunks of it (the reference every adapter must match)."""

from __future__ import annotations

import json
import shutil
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest

from seams.chunking import Chunk, ChunkingConfig, chunk_text
from seams.models.distill import DISTILL_PARAMS
from seams.models.model_store import (
    EMBEDDINGS_FILE,
    TOKENIZER_FILE,
    ModelManifest,
    StaticManifest,
    file_sha256,
)
from seams.resources.embedder import OnnxEmbedder

SAMPLE_CORPUS = Path(str(files("seams.orchestration") / "sample_corpus"))
"""The bundled sample corpus (package data, as `seams run` reads it)."""
SAMPLE_NAMES = sorted(p.name for p in SAMPLE_CORPUS.iterdir() if p.name != "README.md")
"""Its documents (the README only describes them)."""

LEXICAL = ChunkingConfig.preset("technical_docs")
"""The second setting the adapters are checked with: another preset, no model (lexical)."""


@pytest.fixture(scope="session")
def sample_texts() -> dict[str, str]:
    return {name: (SAMPLE_CORPUS / name).read_text(encoding="utf-8") for name in SAMPLE_NAMES}


@pytest.fixture(scope="session")
def onnx_embedder(exported_model: ModelManifest) -> OnnxEmbedder:
    """The packaged model as `OnnxEmbedder()` finds it (the session's data dir)."""
    return OnnxEmbedder()


@pytest.fixture(scope="session")
def reference_chunks(
    sample_texts: dict[str, str], onnx_embedder: OnnxEmbedder
) -> dict[str, list[Chunk]]:
    """`chunk_text` on each sample document, default settings, document_id = file name."""
    return {
        name: chunk_text(text, document_id=name, embed=onnx_embedder)
        for name, text in sample_texts.items()
    }


@pytest.fixture(scope="session")
def lexical_reference_chunks(sample_texts: dict[str, str]) -> dict[str, list[Chunk]]:
    """`chunk_text` with the `technical_docs` preset and no embedder (lexical boundaries)."""
    return {
        name: chunk_text(text, document_id=name, config=LEXICAL, embed=None)
        for name, text in sample_texts.items()
    }


def write_tiny_static_model(folder: Path, tokenizer_json: Path, dims: int = 16) -> None:
    """A static model folder in the distiller's format (random rows over MiniLM's vocabulary):
    real distillation takes minutes here, and a snippet only needs the model to load and run."""
    folder.mkdir(parents=True)
    shutil.copyfile(tokenizer_json, folder / TOKENIZER_FILE)
    vocab = json.loads(tokenizer_json.read_text(encoding="utf-8"))["model"]["vocab"]
    matrix = np.random.default_rng(7).standard_normal((len(vocab), dims)).astype(np.float16)
    np.save(folder / EMBEDDINGS_FILE, matrix, allow_pickle=False)
    files = {name: file_sha256(folder / name) for name in (EMBEDDINGS_FILE, TOKENIZER_FILE)}
    StaticManifest(
        directory=folder,
        model_id=files[EMBEDDINGS_FILE],
        dims=dims,
        vocab_size=len(vocab),
        source={"model": "test: random rows"},
        distill=dict(DISTILL_PARAMS),
        versions={},
        fidelity={},
        files=files,
    ).write()
