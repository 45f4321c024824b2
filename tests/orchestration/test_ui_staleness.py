"""Staleness where people look, through the webserver's GraphQL: after a settings change and
"Reload definitions", the assets the change affects report unsynced batches (Dagster's own
per-partition status, and the `in_sync` check the graph and the overview show), and the assets it
does not affect stay in sync."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster_graphql import DagsterGraphQLClient

from seams.assets.partitions import document_batches
from seams.assets.sync import SYNC_CHECK, SYNCED_ASSETS
from seams.models.model_store import ModelManifest
from seams.orchestration import runner
from seams.orchestration.definitions import build_definitions
from seams.settings import load_settings
from tests.conftest import dagster_services

STALE_BY_PARTITION = """
query Stale($key: AssetKeyInput!, $partitions: [String!]) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode { staleStatusByPartition(partitions: $partitions) }
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

CHANGED = {"semantic_boundaries", "chunks", "chunk_index"}
"""What a boundary-threshold change affects: the cut, and everything built from it."""


def _stale(client: DagsterGraphQLClient, batch: str) -> dict[str, str]:
    found = {}
    for name in SYNCED_ASSETS:
        node = client._execute(STALE_BY_PARTITION, {"key": {"path": [name]}, "partitions": [batch]})
        (status,) = node["assetNodeOrError"]["staleStatusByPartition"]
        found[name] = status
    return found


def _in_sync(client: DagsterGraphQLClient) -> dict[str, tuple[bool, int]]:
    """Per asset, the latest `in_sync` verdict and its count of unsynced batches."""
    found = {}
    for name in SYNCED_ASSETS:
        result = client._execute(CHECK_EXECUTIONS, {"key": {"path": [name]}, "check": SYNC_CHECK})
        executions = result["assetCheckExecutions"]
        if executions and executions[0]["evaluation"]:
            evaluation = executions[0]["evaluation"]
            counts = {e["label"]: e.get("intValue") for e in evaluation["metadataEntries"]}
            found[name] = (evaluation["success"], counts.get("unsynced_batches"))
    return found


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
    (batch,) = runner.register_path(inbox, print)
    instance.add_dynamic_partitions(document_batches.name, [batch])
    settings = load_settings()
    result = (
        build_definitions(settings)
        .resolve_job_def(runner.JOB_NAME)
        .execute_in_process(instance=instance, partition_key=batch, run_config=runner.QUIET)
    )
    assert result.success

    with dagster_services(tmp_path) as client:
        assert set(_stale(client, batch).values()) == {"FRESH"}
        _wait_for(client, {name: (True, 0) for name in SYNCED_ASSETS})

        percentile = settings.chunking_config().percentile + 20.0
        settings_file.write_text(
            f"chunking:\n  overrides: {{percentile: {percentile}}}\n", encoding="utf-8"
        )
        reloaded = client.reload_repository_location("seams")
        assert reloaded.status.value == "SUCCESS", reloaded.message

        stale = _stale(client, batch)
        assert {name for name, status in stale.items() if status == "STALE"} == CHANGED
        assert {name for name, status in stale.items() if status == "FRESH"} == (
            set(SYNCED_ASSETS) - CHANGED
        )
        _wait_for(
            client, {name: (name not in CHANGED, int(name in CHANGED)) for name in SYNCED_ASSETS}
        )
