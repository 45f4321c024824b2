"""The whole product as a user runs it: dagster-webserver + dagster-daemon on a loopback port,
a PostgreSQL-backed instance, a run launched through GraphQL and queued by the run coordinator.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import psycopg
import pytest
from dagster_graphql import DagsterGraphQLClient

from seams.models.model_store import ModelManifest
from seams.orchestration import ownership, runner
from tests.support.processes import dagster_services

ADD_PARTITION = """
mutation Add($repo: RepositorySelector!, $name: String!, $key: String!) {
  addDynamicPartition(repositorySelector: $repo, partitionsDefName: $name, partitionKey: $key) {
    __typename
    ... on PythonError { message }
  }
}
"""

MATERIALIZATIONS = """
query Materializations($key: AssetKeyInput!) {
  assetOrError(assetKey: $key) {
    ... on Asset { assetMaterializations(limit: 10) { runId partition } }
  }
}
"""


@pytest.fixture
def client(
    instance: object, exported_model: ModelManifest, tmp_path: Path
) -> Iterator[DagsterGraphQLClient]:
    with dagster_services(tmp_path) as graphql:
        yield graphql


@pytest.mark.slow
def test_graphql_runs_materialize_and_runs_of_killed_processes_stop_blocking_the_queue(
    client: DagsterGraphQLClient,
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    tmp_path: Path,
    database_url: str,
) -> None:
    """Both halves share one webserver + daemon: starting them is most of this test's cost."""
    _a_run_launched_through_graphql_materializes_a_batch(client, tmp_path, database_url, defs)
    _runs_a_killed_seams_run_left_started_stop_blocking_the_queue(client, instance, tmp_path, defs)


def _a_run_launched_through_graphql_materializes_a_batch(
    client: DagsterGraphQLClient, tmp_path: Path, database_url: str, defs: dg.Definitions
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    shutil.copy(runner.SAMPLE_CORPUS / "kitchen_science.md", inbox)
    (batch,) = runner.register_path(inbox, print, defs=defs)
    run_id = _submit(client, batch)
    status = _wait(client, run_id, ("SUCCESS", "FAILURE", "CANCELED"))
    assert status == "SUCCESS", f"run {run_id} ended {status}"

    found = client._execute(MATERIALIZATIONS, {"key": {"path": ["chunks"]}})
    materializations = found["assetOrError"]["assetMaterializations"]
    assert {"runId": run_id, "partition": batch} in materializations
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT count(*), count(DISTINCT run_id), min(run_id) FROM seams.chunks"
            " WHERE batch_key = %s",
            (batch,),
        ).fetchone()
    assert rows[0] > 0 and rows[1] == 1 and rows[2] == run_id


REPO = {"repositoryLocationName": "seams", "repositoryName": "__repository__"}


def _submit(client: DagsterGraphQLClient, batch: str) -> str:
    """Add `batch` as a partition and submit `chunk_batches` for it, as the UI does."""
    added = client._execute(
        ADD_PARTITION, {"repo": REPO, "name": "document_batches", "key": batch}
    )["addDynamicPartition"]
    assert added["__typename"] == "AddDynamicPartitionSuccess", added
    return client.submit_job_execution(
        "chunk_batches",
        repository_location_name="seams",
        repository_name="__repository__",
        tags={"dagster/partition": batch},
    )


def _wait(client: DagsterGraphQLClient, run_id: str, states: tuple[str, ...]) -> str | None:
    deadline = time.monotonic() + 300
    status = None
    while time.monotonic() < deadline:
        status = client.get_run_status(run_id).value
        if status in states:
            break
        time.sleep(1)
    return status


def _runs_a_killed_seams_run_left_started_stop_blocking_the_queue(
    client: DagsterGraphQLClient, instance: dg.DagsterInstance, tmp_path: Path, defs: dg.Definitions
) -> None:
    # Two runs whose `seams run` process was SIGKILLed: STARTED forever, filling both slots of
    # max_concurrent_runs (Dagster's run monitoring would only catch them at the runtime cap).
    dead = subprocess.Popen(["true"])
    dead.wait()
    owner = {**ownership.owner_tags(), ownership.OWNER_PID_TAG: str(dead.pid)}
    orphans = [
        instance.add_run(
            dg.DagsterRun(job_name="chunk_batches", status=dg.DagsterRunStatus.STARTED, tags=owner)
        )
        for _ in range(2)
    ]
    inbox = tmp_path / "inbox_2"
    inbox.mkdir()
    shutil.copy(runner.SAMPLE_CORPUS / "field_notes.md", inbox)
    (batch,) = runner.register_path(inbox, print, defs=defs)

    queued = _submit(client, batch)
    time.sleep(10)  # several passes of the daemon's run queue
    assert client.get_run_status(queued).value == "QUEUED"

    said: list[str] = []
    runner.settle_in_flight(instance, said.append, [batch])  # what the next `seams run` does first
    assert len(said) == 2 and all("marked failed" in line for line in said), said
    for orphan in orphans:
        assert client.get_run_status(orphan.run_id).value == "FAILURE"
    assert _wait(client, queued, ("SUCCESS", "FAILURE", "CANCELED")) == "SUCCESS"
