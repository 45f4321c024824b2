"""Staleness where people look, through the webserver's GraphQL: after a settings change and
"Reload definitions", the assets the change affects report unsynced batches (Dagster's own
per-partition status, and the `in_sync` check the graph and the overview show), and the assets it
does not affect stay in sync. A new batch chunked with the new settings afterwards does not hide
the warning: the old batch is still unsynced, `in_sync` stays failed (evaluated on the new
materialization, not "Not evaluated"), and the sensor's tick says so in words.

The services are `dagster dev`, as `seams dev` runs them: the webserver and the daemon share one
code server, so "Reload definitions" reaches the daemon's sensors at once (a daemon with a code
server of its own would see the new settings only at its next workspace refresh, a minute on).
The code location is `seams`'s own with one difference: `settings_sync` ticks on every loop of
the sensor daemon (~5 s) instead of every 30 s; its interval is not what this checks."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from dagster_graphql import DagsterGraphQLClient

from seams.assets.partitions import document_batches
from seams.models.model_store import ModelManifest
from seams.orchestration import runner
from seams.orchestration.definitions import build_definitions
from seams.orchestration.sync import SYNC_CHECK
from seams.settings import load_settings
from seams.storage.schema import BATCH_ASSETS
from tests.support.processes import answering_client, free_port, stop_group

STALE_BY_PARTITION = """
query Stale($key: AssetKeyInput!, $partitions: [String!]) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode { staleStatusByPartition(partitions: $partitions) }
  }
}
"""

LATEST_CHECK = """
query Latest($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode {
      assetChecksOrError {
        ... on AssetChecks {
          checks { name executionForLatestMaterialization { evaluation { success } } }
        }
      }
    }
  }
}
"""

SENSOR_TICKS = """
{
  sensorOrError(sensorSelector: {repositoryLocationName: "seams",
                                 repositoryName: "__repository__", sensorName: "settings_sync"}) {
    ... on Sensor { sensorState { ticks(limit: 10) { status skipReason } } }
  }
}
"""

SENSOR_INTERVAL = """
{
  sensorOrError(sensorSelector: {repositoryLocationName: "seams",
                                 repositoryName: "__repository__", sensorName: "settings_sync"}) {
    __typename
    ... on Sensor { minIntervalSeconds }
    ... on Error { message }
  }
}
"""

CHECK_EXECUTIONS = """
query Checks($key: AssetKeyInput!, $check: String!) {
  assetCheckExecutions(assetKey: $key, checkName: $check, limit: 1) {
    evaluation { success metadataEntries { label ... on IntMetadataEntry { intValue } } }
  }
}
"""

SENSOR_INTERVAL_S = 1
"""`settings_sync`'s minimum interval here: every loop of the sensor daemon (~5 s), not 30 s."""

LOCATION = f"""\
# The `seams` code location (seams.orchestration.location), settings_sync ticking sooner.
import dagster as dg

from seams.orchestration import location  # `defs` must be the one Definitions here
from seams.orchestration.sync import SYNC_SENSOR, build_sync_sensor

defs = dg.Definitions(
    assets=location.defs.assets,
    asset_checks=location.defs.asset_checks,
    jobs=location.defs.jobs,
    sensors=[
        build_sync_sensor({SENSOR_INTERVAL_S}) if sensor.name == SYNC_SENSOR else sensor
        for sensor in location.defs.sensors
    ],
    schedules=location.defs.schedules,
    resources=location.defs.resources,
    executor=location.defs.executor,
    loggers=location.defs.loggers,
    metadata=location.defs.metadata,
)
"""

CHANGED = {"semantic_boundaries", "chunks", "chunk_index"}
"""What a boundary-threshold change affects: the cut, and everything built from it."""


@contextlib.contextmanager
def _dagster_dev(folder: Path) -> Iterator[DagsterGraphQLClient]:
    """`dagster dev` as `seams dev` starts it, on a free loopback port, loading the `seams`
    location with the quicker `settings_sync` (written to `folder`); a GraphQL client once the UI
    answers. Against the instance `open_instance` exported (DAGSTER_HOME and the databases)."""
    location = folder / "quick_sync_location.py"
    location.write_text(LOCATION, encoding="utf-8")
    workspace = folder / "workspace.yaml"
    workspace.write_text(
        f"load_from:\n  - python_file:\n      relative_path: {location}\n"
        "      location_name: seams\n",
        encoding="utf-8",
    )
    port = free_port()
    log_path = folder / "dagster-dev.log"
    with log_path.open("w") as log:
        dev = subprocess.Popen(
            [sys.executable, "-W", "ignore:Function `dev_command` is superseded",
             "-m", "dagster", "dev", "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=os.environ,
            cwd=os.environ["DAGSTER_HOME"],
        )  # fmt: skip
    try:
        client = answering_client(port, dev, log_path, timeout_s=180, what="dagster dev")
        sensor = client._execute(SENSOR_INTERVAL)["sensorOrError"]
        assert sensor.get("minIntervalSeconds") == SENSOR_INTERVAL_S, sensor  # that location
        yield client
    finally:
        stop_group(dev, grace_s=30)


def _stale(client: DagsterGraphQLClient, batch: str) -> dict[str, str]:
    found = {}
    for name in BATCH_ASSETS:
        node = client._execute(STALE_BY_PARTITION, {"key": {"path": [name]}, "partitions": [batch]})
        (status,) = node["assetNodeOrError"]["staleStatusByPartition"]
        found[name] = status
    return found


def _in_sync(client: DagsterGraphQLClient) -> dict[str, tuple[bool, int]]:
    """Per asset, the latest `in_sync` verdict and its count of unsynced batches."""
    found = {}
    for name in BATCH_ASSETS:
        result = client._execute(CHECK_EXECUTIONS, {"key": {"path": [name]}, "check": SYNC_CHECK})
        executions = result["assetCheckExecutions"]
        if executions and executions[0]["evaluation"]:
            evaluation = executions[0]["evaluation"]
            counts = {e["label"]: e.get("intValue") for e in evaluation["metadataEntries"]}
            found[name] = (evaluation["success"], counts.get("unsynced_batches"))
    return found


def _shown_on_the_graph(client: DagsterGraphQLClient, name: str) -> bool | None:
    """The `in_sync` result the graph shows for asset `name`: None when "Not evaluated"."""
    node = client._execute(LATEST_CHECK, {"key": {"path": [name]}})["assetNodeOrError"]
    for check in node["assetChecksOrError"]["checks"]:
        if check["name"] == SYNC_CHECK:
            latest = check["executionForLatestMaterialization"]
            return latest["evaluation"]["success"] if latest and latest["evaluation"] else None
    raise AssertionError(f"{name} has no {SYNC_CHECK} check")


def _tick_texts(client: DagsterGraphQLClient) -> list[str]:
    sensor = client._execute(SENSOR_TICKS)["sensorOrError"]
    return [t["skipReason"] or "" for t in sensor["sensorState"]["ticks"]]


def _wait_for(client: DagsterGraphQLClient, expected: dict[str, tuple[bool, int]]) -> None:
    deadline = time.monotonic() + 240
    seen = None
    while time.monotonic() < deadline:
        seen = _in_sync(client)
        if seen == expected:
            return
        time.sleep(2)
    raise AssertionError(f"the settings_sync sensor never reported {expected}; last: {seen}")


@pytest.mark.slow
def test_a_settings_change_shows_unsynced_assets_after_a_reload(
    instance: dg.DagsterInstance,
    exported_model: ModelManifest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings_file = tmp_path / "seams.yaml"
    settings_file.write_text("chunking:\n  preset: default\n", encoding="utf-8")
    monkeypatch.setenv("SEAMS_CONFIG", str(settings_file))
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    shutil.copy(runner.SAMPLE_CORPUS / "field_notes.md", inbox)
    settings = load_settings()
    defs = build_definitions(settings)
    (batch,) = runner.register_path(inbox, print, defs=defs)
    instance.add_dynamic_partitions(document_batches.name, [batch])
    result = defs.resolve_job_def(runner.JOB_NAME).execute_in_process(
        instance=instance, partition_key=batch, run_config=runner.QUIET
    )
    assert result.success

    with _dagster_dev(tmp_path) as client:
        assert set(_stale(client, batch).values()) == {"FRESH"}
        _wait_for(client, {name: (True, 0) for name in BATCH_ASSETS})

        percentile = settings.chunking_config().percentile + 20.0
        settings_file.write_text(
            f"chunking:\n  overrides: {{percentile: {percentile}}}\n", encoding="utf-8"
        )
        reloaded = client.reload_repository_location("seams")
        assert reloaded.status.value == "SUCCESS", reloaded.message

        stale = _stale(client, batch)
        assert {name for name, status in stale.items() if status == "STALE"} == CHANGED
        assert {name for name, status in stale.items() if status == "FRESH"} == (
            set(BATCH_ASSETS) - CHANGED
        )
        _wait_for(
            client, {name: (name not in CHANGED, int(name in CHANGED)) for name in BATCH_ASSETS}
        )
        assert any("1 of 1 batch unsynced: in_sync failed on " in t for t in _tick_texts(client))

        # A new batch, chunked with the new settings: the first batch is still unsynced.
        newer = tmp_path / "newer"
        newer.mkdir()
        shutil.copy(runner.SAMPLE_CORPUS / "kitchen_science.md", newer)
        changed_defs = build_definitions(load_settings())  # the new settings
        (second,) = runner.register_path(newer, print, defs=changed_defs)
        instance.add_dynamic_partitions(document_batches.name, [second])
        result = changed_defs.resolve_job_def(runner.JOB_NAME).execute_in_process(
            instance=instance, partition_key=second, run_config=runner.QUIET
        )
        assert result.success
        assert set(_stale(client, second).values()) == {"FRESH"}
        assert {n for n, s in _stale(client, batch).items() if s == "STALE"} == CHANGED
        _wait_for(
            client, {name: (name not in CHANGED, int(name in CHANGED)) for name in BATCH_ASSETS}
        )
        expected = {name: name not in CHANGED for name in BATCH_ASSETS}
        deadline = time.monotonic() + 120  # evaluated on the newest materialization, not "Not
        shown = {}  # evaluated" (which the graph showed before the fix, with a green "Passed")
        while shown != expected:
            assert time.monotonic() < deadline, shown
            time.sleep(2)
            shown = {name: _shown_on_the_graph(client, name) for name in BATCH_ASSETS}
        wanted = (
            "1 of 2 batches unsynced: in_sync failed on semantic_boundaries, chunks, chunk_index"
        )
        deadline = time.monotonic() + 120
        while not any(t.startswith(wanted) for t in _tick_texts(client)):
            assert time.monotonic() < deadline, _tick_texts(client)
            time.sleep(2)
