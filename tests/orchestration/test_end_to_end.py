"""The whole product as a user runs it: dagster-webserver + dagster-daemon on a loopback port,
a PostgreSQL-backed instance, a run launched through GraphQL and queued by the run coordinator.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from dagster_graphql import DagsterGraphQLClient

from seams.models.model_store import ModelManifest
from seams.orchestration import runner
from tests.conftest import dagster_services

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
def test_run_launched_through_graphql_materializes_a_batch(
    client: DagsterGraphQLClient, tmp_path: Path, database_url: str
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    shutil.copy(runner.SAMPLE_CORPUS / "kitchen_science.md", inbox)
    (batch,) = runner.register_path(inbox, print)
    repo = {"repositoryLocationName": "seams", "repositoryName": "__repository__"}
    added = client._execute(
        ADD_PARTITION, {"repo": repo, "name": "document_batches", "key": batch}
    )["addDynamicPartition"]
    assert added["__typename"] == "AddDynamicPartitionSuccess", added

    run_id = client.submit_job_execution(
        "chunk_batches",
        repository_location_name="seams",
        repository_name="__repository__",
        tags={"dagster/partition": batch},
    )
    deadline = time.monotonic() + 300
    status = None
    while time.monotonic() < deadline:
        status = client.get_run_status(run_id).value
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        time.sleep(1)
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
