"""Issue 18's done-when, against the webserver's GraphQL with a live daemon: `seams backfill` over
two batches after a settings change is exactly one backfill entry and one run, every partition
ends materialized, and each partition's `chunks` materialization counts that partition's rows.

With the daemon alive the CLI hands the backfill to it (Dagster's own backfill loop launches the
run through the run queue and the code server) and follows it to the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import psycopg
import pytest

from seams.orchestration import launch, runner
from tests.conftest import dagster_services, register_sample_batches

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
        runs { runId status }
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
        metadataEntries { label ... on IntMetadataEntry { intValue } }
      }
    }
  }
}
"""


@pytest.mark.slow
def test_seams_backfill_is_one_dagster_backfill_with_one_run_per_graphql(
    instance: dg.DagsterInstance,
    tmp_path: Path,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys = register_sample_batches(tmp_path)
    runner.materialize_batches(instance, keys, print, runner.RunSummary(batches=keys))
    before = {b.backfill_id for b in instance.get_backfills()}

    # The settings change, seen by every process started from now on (as after a reload).
    settings = tmp_path / "seams.yaml"
    settings.write_text("chunking:\n  overrides: {cut_cost: 3.0}\n", encoding="utf-8")
    monkeypatch.setenv("SEAMS_CONFIG", str(settings))

    with dagster_services(tmp_path) as client:
        deadline = time.monotonic() + 180
        while not launch.daemon_is_running(instance):
            assert time.monotonic() < deadline, "the daemon never sent a heartbeat"
            time.sleep(1)
        done = subprocess.run(
            [sys.executable, "-m", "seams", "backfill"],
            env=os.environ.copy(), capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "handed to the running Dagster daemon" in done.stdout

        backfills = client._execute(BACKFILLS)["partitionBackfillsOrError"]["results"]
        new = [b for b in backfills if b["id"] not in before]
        assert len(new) == 1, new  # exactly one backfill entry
        (entry,) = new
        assert entry["isAssetBackfill"] and entry["status"] == "COMPLETED_SUCCESS", entry
        assert {"key": launch.STARTED_BY_TAG, "value": "seams backfill"} in entry["tags"]
        assert {tuple(a["path"]) for a in entry["assetSelection"]} == {
            ("semantic_boundaries",),
            ("chunks",),
            ("chunk_index",),
        }
        assert len(entry["runs"]) == 1 and entry["runs"][0]["status"] == "SUCCESS", entry
        (run_id,) = (r["runId"] for r in entry["runs"])

        found = client._execute(MATERIALIZATIONS, {"key": {"path": ["chunks"]}})
        reported = {
            m["partition"]: {e["label"]: e.get("intValue") for e in m["metadataEntries"]}
            for m in found["assetOrError"]["assetMaterializations"]
            if m["runId"] == run_id
        }

    assert set(reported) == set(keys)  # every partition ended materialized by that one run
    with psycopg.connect(database_url) as conn:
        stored = dict(conn.execute("SELECT batch_key, count(*) FROM seams.chunks GROUP BY 1"))
    assert stored[keys[0]] != stored[keys[1]]
    assert {k: v["dagster/partition_row_count"] for k, v in reported.items()} == stored
