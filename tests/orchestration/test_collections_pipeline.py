"""Two collections in one code location, against real PostgreSQL, the packaged ONNX model and a
PostgreSQL-backed Dagster instance: each chunks its files by its own settings, and a change to
one makes only its assets unsynced and its backfill rewrite only its rows."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import psycopg
import pytest

from seams.environment import SeamsEnvironment
from seams.errors import ConfigError, InputError, SeamsError
from seams.orchestration import runner
from seams.orchestration.definitions import build_definitions
from seams.settings import SeamsSettings, load_settings
from seams.storage.schema import BATCH_ASSETS

HANDBOOK = {
    "deploys.md": "# Deploys\n\nEvery deploy starts with a green build. The release manager tags "
    "the commit and the pipeline promotes it to staging.\n\nRollbacks restore the previous tag. "
    "They take about four minutes and need no approval.\n",
    "oncall.md": "# On call\n\nThe on-call engineer answers pages within fifteen minutes. Pages "
    "that fire twice in an hour open an incident.\n\nHandover happens on Mondays at ten.\n",
}
SHARED = {
    "glossary.md": "# Glossary\n\nA runbook is a checklist for one kind of incident. A pager is "
    "the phone that wakes the on-call engineer.\n",
}
NOTES = {
    "kitchen.txt": "Bread rises because yeast makes carbon dioxide. Warm water speeds it up; "
    "salt slows it down.\n\nA sourdough starter is flour and water that caught wild yeast. It "
    "needs feeding once a day.\n",
}


def _write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _settings(tmp_path: Path, handbook_overrides: str) -> SeamsSettings:
    path = tmp_path / "seams.yaml"
    path.write_text(
        "collections:\n"
        "  handbook:\n"
        "    source: docs/handbook\n"
        f"    chunking: {{preset: technical_docs, overrides: {handbook_overrides}}}\n"
        "  notes:\n"
        "    source: docs/notes\n"
        "    chunking: {preset: narrative}\n",
        encoding="utf-8",
    )
    return load_settings(path)


def _chunks(database_url: str) -> dict[str, list[tuple[str, str, str, str]]]:
    """Per collection: (chunk_id, run_id, config_hash, batch_key) of its current chunks."""
    found: dict[str, list[tuple[str, str, str, str]]] = {}
    with psycopg.connect(database_url) as conn:
        for collection, chunk, run, config, batch in conn.execute(
            "SELECT collection, chunk_id, run_id, config_hash, batch_key FROM seams.current_chunks"
            " ORDER BY collection, chunk_id"
        ):
            found.setdefault(collection, []).append((chunk, run, config, batch))
    return found


def _versions(defs: dg.Definitions) -> dict[str, str | None]:
    graph = defs.resolve_asset_graph()
    return {
        key.to_user_string(): graph.get(key).code_version for key in graph.materializable_asset_keys
    }


def test_each_collection_is_a_lineage_of_its_own(tmp_path: Path) -> None:
    environment = SeamsEnvironment.from_os()
    defs = build_definitions(_settings(tmp_path, "{}"), environment=environment)
    graph = defs.resolve_asset_graph()
    for name in ("handbook", "notes"):
        chunks = graph.get(dg.AssetKey([name, "chunks"]))
        assert chunks.group_name == name
        assert chunks.partitions_def.name == f"{name}__document_batches"
        assert {key.to_user_string() for key in chunks.parent_keys} == {
            f"{name}/semantic_boundaries"
        }
        job = defs.resolve_job_def(f"{name}__chunk_batches")
        assert {key.path[0] for key in job.asset_layer.executable_asset_keys} == {name}
    embeddings = graph.get(dg.AssetKey(["notes", "candidate_embeddings"]))
    assert dg.AssetKey("embedding_model") in embeddings.parent_keys  # one model for all
    assert not graph.has(dg.AssetKey("chunks"))  # no `default` collection declared
    names = {sensor.name for sensor in defs.sensors} | {s.name for s in defs.schedules}
    assert {"handbook__inbox_sensor", "notes__seal_inbox_schedule"} <= names

    # A change to one collection's settings changes only its assets' code versions.
    changed = build_definitions(_settings(tmp_path, "{cut_cost: 3.0}"), environment=environment)
    before, after = _versions(defs), _versions(changed)
    moved = {key for key in before if before[key] != after[key]}
    assert moved == {"handbook/semantic_boundaries", "handbook/chunks", "handbook/chunk_index"}


def test_a_project_without_collections_keeps_its_keys_partitions_groups_and_job() -> None:
    defs = build_definitions(SeamsSettings(), environment=SeamsEnvironment.from_os())
    graph = defs.resolve_asset_graph()
    groups = {
        key.to_user_string(): (
            graph.get(key).group_name,
            getattr(graph.get(key).partitions_def, "name", None),
        )
        for key in graph.materializable_asset_keys
    }
    assert groups == {
        "embedding_model": ("model", None),
        "extracted_text": ("chunking", "document_batches"),
        "sentence_candidates": ("chunking", "document_batches"),
        "candidate_embeddings": ("chunking", "document_batches"),
        "semantic_boundaries": ("chunking", "document_batches"),
        "chunks": ("chunking", "document_batches"),
        "chunk_index": ("retrieval", "document_batches"),
    }
    assert {job.name for job in defs.jobs} == {"chunk_batches", "backfill_unsynced"}
    assert {s.name for s in defs.sensors} >= {"inbox_sensor", "settings_sync"}
    assert {s.name for s in defs.schedules} == {"seal_inbox_schedule"}
    assert set(defs.resolve_job_def("chunk_batches").asset_layer.executable_asset_keys) == {
        dg.AssetKey(name) for name in BATCH_ASSETS
    }


@pytest.mark.slow
def test_two_collections_chunk_by_their_own_settings_and_backfill_alone(
    instance: dg.DagsterInstance, database_url: str, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    _write(docs / "handbook", {**HANDBOOK, **SHARED})
    _write(docs / "notes", {**NOTES, **SHARED})
    environment = SeamsEnvironment.from_os()
    settings = _settings(tmp_path, "{}")
    defs = build_definitions(settings, environment=environment)
    collections = settings.declared_collections()

    # One `seams run` over the parent folder: every file goes to its collection.
    keys = runner.register_path(docs, print, defs=defs, collections=collections)
    assert len(keys) == 2
    summary = runner.RunSummary(batches=keys)
    runner.materialize_batches(instance, keys, print, summary, defs=defs)
    assert len(summary.backfill_ids) == 2  # one backfill per collection, each by its own job
    assert summary.cache_hits > 0  # the glossary's sentences, embedded once for both
    shown = runner.format_summary(runner.summarize(summary, defs=defs), home=tmp_path)
    assert "asset groups 'handbook', 'notes'" in shown
    assert shown.count(", collection handbook)") == shown.count(", collection notes)") == 1

    before = _chunks(database_url)
    assert set(before) == {"handbook", "notes"}
    per = settings.collection_settings()
    for name, rows in before.items():  # each collection's chunks were made by its own config
        assert {config for _, _, config, _ in rows} == {per[name].chunking_config().fingerprint()}
    assert per["handbook"].chunking_config() != per["notes"].chunking_config()
    handbook_batch = before["handbook"][0][3]
    notes_batch = before["notes"][0][3]
    assert instance.has_dynamic_partition("handbook__document_batches", handbook_batch)
    assert instance.has_dynamic_partition("notes__document_batches", notes_batch)
    assert not instance.has_dynamic_partition("document_batches", handbook_batch)

    # A change to the handbook's settings marks only the handbook's assets unsynced.
    changed = _settings(tmp_path, "{cut_cost: 3.0}")
    changed_defs = build_definitions(changed, environment=environment)
    stale = runner.unsynced_assets(instance, keys, defs=changed_defs)
    assert dg.AssetKey(["handbook", "chunks"]) in stale[handbook_batch]
    assert all(key.path[0] == "handbook" for key in stale[handbook_batch])
    assert stale[notes_batch] == []

    with pytest.raises(SeamsError, match=r"collection 'nope' is not in seams.yaml"):
        runner.backfill(instance, print, defs=changed_defs, collection="nope")
    again = runner.backfill(instance, print, defs=changed_defs, collection="handbook")
    assert again.batches == [handbook_batch]
    after = _chunks(database_url)
    assert after["notes"] == before["notes"]  # chunk ids and run ids untouched
    assert {run for _, run, _, _ in after["handbook"]} == set(again.run_ids)
    assert {config for _, _, config, _ in after["handbook"]} == {
        changed.collection_settings()["handbook"].chunking_config().fingerprint()
    }
    assert runner.unsynced_assets(instance, keys, defs=changed_defs) == {
        handbook_batch: [],
        notes_batch: [],
    }


def test_a_file_two_collections_take_is_a_one_line_error(tmp_path: Path) -> None:
    docs = _write(tmp_path / "docs", {"plan.md": "# Plan\n\nShip it.\n"})
    path = tmp_path / "seams.yaml"
    path.write_text(
        "collections:\n"
        f"  plans: {{source: {docs}, match: ['*.md']}}\n"
        f"  everything: {{source: {docs}, match: ['*.md', '*.txt']}}\n",
        encoding="utf-8",
    )
    collections = load_settings(path).declared_collections()
    with pytest.raises(ConfigError) as raised:
        runner.register_path(docs, print, defs=dg.Definitions(), collections=collections)
    message = str(raised.value)
    assert "\n" not in message
    assert "collections.everything" in message and "collections.plans" in message


def test_a_folder_no_collection_takes_is_a_one_line_error(tmp_path: Path) -> None:
    docs = _write(tmp_path / "docs", {"plan.md": "# Plan\n\nShip it.\n"})
    path = tmp_path / "seams.yaml"
    path.write_text(f"collections:\n  pdfs: {{source: {docs}, match: ['*.pdf']}}\n")
    collections = load_settings(path).declared_collections()
    said: list[str] = []
    with pytest.raises(InputError, match=r"no collection takes any of its 1 file:"):
        runner.register_path(docs, said.append, defs=dg.Definitions(), collections=collections)
    assert said == [
        f"skipped {docs / 'plan.md'}: no collection takes it (their `source` and `match`)"
    ]


def test_each_collections_sensor_batches_only_its_files(
    instance: dg.DagsterInstance, database_url: str, tmp_path: Path
) -> None:
    """Nested sources: `handbook` reads docs/, `notes` reads docs/notes/ inside it. Each sensor
    registers batches of its own collection, with only the files routed to it."""
    docs = _write(tmp_path / "docs", HANDBOOK)
    _write(docs / "notes", NOTES)
    path = tmp_path / "seams.yaml"
    path.write_text(
        "inbox: {max_wait_minutes: 0}\n"
        "collections:\n"
        "  handbook: {source: docs}\n"
        "  notes: {source: docs/notes}\n",
        encoding="utf-8",
    )
    settings = load_settings(path)
    defs = build_definitions(settings, environment=SeamsEnvironment.from_os())
    resources = {"seams_postgres": defs.resources["seams_postgres"]}
    requested: dict[str, dg.RunRequest] = {}
    for name in ("notes", "handbook"):
        sensor = next(s for s in defs.sensors if s.name == f"{name}__inbox_sensor")
        with dg.build_sensor_context(instance=instance, resources=resources) as context:
            result = sensor(context)
        assert isinstance(result, dg.SensorResult), result
        (requested[name],) = result.run_requests
        (add,) = result.dynamic_partitions_requests
        assert add.partitions_def_name == f"{name}__document_batches"
        assert sensor.job_name == f"{name}__chunk_batches"
    with psycopg.connect(database_url) as conn:
        files = conn.execute(
            "SELECT b.collection, d.source_uri FROM seams.batches AS b"
            " JOIN seams.batch_documents AS d USING (batch_key) ORDER BY 2"
        ).fetchall()
    assert {(c, Path(uri).name) for c, uri in files} == {
        ("handbook", "deploys.md"),
        ("handbook", "oncall.md"),
        ("notes", "kitchen.txt"),
    }
