"""The same code location on Dagster's Celery executor (issue 20), for real: Redis on a free
loopback port, two `seams worker` processes, one shared PostgreSQL, a backfill over two batches.

Asserted: the runs succeed, steps ran on at least two different workers and never in this
process, and `seams.chunks` holds exactly the rows an in-process run of the same batches writes
(same chunk ids). Everything started here is stopped by PID (process group).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import psycopg
import pytest

from seams.orchestration import runner
from seams.orchestration.definitions import (
    CELERY_BACKEND_ENV,
    CELERY_BROKER_ENV,
    build_definitions,
)
from seams.settings import SeamsSettings, load_settings
from tests.conftest import free_port, register_sample_batches

WORKERS = ("w1", "w2")
READY_S = 150
CHUNK_ROWS = (
    "SELECT batch_key, document_id, chunk_id, chunk_index, total_chunks, text, start_char,"
    " end_char, token_count, boundary_method, config_hash FROM seams.chunks"
    " ORDER BY batch_key, document_id, chunk_index"
)


def _stop(proc: subprocess.Popen) -> None:
    """Stop a process group we started: SIGTERM, then SIGKILL after a grace period."""
    for sig, grace_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A private redis-server (Debian's) on a free 127.0.0.1 port, nothing persisted."""
    server = shutil.which("redis-server")
    assert server, "redis-server is missing: apt-get install -y redis-server (.ci/run does)"
    port = free_port()
    log = (tmp_path / "redis.log").open("w")
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        import redis

        client = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert proc.poll() is None, (tmp_path / "redis.log").read_text()
                assert time.monotonic() < deadline, "redis-server never answered"
                time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}"
    finally:
        _stop(proc)


@pytest.fixture
def celery_settings(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch, instance: dg.DagsterInstance
) -> SeamsSettings:
    """seams.yaml with the Celery executor and one batch per run, in this process's environment
    and every worker's (the shared database URL comes from the `instance` fixture)."""
    path = tmp_path / "seams.yaml"
    path.write_text(
        "execution:\n  executor: celery\nbackfill:\n  max_batches_per_run: 1\n", encoding="utf-8"
    )
    monkeypatch.setenv("SEAMS_CONFIG", str(path))
    # The submitting process loads the code location module as the workers do; a copy imported
    # earlier in this session would carry other settings.
    monkeypatch.delitem(sys.modules, "seams.orchestration.location", raising=False)
    monkeypatch.setenv(CELERY_BROKER_ENV, f"{redis_url}/0")
    monkeypatch.setenv(CELERY_BACKEND_ENV, f"{redis_url}/1")
    return load_settings(path)


@pytest.fixture
def workers(celery_settings: SeamsSettings, tmp_path: Path) -> Iterator[list[str]]:
    """Two `seams worker` processes (concurrency 1 each), ready to take steps."""
    procs, logs = [], []
    try:
        for name in WORKERS:
            log = tmp_path / f"worker_{name}.log"
            logs.append(log)
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "seams", "worker", "-n", name, "-c", "1"],
                    stdout=log.open("w"),
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env=os.environ.copy(),
                    cwd=tmp_path,
                )
            )
        deadline = time.monotonic() + READY_S
        while not all(" ready." in log.read_text() for log in logs):
            for proc, log in zip(procs, logs, strict=True):
                assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the workers never became ready"
            time.sleep(0.5)
        yield [log.read_text() for log in logs]
    finally:
        for proc in procs:
            _stop(proc)


def _rows(database_url: str) -> list[tuple]:
    with psycopg.connect(database_url) as conn:
        return conn.execute(CHUNK_ROWS).fetchall()


@pytest.mark.slow
def test_a_backfill_runs_on_two_celery_workers_and_matches_an_in_process_run(
    instance: dg.DagsterInstance,
    celery_settings: SeamsSettings,
    workers: list[str],
    tmp_path: Path,
    database_url: str,
) -> None:
    keys = register_sample_batches(tmp_path)
    assert len(keys) == 2
    defs = build_definitions(celery_settings)
    summary = runner.RunSummary(batches=keys)
    runner.materialize_batches(instance, keys, print, summary, defs=defs)

    assert len(summary.run_ids) == 2  # max_batches_per_run: 1 -> one run per batch
    hosts, step_pids = set(), set()
    for run_id in summary.run_ids:
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.SUCCESS
        for record in instance.all_logs(run_id):
            event = record.dagster_event
            if event is None:
                continue
            if event.is_engine_event and "Celery worker" in (event.engine_event_data.metadata):
                hosts.add(event.engine_event_data.metadata["Celery worker"].value)
            if event.is_step_start:
                step_pids.add(event.pid)
    assert len({host.split("@")[0] for host in hosts}) >= 2, hosts
    assert step_pids and os.getpid() not in step_pids

    distributed = _rows(database_url)
    assert {row[0] for row in distributed} == set(keys)

    # The same batches in-process (executor in_process) write exactly the same chunks.
    in_process = build_definitions(
        SeamsSettings.model_validate({"execution": {"executor": "in_process"}})
    )
    again = runner.RunSummary(batches=keys)
    runner.materialize_batches(instance, keys, print, again, defs=in_process)
    assert _rows(database_url) == distributed
