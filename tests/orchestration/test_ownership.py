"""A run that `seams run` executed in a process that is gone does not stay STARTED (holding a
queue slot until the runtime cap); one whose process lives is waited for, not redone."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid

import dagster as dg

from seams.orchestration import ownership
from seams.orchestration.dagster_internals import PARTITION_NAME_TAG


def _started_run(
    instance: dg.DagsterInstance,
    tags: dict[str, str],
    status: dg.DagsterRunStatus = dg.DagsterRunStatus.STARTED,
) -> dg.DagsterRun:
    run = dg.DagsterRun(
        job_name="chunk_batches",
        run_id=str(uuid.uuid4()),  # what Dagster's own run ids are
        status=status,
        tags={PARTITION_NAME_TAG: "batch-a", **tags},
    )
    return instance.add_run(run)


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _status(instance: dg.DagsterInstance, run: dg.DagsterRun) -> dg.DagsterRunStatus:
    current = instance.get_run_by_id(run.run_id)
    assert current is not None
    return current.status


def test_runs_of_dead_processes_fail_live_and_foreign_ones_are_left(
    instance: dg.DagsterInstance,
) -> None:
    here = ownership.owner_tags()
    dead = _started_run(instance, {**here, ownership.OWNER_PID_TAG: str(_dead_pid())})
    # Killed seconds in: `execute_in_process` had created the run (with our tags), not started it.
    never_started = _started_run(
        instance,
        {**here, ownership.OWNER_PID_TAG: str(_dead_pid())},
        dg.DagsterRunStatus.NOT_STARTED,
    )
    live = _started_run(instance, here)
    foreign = _started_run(instance, {ownership.OWNER_HOST_TAG: "elsewhere", "seams/pid": "1"})
    dagster_launched = _started_run(instance, {})
    queued_by_dagster = _started_run(instance, {}, dg.DagsterRunStatus.NOT_STARTED)
    said: list[str] = []

    found = ownership.reap_orphans(instance, said.append)

    assert {r.run_id for r in found.orphaned} == {dead.run_id, never_started.run_id}
    assert [r.run_id for r in found.live] == [live.run_id]
    assert _status(instance, dead) == dg.DagsterRunStatus.FAILURE
    assert _status(instance, never_started) == dg.DagsterRunStatus.FAILURE
    for run in (live, foreign, dagster_launched):
        assert _status(instance, run) == dg.DagsterRunStatus.STARTED
    assert _status(instance, queued_by_dagster) == dg.DagsterRunStatus.NOT_STARTED
    assert len(said) == 2 and all("batch batch-a" in line for line in said), said
    assert {dead.run_id, never_started.run_id} == {line.split()[1] for line in said}
    assert ownership.batches_of(instance, live) == {"batch-a"}


def test_waiting_for_a_live_run_ends_when_its_process_dies(instance: dg.DagsterInstance) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    run = _started_run(
        instance, {**ownership.owner_tags(), ownership.OWNER_PID_TAG: str(sleeper.pid)}
    )
    said: list[str] = []

    def kill() -> None:
        sleeper.kill()
        sleeper.wait()

    threading.Timer(1.0, kill).start()
    ownership.wait_for(instance, [run], said.append, poll_s=0.1)

    assert said[0].startswith(f"waiting for run {run.run_id}"), said
    assert _status(instance, run) == dg.DagsterRunStatus.FAILURE


def test_only_a_daemon_that_is_really_there_counts_as_running(
    instance: dg.DagsterInstance,
) -> None:
    """A heartbeat's age alone cannot tell a stopped daemon from a live one; `seams dev`'s marker
    (its process) and its clean shutdown (marker and heartbeats removed) can."""
    from dagster._daemon.types import DaemonHeartbeat  # test-only: Seams reads heartbeats

    from seams.orchestration import launch
    from seams.orchestration.dagster_internals import backfill_daemon_type

    home = instance.root_directory

    def beat(seconds_ago: float) -> None:
        instance.add_daemon_heartbeat(
            DaemonHeartbeat(time.time() - seconds_ago, backfill_daemon_type(), "d1", [])
        )

    assert not launch.daemon_is_running(instance)  # never started
    beat(5)
    assert launch.daemon_is_running(instance)  # a daemon started without `seams dev`
    beat(launch.DAEMON_SILENCE_S + 60)  # stopped a few minutes ago: Dagster's default says alive
    assert not launch.daemon_is_running(instance)

    beat(5)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        ownership.write_dev_marker(home, sleeper.pid, "http://127.0.0.1:3123")
        assert launch.daemon_is_running(instance)
        assert ownership.ui_address(home) == "http://127.0.0.1:3123"
    finally:
        sleeper.kill()
        sleeper.wait()
    # `seams dev` killed (no clean shutdown): its heartbeat is seconds old, but it is gone.
    assert not launch.daemon_is_running(instance)
    assert ownership.ui_address(home) is None

    ownership.remove_dev_marker(home)  # what a clean shutdown does
    instance.wipe_daemon_heartbeats()
    assert not launch.daemon_is_running(instance)
    assert ownership.dev_marker(home) is None
