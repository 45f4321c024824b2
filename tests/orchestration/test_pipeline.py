"""The pipeline against real PostgreSQL, a real ONNX model and a PostgreSQL-backed Dagster instance.

Each test gets a fresh database; the model is exported once per session into the isolated data
dir. Runs go through `orchestration.runner`, exactly as `seams run` / `seams backfill` do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from seams.assets.partitions import document_batches
from seams.chunking import ChunkingConfig
from seams.models.model_store import ModelManifest
from seams.orchestration import runner
from seams.orchestration.definitions import build_definitions
from seams.orchestration.sensors import build_inbox_sensor, build_seal_schedule, look_at_inbox
from seams.resources.postgres import PostgresResource
from seams.settings import InboxSettings, load_settings
from tests.support.databases import extracted_documents, rows
from tests.support.samples import copy_samples

SAMPLES = ("field_notes.md", "history_of_maps.txt")
SETTINGS = load_settings()
CONFIG = SETTINGS.chunking_config()
CHUNKS = build_definitions(SETTINGS).resolve_assets_def("chunks")
CHUNKS_CODE_VERSION = CHUNKS.code_versions_by_key[dg.AssetKey("chunks")]


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    return copy_samples(tmp_path / "inbox", SAMPLES)


def _run(instance: dg.DagsterInstance, path: Path, *, defs: dg.Definitions) -> runner.RunSummary:
    keys = runner.register_path(path, print, defs=defs)
    summary = runner.RunSummary(batches=keys)
    runner.materialize_batches(instance, keys, print, summary, defs=defs)
    return summary


CHUNK_SNAPSHOT = (
    "SELECT chunk_id, document_id, chunk_index, total_chunks, text, start_char, end_char,"
    " overlap_start, overlap_end, token_count, section, boundary_method, config_hash"
    " FROM seams.chunks ORDER BY batch_key, document_id, chunk_index"
)


def test_a_batch_materializes_end_to_end_with_provenance(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    inbox: Path,
    database_url: str,
    exported_model: ModelManifest,
) -> None:
    summary = _run(instance, inbox, defs=defs)
    assert len(summary.batches) == 1 and len(summary.run_ids) == 1
    (batch,) = summary.batches
    assert batch in instance.get_dynamic_partitions(document_batches.name)
    sources = dict(extracted_documents(database_url))
    assert len(sources) == len(SAMPLES)
    chunks = rows(
        database_url,
        "SELECT document_id, text, start_char, end_char, run_id, config_hash, model_id,"
        " source_sha256, code_version, boundary_method FROM seams.chunks",
    )
    assert len(chunks) >= 2 * len(SAMPLES)  # several topics per document
    for doc, text, start, end, run_id, config_hash, model_id, _sha, code_version, method in chunks:
        assert sources[doc][start:end] == text
        assert run_id == summary.run_ids[0]
        assert config_hash == CONFIG.fingerprint()
        assert model_id == exported_model.model_id
        assert code_version == CHUNKS_CODE_VERSION
        assert method == "semantic"
    file_hashes = {r[0] for r in rows(database_url, "SELECT source_sha256 FROM seams.chunks")}
    manifest = {r[0] for r in rows(database_url, "SELECT source_sha256 FROM seams.batch_documents")}
    assert file_hashes == manifest
    current = rows(database_url, "SELECT count(*) FROM seams.current_chunks")[0][0]
    assert current == len(chunks)
    # The blocking checks ran and passed.
    checks = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("chunks"), "nothing_lost"), limit=1
    )
    assert checks and checks[0].status.value == "SUCCEEDED"


def test_rerun_gives_byte_identical_chunks_from_the_cache(
    instance: dg.DagsterInstance, defs: dg.Definitions, inbox: Path, database_url: str
) -> None:
    first = _run(instance, inbox, defs=defs)
    before = rows(database_url, CHUNK_SNAPSHOT)
    again = runner.RunSummary(batches=first.batches)
    runner.materialize_batches(instance, first.batches, print, again, defs=defs)
    after = rows(database_url, CHUNK_SNAPSHOT)
    assert after == before  # same ids, same bytes, no duplicates
    assert again.texts_embedded == 0
    assert again.cache_hits == first.texts_embedded > 0


def test_registering_the_same_files_twice_makes_no_new_batch(
    instance: dg.DagsterInstance, defs: dg.Definitions, inbox: Path, database_url: str
) -> None:
    _run(instance, inbox, defs=defs)
    assert runner.register_path(inbox, print, defs=defs) == []
    (inbox / SAMPLES[0]).write_text("# Changed\n\nA new version of the notes.\n", encoding="utf-8")
    (new_batch,) = runner.register_path(inbox, print, defs=defs)
    versions = rows(
        database_url,
        "SELECT document_id, source_sha256 FROM seams.batch_documents WHERE batch_key = %s",
        new_batch,
    )
    assert len(versions) == 1  # only the changed file, as a new version of the same document


@pytest.mark.slow
def test_a_cut_cost_change_marks_boundaries_and_chunks_unsynced_and_backfill_uses_the_cache(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    inbox: Path,
    database_url: str,
    tmp_path: Path,
) -> None:
    (batch,) = _run(instance, inbox, defs=defs).batches
    before = rows(database_url, "SELECT is_boundary FROM seams.semantic_boundaries ORDER BY 1")
    assert runner.unsynced_assets(instance, [batch], defs=defs) == {batch: []}

    changed = CONFIG.cut_cost / 4  # cheaper cuts: more topic boundaries
    settings = tmp_path / "seams.yaml"
    settings.write_text(f"chunking:\n  overrides: {{cut_cost: {changed}}}\n", encoding="utf-8")
    env = {**os.environ, "SEAMS_CONFIG": str(settings)}
    probe = (
        "import json, dagster as dg; from seams.orchestration import runner;"
        "from seams.orchestration.definitions import build_definitions;"
        "from seams.settings import load_settings;"
        "i = dg.DagsterInstance.get(); d = build_definitions(load_settings());"
        f"print(json.dumps({{p: [k.to_user_string() for k in v] for p, v in "
        f"runner.unsynced_assets(i, [{batch!r}], defs=d).items()}}))"
    )
    stale = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300
    )
    assert stale.returncode == 0, stale.stderr[-3000:]
    assert json.loads(stale.stdout.strip().splitlines()[-1]) == {
        batch: ["semantic_boundaries", "chunks", "chunk_index"]
    }

    done = subprocess.run(
        [sys.executable, "-m", "seams", "backfill", "--json"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["batches"] == [batch]
    assert result["texts_embedded"] == 0  # candidate_embeddings was not even re-run
    new_hash = ChunkingConfig.preset("default", cut_cost=changed).fingerprint()
    hashes = {r[0] for r in rows(database_url, "SELECT DISTINCT config_hash FROM seams.chunks")}
    assert hashes == {new_hash}  # no stale rows left behind
    after = rows(database_url, "SELECT is_boundary FROM seams.semantic_boundaries ORDER BY 1")
    assert sum(r[0] for r in after) > sum(r[0] for r in before)


# --- sensor and schedule -----------------------------------------------------------------------


def _age(folder: Path, minutes: float) -> None:
    then = time.time() - minutes * 60
    for path in folder.iterdir():
        os.utime(path, (then, then))


def test_inbox_thresholds_count_and_age(instance: dg.DagsterInstance, inbox: Path) -> None:
    postgres = PostgresResource()
    settings = InboxSettings(path=str(inbox), min_files=3, max_wait_minutes=5)
    young = look_at_inbox(postgres, settings, set(), seal=False)
    assert young.new_batch is None and "2 files waiting" in young.reason
    _age(inbox, 6)
    old = look_at_inbox(postgres, settings, set(), seal=False)
    assert old.new_batch and "waited" in old.reason
    again = look_at_inbox(postgres, settings, {old.new_batch}, seal=False)
    assert again.batch_keys == []  # idempotent: the same file versions never batch twice
    recovered = look_at_inbox(postgres, settings, set(), seal=False)
    assert recovered.orphaned == [old.new_batch]  # a batch whose partition was never added


def test_sensor_registers_a_batch_once_and_again_for_a_new_version(
    instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    inbox_sensor = build_inbox_sensor(SETTINGS.inbox)
    seal_inbox_schedule = build_seal_schedule(SETTINGS.inbox)
    folder = SETTINGS.inbox.location()
    folder.mkdir(parents=True, exist_ok=True)
    for path in folder.iterdir():
        path.unlink()
    note = folder / "note.md"
    note.write_text("# Note\n\nFirst version of a note about tides.\n", encoding="utf-8")
    _age(folder, 60)
    resources = {"seams_postgres": PostgresResource()}

    with dg.build_sensor_context(instance=instance, resources=resources) as context:
        first = inbox_sensor(context)
    assert isinstance(first, dg.SensorResult)
    (request,) = first.run_requests
    (add,) = first.dynamic_partitions_requests
    assert list(add.partition_keys) == [request.partition_key]
    instance.add_dynamic_partitions(document_batches.name, list(add.partition_keys))

    with dg.build_sensor_context(instance=instance, resources=resources) as context:
        assert isinstance(inbox_sensor(context), dg.SkipReason)

    note.write_text("# Note\n\nSecond version: now about the moon.\n", encoding="utf-8")
    _age(folder, 60)
    with dg.build_sensor_context(instance=instance, resources=resources) as context:
        second = inbox_sensor(context)
    assert isinstance(second, dg.SensorResult)
    assert second.run_requests[0].partition_key != request.partition_key

    note.write_text("# Note\n\nA third version, sealed by the schedule.\n", encoding="utf-8")
    with dg.build_schedule_context(instance=instance, resources=resources) as context:
        sealed = seal_inbox_schedule(context)
    assert isinstance(sealed, list) and len(sealed) == 2  # the sensor's unlaunched + the new one
    assert set(instance.get_dynamic_partitions(document_batches.name)) >= {
        r.partition_key for r in sealed
    }


def test_one_run_materializes_several_batches(
    instance: dg.DagsterInstance, inbox: Path, tmp_path: Path, database_url: str
) -> None:
    """What a single-run backfill does: one run, a partition range, one transaction each."""
    # Built here, after the fixtures chose this test's database: definitions carry the
    # environment they were built in.
    defs = build_definitions(SETTINGS)
    first = runner.register_path(inbox, print, defs=defs)
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(runner.SAMPLE_CORPUS / "city_notes.txt", other)
    second = runner.register_path(other, print, defs=defs)
    keys = [*first, *second]
    instance.add_dynamic_partitions(document_batches.name, keys)
    result = defs.resolve_job_def(runner.JOB_NAME).execute_in_process(
        instance=instance,
        tags={
            "dagster/asset_partition_range_start": keys[0],
            "dagster/asset_partition_range_end": keys[-1],
        },
        run_config=runner.QUIET,
    )
    assert result.success
    per_batch = dict(
        rows(
            database_url,
            "SELECT batch_key, count(DISTINCT document_id) FROM seams.chunks GROUP BY batch_key",
        )
    )
    assert per_batch == {keys[0]: len(SAMPLES), keys[1]: 1}
    assert runner.unsynced_assets(instance, keys, defs=defs) == {k: [] for k in keys}


def test_a_reverted_file_lands_again_as_the_newest_version(
    instance: dg.DagsterInstance, defs: dg.Definitions, inbox: Path, database_url: str
) -> None:
    note = inbox / SAMPLES[0]
    original = note.read_bytes()
    assert len(runner.register_path(inbox, print, defs=defs)) == 1
    note.write_text("# Changed\n\nAn edited version.\n", encoding="utf-8")
    assert len(runner.register_path(inbox, print, defs=defs)) == 1
    note.write_bytes(original)  # A -> B -> A: A is the newest version again
    (reverted,) = runner.register_path(inbox, print, defs=defs)
    counted = rows(
        database_url,
        "SELECT count(*) FROM seams.batch_documents WHERE batch_key = %s",
        reverted,
    )
    assert counted == [(1,)]
    assert runner.register_path(inbox, print, defs=defs) == []
