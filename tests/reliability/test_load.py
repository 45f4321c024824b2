"""Load: six batches submitted at once through the run queue of a real webserver + daemon, with
the QueuedRunCoordinator's limit of 2 concurrent runs (dagster.yaml). All complete, never more
than 2 at a time, and no row is lost or duplicated. Six is three times the limit: enough for
the queue to hold runs back in every wave, which is the property under test.

Each batch is one short document, so what is measured is Dagster's per-run overhead. Runs use
the location's default executor, in-process (one process per run instead of one per step).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster_graphql import DagsterGraphQLClient

from seams.assets.partitions import document_batches
from seams.models.model_store import ModelManifest
from seams.orchestration import runner
from seams.orchestration.instance import INSTANCE_YAML
from seams.resources import database
from tests.support.databases import rows
from tests.support.instances import current_definitions, export_instance, keep_environment
from tests.support.processes import dagster_services

LIMIT = 2
TOPICS = ("tides", "glaciers", "bread", "violins", "orchards", "lighthouses")
BATCHES = len(TOPICS)


@pytest.fixture
def queue(
    database_url: str, monkeypatch: pytest.MonkeyPatch, exported_model: ModelManifest,
    tmp_path: Path,
) -> Iterator[DagsterGraphQLClient]:  # fmt: skip
    configured = yaml.safe_load(INSTANCE_YAML.read_text())["run_coordinator"]
    assert configured["class"] == "QueuedRunCoordinator"
    assert configured["config"]["max_concurrent_runs"] == LIMIT
    keep_environment(monkeypatch)
    monkeypatch.setenv(database.URL_ENV, database_url)
    monkeypatch.delenv(database.DAGSTER_URL_ENV, raising=False)
    export_instance(monkeypatch)
    with dagster_services(tmp_path) as client:
        yield client


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    running = peak = 0
    for _, step in edges:  # an end sorts before a start at the same instant
        running += step
        peak = max(peak, running)
    return peak


@pytest.mark.slow
def test_six_batches_through_the_queue_all_complete_with_nothing_lost(
    queue: DagsterGraphQLClient, database_url: str, tmp_path: Path
) -> None:
    defs = current_definitions()  # the environment `queue` exported
    keys = []
    for number, topic in enumerate(TOPICS):
        folder = tmp_path / f"inbox_{number:02d}"
        folder.mkdir()
        (folder / f"{topic}.md").write_text(
            f"# {topic.title()}\n\nBatch {number} is about {topic}. It has a second sentence.\n",
            encoding="utf-8",
        )
        (key,) = runner.register_path(folder, print, defs=defs)
        keys.append(key)
    assert len(set(keys)) == BATCHES
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions(document_batches.name, keys)
        run_ids = {
            queue.submit_job_execution(
                "chunk_batches",
                repository_location_name="seams",
                repository_name="__repository__",
                tags={"dagster/partition": key},
            ): key
            for key in keys
        }
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline:
            records = instance.get_run_records(dg.RunsFilter(run_ids=list(run_ids)))
            if all(r.dagster_run.status.value in ("SUCCESS", "FAILURE", "CANCELED")
                   for r in records):  # fmt: skip
                break
            time.sleep(1)
        records = instance.get_run_records(dg.RunsFilter(run_ids=list(run_ids)))
        statuses = {r.dagster_run.run_id: r.dagster_run.status.value for r in records}
        assert sorted(statuses.values()) == ["SUCCESS"] * BATCHES, statuses
        assert _max_overlap([(r.start_time, r.end_time) for r in records]) <= LIMIT
        reported = {}
        for run_id, key in run_ids.items():
            for record in instance.all_logs(run_id):
                event = record.dagster_event
                if event and event.is_step_materialization:
                    materialization = event.step_materialization_data.materialization
                    if materialization.asset_key == dg.AssetKey("chunks"):
                        reported[key] = int(materialization.metadata["chunks"].value)

    per_batch = dict(
        rows(database_url, "SELECT batch_key, count(*) FROM seams.chunks GROUP BY batch_key")
    )
    assert set(per_batch) == set(keys)  # every batch has chunks, none lost
    assert per_batch == reported  # what each run reported is what is stored
    total, distinct, runs = rows(
        database_url,
        "SELECT count(*), count(DISTINCT (batch_key, chunk_id)), count(DISTINCT run_id)"
        " FROM seams.chunks",
    )[0]
    assert total == distinct == sum(per_batch.values())  # no duplicates
    assert runs == BATCHES  # each batch written by exactly its own run
    by_run = dict(rows(database_url, "SELECT DISTINCT batch_key, run_id FROM seams.chunks"))
    assert {run: key for key, run in by_run.items()} == run_ids
