"""The UI's sync state, however it is reached: `in_sync` executed by hand gives the sensor's
verdict, `backfill_unsynced` (the one click) backfills exactly the unsynced batches and assets,
and the partitioned invariant checks count as evaluated on each batch's page.

Against a real PostgreSQL-backed instance, through Dagster's Python API: the check is executed
alone as the UI's "Execute" does it (a run of the asset job holding only the check), the sensor
is evaluated with the location's repository, and the backfill the job requests is run by the
planner the daemon uses.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from seams.assets.partitions import document_batches
from seams.orchestration import launch, runner
from seams.orchestration.dagster_internals import (
    BulkActionsFilter,
    BulkActionStatus,
    backfill_partitions,
)
from seams.orchestration.definitions import build_definitions
from seams.orchestration.jobs import REQUESTED_BY_RUN_TAG
from seams.orchestration.sync import BACKFILL_JOB, SYNC_CHECK_KEYS, SYNC_SENSOR
from seams.settings import SeamsSettings, load_settings
from seams.storage.schema import BATCH_ASSETS
from tests.support.samples import copy_samples, register_sample_batches

CHANGED = {"semantic_boundaries", "chunks", "chunk_index"}
"""What a boundary-cost change affects: the cut, and everything built from it."""
CHUNK_CHECKS = ("exact_slices", "nothing_lost", "sizes_within_bounds", "unique_chunk_ids")


def _changed_definitions() -> dg.Definitions:
    defaults = load_settings()
    changed = SeamsSettings.model_validate(
        {**defaults.model_dump(), "chunking": {"preset": "default", "overrides": {"cut_cost": 3.0}}}
    )
    return build_definitions(changed)


def _in_sync_alone(defs: dg.Definitions, instance: dg.DagsterInstance) -> dict[str, tuple]:
    """Execute only the in_sync checks, as the Checks tab's "Execute" does (a run of the asset
    job holding no asset); per asset, (passed, unsynced batches, description)."""
    job = defs.resolve_implicit_global_asset_job_def().get_subset(
        asset_selection=set(), asset_check_selection=set(SYNC_CHECK_KEYS)
    )
    result = job.execute_in_process(instance=instance)
    assert result.success
    found = {}
    for evaluation in result.get_asset_check_evaluations():
        found[evaluation.asset_key.to_user_string()] = (
            evaluation.passed,
            evaluation.metadata["unsynced_batches"].value,
            evaluation.description,
        )
    assert set(found) == set(BATCH_ASSETS)
    return found


def _sensor_verdict(defs: dg.Definitions, instance: dg.DagsterInstance) -> dict[str, tuple]:
    sensor = defs.resolve_sensor_def(SYNC_SENSOR)
    context = dg.build_sensor_context(instance=instance, repository_def=defs.get_repository_def())
    result = sensor(context)
    return {
        e.asset_key.to_user_string(): (
            e.passed,
            e.metadata["unsynced_batches"].value,
            e.description,
        )
        for e in result.asset_events
    }


def _materialized_since(
    instance: dg.DagsterInstance, after_storage_id: int
) -> set[tuple[str, str]]:
    """(asset, batch) pairs materialized after storage id `after_storage_id`."""
    found = set()
    for name in BATCH_ASSETS:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(name), after_storage_id=after_storage_id),
            limit=1000,
        ).records
        found |= {(name, r.partition_key) for r in records}
    return found


def _latest_storage_id(instance: dg.DagsterInstance) -> int:
    return max(
        record.storage_id
        for name in BATCH_ASSETS
        for record in instance.fetch_materializations(dg.AssetKey(name), limit=1).records
    )


def _check_partitions(instance: dg.DagsterInstance, keys: list[str]) -> dict[tuple, tuple]:
    """What the check's Partitions tab counts, per (check, batch): the latest execution's status
    and whether it targets the batch's latest materialization (else the UI says "Missing")."""
    wanted = [dg.AssetCheckKey(dg.AssetKey("chunks"), name) for name in CHUNK_CHECKS]
    infos = instance.event_log_storage.get_asset_check_partition_info(wanted, partition_keys=keys)
    return {
        (info.check_key.name, info.partition_key): (
            info.latest_execution_status.value,
            info.is_current,
        )
        for info in infos
    }


@pytest.mark.slow
def test_in_sync_by_hand_and_the_one_click_backfill_after_a_settings_change(
    instance: dg.DagsterInstance, defs: dg.Definitions, tmp_path: Path
) -> None:
    keys = register_sample_batches(tmp_path, defs=defs)
    runner.materialize_batches(instance, keys, print, runner.RunSummary(batches=keys), defs=defs)
    # Each batch's partitioned checks passed and count as evaluated on that batch (the
    # Partitions tab said "Missing" when the evaluations named no materialization).
    assert _check_partitions(instance, keys) == {
        (check, key): ("SUCCEEDED", True) for check in CHUNK_CHECKS for key in keys
    }

    # The settings change; a third batch chunked with the new settings is in sync.
    changed = _changed_definitions()
    newer = copy_samples(tmp_path / "newer", ["city_notes.txt"])
    (third,) = runner.register_path(newer, print, defs=changed)
    runner.materialize_batches(
        instance, [third], print, runner.RunSummary(batches=[third]), defs=changed
    )
    assert set(instance.get_dynamic_partitions(document_batches.name)) == {*keys, third}

    expected = {
        name: (
            (False, 2, f"2 of 3 batches unsynced: launch the job {BACKFILL_JOB}")
            if name in CHANGED
            else (True, 0, None)
        )
        for name in BATCH_ASSETS
    }
    by_hand = _in_sync_alone(changed, instance)
    assert by_hand == expected  # before: "Passed, 0 of 3 unsynced" on every asset
    assert _sensor_verdict(changed, instance) == by_hand  # one verdict however it is run

    # The one click: the job requests one backfill of exactly the unsynced pairs.
    result = changed.resolve_job_def(BACKFILL_JOB).execute_in_process(instance=instance)
    assert result.success
    (requested,) = instance.get_backfills(
        filters=BulkActionsFilter(tags={REQUESTED_BY_RUN_TAG: result.run_id})
    )
    assert requested.status == BulkActionStatus.REQUESTED  # the daemon launches its runs
    assert requested.tags[launch.LAUNCHED_BY_TAG] == BACKFILL_JOB  # the UI's "Launched by"
    graph = launch.workspace_asset_graph(changed)
    assert backfill_partitions(requested, graph) == sorted(keys)  # not the third batch
    assert {k.to_user_string() for k in requested.asset_selection} == CHANGED

    # Run as the daemon would run it: exactly those pairs are recomputed, nothing else.
    before = _latest_storage_id(instance)
    outcome = launch.run_backfill_here(instance, changed, requested, runner.JOB_NAME, print)
    assert outcome.status == BulkActionStatus.COMPLETED_SUCCESS
    assert _materialized_since(instance, before) == {(n, k) for n in CHANGED for k in keys}
    assert instance.get_run_by_id(outcome.run_ids[0]).tags[launch.LAUNCHED_BY_TAG] == BACKFILL_JOB
    assert _in_sync_alone(changed, instance) == {n: (True, 0, None) for n in BATCH_ASSETS}
    assert _check_partitions(instance, keys) == {
        (check, key): ("SUCCEEDED", True) for check in CHUNK_CHECKS for key in keys
    }

    # Nothing unsynced: the job says so and requests nothing.
    again = changed.resolve_job_def(BACKFILL_JOB).execute_in_process(instance=instance)
    assert again.success
    assert not instance.get_backfills(
        filters=BulkActionsFilter(tags={REQUESTED_BY_RUN_TAG: again.run_id})
    )
