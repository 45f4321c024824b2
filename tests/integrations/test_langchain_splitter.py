"""`SeamsTextSplitter` on the bundled sample corpus: the chunks `chunk_text` gives, as Documents."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document

from seams.chunking import Chunk, chunk_text
from seams.errors import ConfigError
from seams.integrations import CHUNK_METADATA_KEYS
from seams.integrations.chunker import text_document_id
from seams.integrations.langchain import SeamsTextSplitter
from seams.models.embedders import OnnxEmbedder
from tests.support.samples import LEXICAL


def _assert_same_chunks(docs: list[Document], chunks: list[Chunk], text: str) -> None:
    assert [d.id for d in docs] == [c.chunk_id for c in chunks]
    assert [d.metadata["chunk_id"] for d in docs] == [c.chunk_id for c in chunks]
    offsets = [(d.metadata["start_char"], d.metadata["end_char"]) for d in docs]
    assert offsets == [(c.start_char, c.end_char) for c in chunks]
    for doc, chunk in zip(docs, chunks, strict=True):
        assert doc.page_content == text[chunk.start_char : chunk.end_char]
        assert doc.metadata["section"] == chunk.section
        assert doc.metadata["boundary_reason"] == chunk.metadata["boundary_reason"]
        assert doc.metadata["boundary_method"] == chunk.boundary_method
        assert doc.metadata["token_count"] == chunk.token_count
        assert doc.metadata["chunk_index"] == chunk.chunk_index


@pytest.fixture(scope="module")
def splitter(onnx_embedder: OnnxEmbedder) -> SeamsTextSplitter:
    """Built with no arguments: the default preset and the packaged ONNX model."""
    made = SeamsTextSplitter()
    assert isinstance(made.embedder, OnnxEmbedder)
    return made


def test_split_documents_gives_chunk_texts_ids_and_offsets_and_keeps_metadata(
    splitter: SeamsTextSplitter, sample_texts: dict[str, str], reference_chunks: dict
) -> None:
    tags = {"tags": ["sample", "corpus"]}
    documents = [
        Document(page_content=text, metadata={"source": name, "lang": "en", "extra": tags})
        for name, text in sample_texts.items()
    ]
    out = splitter.split_documents(documents)
    assert len(out) == sum(len(c) for c in reference_chunks.values())
    by_source: dict[str, list[Document]] = {}
    for doc in out:
        by_source.setdefault(doc.metadata["source"], []).append(doc)
    for name, text in sample_texts.items():
        docs = by_source[name]
        _assert_same_chunks(docs, reference_chunks[name], text)
        for doc in docs:
            assert set(CHUNK_METADATA_KEYS) <= set(doc.metadata)
            assert doc.metadata["document_id"] == name
            assert doc.metadata["lang"] == "en" and doc.metadata["extra"] == tags
            assert doc.metadata["extra"] is not tags  # a copy: chunks never share mutable state
    assert splitter.transform_documents(documents[:1]) == splitter.split_documents(documents[:1])


def test_split_text_and_create_documents_match_chunk_text(
    splitter: SeamsTextSplitter,
    onnx_embedder: OnnxEmbedder,
    sample_texts: dict[str, str],
    reference_chunks: dict,
) -> None:
    name = "platform_handbook.md"
    text = sample_texts[name]
    assert splitter.split_text(text) == [c.text for c in reference_chunks[name]]
    # Without any id, chunk ids are namespaced by the text's sha256.
    anonymous = chunk_text(text, document_id=text_document_id(text), embed=onnx_embedder)
    docs = splitter.create_documents([text])
    _assert_same_chunks(docs, anonymous, text)
    # A Document's own id names it when its metadata does not.
    with_id = splitter.split_documents([Document(page_content=text, id="handbook-v1")])
    _assert_same_chunks(
        with_id, chunk_text(text, document_id="handbook-v1", embed=onnx_embedder), text
    )
    docs = splitter.create_documents([text], metadatas=[{"document_id": name, "team": "ops"}])
    _assert_same_chunks(docs, reference_chunks[name], text)
    assert {d.metadata["team"] for d in docs} == {"ops"}


def test_another_preset_without_a_model_matches_lexical_chunk_text(
    sample_texts: dict[str, str], lexical_reference_chunks: dict
) -> None:
    splitter = SeamsTextSplitter("technical_docs", embedder=None, add_start_index=True)
    assert splitter.config == LEXICAL
    for name, text in sample_texts.items():
        docs = splitter.split_documents([Document(page_content=text, metadata={"source": name})])
        _assert_same_chunks(docs, lexical_reference_chunks[name], text)
        assert {d.metadata["boundary_method"] for d in docs} == {"jaccard"}
        assert [d.metadata["start_index"] for d in docs] == [d.metadata["start_char"] for d in docs]


def test_empty_documents_give_no_chunks_and_bad_settings_say_what_to_do() -> None:
    splitter = SeamsTextSplitter(embedder=None)
    assert splitter.split_documents([Document(page_content="  \n ")]) == []
    with pytest.raises(ConfigError, match="unknown preset 'tiny'"):
        SeamsTextSplitter("tiny", embedder=None)
    with pytest.raises(ValueError, match="2 entries for 1 texts"):
        splitter.create_documents(["text"], metadatas=[{}, {}])
