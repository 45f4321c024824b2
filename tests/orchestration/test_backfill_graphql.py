"""With the UI open (`seams dev`: webserver + daemon, real runs), through the webserver's GraphQL:

- `seams backfill` over two batches of different sizes after a settings change is exactly one
  backfill entry with one run, executed by the command itself (the daemon's fixed 30 s loop is
  never waited for), and each partition's `chunks` materialization and each of its check results
  report that partition's own counts, preview and source folder;
- the summary names the UI's real address (the port `seams dev` serves);
- after Ctrl-C of `seams dev`, no daemon counts as running (its marker and heartbeats are gone),
  `seams backfill` runs here at once, and no backfill is left for a later daemon to re-run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster_graphql import DagsterGraphQLClient

from seams.assets.partitions import DEFAULT_LINEAGE
from seams.orchestration import launch, ownership, runner
from seams.orchestration.dagster_internals import BulkActionsFilter, BulkActionStatus
from tests.orchestration.test_backfill import _stored_per_batch
from tests.support.graphql import LAUNCH_BACKFILL
from tests.support.processes import answering_client, free_port
from tests.support.samples import register_sample_batches

BACKFILLS = """
{
  partitionBackfillsOrError {
    ... on PartitionBackfills {
      results {
        id
        status
        isAssetBackfill
        numPartitions
        tags { key value }
        assetSelection { path }
        runs { runId status tags { key value } }
      }
    }
  }
}
"""

MATERIALIZATIONS = """
query Materializations($key: AssetKeyInput!) {
  assetOrError(assetKey: $key) {
    ... on Asset {
      assetMaterializations(limit: 50) {
        runId
        partition
        metadataEntries {
          label
          ... on IntMetadataEntry { intValue }
          ... on TextMetadataEntry { text }
          ... on MarkdownMetadataEntry { mdStr }
        }
      }
    }
  }
}
"""

CHECK_EXECUTIONS = """
query Checks($key: AssetKeyInput!, $check: String!, $partition: String) {
  assetCheckExecutions(assetKey: $key, checkName: $check, partition: $partition, limit: 1) {
    runId
    partition
    evaluation { success metadataEntries { label ... on IntMetadataEntry { intValue } } }
  }
}
"""

CHUNK_CHECKS = ("exact_slices", "nothing_lost", "sizes_within_bounds", "unique_chunk_ids")


def _seams(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "seams", *args],
        env=os.environ.copy(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _change_settings(path: Path, cut_cost: float) -> None:
    """A settings change every process started from now on sees (as after a reload)."""
    path.write_text(f"chunking:\n  overrides: {{cut_cost: {cut_cost}}}\n", encoding="utf-8")


def _entry_value(entry: dict) -> object:
    for field in ("intValue", "text", "mdStr"):
        if field in entry:
            return entry[field]
    return None


def _start_dev(logs: Path, port: int) -> tuple[subprocess.Popen, DagsterGraphQLClient]:
    """`seams dev` on `port`, as a user starts it; returns once the UI answers."""
    log = (logs / "seams-dev.log").open("w")
    dev = subprocess.Popen(
        [sys.executable, "-m", "seams", "dev", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy(), start_new_session=True,
    )  # fmt: skip
    client = answering_client(port, dev, logs / "seams-dev.log", timeout_s=240, what="seams dev")
    return dev, client


@pytest.mark.slow
def test_seams_backfill_with_the_ui_open_is_one_backfill_each_batch_reported_alone(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    tmp_path: Path,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys = register_sample_batches(tmp_path, defs=defs)
    runner.ensure_model(instance, print, defs=defs)  # as `seams run` does before its batches
    runner.materialize_batches(instance, keys, print, runner.RunSummary(batches=keys), defs=defs)
    before = {b.backfill_id for b in instance.get_backfills()}
    settings = tmp_path / "seams.yaml"
    _change_settings(settings, 3.0)
    monkeypatch.setenv("SEAMS_CONFIG", str(settings))

    port = free_port()
    dev, client = _start_dev(tmp_path, port)
    try:
        deadline = time.monotonic() + 180
        while not launch.daemon_is_running(instance):
            assert time.monotonic() < deadline, "the daemon never sent a heartbeat"
            assert dev.poll() is None, (tmp_path / "seams-dev.log").read_text()[-3000:]
            time.sleep(1)
        done = _seams("backfill")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "running here" in done.stdout, done.stdout
        assert f"the Dagster UI at http://127.0.0.1:{port}" in done.stdout  # its real port
        for number, key in enumerate(keys):  # the summary says where each batch came from
            assert f"{key} ({tmp_path / f'batch_{number}'}, " in done.stdout, done.stdout

        backfills = client._execute(BACKFILLS)["partitionBackfillsOrError"]["results"]
        new = [b for b in backfills if b["id"] not in before]
        assert len(new) == 1, new  # exactly one backfill entry
        (entry,) = new
        assert entry["isAssetBackfill"] and entry["status"] == "COMPLETED_SUCCESS", entry
        assert {"key": launch.STARTED_BY_TAG, "value": "seams backfill"} in entry["tags"]
        # What the UI's "Launched by" shows (else "Manually launched"), on the backfill and its run.
        launched_by = {"key": launch.LAUNCHED_BY_TAG, "value": "seams backfill"}
        assert launched_by in entry["tags"] and launched_by in entry["runs"][0]["tags"], entry
        assert {tuple(a["path"]) for a in entry["assetSelection"]} == {
            ("semantic_boundaries",),
            ("chunks",),
            ("chunk_index",),
        }
        assert len(entry["runs"]) == 1 and entry["runs"][0]["status"] == "SUCCESS", entry
        (run_id,) = (r["runId"] for r in entry["runs"])

        found = client._execute(MATERIALIZATIONS, {"key": {"path": ["chunks"]}})
        reported = {
            m["partition"]: {e["label"]: _entry_value(e) for e in m["metadataEntries"]}
            for m in found["assetOrError"]["assetMaterializations"]
            if m["runId"] == run_id
        }
        checked = {
            (name, key): client._execute(
                CHECK_EXECUTIONS,
                {"key": {"path": ["chunks"]}, "check": name, "partition": key},
            )["assetCheckExecutions"]
            for name in CHUNK_CHECKS
            for key in keys
        }
    finally:
        dev.send_signal(signal.SIGINT)  # Ctrl-C
        assert dev.wait(timeout=180) == 0, (tmp_path / "seams-dev.log").read_text()[-3000:]

    stored = _stored_per_batch(database_url)
    assert set(reported) == set(keys) == set(stored)  # one run materialized every partition
    assert stored[keys[0]][0] != stored[keys[1]][0]
    for number, key in enumerate(keys):
        chunks, documents, names = stored[key]
        files = set(names)
        meta = reported[key]
        assert meta["dagster/partition_row_count"] == meta["dagster/row_count"] == chunks
        assert (meta["chunks"], meta["documents_chunked"]) == (chunks, documents), key
        previewed = {line.split("|")[1].strip() for line in meta["preview"].splitlines()[2:]}
        assert previewed and previewed <= files, (key, previewed, files)
        assert meta["source"] == str(tmp_path / f"batch_{number}") and meta["files"] == len(files)
        for name in CHUNK_CHECKS:
            (execution,) = checked[(name, key)]
            assert execution["runId"] == run_id and execution["partition"] == key
            counts = {
                e["label"]: e.get("intValue") for e in execution["evaluation"]["metadataEntries"]
            }
            assert execution["evaluation"]["success"], (name, key)
            assert (counts["chunks"], counts["documents"]) == (chunks, documents), (name, key)

    # Ctrl-C stopped the daemon: it is known to be gone at once, not after 90 s of silence.
    assert ownership.dev_marker(instance.root_directory) is None
    assert not launch.daemon_is_running(instance)
    _change_settings(settings, 4.0)
    started = {b.backfill_id for b in instance.get_backfills()}
    again = _seams("backfill")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "running here" in again.stdout and "UI at" not in again.stdout, again.stdout
    (latest,) = [b for b in instance.get_backfills() if b.backfill_id not in started]
    assert latest.status == BulkActionStatus.COMPLETED_SUCCESS
    left = instance.get_backfills(filters=BulkActionsFilter(statuses=[BulkActionStatus.REQUESTED]))
    assert left == []  # nothing for a later daemon to pick up and run again


LAUNCHED = """
query Backfill($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    ... on PartitionBackfill {
      status
      numPartitions
      runs { runId jobName status tags { key value } }
    }
  }
}
"""


@pytest.mark.slow
def test_a_backfill_launched_from_the_job_runs_as_a_run_of_the_job(
    instance: dg.DagsterInstance, defs: dg.Definitions, tmp_path: Path
) -> None:
    """What the UI sends for Materialize on the job's page (Jobs -> chunk_batches) with every
    batch picked: a backfill of the job's partition set, which the daemon runs as one run of
    `chunk_batches` over all batches (the assets' BackfillPolicy), as `seams run` does; its
    partition selection lists every batch."""
    keys = register_sample_batches(tmp_path, defs=defs)
    runner.ensure_model(instance, print, defs=defs)
    runner.materialize_batches(instance, keys, print, runner.RunSummary(batches=keys), defs=defs)
    dev, client = _start_dev(tmp_path, free_port())
    try:
        params = {
            "partitionNames": keys,
            "assetSelection": [{"path": key.path} for key in DEFAULT_LINEAGE.keys],
            "selector": {
                "partitionSetName": f"{DEFAULT_LINEAGE.job_name}_partition_set",
                "repositorySelector": {
                    "repositoryLocationName": "seams",
                    "repositoryName": "__repository__",
                },
            },
        }
        launched = client._execute(LAUNCH_BACKFILL, {"params": params})["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched
        deadline = time.monotonic() + 400
        while True:
            found = client._execute(LAUNCHED, {"id": launched["backfillId"]})
            backfill = found["partitionBackfillOrError"]
            if backfill["status"] not in ("REQUESTED", "CANCELING"):
                break
            assert dev.poll() is None, (tmp_path / "seams-dev.log").read_text()[-3000:]
            assert time.monotonic() < deadline, f"the backfill never finished: {backfill}"
            time.sleep(2)
    finally:
        dev.send_signal(signal.SIGINT)  # Ctrl-C
        assert dev.wait(timeout=180) == 0, (tmp_path / "seams-dev.log").read_text()[-3000:]
    assert backfill["status"] in ("COMPLETED", "COMPLETED_SUCCESS"), backfill
    (run,) = backfill["runs"]  # one run for both batches
    assert run["jobName"] == DEFAULT_LINEAGE.job_name and run["status"] == "SUCCESS", run
    tags = {tag["key"]: tag["value"] for tag in run["tags"]}
    assert (tags.get("dagster/asset_partition_range_start"), tags.get(
        "dagster/asset_partition_range_end")) == (keys[0], keys[-1])  # fmt: skip
    assert backfill["numPartitions"] == len(keys)  # its "Partition selection"
