"""The whole product as a user runs it: dagster-webserver + dagster-daemon on a loopback port,
a PostgreSQL-backed instance, a run launched through GraphQL and queued by the run coordinator.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from dagster_graphql import DagsterGraphQLClient, DagsterGraphQLClientError

from orchestration import runner
from orchestration.instance import DAGSTER_URL_VAR, prepare_environment
from resources import database
from resources.model_store import ModelManifest

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(command: list[str], log: Path) -> subprocess.Popen:
    handle = log.open("w")
    return subprocess.Popen(
        command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True, env=os.environ
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


@pytest.fixture
def services(
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    exported_model: ModelManifest,
    tmp_path: Path,
) -> Iterator[int]:
    monkeypatch.setenv(database.URL_ENV, database_url)
    for variable in ("DAGSTER_HOME", DAGSTER_URL_VAR, "SEAMS_DATA_DIR"):  # restored afterwards
        monkeypatch.setenv(variable, os.environ.get(variable, ""))
    prepare_environment()
    port = _free_port()
    bin_dir = Path(sys.executable).parent
    web = _start(
        [str(bin_dir / "dagster-webserver"), "-m", "orchestration",
         "-h", "127.0.0.1", "-p", str(port)],
        tmp_path / "webserver.log",
    )  # fmt: skip
    daemon = _start(
        [str(bin_dir / "dagster-daemon"), "run", "-m", "orchestration"], tmp_path / "daemon.log"
    )
    try:
        yield port
    finally:
        _stop(web)
        _stop(daemon)


@pytest.mark.slow
def test_run_launched_through_graphql_materializes_a_batch(
    services: int, tmp_path: Path, database_url: str
) -> None:
    client = DagsterGraphQLClient("127.0.0.1", port_number=services, timeout=30)
    deadline = time.monotonic() + 120
    while True:
        try:
            client._execute("{ version }")
            break
        except DagsterGraphQLClientError:
            assert time.monotonic() < deadline, "the webserver never answered"
            time.sleep(0.5)

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    shutil.copy(runner.SAMPLE_CORPUS / "kitchen_science.md", inbox)
    (batch,) = runner.register_path(inbox, print)
    repo = {"repositoryLocationName": "orchestration", "repositoryName": "__repository__"}
    added = client._execute(
        ADD_PARTITION, {"repo": repo, "name": "document_batches", "key": batch}
    )["addDynamicPartition"]
    assert added["__typename"] == "AddDynamicPartitionSuccess", added

    run_id = client.submit_job_execution(
        "chunk_batches",
        repository_location_name="orchestration",
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
