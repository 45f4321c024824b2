"""The library and the pipeline are one algorithm: `chunk_text(embed=OnnxEmbedder())` gives the
chunks the pipeline stores, sized by the same counter, and the stored lineage names it."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from seams import OnnxEmbedder, chunk_text
from seams.models.model_store import ModelManifest
from seams.orchestration import runner
from seams.settings import load_settings
from tests.support.databases import extracted_documents, rows
from tests.support.samples import copy_samples

SAMPLES = ("field_notes.md", "history_of_maps.txt", "platform_handbook.md")


@pytest.mark.slow
def test_chunk_text_with_the_onnx_embedder_equals_the_pipeline(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    tmp_path: Path,
    database_url: str,
    exported_model: ModelManifest,
) -> None:
    inbox = copy_samples(tmp_path / "inbox", SAMPLES)
    keys = runner.register_path(inbox, print, defs=defs)
    runner.materialize_batches(instance, keys, print, runner.RunSummary(batches=keys), defs=defs)

    documents = extracted_documents(database_url)
    stored = rows(
        database_url,
        "SELECT document_id, chunk_id, start_char, end_char, token_count,"
        " metadata->>'token_counter', boundary_method"
        " FROM seams.chunks ORDER BY document_id, chunk_index",
    )
    assert len(documents) == len(SAMPLES)

    embedder = OnnxEmbedder()
    config = load_settings().chunking_config()
    library = [
        (
            document_id,
            c.chunk_id,
            c.start_char,
            c.end_char,
            c.token_count,
            c.metadata["token_counter"],
            c.boundary_method,
        )
        for document_id, text in sorted(documents)
        for c in chunk_text(text, document_id=document_id, config=config, embed=embedder)
    ]
    assert library == stored
    # Sized by the model's own tokenizer, and the lineage says so (not the heuristic).
    counter = embedder.count_tokens.name
    assert counter.startswith("tokenizer:")
    assert {row[5] for row in stored} == {counter}
    assert {row[6] for row in stored} == {"semantic"}
