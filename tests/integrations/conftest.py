"""Fixtures for the adapter, export and library-page tests: the real ONNX model, the bundled
sample corpus, and `chunk_text`'s own chunks of it (the reference every adapter must match)."""

from __future__ import annotations

import pytest

from seams.chunking import Chunk, chunk_text
from seams.models.embedders import OnnxEmbedder
from seams.models.model_store import ModelManifest
from tests.support.samples import LEXICAL, SAMPLE_CORPUS, SAMPLE_NAMES


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
