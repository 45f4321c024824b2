"""A straight graph: each per-batch asset reads only its direct upstream, and the rows it passes
on rebuild exactly what later steps used to read from earlier tables (same chunks as the library,
in every embedding window mode)."""

from __future__ import annotations

import itertools
from pathlib import Path

import dagster as dg
import pytest

from seams import OnnxEmbedder, chunk_text
from seams.assets.partitions import document_batches
from seams.models.model_store import ModelManifest
from seams.orchestration import runner
from seams.orchestration.definitions import build_definitions
from seams.settings import SeamsSettings
from tests.support.databases import extracted_documents, rows
from tests.support.samples import copy_samples

CHAIN = ["extracted_text", "sentence_candidates", "candidate_embeddings", "semantic_boundaries",
         "chunks"]  # fmt: skip
SAMPLES = ("field_notes.md", "platform_handbook.md")


def _settings(window_mode: str = "pooled", retrieval: str = "pooled") -> SeamsSettings:
    return SeamsSettings.model_validate(
        {"chunking": {"overrides": {"window_mode": window_mode}}, "retrieval": {"mode": retrieval}}
    )


def _upstream(defs: dg.Definitions) -> dict[str, set[str]]:
    graph = defs.resolve_asset_graph()
    return {
        key.to_user_string(): {p.to_user_string() for p in graph.get(key).parent_keys}
        for key in graph.get_all_asset_keys()
    }


@pytest.mark.parametrize("mode", ["text", "pooled", "late"])
def test_each_step_depends_only_on_the_one_before(mode: str) -> None:
    upstream = _upstream(build_definitions(_settings(retrieval=mode)))
    for before, after in itertools.pairwise(CHAIN):
        expected = {before, "embedding_model"} if after == "candidate_embeddings" else {before}
        assert upstream[after] == expected, after
    assert upstream["extracted_text"] == set()
    # The index reads the candidates' vectors or text only when its mode needs them.
    needs = {"text": {"chunks"}, "pooled": {"chunks", "semantic_boundaries"}}
    assert upstream["chunk_index"] == needs.get(mode, {"chunks", "semantic_boundaries"})


def test_assets_carry_kinds_owners_tags_and_described_columns() -> None:
    graph = build_definitions(_settings()).resolve_asset_graph()
    for name in CHAIN:
        node = graph.get(dg.AssetKey(name))
        assert "postgres" in node.kinds and node.owners == ["team:seams"]
        assert node.tags["pipeline"] == "seams"
        schema = node.metadata["dagster/column_schema"]
        assert all(column.description for column in schema.columns), name
    assert "onnx" in graph.get(dg.AssetKey("candidate_embeddings")).kinds
    assert graph.get(dg.AssetKey("embedding_model")).kinds == {"onnx"}


@pytest.mark.parametrize("window_mode", ["pooled", "text"])
def test_chunks_from_carried_rows_equal_the_library(
    instance: dg.DagsterInstance,
    tmp_path: Path,
    database_url: str,
    exported_model: ModelManifest,
    window_mode: str,
) -> None:
    settings = _settings(window_mode)
    defs = build_definitions(settings)  # after `instance` chose this test's database
    inbox = copy_samples(tmp_path / "inbox", SAMPLES)
    keys = runner.register_path(inbox, print, defs=defs)
    instance.add_dynamic_partitions(document_batches.name, keys)
    result = defs.resolve_job_def(runner.JOB_NAME).execute_in_process(
        instance=instance, partition_key=keys[0], run_config=runner.QUIET
    )
    assert result.success

    documents = extracted_documents(database_url)
    stored = rows(
        database_url,
        "SELECT document_id, chunk_id, start_char, end_char, token_count, cohesion"
        " FROM seams.chunks ORDER BY document_id, chunk_index",
    )
    ((indexed,),) = rows(database_url, "SELECT count(*) FROM seams.chunk_index")
    config = settings.chunking_config()
    embedder = OnnxEmbedder()
    library = [
        (doc, c.chunk_id, c.start_char, c.end_char, c.token_count, c.cohesion)
        for doc, text in sorted(documents)
        for c in chunk_text(text, document_id=doc, config=config, embed=embedder)
    ]
    assert [row[:5] for row in stored] == [row[:5] for row in library]
    for (*_, mine), (*_, theirs) in zip(stored, library, strict=True):
        assert mine == pytest.approx(theirs, abs=1e-5)
    assert indexed == len(stored)


def test_the_in_sync_check_runs_inside_a_run(tmp_path: Path) -> None:
    """Backfills of the assets include their checks: in_sync must evaluate in any run."""
    from seams.orchestration.sync import SYNC_CHECK_KEYS

    only_checks = dg.define_asset_job("in_sync_only", dg.AssetSelection.checks(*SYNC_CHECK_KEYS))
    defs = dg.Definitions.merge(build_definitions(_settings()), dg.Definitions(jobs=[only_checks]))
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions(document_batches.name, ["b1"])
        result = defs.resolve_job_def("in_sync_only").execute_in_process(instance=instance)
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert {(e.asset_key.to_user_string(), e.passed) for e in evaluations} == {
        (key.asset_key.to_user_string(), True) for key in SYNC_CHECK_KEYS
    }
    assert all(e.metadata["batches"].value == 1 for e in evaluations)
