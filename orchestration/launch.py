"""Backfills as Dagster backfills: create one asset backfill, run it, follow it to the end.

`seams run` and `seams backfill` record their work as one asset backfill in the instance (it shows
under Runs -> Backfills) and turn it into runs with Dagster's own backfill planner
(`execute_asset_backfill_iteration_inner`, the function the daemon's backfill loop calls), so the
assets' `BackfillPolicy` decides how many runs there are: one for all batches by default,
`max_batches_per_run` batches per run with `backfill.max_batches_per_run`.

Who executes the runs: always the command itself. This module is the loop the daemon would have
been: it asks the planner for run requests, executes each run in this process (or, with Celery,
in run workers whose steps go to the workers) with the backfill's tags (`dagster/backfill`, the
partition range), and records what was requested, materialized or failed in the backfill, ending
it COMPLETED_SUCCESS or COMPLETED_FAILED, as the daemon does. Dagster's own `dagster job
backfill` likewise launches a backfill's runs itself.

Never the daemon, even when one runs (`seams dev`): Dagster 1.13's backfill daemon looks at
backfills at a fixed interval and launches runs through the queue and a run worker process
each, so a small backfill took many times longer with the UI open than here. A live
daemon still sees every REQUESTED backfill, so this module registers one only once its first
iteration's runs are recorded as requested *and* the first run exists: the daemon then finds
nothing left to request and a run in progress (never a "stalled" backfill to fail), and only
records progress, as the UI shows it. A backfill whose process died is marked failed by
`ownership.reap_orphans` (the next `seams` command, or `seams dev` before its daemon starts), and
a daemon never re-runs it: everything it targets is already recorded as requested.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import dagster as dg

from seams.assets.partitions import BATCH_ASSETS
from seams.errors import ConfigError, SeamsError, counted
from seams.orchestration import dagster_internals, ownership
from seams.orchestration.dagster_internals import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    BACKFILL_ID_TAG,
    PARTITION_NAME_TAG,
    AssetBackfillData,
    BulkActionStatus,
    PartitionBackfill,
    ReconstructableJob,
)
from seams.orchestration.instance import LOCATION_MODULE, LOCATION_NAME
from seams.orchestration.ownership import owner_tags
from seams.resources.database import URL_ENV

Report = Callable[[str], None]
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
"""Run config of the runs a command executes in its own process: in-process runs log every event
to the terminal at DEBUG; the command prints its own lines and the UI keeps the full log."""

STARTED_BY_TAG = "seams/started_by"
"""Tag on backfills Seams created: the command that made it (`seams run`, `seams backfill`)."""
LAUNCHED_BY_TAG = "user"
"""The tag the UI's "Launched by" column shows (else "Manually launched"); Seams' backfills and
their runs carry the command or job that started them there."""
FINISHED = (
    BulkActionStatus.COMPLETED,
    BulkActionStatus.COMPLETED_SUCCESS,
    BulkActionStatus.COMPLETED_FAILED,
    BulkActionStatus.FAILED,
    BulkActionStatus.CANCELED,
)
_log = logging.getLogger("seams.backfill")


@dataclass
class BackfillOutcome:
    """What a followed backfill did: its id, its runs (in order) and how it ended."""

    backfill_id: str
    run_ids: list[str] = field(default_factory=list)
    status: BulkActionStatus = BulkActionStatus.REQUESTED
    results: list[RunResult] = field(default_factory=list)
    """In-process runs only: their results (events) for the caller's summary."""


def started_by_tags(started_by: str) -> dict[str, str]:
    """The tags that say who started a backfill or run: ours, and the one the UI shows under
    "Launched by"."""
    return {STARTED_BY_TAG: started_by, LAUNCHED_BY_TAG: started_by}


def materialize_here(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    keys: Sequence[dg.AssetKey],
    *,
    started_by: str,
    tags: Mapping[str, str] | None = None,
) -> dg.ExecuteInProcessResult:
    """One quiet run, in this process, of the unpartitioned assets `keys` (and their checks),
    tagged with who started it and owned by this process; a failure is in the result, not
    raised."""
    job = defs.resolve_implicit_global_asset_job_def()
    return job.execute_in_process(
        instance=instance,
        asset_selection=list(keys),
        run_config=QUIET,
        tags={**(tags or {}), **started_by_tags(started_by), **owner_tags()},
        raise_on_error=False,
    )


def create_backfill(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    targets: Mapping[str, Sequence[dg.AssetKey]],
    *,
    started_by: str,
    run_config: Mapping[str, object] | None = None,
    tags: Mapping[str, str] | None = None,
) -> PartitionBackfill:
    """One asset backfill of `targets` (partition -> the assets to materialize there), not yet
    in the instance: `run_backfill_here` registers it once its first run exists."""
    graph = workspace_asset_graph(defs)
    wanted = {(key, part) for part, keys in targets.items() for key in keys}
    if not wanted:
        raise SeamsError("a backfill needs at least one batch and asset: nothing was selected")
    return dagster_internals.new_asset_backfill(
        instance,
        graph,
        wanted,
        timestamp=time.time(),
        tags={**(tags or {}), **started_by_tags(started_by)},
        title=f"{started_by}: {counted(len(targets), 'batch')}",
        description=", ".join(sorted(targets)),
        run_config=run_config,
    )


def by_first_step(
    targets: Mapping[str, Sequence[dg.AssetKey]],
) -> list[dict[str, Sequence[dg.AssetKey]]]:
    """`targets` (batch -> assets) split so the batches of each part start at the same asset.

    Dagster's UI shows a backfill's "Partition selection" as the partitions of its most upstream
    targeted asset, so one backfill mixing a new batch (from `extracted_text` on) with batches
    resumed or unsynced from `chunks` on would show the new batch alone: one backfill per first
    step lists every batch it builds. Targets that all start at one step stay one backfill."""
    parts: dict[dg.AssetKey, dict[str, Sequence[dg.AssetKey]]] = {}
    for batch, keys in targets.items():
        parts.setdefault(min(keys, key=_pipeline_position), {})[batch] = keys
    return [parts[first] for first in sorted(parts, key=_pipeline_position)]


def _pipeline_position(key: dg.AssetKey) -> int:
    """Where `key` comes in a batch's pipeline (`BATCH_ASSETS` order; other assets last)."""
    name = key.path[-1]
    return BATCH_ASSETS.index(name) if name in BATCH_ASSETS else len(BATCH_ASSETS)


def workspace_asset_graph(defs: dg.Definitions):
    """`defs` as the daemon sees them: the workspace asset graph of location `seams`, on which
    Dagster's backfill planner works (see `dagster_internals.workspace_asset_graph`)."""
    return dagster_internals.workspace_asset_graph(
        defs, location_name=LOCATION_NAME, module=LOCATION_MODULE
    )


DISTRIBUTED_EXECUTORS = frozenset({"seams_celery", "celery"})


def is_distributed(defs: dg.Definitions, job_name: str) -> bool:
    """Whether `job_name` runs its steps in other processes that may be on other machines."""
    return defs.resolve_job_def(job_name).executor_def.name in DISTRIBUTED_EXECUTORS


def check_shared_database(who: str, database_url: str | None) -> None:
    """Stop `who` unless `database_url` (SEAMS_DATABASE_URL, from the entry point's environment)
    names the one PostgreSQL every process shares.

    Without it each process would start its own embedded server under its own data dir, and a
    distributed run's steps would write to databases nobody reads.
    """
    if database_url:
        return
    raise ConfigError(
        f"{who} needs {URL_ENV}: a distributed run's processes (the one that submits runs and "
        "every worker) must all point at one PostgreSQL, or each would start its own embedded "
        f"server and write there. Set {URL_ENV}=postgresql://user@host:5432/seams in every "
        "process's environment (the same value everywhere)."
    )


HEARTBEAT_INTERVAL_S = 30.0
"""How often a daemon beats (Dagster's default)."""
DAEMON_SILENCE_S = 90.0
"""A daemon silent this long after its next beat was due is gone (Dagster's own default
tolerance is 30 minutes)."""


def daemon_is_running(instance: dg.DagsterInstance) -> bool:
    """Whether a live dagster-daemon serves this instance.

    A fresh heartbeat alone cannot tell: a daemon stopped a minute ago left one. `seams dev`
    says more: while it runs, its marker names its process (dead: the daemon is gone with it),
    and a clean shutdown removes the marker and the daemons' heartbeats. A fresh heartbeat with
    no marker is a daemon started some other way (`dagster-daemon run` beside a webserver).
    """
    marker = ownership.dev_marker(instance.root_directory)
    if marker is not None and not marker.alive:
        return False
    kind = dagster_internals.backfill_daemon_type()
    try:
        # Not `status.healthy`: that allows Dagster's default 30 minutes of silence.
        beat = instance.get_daemon_statuses([kind])[kind].last_heartbeat
    except Exception:  # no heartbeat table yet, a fresh instance: no daemon
        return False
    if beat is None:  # never beat, or a daemon this instance does not run
        return False
    return time.time() <= beat.timestamp + HEARTBEAT_INTERVAL_S + DAEMON_SILENCE_S


def _run_tags(backfill: PartitionBackfill, request: dg.RunRequest) -> dict[str, str]:
    tags = {**backfill.tags, **request.tags, BACKFILL_ID_TAG: backfill.backfill_id}
    for owner_tag in owner_tags():  # only a run executed in this process names it as its owner
        tags.pop(owner_tag, None)
    key_range = request.partition_key_range
    if key_range is not None and key_range.start != key_range.end:
        tags.pop(PARTITION_NAME_TAG, None)
        tags[ASSET_PARTITION_RANGE_START_TAG] = key_range.start
        tags[ASSET_PARTITION_RANGE_END_TAG] = key_range.end
    elif request.partition_key is not None:
        tags[PARTITION_NAME_TAG] = request.partition_key
    return tags


def run_backfill_here(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    backfill: PartitionBackfill,
    job_name: str,
    report: Report,
    *,
    distributed: bool = False,
) -> BackfillOutcome:
    """Execute `backfill` (from `create_backfill`) here, iteration by iteration, as the daemon
    would; it is registered in the instance as its first run starts (see the module doc), unless
    it is there already (a requested one, as the `backfill_unsynced` job adds).

    `distributed`: each run executes through the location's executor (Celery: its steps go to
    the workers) from the reconstructable job the workers load too, instead of in-process, and
    the runs of one iteration go at once (one thread each follows its run), so N workers get
    the N runs of `backfill.max_batches_per_run`.
    """
    graph = workspace_asset_graph(defs)
    job = defs.resolve_job_def(job_name)
    recon = reconstructable_job(job_name) if distributed else None
    backfill_id = backfill.backfill_id
    outcome = BackfillOutcome(backfill_id)
    progress = _Progress(report, total=len(dagster_internals.backfill_partitions(backfill, graph)))
    registered = instance.get_backfill(backfill_id) is not None
    while True:
        if registered:
            backfill = _get(instance, backfill_id)
        data, requests = dagster_internals.backfill_iteration(instance, graph, backfill, _log)
        backfill = dagster_internals.with_backfill_data(backfill, data, instance, graph)
        if registered:
            instance.update_backfill(backfill)
        if not requests:
            if not registered:  # nothing to run at all: still one backfill in the instance
                instance.add_backfill(backfill)
            return _finish(instance, graph, backfill_id, data, outcome)

        register = None if registered else _Registration(instance, backfill)
        try:
            if recon is None:
                results = [
                    _execute(instance, job, backfill, r, progress=progress, register=register)
                    for r in requests
                ]
            else:
                results = _execute_in_run_workers(
                    instance, job, recon, backfill, requests, progress, register=register
                )
        except BaseException:
            if register is not None:
                register.stop.set()  # the command fails: its watcher stops polling storage
            raise
        if register is not None:
            register.done()
        registered = True
        outcome.results.extend(results)
        outcome.run_ids.extend(r.run_id for r in results)
        # the next iteration records what these runs materialized


class _Registration:
    """Adds a backfill to the instance once run `run_id` exists there (see the module doc).

    `execute_in_process` creates its run inside, so a thread watches for the run's row (a
    few ms of polling) while the main thread executes; `done()` registers it in any case.
    """

    POLL_S = 0.02

    def __init__(self, instance: dg.DagsterInstance, backfill: PartitionBackfill) -> None:
        self.instance = instance
        self.backfill = backfill
        self.lock = threading.Lock()
        self.added = False
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def when_run_exists(self, run_id: str) -> None:
        """Register the backfill as soon as run `run_id` is in the instance (in a thread)."""

        def watch() -> None:
            try:
                while not self.stop.is_set():
                    if self.instance.get_run_by_id(run_id) is not None:
                        self.now()
                        return
                    self.stop.wait(self.POLL_S)
            except Exception:
                # A storage fault here is met again by the main thread (its run, or `done()`),
                # which reports it once; a second traceback from this thread would only repeat it.
                self.stop.set()

        self.thread = threading.Thread(target=watch, name="seams-backfill-registration")
        self.thread.start()

    def now(self) -> None:
        with self.lock:
            if not self.added:
                self.instance.add_backfill(self.backfill)
                self.added = True

    def done(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        self.now()


@dataclass
class _Progress:
    """One line per batch as its run ends (`batch 3/7 <key>: done in 12.3 s`), thread-safe."""

    report: Report
    total: int
    done: int = 0
    runs: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run_started(self, batches: int, assets: int) -> None:
        with self.lock:
            self.runs += 1
            self.report(f"run {self.runs}: {counted(batches, 'batch')}, {counted(assets, 'asset')}")

    def batch_ended(self, key: str, state: str, seconds: float) -> None:
        with self.lock:
            self.done += 1
            self.report(f"batch {self.done}/{self.total} {key}: {state} in {seconds:.1f} s")


def _options(backfill: PartitionBackfill, request: dg.RunRequest) -> dict[str, object]:
    return {
        "asset_selection": list(request.asset_selection or []) or None,
        "run_config": dict(request.run_config or {}),
        "tags": _run_tags(backfill, request),
    }


def _execute(
    instance: dg.DagsterInstance,
    job: dg.JobDefinition,
    backfill: PartitionBackfill,
    request: dg.RunRequest,
    *,
    progress: _Progress,
    register: _Registration | None = None,
) -> RunResult:
    """One planned run, every step in this process (`register`: add the backfill to the
    instance as soon as this run exists)."""
    partitions = _partitions_of(instance, job, request)
    progress.run_started(len(partitions), len(request.asset_selection or []))
    started = time.perf_counter()
    options = _options(backfill, request)
    options["tags"] = {**options["tags"], **owner_tags()}  # a kill -9 here is then detectable
    run_id = str(uuid.uuid4())  # a run id as Dagster makes them
    if register is not None and not register.added:
        register.when_run_exists(run_id)
    result = job.execute_in_process(
        instance=instance, raise_on_error=False, run_id=run_id, **options
    )
    if register is not None:
        register.done()
    _report_run(progress, partitions, result, time.perf_counter() - started)
    return result


def _execute_in_run_workers(
    instance: dg.DagsterInstance,
    job: dg.JobDefinition,
    recon: ReconstructableJob,
    backfill: PartitionBackfill,
    requests: Sequence[dg.RunRequest],
    progress: _Progress,
    *,
    register: _Registration | None = None,
) -> list[RunResult]:
    """The planned runs at once, each in its own run worker (`dagster api execute_run`, what
    Dagster's DefaultRunLauncher starts) whose executor sends the steps to the workers.

    One process per run, not threads: Dagster's run setup (loggers, signal handling) is not
    thread-safe. The runs are created here first, so they exist in the instance (tagged with
    the backfill) before any worker process starts.
    """
    job_def = recon.get_definition()
    started_at = time.perf_counter()
    launched = []
    for request in requests:
        options = _options(backfill, request)
        selection = options.pop("asset_selection")
        run = instance.create_run_for_job(
            job_def=job_def,
            run_config=options["run_config"],
            tags=options["tags"],
            job_code_origin=recon.get_python_origin(),
            asset_selection=frozenset(selection) if selection else None,
        )
        if register is not None:
            register.now()  # the first run exists: the daemon may see the backfill now
        partitions = _partitions_of(instance, job, request)
        progress.run_started(len(partitions), len(selection or []))
        argument = dagster_internals.execute_run_argument(recon, run.run_id, instance)
        worker = subprocess.Popen(
            [sys.executable, "-m", "dagster", "api", "execute_run", argument],
            stdout=subprocess.DEVNULL,  # the run's events go to the instance, not here
        )
        launched.append((run.run_id, partitions, worker))
    results = []
    for run_id, partitions, worker in launched:
        worker.wait()
        result = StoredRunResult.of_run(instance, run_id)
        _report_run(progress, partitions, result, time.perf_counter() - started_at)
        results.append(result)
    return results


@dataclass
class StoredRunResult:
    """A finished run read back from the instance (a run that executed in another process)."""

    run_id: str
    success: bool
    all_events: list[dg.DagsterEvent]

    @classmethod
    def of_run(cls, instance: dg.DagsterInstance, run_id: str) -> StoredRunResult:
        run = instance.get_run_by_id(run_id)
        events = [r.dagster_event for r in instance.all_logs(run_id) if r.dagster_event]
        return cls(run_id, bool(run and run.status == dg.DagsterRunStatus.SUCCESS), events)

    def get_asset_materialization_events(self) -> list[dg.DagsterEvent]:
        return [event for event in self.all_events if event.is_step_materialization]


RunResult = dg.ExecuteInProcessResult | StoredRunResult


def _report_run(
    progress: _Progress, partitions: Sequence[str], result: RunResult, seconds: float
) -> None:
    done = _materialized_partitions(result)
    for key in partitions:
        progress.batch_ended(key, "done" if key in done or result.success else "failed", seconds)


def reconstructable_job(job_name: str) -> ReconstructableJob:
    """`job_name` of the code location module, as every worker loads it (its settings from the
    worker's own SEAMS_CONFIG: the same seams.yaml must reach every machine)."""
    return dagster_internals.reconstructable_job(LOCATION_MODULE, job_name)


def _partitions_of(
    instance: dg.DagsterInstance, job: dg.JobDefinition, request: dg.RunRequest
) -> list[str]:
    key_range = request.partition_key_range
    if key_range is None:
        return [request.partition_key] if request.partition_key else []
    with dg.partition_loading_context(dynamic_partitions_store=instance):
        return list(job.partitions_def.get_partition_keys_in_range(key_range))


def _materialized_partitions(result: RunResult) -> set[str]:
    return {
        event.step_materialization_data.materialization.partition
        for event in result.get_asset_materialization_events()
    }


def _finish(
    instance: dg.DagsterInstance,
    graph: object,
    backfill_id: str,
    data: AssetBackfillData,
    outcome: BackfillOutcome,
) -> BackfillOutcome:
    """End the backfill as the daemon does: SUCCESS when every target materialized."""
    backfill = _get(instance, backfill_id)
    data, failed = dagster_internals.final_backfill_data(data)
    outcome.status = (
        BulkActionStatus.COMPLETED_FAILED if failed else BulkActionStatus.COMPLETED_SUCCESS
    )
    instance.update_backfill(
        dagster_internals.with_backfill_data(backfill, data, instance, graph)
        .with_status(outcome.status)
        .with_end_timestamp(time.time())
    )
    return outcome


def _get(instance: dg.DagsterInstance, backfill_id: str) -> PartitionBackfill:
    backfill = instance.get_backfill(backfill_id)
    if backfill is None:
        raise SeamsError(f"backfill {backfill_id} is gone from the instance: was it deleted?")
    return backfill
