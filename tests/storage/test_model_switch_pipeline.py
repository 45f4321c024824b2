"""A model switch through the whole pipeline, with a reader querying all along.

Three batches are indexed with `retrieval.model` set (a tiny sentence-transformers model built
here from seed 0); the setting is then removed, so the packaged model indexes again, and
`seams backfill` runs one run per batch (`backfill.max_batches_per_run: 1`): the switch is
built batch by batch. Meanwhile a thread searches back to back with the settings' embedder, as
`seams search` does. Every answer it gets is, exactly, either the answer before the switch
(the tiny model's) or the one after it (the packaged model's): never an error, never empty,
never a mix of the two; the answers flip once. The backfill rewrites no chunk, and the tiny
model's vectors are gone after it.
"""

from __future__ import annotations

import itertools
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest

from seams.orchestration import runner
from seams.paths import sample_corpus
from seams.storage.search import SearchResponse, search_response
from tests.support.databases import rows
from tests.support.instances import current_definitions
from tests.support.tiny_models import (
    PROMPTS,
    tiny_bert_folder,
)

# Two whole runs through Dagster and a backfill of three runs: the slow lane;
# tests/storage/test_model_switch.py checks the same promise at the storage level in CI's lane.
pytestmark = [pytest.mark.export, pytest.mark.slow, pytest.mark.usefixtures("exported_model")]
FOLDERS = {  # one batch each
    "bees": ("field_notes.md",),
    "kitchen": ("kitchen_science.md",),
    "rest": ("README.md",),
}
QUERIES = (
    "how a honey bee colony is organised around its queen",
    "why emulsions like mayonnaise hold oil and water together",
)
SETTINGS = "retrieval:\n  mode: text\n{model}backfill:\n  max_batches_per_run: 1\n"


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert_folder(tmp_path_factory, "switch-model", "mean-prompts-128", prompts=PROMPTS)


Answer = tuple[str, tuple[tuple[str, str, float, float | None], ...]]


def answer_of(response: SearchResponse) -> Answer:
    """What a reader sees of an answer: the model, and each hit with its scores."""
    hits = tuple(
        (h.batch_key, h.chunk_id, round(h.score, 5), h.dense_score and round(h.dense_score, 5))
        for h in response.hits
    )
    return response.model_id, hits


def chunk_rows(url: str) -> list[tuple]:
    return rows(
        url,
        "SELECT batch_key, generation, chunk_id, text FROM seams.chunks ORDER BY 1, 2, 3",
    )


def test_a_switch_back_is_one_backfill_that_readers_never_see_half_done(
    instance: dg.DagsterInstance,
    database_url: str,
    model_folder: Path,
    tmp_path: Path,
    seams_yaml: Callable[[str], Path],
) -> None:
    settings_file = seams_yaml(SETTINGS.format(model=f"  model: {model_folder}\n"))
    defs = current_definitions()
    keys = []
    for name, files in FOLDERS.items():
        folder = tmp_path / name
        folder.mkdir()
        for file in files:
            shutil.copy(sample_corpus() / file, folder / file)
        keys += runner.register_path(folder, print, defs=defs)
    runner.materialize_batches(instance, keys, print, runner.RunSummary(batches=keys), defs=defs)
    tiny = defs.resources["seams_retrieval_embedder"].model_id
    chunks_before = chunk_rows(database_url)

    # Back to the packaged model: search keeps the tiny model's index until the switch is done.
    settings_file.write_text(SETTINGS.format(model=""), "utf-8")
    back = current_definitions()
    postgres, embedder = back.resources["seams_postgres"], back.resources["seams_embedder"]

    def ask(query: str) -> Answer:
        return answer_of(search_response(postgres, embedder, query, 5))

    before = {query: ask(query) for query in QUERIES}
    assert all(model == tiny and hits for model, hits in before.values()), before
    seen: list[dict[str, Answer]] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        while True:
            finished = done.is_set()  # one more round after the backfill
            try:
                seen.append({query: ask(query) for query in QUERIES})
            except BaseException as exc:  # asserted below
                errors.append(exc)
                return
            if finished:
                return

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        summary = runner.backfill(instance, print, defs=back)
    finally:
        done.set()
        thread.join(timeout=300)
    assert errors == []
    assert len(summary.run_ids) == len(keys)  # one run per batch: the switch built batch by batch
    after = {query: ask(query) for query in QUERIES}
    packaged = embedder.model_id
    assert all(model == packaged and hits for model, hits in after.values()), after
    assert len(seen) >= 2
    models = []
    for round_ in seen:
        for query, got in round_.items():
            assert got in (before[query], after[query]), (query, got)  # one model, whole
        models.append(round_[QUERIES[0]][0])
    assert models[-1] == packaged
    assert sum(a != b for a, b in itertools.pairwise(models)) <= 1, models

    assert chunk_rows(database_url) == chunks_before  # no chunk rewritten, not even its build
    assert rows(database_url, "SELECT DISTINCT model_id FROM seams.chunk_index") == [(packaged,)]
