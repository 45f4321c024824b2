"""The one module that reaches into Dagster's private API (`dagster._...`), for what Dagster
1.12 and 1.13 have no public API for.

Everything else in Seams uses `import dagster as dg` only. Each name here says what Seams needs
it for and which public API is missing; the small functions wrap the private calls so the rest of
the code handles their results as opaque values. `tests/orchestration/test_dagster_internals.py`
exercises every name (and the methods the callers use on the returned objects), so a Dagster
upgrade that moves or changes one fails there first, naming the entry. Keep it that way: a new
private import goes here, with its reason, and into that test.
"""

from __future__ import annotations

import hashlib
import logging
import random
import string
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

import dagster as dg

# The effective time and instance a staleness resolver or the backfill planner reads through;
# no public constructor.
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext

# The code pointer of the workspace asset graph's repository handle (see `workspace_asset_graph`).
from dagster._core.code_pointer import ModuleCodePointer

# Ties a sensor-reported check evaluation to the materialization it judged:
# `dg.AssetCheckEvaluation(target_materialization_data=...)` is public, this type is not.
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)

# The (asset, partition) set an asset backfill targets; no public constructor of a backfill.
from dagster._core.definitions.assets.graph.asset_graph_subset import AssetGraphSubset

# The workspace asset graph the backfill planner works on (a daemon builds it from a code
# server's snapshot, `workspace_asset_graph` from the definitions in hand); no public builder.
from dagster._core.definitions.assets.graph.remote_asset_graph import (
    RemoteWorkspaceAssetGraph,
    RemoteWorkspaceAssetNode,
    RepositoryScopedAssetInfo,
)

# The per-partition "unsynced" verdict the UI shows on a partition's page (no public resolver
# or enum). The tags a run's materialization carries to say which input data versions and
# events it was computed from, and its data version computed from them (`provenance_tags`: a
# materialization recorded without a run, of a write a stopped run made); no public API
# writes them.
from dagster._core.definitions.data_version import (
    CachingStaleStatusResolver,
    StaleStatus,
    compute_logical_data_version,
    get_input_data_version_tag,
    get_input_event_pointer_tag,
)

# One (asset, partition) pair of a backfill's target set; not exported.
from dagster._core.definitions.events import AssetKeyPartitionKey

# A job every run worker loads by module: `dg.reconstructable` takes a module-level job or
# job-making function, not a job of a `Definitions`.
from dagster._core.definitions.reconstruct import ReconstructableJob, ReconstructableRepository

# Dagster's backfill planner, the function the daemon's backfill loop calls, and the state it
# keeps in a backfill; not exported.
from dagster._core.execution.asset_backfill import (
    AssetBackfillData,
    execute_asset_backfill_iteration_inner,
)

# A backfill, its status and the filter of `instance.get_backfills`: the instance's
# `add_backfill`/`get_backfills`/`update_backfill` are public, the types they take are not.
from dagster._core.execution.backfill import BulkActionsFilter, BulkActionStatus, PartitionBackfill

# An instance opened from a Dagster home with its storage overridden in code (Seams' own
# PostgreSQL URL, never written into dagster.yaml): `DagsterInstance.from_config` takes no
# overrides.
from dagster._core.instance.ref import InstanceRef

# The repository handle of the workspace asset graph (see `workspace_asset_graph`).
from dagster._core.origin import RepositoryPythonOrigin
from dagster._core.remote_origin import RegisteredCodeLocationOrigin
from dagster._core.remote_representation.external import RemoteRepository
from dagster._core.remote_representation.external_data import RepositorySnap
from dagster._core.remote_representation.handle import RepositoryHandle

# The argument of `dagster api execute_run`, what the DefaultRunLauncher starts a run worker
# with; no public constructor.
from dagster._grpc.types import ExecuteRunArgs

# Tag values, not imports: the strings Dagster writes and reads, as its UI and documentation
# show them (`tests/orchestration/test_dagster_internals.py` checks each against what a real run
# records, so a release that changes one fails there).
PARTITION_NAME_TAG = "dagster/partition"
"""A run's partition."""
ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"
"""The partition range of a run covering several (the UI groups runs by them)."""
BACKFILL_ID_TAG = "dagster/backfill"
"""The backfill a run belongs to."""
CODE_VERSION_TAG = "dagster/code_version"
DATA_VERSION_TAG = "dagster/data_version"
DATA_VERSION_IS_USER_PROVIDED_TAG = "dagster/data_version_is_user_provided"
"""The tags with which a runless materialization (a model found in the data dir) records its
data and code version: `report_runless_asset_event` takes no data version, only
`MaterializeResult`/`Output` inside a run do."""
DEFAULT_DATA_VERSION = dg.DataVersion("INITIAL")
"""The data version Dagster gives an input that was never materialized."""
NULL_EVENT_POINTER = "NULL"
"""The event pointer Dagster records for such an input."""

__all__ = [
    "ASSET_PARTITION_RANGE_END_TAG",
    "ASSET_PARTITION_RANGE_START_TAG",
    "BACKFILL_ID_TAG",
    "CODE_VERSION_TAG",
    "DATA_VERSION_IS_USER_PROVIDED_TAG",
    "DATA_VERSION_TAG",
    "PARTITION_NAME_TAG",
    "AssetBackfillData",
    "AssetCheckEvaluationTargetMaterializationData",
    "BulkActionStatus",
    "BulkActionsFilter",
    "InstanceRef",
    "PartitionBackfill",
    "ReconstructableJob",
    "StaleStatus",
    "backfill_daemon_type",
    "backfill_iteration",
    "backfill_partitions",
    "execute_run_argument",
    "final_backfill_data",
    "new_asset_backfill",
    "provenance_tags",
    "reconstructable_job",
    "stale_status_resolver",
    "with_backfill_data",
    "workspace_asset_graph",
]

BACKFILL_ID_LENGTH = 8
"""A backfill id as Dagster makes them (`make_new_backfill_id`): 8 lowercase letters."""


def _view(instance: dg.DagsterInstance, asset_graph: object, effective: datetime) -> AssetGraphView:
    return AssetGraphView(
        temporal_context=TemporalContext(effective_dt=effective, last_event_id=None),
        instance=instance,
        asset_graph=asset_graph,
    )


def stale_status_resolver(
    instance: dg.DagsterInstance, asset_graph: object
) -> CachingStaleStatusResolver:
    """Dagster's own per-partition staleness resolver, as the UI's partition page uses it:
    `.get_status(asset_key, partition)` -> `StaleStatus` (MISSING, STALE or FRESH)."""
    view = _view(instance, asset_graph, datetime.now(UTC))
    return CachingStaleStatusResolver(
        instance=instance, asset_graph=asset_graph, loading_context=view
    )


def workspace_asset_graph(
    defs: dg.Definitions, *, location_name: str, module: str, attribute: str = "defs"
) -> RemoteWorkspaceAssetGraph:
    """`defs` as a daemon sees them: the workspace asset graph of code location
    `location_name`, which loads `attribute` of `module`.

    Dagster's backfill planner works on the workspace graph (a daemon builds it from the code
    server's snapshot); this builds the same graph from the definitions in hand, so the planner
    sees exactly the code versions and backfill policies this process will execute.
    """
    repository = defs.get_repository_def()
    handle = RepositoryHandle(
        repository_name=repository.name,
        code_location_origin=RegisteredCodeLocationOrigin(location_name=location_name),
        repository_python_origin=RepositoryPythonOrigin(
            executable_path=sys.executable,
            code_pointer=ModuleCodePointer(module=module, fn_name=attribute),
        ),
        display_metadata={},
    )
    remote = RemoteRepository(
        RepositorySnap.from_def(repository), handle, auto_materialize_use_sensors=True
    ).asset_graph
    nodes = {
        key: RemoteWorkspaceAssetNode(
            repo_scoped_asset_infos=[
                RepositoryScopedAssetInfo(
                    asset_node=node, targeting_sensor_names=[], targeting_schedule_names=[]
                )
            ]
        )
        for key, node in remote.remote_asset_nodes_by_key.items()
    }
    # Dagster 1.13 also indexes the asset jobs; 1.12's graph has no such index to pass.
    jobs = getattr(remote, "remote_asset_job_nodes_by_key", None)
    return RemoteWorkspaceAssetGraph(
        remote_asset_nodes_by_key=nodes,
        remote_asset_check_nodes_by_key=remote.remote_asset_check_nodes_by_key,
        **({} if jobs is None else {"remote_asset_job_nodes_by_key": jobs}),
    )


def new_asset_backfill(
    instance: dg.DagsterInstance,
    asset_graph: RemoteWorkspaceAssetGraph,
    targets: Iterable[tuple[dg.AssetKey, str]],
    *,
    timestamp: float,
    tags: Mapping[str, str],
    title: str,
    description: str,
    run_config: Mapping[str, object] | None,
) -> PartitionBackfill:
    """An asset backfill of the (asset, partition) pairs `targets`, not yet in the instance
    (`instance.add_backfill` adds it)."""
    wanted = {AssetKeyPartitionKey(key, partition) for key, partition in targets}
    return PartitionBackfill.from_asset_graph_subset(
        backfill_id="".join(random.choices(string.ascii_lowercase, k=BACKFILL_ID_LENGTH)),
        backfill_timestamp=timestamp,
        tags=tags,
        dynamic_partitions_store=instance,
        asset_graph_subset=AssetGraphSubset.from_asset_partition_set(wanted, asset_graph),
        title=title,
        description=description,
        run_config=run_config,
    )


def backfill_iteration(
    instance: dg.DagsterInstance,
    asset_graph: RemoteWorkspaceAssetGraph,
    backfill: PartitionBackfill,
    logger: logging.Logger,
) -> tuple[AssetBackfillData, Sequence[dg.RunRequest]]:
    """One iteration of Dagster's backfill planner (the function the daemon's backfill loop
    calls): the run requests it plans now, and the backfill's data with them recorded as
    submitted (store it with `with_backfill_data`)."""
    view = _view(instance, asset_graph, datetime.fromtimestamp(backfill.backfill_timestamp, UTC))
    result = execute_asset_backfill_iteration_inner(
        backfill_id=backfill.backfill_id,
        asset_backfill_data=backfill.get_asset_backfill_data(asset_graph),
        asset_graph_view=view,
        backfill_start_timestamp=backfill.backfill_timestamp,
        logger=logger,
        run_config=backfill.run_config,
    )
    data = result.backfill_data.with_run_requests_submitted(result.run_requests, view)
    return data, result.run_requests


def with_backfill_data(
    backfill: PartitionBackfill,
    data: AssetBackfillData,
    instance: dg.DagsterInstance,
    asset_graph: RemoteWorkspaceAssetGraph,
) -> PartitionBackfill:
    """`backfill` carrying `data` (from `backfill_iteration` or `final_backfill_data`)."""
    return backfill.with_asset_backfill_data(
        data, dynamic_partitions_store=instance, asset_graph=asset_graph
    )


def backfill_partitions(
    backfill: PartitionBackfill, asset_graph: RemoteWorkspaceAssetGraph
) -> list[str]:
    """The partitions `backfill` targets, sorted."""
    data = backfill.get_asset_backfill_data(asset_graph)
    return sorted({t.partition_key for t in data.target_subset.iterate_asset_partitions()})


def final_backfill_data(data: AssetBackfillData) -> tuple[AssetBackfillData, bool]:
    """A finished backfill's data as the daemon leaves it (a target never materialized counts
    as failed), and whether anything failed."""
    # What Dagster 1.13's `get_targeted_partitions_without_materialization_status` and
    # `with_failed_and_downstream_subset` do, spelled so that 1.12 (without them) runs it too.
    failed_subset = data.failed_and_downstream_subset
    missing = data.target_subset - (data.materialized_subset | failed_subset)
    if not missing.is_empty:
        data = data._replace(failed_and_downstream_subset=failed_subset | missing)
    failed = data.failed_and_downstream_subset.num_partitions_and_non_partitioned_assets > 0
    return data, failed


def provenance_tags(
    code_version: str, inputs: Mapping[dg.AssetKey, dg.EventLogRecord | None]
) -> dict[str, str]:
    """The data version tags Dagster's step execution puts on a materialization of one
    partition computed by `code_version` from `inputs` (each input's materialization of that
    partition, None: never materialized): per input its data version (for a partitioned input,
    the sha256 of its partitions' data versions: here one) and its event, then the data version
    computed from them. The event is the input partition's own (a run names the input asset's
    newest, whichever partition): staleness compares only the partition's later events with it."""
    tags: dict[str, str] = {CODE_VERSION_TAG: code_version}
    versions: dict[dg.AssetKey, dg.DataVersion] = {}
    for key, record in inputs.items():
        if record is None:
            versions[key], pointer = DEFAULT_DATA_VERSION, NULL_EVENT_POINTER
        else:
            event = record.asset_materialization
            own = (event.tags or {}).get(DATA_VERSION_TAG, "") if event is not None else ""
            versions[key] = dg.DataVersion(hashlib.sha256(own.encode("utf-8")).hexdigest())
            pointer = str(record.storage_id)
        tags[get_input_data_version_tag(key)] = versions[key].value
        tags[get_input_event_pointer_tag(key)] = pointer
    tags[DATA_VERSION_TAG] = compute_logical_data_version(code_version, versions).value
    return tags


def reconstructable_job(module: str, job_name: str, attribute: str = "defs") -> ReconstructableJob:
    """Job `job_name` of the `Definitions` at `attribute` of `module`, as a run worker loads it."""
    repository = ReconstructableRepository.for_module(module, attribute, None)
    return repository.get_reconstructable_job(job_name)


def execute_run_argument(job: ReconstructableJob, run_id: str, instance: dg.DagsterInstance) -> str:
    """The argument of `dagster api execute_run` that executes run `run_id` of `job` (exit
    status 1 when the run fails)."""
    args = ExecuteRunArgs(
        job_origin=job.get_python_origin(),
        run_id=run_id,
        instance_ref=instance.get_ref(),
        set_exit_code_on_failure=True,
    )
    return dg.serialize_value(args)


def backfill_daemon_type() -> str:
    """The backfill daemon's name in the instance's daemon heartbeats and statuses:
    `instance.get_daemon_statuses` is public but takes names no public constant spells."""
    # Imported here: Dagster's daemon package is slow to import, and most commands that
    # import this module never ask.
    from dagster._daemon.daemon import BackfillDaemon

    return BackfillDaemon.daemon_type()
