"""Which process owns a run that `seams run` executes here, so a killed one does not block forever.

An in-process run dies with its process (`kill -9`, OOM, a closed laptop) and stays STARTED in
the instance: Dagster's DefaultRunLauncher has no worker health check, so run monitoring only
catches it at the runtime cap, and meanwhile it holds a slot of `max_concurrent_runs`. Every run
and backfill that `seams run`/`seams backfill` executes here carries its host and PID as tags;
the next command on the same host marks those whose process is gone as failed (the batches are
then finished again, exactly), and waits for those whose process is still alive instead of
doing their work a second time.

`seams dev` leaves a marker in the Dagster home while it runs (`DevMarker`): which process holds
the UI and its daemon, and the address it serves. It says whether a daemon is really there (a
heartbeat a minute old cannot: a daemon stopped cleanly leaves one behind) and where the UI is.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import dagster as dg

from seams.assets.partitions import CHUNK_BATCHES_JOB, Lineage, document_batches, lineage_of
from seams.orchestration.dagster_internals import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    PARTITION_NAME_TAG,
    BulkActionsFilter,
    BulkActionStatus,
)

OWNER_HOST_TAG = "seams/host"
OWNER_PID_TAG = "seams/pid"
IN_FLIGHT = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]
"""Run states a dead owner can leave behind: `execute_in_process` creates its run NOT_STARTED
(with the owner tags) before it starts it, so a process killed in between leaves it there."""

Report = Callable[[str], None]


def owner_tags() -> dict[str, str]:
    """Tags naming this process as the one executing a run or backfill."""
    return {OWNER_HOST_TAG: socket.gethostname(), OWNER_PID_TAG: str(os.getpid())}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def _owner_pid(tags: dict[str, str]) -> int | None:
    """The PID of a run's owner on this host; None for runs owned elsewhere or by Dagster."""
    if tags.get(OWNER_HOST_TAG) != socket.gethostname():
        return None
    try:
        return int(tags.get(OWNER_PID_TAG, ""))
    except ValueError:
        return None


def batches_of(instance: dg.DagsterInstance, run: dg.DagsterRun) -> set[str]:
    """The batches a run materializes: its partition, or every key of its partition range."""
    if PARTITION_NAME_TAG in run.tags:
        return {run.tags[PARTITION_NAME_TAG]}
    start = run.tags.get(ASSET_PARTITION_RANGE_START_TAG)
    end = run.tags.get(ASSET_PARTITION_RANGE_END_TAG)
    if start is None or end is None:
        return set()
    keys = list(instance.get_dynamic_partitions(_partitions_of(run).name))
    if start not in keys or end not in keys:
        return {start, end}
    return set(keys[keys.index(start) : keys.index(end) + 1])


def _partitions_of(run: dg.DagsterRun) -> dg.DynamicPartitionsDefinition:
    """The batch partitions of the collection a run builds: its assets' lineage, else its
    job's (`handbook__chunk_batches`), else the default collection's."""
    for key in run.asset_selection or ():
        if (lineage := lineage_of(key)) is not None:
            return lineage.partitions
    suffix = f"__{CHUNK_BATCHES_JOB}"
    if run.job_name.endswith(suffix):
        return Lineage(run.job_name.removesuffix(suffix)).partitions
    return document_batches


@dataclass
class InFlight:
    """Runs this host executes in-process: `orphaned` were just marked failed; `live` go on."""

    orphaned: list[dg.DagsterRun]
    live: list[dg.DagsterRun]


def reap_orphans(instance: dg.DagsterInstance, report: Report) -> InFlight:
    """Mark the in-flight runs and backfills whose owning process on this host is gone as failed
    (a run created but never started too: a command killed seconds in)."""
    found = InFlight([], [])
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=IN_FLIGHT)):
        pid = _owner_pid(run.tags)
        if pid is None:
            continue
        if _alive(pid):
            found.live.append(run)
            continue
        instance.report_run_failed(
            run,
            f"its process (pid {pid} on {run.tags[OWNER_HOST_TAG]}) is gone: killed or crashed "
            "mid-run. The next `seams run` finishes its batches.",
        )
        found.orphaned.append(run)
        batches = ", ".join(sorted(batches_of(instance, run))) or "-"
        report(
            f"run {run.run_id} (batch {batches}) was left running by pid {pid}, which is gone: "
            "marked failed"
        )
    requested = BulkActionsFilter(statuses=[BulkActionStatus.REQUESTED])
    for backfill in instance.get_backfills(filters=requested):
        pid = _owner_pid(backfill.tags)
        if pid is not None and not _alive(pid):
            instance.update_backfill(
                backfill.with_status(BulkActionStatus.FAILED).with_end_timestamp(time.time())
            )
    return found


def wait_for(
    instance: dg.DagsterInstance,
    runs: Iterable[dg.DagsterRun],
    report: Report,
    *,
    poll_s: float = 1.0,
) -> None:
    """Wait until `runs` (executing in another live process) end, or their process dies."""
    for run in runs:
        pid = _owner_pid(run.tags)
        batches = ", ".join(sorted(batches_of(instance, run))) or "-"
        report(f"waiting for run {run.run_id} (batch {batches}), in progress in pid {pid}")
        while True:
            current = instance.get_run_by_id(run.run_id)
            if current is None or current.is_finished:
                break
            if pid is not None and not _alive(pid):
                reap_orphans(instance, report)
                break
            time.sleep(poll_s)


DEV_MARKER = "seams-dev.json"
"""The marker `seams dev` writes in `$DAGSTER_HOME` while it runs, and removes when it stops."""


@dataclass(frozen=True)
class DevMarker:
    """A running `seams dev`: the process group of its `dagster dev` and the UI's address."""

    host: str
    pid: int
    url: str

    @property
    def alive(self) -> bool:
        """Whether its process is still there (on another host: assumed so)."""
        return self.host != socket.gethostname() or _alive(self.pid)


def write_dev_marker(home: str | Path, pid: int, url: str) -> DevMarker:
    """Record that `seams dev` (its `dagster dev` is process `pid`) serves the UI at `url`."""
    marker = DevMarker(socket.gethostname(), pid, url)
    path = Path(home) / DEV_MARKER
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(asdict(marker)), encoding="utf-8")
    temporary.replace(path)  # readers never see half a file
    return marker


def remove_dev_marker(home: str | Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (Path(home) / DEV_MARKER).unlink()


def dev_marker(home: str | Path | None) -> DevMarker | None:
    """The marker of `seams dev` on the instance in `home`, if one was left (alive or not)."""
    if home is None:
        return None
    try:
        fields = json.loads((Path(home) / DEV_MARKER).read_text(encoding="utf-8"))
        return DevMarker(str(fields["host"]), int(fields["pid"]), str(fields["url"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def ui_address(home: str | Path | None) -> str | None:
    """The address of the UI a live `seams dev` serves for this instance; None when none runs."""
    marker = dev_marker(home)
    return marker.url if marker is not None and marker.alive else None
