"""Distributed runs refuse to start where they would lose data (issue 20, "fail fast").

Without SEAMS_DATABASE_URL every process would start its own embedded PostgreSQL under its own
data dir, so steps on a worker would write where nobody reads; without the exported model a
worker would fail every step. Each is refused up front, naming what is missing and the fix,
before any server starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from seams.resources.database import URL_ENV

# Each test starts PostgreSQL or `seams` commands in child processes.
pytestmark = pytest.mark.services

SHARED_DB_MESSAGE = "must all point at one PostgreSQL"


def _seams(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("SEAMS_", "DAGSTER_"))}
    environment["SEAMS_DATA_DIR"] = str(tmp_path / "data")
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "seams", *args],
        capture_output=True,
        text=True,
        env=environment,
        cwd=tmp_path,
        timeout=120,
    )


def _celery_settings(tmp_path: Path) -> Path:
    path = tmp_path / "seams.yaml"
    path.write_text("execution:\n  executor: celery\n", encoding="utf-8")
    return path


def test_a_worker_without_the_shared_database_url_refuses_to_start(tmp_path: Path) -> None:
    done = _seams(["worker"], tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert URL_ENV in done.stderr and SHARED_DB_MESSAGE in done.stderr
    assert not (tmp_path / "data").exists()  # no embedded server, no DAGSTER_HOME


def test_a_distributed_backfill_without_the_shared_database_url_refuses_to_start(
    tmp_path: Path,
) -> None:
    settings = _celery_settings(tmp_path)
    for command in (["backfill"], ["run", str(tmp_path)]):
        done = _seams(command, tmp_path, SEAMS_CONFIG=str(settings))
        assert done.returncode == 2, done.stdout + done.stderr
        assert URL_ENV in done.stderr and SHARED_DB_MESSAGE in done.stderr
        assert "executor: celery" in done.stderr
    assert not (tmp_path / "data").exists()


def test_a_worker_without_the_model_says_where_it_looked_and_how_to_provide_it(
    tmp_path: Path,
) -> None:
    done = _seams(
        ["worker"],
        tmp_path,
        SEAMS_CONFIG=str(_celery_settings(tmp_path)),
        **{
            URL_ENV: "postgresql://seams@db.invalid:5432/seams",
            "SEAMS_CELERY_BROKER_URL": "redis://127.0.0.1:1/0",
            "SEAMS_CELERY_BACKEND_URL": "redis://127.0.0.1:1/1",
        },
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert str(tmp_path / "data" / "models") in done.stderr
    assert "seams model export" in done.stderr and "shared volume" in done.stderr
