"""A model switch that waits for a batch of a collection the settings no longer declare.

A first run indexes a folder as the implicit `default` collection; `collections:` is then added
(so `default` is declared no more) and a second run indexes a new collection. `retrieval.model`
is set to a tiny random-weight model: the backfill builds the declared collection's index with
it, and the switch would wait for the `default` batch, which no job builds. While it is held,
`in_sync` fails on `chunk_index` naming the batch and `seams backfill`, and the held write's
metadata says so and retires no row; `seams backfill` then indexes the `default` batch's
published chunks with the new model and publishes the switch: search answers with the new
model, over both collections' documents.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest

from seams.orchestration import runner, sync
from seams.paths import sample_corpus
from seams.settings import load_settings
from seams.storage import publication
from seams.storage.search import search_response
from tests.support.databases import rows
from tests.support.instances import current_definitions
from tests.support.tiny_models import (
    PROMPTS,
    tiny_bert_folder,
)

# Three pipeline runs through Dagster (about a minute here): the slow lane; the lean lane checks
# the same promise at the storage level (tests/storage/test_held_switch.py).
pytestmark = [pytest.mark.export, pytest.mark.slow]


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert_folder(tmp_path_factory, "held-switch", "mean-prompts-128", prompts=PROMPTS)


def folder_with(tmp_path: Path, name: str, file: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(sample_corpus() / file, folder / file)
    return folder


def run(instance: dg.DagsterInstance, folder: Path) -> list[str]:
    """`seams run FOLDER` under the settings as they are now: the batches it registered."""
    defs = current_definitions()
    collections = load_settings().declared_collections() or None
    keys = runner.register_path(folder, print, defs=defs, collections=collections)
    runner.materialize_batches(instance, keys, print, runner.RunSummary(batches=keys), defs=defs)
    return keys


def test_a_switch_held_for_an_undeclared_collection_is_finished_by_backfill(
    instance: dg.DagsterInstance,
    database_url: str,
    model_folder: Path,
    tmp_path: Path,
    seams_yaml: Callable[[str], Path],
) -> None:
    settings_file = seams_yaml("retrieval:\n  mode: text\n")
    (old_batch,) = run(instance, folder_with(tmp_path, "first", "README.md"))

    notes = folder_with(tmp_path, "notes", "field_notes.md")
    declared = f"collections:\n  notes:\n    source: {notes}\n"
    settings_file.write_text("retrieval:\n  mode: text\n" + declared, "utf-8")
    (new_batch,) = run(instance, notes)

    settings_file.write_text(f"retrieval:\n  mode: text\n  model: {model_folder}\n" + declared)
    defs = current_definitions()
    postgres = defs.resources["seams_postgres"]
    packaged, tiny = (
        defs.resources["seams_embedder"].model_id,
        defs.resources["seams_retrieval_embedder"],
    )
    tiny = tiny.model_id
    # What the UI's backfill_unsynced does: the declared collection's unsynced index, rebuilt.
    stale = {
        p: keys
        for p, keys in runner.unsynced_assets(instance, [new_batch], defs=defs).items()
        if keys
    }
    summary = runner.RunSummary(batches=list(stale))
    runner.run_backfill(instance, stale, print, summary, defs=defs, started_by="test")
    with postgres.connection() as conn:
        switch = publication.model_switch(conn)
    assert switch is not None and switch.ready == (new_batch,), switch
    assert switch.waiting == (old_batch,) and switch.target == tiny
    held = sync.held_switch(defs)
    assert held is not None and f"batch {old_batch} (collection default)" in held, held
    assert held.endswith("run `seams backfill`"), held
    # The held write's page says so, and retired nothing: the old rows are still searched.
    page = (
        instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=dg.AssetKey(["notes", "chunk_index"]), asset_partitions=[new_batch]
            ),
            limit=1,
        )
        .records[0]
        .asset_materialization.metadata
    )
    assert page["held"].value == held
    assert page["rows_deleted"].value == 0 and page["rows_replaced"].value > 0
    assert (
        search_response(postgres, defs.resources["seams_embedder"], "bees", 3).model_id == packaged
    )
    # in_sync fails on chunk_index while held, naming the batch and the command.
    evaluation = sync.sync_evaluation(dg.AssetKey(["notes", "chunk_index"]), [], 1, None, held)
    assert not evaluation.passed and evaluation.description == held

    runner.backfill(instance, print, defs=defs)
    with postgres.connection() as conn:
        assert publication.model_switch(conn) is None
    assert sync.held_switch(defs) is None
    models = rows(database_url, "SELECT DISTINCT model_id FROM seams.chunk_index")
    assert models == [(tiny,)]
    answer = search_response(postgres, defs.resources["seams_retrieval_embedder"], "bees", 10)
    assert answer.model_id == tiny
    assert {hit.batch_key for hit in answer.hits} == {old_batch, new_batch}
