"""`seams run` and `seams backfill` record their work as one Dagster asset backfill.

No daemon runs here (the CLI case): Seams drives the backfill through Dagster's own planner and
executes its run in-process; the instance must show one backfill, its runs tagged with it, every
partition materialized, and per-partition row counts in each materialization.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import psycopg
import pytest

from seams.orchestration import launch, runner
from seams.orchestration.dagster_internals import BulkActionStatus
from seams.orchestration.definitions import build_definitions
from seams.settings import SeamsSettings, load_settings
from tests.support.samples import register_sample_batches

CHUNK_CHECKS = ("exact_slices", "nothing_lost", "sizes_within_bounds", "unique_chunk_ids")


def _backfill_runs(instance: dg.DagsterInstance, backfill_id: str) -> list[dg.DagsterRun]:
    return list(
        instance.get_runs(filters=dg.RunsFilter(tags={launch.BACKFILL_ID_TAG: backfill_id}))
    )


def _partition_row_counts(instance: dg.DagsterInstance, run_id: str, asset: str) -> dict:
    counts = {}
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event and event.is_step_materialization:
            materialization = event.step_materialization_data.materialization
            if materialization.asset_key == dg.AssetKey(asset):
                meta = materialization.metadata["dagster/partition_row_count"]
                counts[materialization.partition] = int(meta.value)
    return counts


def _chunk_materializations(instance: dg.DagsterInstance, run_id: str) -> dict[str, dict]:
    """Per partition, the metadata values of `chunks`' materialization in `run_id`."""
    found = {}
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event and event.is_step_materialization:
            materialization = event.step_materialization_data.materialization
            if materialization.asset_key == dg.AssetKey("chunks"):
                found[materialization.partition] = {
                    k: v.value for k, v in materialization.metadata.items()
                }
    return found


def _check_evaluations(instance: dg.DagsterInstance, run_id: str) -> dict[tuple[str, str], dict]:
    """Per (check, partition), the numbers of `chunks`' check evaluations in `run_id`."""
    found = {}
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event and event.event_type_value == "ASSET_CHECK_EVALUATION":
            evaluation = event.event_specific_data
            if evaluation.asset_key == dg.AssetKey("chunks"):
                values = {k: v.value for k, v in evaluation.metadata.items()}
                found[(evaluation.check_name, evaluation.partition)] = {
                    "passed": evaluation.passed,
                    **values,
                }
    return found


def _stored_per_batch(database_url: str) -> dict[str, tuple[int, int, list[str]]]:
    """Per batch: stored chunks, documents chunked and the file names of its documents."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT c.batch_key, count(*), count(DISTINCT c.document_id),"
            " array_agg(DISTINCT e.source_uri) FROM seams.chunks c JOIN seams.extracted_text e"
            " USING (batch_key, document_id) GROUP BY 1"
        ).fetchall()
    return {key: (n, docs, sorted(u.rsplit("/", 1)[-1] for u in uris))
            for key, n, docs, uris in rows}  # fmt: skip


def assert_each_batch_describes_itself(
    instance: dg.DagsterInstance, run_id: str, database_url: str
) -> None:
    """Every `chunks` materialization and check evaluation of `run_id` (one run over several
    batches) reports its own batch's counts, and its preview names only that batch's files."""
    stored = _stored_per_batch(database_url)
    materialized = _chunk_materializations(instance, run_id)
    evaluations = _check_evaluations(instance, run_id)
    assert set(materialized) == set(stored) and len(stored) > 1
    for batch, (chunks, documents, names) in stored.items():
        meta = materialized[batch]
        assert (meta["chunks"], meta["documents_chunked"]) == (chunks, documents), batch
        assert meta["dagster/row_count"] == meta["dagster/partition_row_count"] == chunks
        previewed = {line.split("|")[1].strip() for line in meta["preview"].splitlines()[2:]}
        assert previewed and previewed <= set(names), (batch, previewed, names)
        assert meta["tokens_p95"] == round(meta["tokens_p95"], 1)
        for check in CHUNK_CHECKS:
            result = evaluations[(check, batch)]
            assert result["passed"], (check, batch, result)
            assert (result["chunks"], result["documents"]) == (chunks, documents), (check, batch)
    pooled = [key for key in evaluations if key[0] in CHUNK_CHECKS and key[1] not in stored]
    assert not pooled, pooled  # no evaluation of a chunks check pools the run's batches


def _stored_counts(database_url: str) -> dict[str, int]:
    with psycopg.connect(database_url) as conn:
        return dict(conn.execute("SELECT batch_key, count(*) FROM seams.chunks GROUP BY batch_key"))


@pytest.mark.slow
def test_two_batches_then_a_settings_change_are_each_one_backfill_with_one_run(
    instance: dg.DagsterInstance, defs: dg.Definitions, tmp_path: Path, database_url: str
) -> None:
    keys = register_sample_batches(tmp_path, defs=defs)
    assert len(keys) == 2
    summary = runner.RunSummary(batches=keys)
    runner.materialize_batches(instance, keys, print, summary, defs=defs)

    (first_id,) = summary.backfill_ids
    first = instance.get_backfill(first_id)
    assert first.status == BulkActionStatus.COMPLETED_SUCCESS
    assert first.tags[launch.STARTED_BY_TAG] == "seams run"
    (run,) = _backfill_runs(instance, first_id)
    assert first.tags[launch.LAUNCHED_BY_TAG] == run.tags[launch.LAUNCHED_BY_TAG] == "seams run"
    assert summary.run_ids == [run.run_id]
    assert run.status == dg.DagsterRunStatus.SUCCESS
    stored = _stored_counts(database_url)
    assert set(stored) == set(keys) and all(n > 0 for n in stored.values())
    assert stored[keys[0]] < stored[keys[1]]
    assert _partition_row_counts(instance, run.run_id, "chunks") == stored
    assert_each_batch_describes_itself(instance, run.run_id, database_url)

    # A settings change makes the boundary stages unsynced; `seams backfill` recomputes them.
    defaults = load_settings()
    changed = SeamsSettings.model_validate(
        {**defaults.model_dump(), "chunking": {"preset": "default", "overrides": {"cut_cost": 3.0}}}
    )
    changed_defs = build_definitions(changed)
    stale = runner.unsynced_assets(instance, keys, defs=changed_defs)
    assert all(dg.AssetKey("chunks") in stale[k] for k in keys)
    assert all(dg.AssetKey("candidate_embeddings") not in stale[k] for k in keys)

    again = runner.backfill(instance, print, defs=changed_defs)
    (second_id,) = again.backfill_ids
    second = instance.get_backfill(second_id)
    assert second.status == BulkActionStatus.COMPLETED_SUCCESS
    assert second.tags[launch.STARTED_BY_TAG] == "seams backfill"
    (rerun,) = _backfill_runs(instance, second_id)
    assert second.tags[launch.LAUNCHED_BY_TAG] == rerun.tags[launch.LAUNCHED_BY_TAG]
    assert rerun.tags[launch.LAUNCHED_BY_TAG] == "seams backfill"
    assert again.run_ids == [rerun.run_id]
    assert set(second.asset_selection) == set(stale[keys[0]])
    data = second.get_asset_backfill_data(changed_defs.resolve_asset_graph())
    assert data.materialized_subset == data.target_subset  # every partition ended materialized
    assert again.texts_embedded == 0  # unchanged embeddings: nothing re-embedded
    assert _partition_row_counts(instance, rerun.run_id, "chunks") == _stored_counts(database_url)
    assert_each_batch_describes_itself(instance, rerun.run_id, database_url)
    assert runner.unsynced_assets(instance, keys, defs=changed_defs) == {k: [] for k in keys}
    assert (
        runner.backfill(instance, print, defs=changed_defs).backfill_ids == []
    )  # nothing left to do
