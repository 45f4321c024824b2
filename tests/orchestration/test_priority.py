"""Batch commands yield the CPU to readers: `lower_priority` lowers every thread of the process,
never raises one, and a pool to the embedded server lowers each backend it opens to the
process's niceness. A niceness cannot be taken back: the process-wide case runs in a child
Python, the pool's in a thread of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from seams.resources.postgres import PostgresResource
from seams.resources.postgres_pool import _open_pool
from seams.settings import SeamsSettings


def _child(script: str, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


THREADS = """
    import json, os, threading
    from seams.orchestration.priority import lower_priority

    def niceness():
        tasks = os.listdir("/proc/self/task")
        return sorted({os.getpriority(os.PRIO_PROCESS, int(t)) for t in tasks})

    base = os.getpriority(os.PRIO_PROCESS, 0)  # what this process inherited
    target = min(19, base + 3)
    stop = threading.Event()
    early = threading.Thread(target=stop.wait)  # exists before the call: lowered one by one
    early.start()
    seen = {"base": base, "target": target, "before": niceness()}
    lower_priority(0)
    seen["zero"] = niceness()
    lower_priority(target)
    seen["lowered"] = niceness()
    later = []
    late = threading.Thread(target=lambda: later.append(os.getpriority(os.PRIO_PROCESS, 0)))
    late.start(); late.join()
    seen["later_thread"] = later
    lower_priority(base + 1)  # never raises a priority back
    seen["again"] = niceness()
    stop.set(); early.join()
    print(json.dumps(seen))
"""


def test_every_thread_is_lowered_and_none_raised_again() -> None:
    seen = _child(THREADS)
    base, target = seen["base"], seen["target"]
    assert base <= 16, "the test needs a process that is not already nearly at the bottom"
    assert seen["before"] == seen["zero"] == [base]
    assert seen["lowered"] == seen["later_thread"] == seen["again"] == [target]


def _backend_niceness(url: str, *, local: bool, niceness: int | None) -> int:
    """The niceness of the backend a pool opens, the pool opened from a thread of its own at
    `niceness` (Linux keeps a niceness per thread, and the pool's worker threads, which open
    its connections, inherit it): this test process itself keeps its priority."""
    seen: list[int] = []

    def open_pool() -> None:
        if niceness is not None:
            os.setpriority(os.PRIO_PROCESS, 0, niceness)  # this thread only
        pool = _open_pool(url, 1, local_server=local)
        try:
            with pool.connection() as conn:
                seen.append(os.getpriority(os.PRIO_PROCESS, conn.info.backend_pid))
        finally:
            pool.close()

    thread = threading.Thread(target=open_pool)
    thread.start()
    thread.join()
    assert seen, "the pool's thread failed"
    return seen[0]


@pytest.mark.services
def test_a_pool_to_the_embedded_server_lowers_its_backends(database_url: str) -> None:
    """The test server is a local embedded PostgreSQL: the backend a lowered thread's pool opens
    on it runs at that niceness; a pool that does not know its server is local leaves it."""
    own = os.getpriority(os.PRIO_PROCESS, 0)  # an earlier in-process `seams run` may lower it
    plain = _backend_niceness(database_url, local=False, niceness=None)
    target = min(19, max(plain, own) + 2)
    assert plain < target
    assert _backend_niceness(database_url, local=True, niceness=target) == target
    assert _backend_niceness(database_url, local=False, niceness=target) == plain
    assert _backend_niceness(database_url, local=True, niceness=None) == max(plain, own)
    assert os.getpriority(os.PRIO_PROCESS, 0) == own  # the test process kept its priority


def test_the_default_niceness_and_its_bounds() -> None:
    assert SeamsSettings().execution.niceness == 10
    assert SeamsSettings.model_validate({"execution": {"niceness": 0}}).execution.niceness == 0
    for bad in (-1, 20):
        with pytest.raises(ValueError, match="niceness"):
            SeamsSettings.model_validate({"execution": {"niceness": bad}})


BATCH_COMMAND = """
    import json, sys
    from pathlib import Path
    from seams.orchestration.priority import lower_priority
    from seams.resources.database import DATA_DATABASE, EmbeddedPostgres, database_url_for
    from seams.resources.postgres import PostgresResource
from seams.resources.postgres_pool import _open_pool

    def niceness(pid):
        with open(f"/proc/{pid}/stat") as stat:  # field 19, after the command's parentheses
            return int(stat.read().rsplit(")", 1)[1].split()[16])

    lower_priority(int(sys.argv[2]))  # the worst case: lowered before it starts the server
    server = EmbeddedPostgres(Path(sys.argv[1]))
    url = database_url_for(server.start(), DATA_DATABASE)
    pool = _open_pool(url, 1, local_server=True)  # the batch command's own connections
    with pool.connection() as conn:
        batch = niceness(conn.info.backend_pid)
    pool.close()
    print(json.dumps({"url": url, "batch_backend": batch, "own": niceness("self")}))
"""


def _niceness(pid: int) -> int:
    """A process's niceness as /proc says it (field 19 of its stat line)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[16])


@pytest.mark.slow  # a server of its own: initdb and a start (the attach below is the lean one)
@pytest.mark.services
def test_only_batch_backends_run_niced_on_a_server_a_batch_command_started() -> None:
    """A batch command lowered to `execution.niceness` starts the embedded server: the server
    (and so every backend it forks for a reader) runs at normal priority; the batch command's
    own backends run at its niceness."""
    if os.geteuid() != 0:
        pytest.skip("raising the starting thread's priority back to 0 needs root")
    import psycopg

    from seams.resources.database import EmbeddedPostgres
    from seams.resources.embedded_server import server_tempdir

    folder = server_tempdir("seams-nice-")
    server = EmbeddedPostgres(folder / "pgdata")
    try:
        seen = _child(BATCH_COMMAND, str(folder / "pgdata"), "10")
        assert seen["own"] == 10 and seen["batch_backend"] == 10, seen
        postmaster = int((folder / "pgdata" / "postmaster.pid").read_text().split()[0])
        assert _niceness(postmaster) == 0
        with psycopg.connect(seen["url"]) as reader:  # a reader: a plain connection
            assert _niceness(reader.info.backend_pid) == 0
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.services
def test_a_batch_command_raises_a_niced_server_and_lowers_only_its_own_backends(
    pg_server_url: str, database_url: str
) -> None:
    """The test server, found running niced (as a batch command of an older Seams started it),
    is raised back to normal priority by a lowered batch command that attaches to it (a thread
    of its own at niceness 10: Linux keeps a niceness per thread): a reader's backend then runs
    at 0, the batch command's own at its niceness."""
    if os.geteuid() != 0:
        pytest.skip("raising a server's priority back to 0 needs root (or its own start)")
    import psycopg

    from seams.resources.database import EmbeddedPostgres

    with psycopg.connect(pg_server_url) as conn:
        pgdata = Path(conn.execute("SHOW data_directory").fetchone()[0])
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    os.setpriority(os.PRIO_PROCESS, postmaster, 10)
    try:
        with psycopg.connect(database_url) as reader:
            assert _niceness(reader.info.backend_pid) == 10  # what readers got before
        started: list[str] = []

        def batch_command() -> None:
            os.setpriority(os.PRIO_PROCESS, 0, 10)  # this thread only
            started.append(EmbeddedPostgres(pgdata).start())

        thread = threading.Thread(target=batch_command)
        thread.start()
        thread.join()
        assert started, "the batch command's start failed"
        assert _niceness(postmaster) == 0
        assert _backend_niceness(database_url, local=True, niceness=10) == 10
        with psycopg.connect(database_url) as reader:
            assert _niceness(reader.info.backend_pid) == 0
    finally:
        os.setpriority(os.PRIO_PROCESS, postmaster, 0)


LAUNCHED_RUN = """
    import json, os, sys
    import dagster as dg
    from seams.orchestration.definitions import default_executor
    from seams.resources.postgres import PostgresResource
    from seams.settings import ExecutionSettings

    def niceness(pid):
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[16])

    @dg.op
    def step(context) -> None:
        # As `seams dev` runs it: SEAMS_DATABASE_URL names the data dir's embedded server.
        with PostgresResource().connection() as conn:
            seen = {"step": niceness("thread-self"), "backend": niceness(conn.info.backend_pid)}
        context.instance.add_run_tags(context.run_id, {"seen": json.dumps(seen)})

    def build():
        execution = ExecutionSettings(niceness=int(os.environ["SEAMS_TEST_NICENESS"]))

        @dg.job(executor_def=default_executor(execution))
        def lowered() -> None:
            step()

        return lowered

    if __name__ == "__main__":
        with dg.DagsterInstance.ephemeral() as instance:
            found = {}
            # As `seams run` executes (its process lowered itself): the job's executor is not
            # used. Its pool stays open, as one opened while a run worker loads definitions.
            direct = build().execute_in_process(instance=instance)
            found["in_process"] = json.loads(instance.get_run_by_id(direct.run_id).tags["seen"])
            # As a run worker executes a launched run: through the job's executor.
            with dg.execute_job(dg.reconstructable(build), instance) as run:
                assert run.success
                found["launched"] = json.loads(instance.get_run_by_id(run.run_id).tags["seen"])
            found["own"] = niceness("self")
        print(json.dumps(found))
"""


@pytest.mark.services
def test_a_launched_runs_worker_and_its_backends_run_at_the_configured_niceness(
    postgres: PostgresResource, tmp_path: Path
) -> None:
    """A run the daemon or the webserver launches executes through its job's executor in a run
    worker of its own, which `seams dev` hands the embedded server's URL: that worker, and the
    backends the Postgres resource opens for it, run at `execution.niceness`, read from /proc
    (connections its pool opened before included). The same job executed in-process (`seams
    run`, which lowers itself) is left as it is."""
    base = os.getpriority(os.PRIO_PROCESS, 0)
    target = min(19, base + 3)
    url = postgres.resolved_url()
    with postgres.connection() as conn:
        pgdata = conn.execute("SHOW data_directory").fetchone()[0]
    data_dir = tmp_path / "data"  # a data dir whose embedded server is the test server
    data_dir.mkdir()
    (data_dir / "postgres.location").write_text(pgdata, encoding="utf-8")
    script = tmp_path / "launched_run.py"
    script.write_text(textwrap.dedent(LAUNCHED_RUN), encoding="utf-8")
    env = {
        **os.environ,
        "SEAMS_DATABASE_URL": url,
        "SEAMS_DATA_DIR": str(data_dir),
        "SEAMS_TEST_NICENESS": str(target),
    }
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env,
        cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["in_process"] == {"step": base, "backend": base} and base < target
    assert seen["launched"] == {"step": target, "backend": target}
    assert seen["own"] == target
