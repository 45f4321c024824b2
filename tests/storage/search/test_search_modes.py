"""`seams search` follows the index: whichever retrieval mode (and preset) built it, the query is
embedded and matched the same way, read back from the index's rows, and finds the right chunk."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import pytest

from seams.assets.partitions import document_batches
from seams.models.model_store import ModelManifest
from seams.orchestration import cli
from seams.orchestration.definitions import build_definitions
from seams.paths import sample_corpus
from seams.resources import database
from seams.settings import load_settings
from seams.storage.batches import register_batch, scan_inbox
from tests.support.instances import keep_environment

CASES = {  # seams.yaml, the mode the index is built in
    "pooled": ("retrieval: {mode: pooled}\n", "pooled"),
    "text": ("retrieval: {mode: text}\n", "text"),
    "late": ("retrieval: {mode: late}\n", "late"),
    # The fast preset cuts with the static model, whose vectors no query can match: its index
    # embeds chunk texts (`assets.retrieval.index_mode`), and search must follow.
    "fast": ("chunking: {preset: fast}\nretrieval: {mode: pooled}\n", "text"),
}
QUERIES = {
    "how a honey bee colony is organised around its queen": ("field_notes.md", "queen"),
    "why emulsions like mayonnaise hold oil and water together": ("kitchen_science.md", "emuls"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_seams_search_finds_the_right_chunk_in_every_mode(
    case: str,
    database_url: str,
    exported_model: ModelManifest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    text, mode = CASES[case]
    settings = tmp_path / "seams.yaml"
    settings.write_text(text, encoding="utf-8")
    keep_environment(monkeypatch)
    monkeypatch.setenv("SEAMS_CONFIG", str(settings))
    monkeypatch.setenv(database.URL_ENV, database_url)
    monkeypatch.delenv(database.DAGSTER_URL_ENV, raising=False)
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("field_notes.md", "kitchen_science.md"):
        shutil.copy(sample_corpus() / name, docs / name)
    _materialize(docs)
    for query, (source, word) in QUERIES.items():
        assert cli.main(["search", query, "-k", "1", "--json"]) == 0
        response = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert response["mode"] == mode and response["model_id"] == exported_model.model_id
        (hit,) = response["hits"]
        assert hit["source_uri"].endswith(source), (case, query, hit["text"][:80])
        assert word in hit["text"].lower(), (case, query, hit["text"][:80])


def _materialize(folder: Path) -> None:
    """Register `folder` as a batch and materialize it in-process with the definitions of the
    settings `SEAMS_CONFIG` names (what the code location would load)."""
    defs = build_definitions(load_settings())
    postgres = defs.resources["seams_postgres"]
    files, _ = scan_inbox(folder)
    postgres.ensure_schema()
    with postgres.connection() as conn:
        key = register_batch(conn, files, source="test")
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(document_batches.name, [key])
        job = defs.resolve_job_def("chunk_batches")
        assert job.execute_in_process(instance=instance, partition_key=key).success
