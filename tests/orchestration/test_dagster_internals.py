"""Every name of `seams.orchestration.dagster_internals`, the one module that uses Dagster's
private API, does here what Seams relies on it to do.

After a Dagster upgrade these are the tests to read first: each is named after the entry it
exercises, on a tiny code location of its own and a real (temporary) instance, so a moved,
renamed or changed private API fails here with the entry's name rather than deep in a pipeline
test. A new entry in the module needs a test here (`test_every_entry_is_exercised`).
"""

import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from seams.orchestration import dagster_internals as di

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.orchestration.test_dagster_internals"
BATCHES = dg.DynamicPartitionsDefinition(name="internals_batches")


def tiny_assets(code_version: str) -> list[dg.AssetsDefinition]:
    """Two per-batch assets (one run for a whole backfill) and an unpartitioned one."""

    @dg.asset(
        partitions_def=BATCHES,
        code_version=code_version,
        backfill_policy=dg.BackfillPolicy.single_run(),
    )
    def pieces(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata={"batches": len(context.partition_keys)})

    @dg.asset(
        partitions_def=BATCHES,
        deps=[pieces],
        code_version="1",
        backfill_policy=dg.BackfillPolicy.single_run(),
    )
    def joined(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata={"batches": len(context.partition_keys)})

    @dg.asset(code_version="model-1")
    def model() -> dg.MaterializeResult:
        return dg.MaterializeResult(data_version=dg.DataVersion("sha-1"))

    return [pieces, joined, model]


@dg.op
def hello() -> str:
    return "hello"


@dg.job
def hello_job() -> None:
    hello()


batches_job = dg.define_asset_job("batches_job", selection=["pieces", "joined"])
defs = dg.Definitions(assets=tiny_assets("1"), jobs=[hello_job, batches_job])
"""The tiny code location (a run worker loads it by module, as `reconstructable_job` says)."""


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    """A real instance on disk (SQLite), with a ref a run worker can open."""
    (tmp_path / "home").mkdir()
    ref = di.InstanceRef.from_dir(str(tmp_path / "home"))
    with dg.DagsterInstance.from_ref(ref) as opened:
        opened.add_dynamic_partitions(BATCHES.name, ["a", "b"])
        yield opened


def _graph(definitions: dg.Definitions = defs):
    return di.workspace_asset_graph(definitions, location_name="internals", module=MODULE)


def test_instance_ref_opens_a_home_with_storage_overridden(tmp_path: Path) -> None:
    storage = tmp_path / "elsewhere"
    (tmp_path / "home").mkdir()
    ref = di.InstanceRef.from_dir(
        str(tmp_path / "home"), overrides={"storage": {"sqlite": {"base_dir": str(storage)}}}
    )
    with dg.DagsterInstance.from_ref(ref) as instance:
        instance.add_run(
            dg.DagsterRun(job_name="hello_job", run_id="0" * 8 + "-0000-0000-0000-" + "0" * 12)
        )
        assert instance.root_directory == str(tmp_path / "home")
        assert len(instance.get_runs()) == 1
    assert any(storage.rglob("*.db")), "the storage override did not take: no database under it"


def test_tags_are_the_ones_dagster_writes(instance: dg.DagsterInstance) -> None:
    result = dg.materialize(tiny_assets("1")[:1], instance=instance, partition_key="a")
    assert result.dagster_run.tags[di.PARTITION_NAME_TAG] == "a"
    # A run tagged with a partition range materializes the whole range (one run per backfill).
    ranged = defs.resolve_job_def("batches_job").execute_in_process(
        instance=instance,
        tags={di.ASSET_PARTITION_RANGE_START_TAG: "a", di.ASSET_PARTITION_RANGE_END_TAG: "b"},
        asset_selection=[dg.AssetKey("pieces")],
    )
    partitions = {
        e.step_materialization_data.materialization.partition
        for e in ranged.get_asset_materialization_events()
    }
    assert partitions == {"a", "b"}
    # Names in stored runs and the UI's filters: a rename would orphan existing history.
    assert (di.PARTITION_NAME_TAG, di.BACKFILL_ID_TAG) == ("dagster/partition", "dagster/backfill")


def test_data_version_tags_are_what_a_run_records(instance: dg.DagsterInstance) -> None:
    dg.materialize(tiny_assets("1")[2:], instance=instance)
    event = instance.get_latest_materialization_event(dg.AssetKey("model"))
    assert event is not None and event.asset_materialization is not None
    tags = event.asset_materialization.tags
    assert tags[di.DATA_VERSION_TAG] == "sha-1"
    assert tags[di.CODE_VERSION_TAG] == "model-1"
    assert tags[di.DATA_VERSION_IS_USER_PROVIDED_TAG] == "true"


def test_stale_status_resolver_tells_fresh_stale_and_missing(
    instance: dg.DagsterInstance,
) -> None:
    dg.materialize(tiny_assets("1")[:2], instance=instance, partition_key="a")
    key = dg.AssetKey("pieces")
    before = di.stale_status_resolver(instance, defs.resolve_asset_graph())
    assert before.get_status(key, "a") == di.StaleStatus.FRESH
    assert before.get_status(key, "b") == di.StaleStatus.MISSING
    changed = dg.Definitions(assets=tiny_assets("2"))  # the code version moved on
    after = di.stale_status_resolver(instance, changed.resolve_asset_graph())
    assert after.get_status(key, "a") == di.StaleStatus.STALE


def test_provenance_tags_are_those_a_run_writes(instance: dg.DagsterInstance) -> None:
    @dg.asset(partitions_def=BATCHES, code_version="1")
    def rows() -> int:
        return 1

    @dg.asset(partitions_def=BATCHES, code_version="2")
    def total(rows: int) -> int:  # a partitioned input, loaded by the IO manager
        return rows + 1

    for partition in ("a", "b"):
        dg.materialize([rows], instance=instance, partition_key=partition)
    dg.materialize([rows, total], instance=instance, partition_key="a", selection=[total])

    def latest(key: dg.AssetKey) -> dg.EventLogRecord:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, asset_partitions=["a"]), limit=1
        ).records
        return records[0]

    real = latest(total.key).asset_materialization.tags
    rebuilt = di.provenance_tags("2", {rows.key: latest(rows.key)})
    pointer = "dagster/input_event_pointer/rows"  # the run's names rows' newest event (of b)
    assert rebuilt[pointer] == str(latest(rows.key).storage_id) != real[pointer]
    assert {k: v for k, v in rebuilt.items() if k != pointer} == {
        k: real[k] for k in rebuilt if k != pointer
    }
    assert di.CODE_VERSION_TAG in rebuilt and di.DATA_VERSION_TAG in rebuilt


def test_check_evaluation_targets_a_materialization(instance: dg.DagsterInstance) -> None:
    dg.materialize(tiny_assets("1")[2:], instance=instance)
    key = dg.AssetKey("model")
    [record] = instance.get_asset_records([key])
    latest = record.asset_entry.last_materialization_record
    target = di.AssetCheckEvaluationTargetMaterializationData(
        storage_id=latest.storage_id, run_id=latest.run_id, timestamp=latest.timestamp
    )
    check = dg.AssetCheckKey(key, "in_sync")
    instance.report_runless_asset_event(
        dg.AssetCheckEvaluation(
            asset_key=key, check_name=check.name, passed=True, target_materialization_data=target
        )
    )
    stored = instance.get_latest_asset_check_evaluation_record(check)
    assert stored is not None and stored.evaluation is not None
    assert stored.evaluation.target_materialization_data == target


def test_workspace_asset_graph_carries_code_versions_and_policies() -> None:
    graph = _graph()
    assert set(graph.get_all_asset_keys()) == {
        dg.AssetKey(n) for n in ("pieces", "joined", "model")
    }
    node = graph.get(dg.AssetKey("pieces"))
    assert node.code_version == "1"
    assert node.backfill_policy == dg.BackfillPolicy.single_run()


def test_a_backfill_planned_run_and_finished(instance: dg.DagsterInstance) -> None:
    """new_asset_backfill, backfill_partitions, backfill_iteration, with_backfill_data,
    final_backfill_data, PartitionBackfill, AssetBackfillData, BulkActionStatus and
    BulkActionsFilter, in the order `launch.run_backfill_here` uses them."""
    graph = _graph()
    keys = [dg.AssetKey("pieces"), dg.AssetKey("joined")]
    backfill = di.new_asset_backfill(
        instance,
        graph,
        [(key, part) for key in keys for part in ("a", "b")],
        timestamp=time.time(),
        tags={"seams/started_by": "test"},
        title="test: 2 batches",
        description="a, b",
        run_config=None,
    )
    assert isinstance(backfill, di.PartitionBackfill)
    assert len(backfill.backfill_id) == di.BACKFILL_ID_LENGTH
    assert di.backfill_partitions(backfill, graph) == ["a", "b"]
    _, failed = di.final_backfill_data(backfill.get_asset_backfill_data(graph))
    assert failed  # nothing materialized yet: a backfill ending now has failed
    instance.add_backfill(backfill)

    data, requests = di.backfill_iteration(instance, graph, backfill, logging.getLogger("test"))
    assert isinstance(data, di.AssetBackfillData)
    assert len(requests) == 1  # single_run: both batches and both assets in one run
    [request] = requests
    assert (request.partition_key_range.start, request.partition_key_range.end) == ("a", "b")
    instance.update_backfill(di.with_backfill_data(backfill, data, instance, graph))
    tags = {
        **request.tags,
        di.BACKFILL_ID_TAG: backfill.backfill_id,
        di.ASSET_PARTITION_RANGE_START_TAG: "a",
        di.ASSET_PARTITION_RANGE_END_TAG: "b",
    }
    tags.pop(di.PARTITION_NAME_TAG, None)
    result = defs.resolve_job_def("batches_job").execute_in_process(
        instance=instance, tags=tags, asset_selection=list(request.asset_selection)
    )
    assert result.success

    stored = instance.get_backfill(backfill.backfill_id)
    data, requests = di.backfill_iteration(instance, graph, stored, logging.getLogger("test"))
    assert not requests  # all done
    data, failed = di.final_backfill_data(data)
    assert not failed
    instance.update_backfill(
        di.with_backfill_data(stored, data, instance, graph).with_status(
            di.BulkActionStatus.COMPLETED_SUCCESS
        )
    )
    done = instance.get_backfills(
        filters=di.BulkActionsFilter(statuses=[di.BulkActionStatus.COMPLETED_SUCCESS])
    )
    assert [b.backfill_id for b in done] == [backfill.backfill_id]
    runs = instance.get_runs(filters=dg.RunsFilter(tags={di.BACKFILL_ID_TAG: backfill.backfill_id}))
    assert [r.run_id for r in runs] == [result.run_id]


@pytest.mark.slow
@pytest.mark.services
def test_a_reconstructable_job_runs_in_a_run_worker(instance: dg.DagsterInstance) -> None:
    """reconstructable_job, ReconstructableJob and execute_run_argument: the run worker
    `dagster api execute_run` executes a run created here."""
    job = di.reconstructable_job(MODULE, "hello_job")
    assert isinstance(job, di.ReconstructableJob)
    run = instance.create_run_for_job(
        job_def=job.get_definition(), job_code_origin=job.get_python_origin()
    )
    argument = di.execute_run_argument(job, run.run_id, instance)
    worker = subprocess.run(
        [sys.executable, "-m", "dagster", "api", "execute_run", argument],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this module is not installed, seams is
        capture_output=True,
        text=True,
        timeout=120,
    )
    finished = instance.get_run_by_id(run.run_id)
    assert worker.returncode == 0, worker.stderr[-2000:]
    assert finished is not None and finished.status == dg.DagsterRunStatus.SUCCESS


def test_backfill_daemon_type_names_a_daemon(instance: dg.DagsterInstance) -> None:
    kind = di.backfill_daemon_type()
    assert kind in instance.get_required_daemon_types()
    status = instance.get_daemon_statuses([kind])[kind]
    assert status.required and status.last_heartbeat is None  # no daemon runs here


EXERCISED = {
    "ASSET_PARTITION_RANGE_END_TAG": test_tags_are_the_ones_dagster_writes,
    "ASSET_PARTITION_RANGE_START_TAG": test_tags_are_the_ones_dagster_writes,
    "BACKFILL_ID_TAG": test_a_backfill_planned_run_and_finished,
    "CODE_VERSION_TAG": test_data_version_tags_are_what_a_run_records,
    "DATA_VERSION_IS_USER_PROVIDED_TAG": test_data_version_tags_are_what_a_run_records,
    "DATA_VERSION_TAG": test_data_version_tags_are_what_a_run_records,
    "PARTITION_NAME_TAG": test_tags_are_the_ones_dagster_writes,
    "AssetBackfillData": test_a_backfill_planned_run_and_finished,
    "AssetCheckEvaluationTargetMaterializationData": (
        test_check_evaluation_targets_a_materialization
    ),
    "BulkActionStatus": test_a_backfill_planned_run_and_finished,
    "BulkActionsFilter": test_a_backfill_planned_run_and_finished,
    "InstanceRef": test_instance_ref_opens_a_home_with_storage_overridden,
    "PartitionBackfill": test_a_backfill_planned_run_and_finished,
    "ReconstructableJob": test_a_reconstructable_job_runs_in_a_run_worker,
    "StaleStatus": test_stale_status_resolver_tells_fresh_stale_and_missing,
    "backfill_daemon_type": test_backfill_daemon_type_names_a_daemon,
    "backfill_iteration": test_a_backfill_planned_run_and_finished,
    "backfill_partitions": test_a_backfill_planned_run_and_finished,
    "execute_run_argument": test_a_reconstructable_job_runs_in_a_run_worker,
    "final_backfill_data": test_a_backfill_planned_run_and_finished,
    "new_asset_backfill": test_a_backfill_planned_run_and_finished,
    "provenance_tags": test_provenance_tags_are_those_a_run_writes,
    "reconstructable_job": test_a_reconstructable_job_runs_in_a_run_worker,
    "stale_status_resolver": test_stale_status_resolver_tells_fresh_stale_and_missing,
    "with_backfill_data": test_a_backfill_planned_run_and_finished,
    "workspace_asset_graph": test_workspace_asset_graph_carries_code_versions_and_policies,
}
"""Each exported entry and the test that exercises it."""


def test_every_entry_is_exercised() -> None:
    assert set(EXERCISED) == set(di.__all__), (
        "dagster_internals exports entries without a test here (or a test names an entry it "
        f"no longer has): {sorted(set(di.__all__) ^ set(EXERCISED))}"
    )


def test_the_tag_values_are_dagsters_own() -> None:
    """The tag strings `dagster_internals` holds as values are Dagster's own constants (which
    stay private: only this test imports them, so a release that moves or changes one fails
    here, not in a run)."""
    from dagster._core.definitions import data_version
    from dagster._core.storage import tags

    for name in (
        "PARTITION_NAME_TAG",
        "ASSET_PARTITION_RANGE_START_TAG",
        "ASSET_PARTITION_RANGE_END_TAG",
        "BACKFILL_ID_TAG",
    ):
        assert getattr(di, name) == getattr(tags, name), name
    for name in (
        "CODE_VERSION_TAG",
        "DATA_VERSION_TAG",
        "DATA_VERSION_IS_USER_PROVIDED_TAG",
        "DEFAULT_DATA_VERSION",
        "NULL_EVENT_POINTER",
    ):
        assert getattr(di, name) == getattr(data_version, name), name
