"""The embedded server's lifecycle, the external-URL rule and the errors users see."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from seams.environment import SeamsEnvironment
from seams.errors import StorageError
from seams.resources import database
from seams.resources.database import EmbeddedPostgres, database_url_for, redact, resolve
from seams.resources.embedded_server import server_tempdir


@pytest.fixture
def pgdata() -> Iterator[Path]:
    # tempfile-style short path: the Unix socket lives in it. Not pytest's tmp_path: that is
    # 0700, and as root the server's own user must enter the folder (Seams never loosens it).
    root = server_tempdir("seams-pgt-")
    yield root / "pgdata"
    shutil.rmtree(root, ignore_errors=True)


def _stop(server: EmbeddedPostgres) -> None:
    server.stop()
    assert not server.is_running()


@pytest.mark.services
def test_embedded_start_is_idempotent_and_keeps_data_across_restart(pgdata: Path) -> None:
    server = EmbeddedPostgres(pgdata)
    try:
        url = server.start()
        assert server.start() == url
        data_url = database_url_for(url, database.DATA_DATABASE)
        with psycopg.connect(data_url, autocommit=True) as conn:
            assert conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname='vector'"
            ).fetchone()
            conn.execute("CREATE TABLE kept (x int)")
            conn.execute("INSERT INTO kept VALUES (42)")
        with psycopg.connect(url) as conn:
            names = {r[0] for r in conn.execute("SELECT datname FROM pg_database")}
        assert {database.DATA_DATABASE, database.DAGSTER_DATABASE} <= names

        _stop(server)
        assert server.stop() is False  # stopping a stopped server is not an error

        server.start()
        with psycopg.connect(data_url) as conn:
            assert conn.execute("SELECT x FROM kept").fetchone() == (42,)
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.services
def test_start_recovers_after_owner_and_postmaster_were_killed(pgdata: Path) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from seams.resources.database import EmbeddedPostgres;"
         f"EmbeddedPostgres(__import__('pathlib').Path({str(pgdata)!r})).start();"
         "print('up', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "up"
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    server = EmbeddedPostgres(pgdata)
    try:
        # The killed owner left the server running: the next start attaches to it.
        assert server.is_running()
        url = server.start()
        # Now crash the server itself: a stale postmaster.pid stays behind.
        pid = int((pgdata / "postmaster.pid").read_text().splitlines()[0])
        os.kill(pid, signal.SIGKILL)
        for _ in range(100):
            if not server.is_running():
                break
            time.sleep(0.05)
        assert not server.is_running()
        assert server.start() == url
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        server.stop()


def test_external_url_takes_precedence(
    database_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SEAMS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv(database.URL_ENV, database_url)
    urls = resolve(SeamsEnvironment.from_os())
    assert urls.data == database_url
    assert urls.embedded is False
    assert urls.dagster.startswith("postgresql+psycopg2://")
    assert not (tmp_path / "data" / "postgres").exists()  # no embedded server was started


def test_unreachable_url_gives_clear_error_without_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(database.URL_ENV, "postgresql://seams:s3cret-pw@127.0.0.1:1/nowhere")
    with pytest.raises(StorageError) as info:
        resolve(SeamsEnvironment.from_os())
    message = str(info.value)
    assert "127.0.0.1:1" in message and "SEAMS_DATABASE_URL" in message
    assert "s3cret-pw" not in message


@pytest.mark.services
def test_cli_reports_unreachable_database_without_traceback() -> None:
    env = {**os.environ, "SEAMS_DATABASE_URL": "postgresql://u:hunter22@127.0.0.1:1/db"}
    done = subprocess.run(
        [sys.executable, "-m", "seams", "db", "url"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("seams: error: cannot connect to PostgreSQL")
    assert "Traceback" not in done.stderr
    assert "hunter22" not in done.stderr + done.stdout


def test_redact_hides_passwords_in_both_url_forms() -> None:
    assert redact("postgresql://a:pw@h:5/d") == "postgresql://a:***@h:5/d"
    assert "pw" not in redact("postgresql://h/d?password=pw&sslmode=require")
    assert redact("postgresql://a@h/d") == "postgresql://a@h/d"
