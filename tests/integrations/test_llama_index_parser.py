"""`SeamsNodeParser` on the bundled sample corpus, alone and inside an `IngestionPipeline`."""

from __future__ import annotations

import pytest
from llama_index.core import Document
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.schema import MetadataMode, NodeRelationship, TextNode
from llama_index.core.storage.docstore import SimpleDocumentStore

from seams.chunking import Chunk
from seams.integrations.llama_index import SeamsNodeParser
from seams.models.embedders import OnnxEmbedder
from tests.support.samples import LEXICAL


def _documents(texts: dict[str, str]) -> list[Document]:
    return [
        Document(text=text, id_=name, metadata={"file_name": name}) for name, text in texts.items()
    ]


def _assert_nodes_are_the_chunks(nodes: list[TextNode], chunks: list[Chunk], doc: Document) -> None:
    assert [n.id_ for n in nodes] == [c.chunk_id for c in chunks]
    assert [(n.start_char_idx, n.end_char_idx) for n in nodes] == [
        (c.start_char, c.end_char) for c in chunks
    ]
    for index, (node, chunk) in enumerate(zip(nodes, chunks, strict=True)):
        assert node.text == doc.text[node.start_char_idx : node.end_char_idx]
        assert node.metadata["file_name"] == doc.metadata["file_name"]
        assert node.metadata["section"] == chunk.section
        assert node.metadata["token_count"] == chunk.token_count
        assert node.metadata["boundary_reason"] == chunk.metadata["boundary_reason"]
        relations = node.relationships
        assert relations[NodeRelationship.SOURCE].node_id == doc.id_
        previous = relations.get(NodeRelationship.PREVIOUS)
        following = relations.get(NodeRelationship.NEXT)
        assert (previous.node_id if previous else None) == (
            chunks[index - 1].chunk_id if index > 0 else None
        )
        assert (following.node_id if following else None) == (
            chunks[index + 1].chunk_id if index + 1 < len(chunks) else None
        )


def _by_document(nodes: list) -> dict[str, list[TextNode]]:
    grouped: dict[str, list[TextNode]] = {}
    for node in nodes:
        grouped.setdefault(node.ref_doc_id, []).append(node)
    return grouped


def test_nodes_in_an_ingestion_pipeline_are_chunk_text_chunks(
    onnx_embedder: OnnxEmbedder, sample_texts: dict[str, str], reference_chunks: dict
) -> None:
    parser = SeamsNodeParser()  # the default preset and the packaged ONNX model
    assert isinstance(parser.embedder, OnnxEmbedder)
    documents = _documents(sample_texts)
    pipeline = IngestionPipeline(
        transformations=[parser],
        docstore=SimpleDocumentStore(),
        docstore_strategy=DocstoreStrategy.DUPLICATES_ONLY,
    )
    nodes = pipeline.run(documents=documents)
    assert all(isinstance(n, TextNode) for n in nodes)
    grouped = _by_document(nodes)
    assert sorted(grouped) == sorted(sample_texts)
    for doc in documents:
        _assert_nodes_are_the_chunks(grouped[doc.id_], reference_chunks[doc.id_], doc)
    # The docstore remembers the documents: running again ingests nothing twice.
    assert pipeline.run(documents=_documents(sample_texts)) == []


def test_seams_bookkeeping_stays_out_of_the_embedded_text(sample_texts: dict[str, str]) -> None:
    parser = SeamsNodeParser(LEXICAL, embedder=None)
    name = "platform_handbook.md"
    node = parser.get_nodes_from_documents(_documents({name: sample_texts[name]}))[0]
    embedded = node.get_content(metadata_mode=MetadataMode.EMBED)
    assert "file_name: platform_handbook.md" in embedded and "section:" in embedded
    assert node.metadata["chunk_id"] not in embedded and "start_char" not in embedded


def test_another_preset_without_a_model_matches_lexical_chunk_text(
    sample_texts: dict[str, str], lexical_reference_chunks: dict
) -> None:
    parser = SeamsNodeParser.from_defaults("technical_docs", embedder=None)
    assert parser.config == LEXICAL and parser.embedder_id == "none"
    documents = _documents(sample_texts)
    grouped = _by_document(parser(documents))
    for doc in documents:
        _assert_nodes_are_the_chunks(grouped[doc.id_], lexical_reference_chunks[doc.id_], doc)


def test_the_parser_round_trips_through_to_dict_and_keys_caches_by_settings(
    onnx_embedder: OnnxEmbedder,
) -> None:
    parser = SeamsNodeParser("narrative", embedder=None)
    again = SeamsNodeParser.from_dict(parser.to_dict())
    assert again.config == parser.config
    with_model = SeamsNodeParser("narrative", embedder=onnx_embedder)
    assert with_model.embedder_id.endswith(onnx_embedder.model_id)
    assert with_model.to_dict() != parser.to_dict()  # IngestionPipeline caches key on this


def test_a_document_id_in_metadata_names_the_chunks(
    sample_texts: dict[str, str], lexical_reference_chunks: dict
) -> None:
    name = "city_notes.txt"
    parser = SeamsNodeParser(LEXICAL, embedder=None)
    document = Document(text=sample_texts[name], metadata={"document_id": name})  # random id_
    nodes = parser.get_nodes_from_documents([document])
    assert [n.id_ for n in nodes] == [c.chunk_id for c in lexical_reference_chunks[name]]


def test_bad_settings_say_what_to_do() -> None:
    with pytest.raises(Exception, match="unknown preset 'tiny'"):
        SeamsNodeParser("tiny", embedder=None)
