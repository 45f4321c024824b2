"""Distributed runs refuse to start where they would lose data (issue 20, "fail fast").

Without SEAMS_DATABASE_URL every process would start its own embedded PostgreSQL under its own
data dir, so steps on a worker would write where nobody reads; without the exported model a
worker would fail every step. Each is refused up front, naming what is missing and the fix,
before any server starts.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from seams.resources.database import URL_ENV
from tests.support.cli import run_seams, seams_env

# Each test starts PostgreSQL or `seams` commands in child processes.
pytestmark = pytest.mark.services

SHARED_DB_MESSAGE = "must all point at one PostgreSQL"


def _seams(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """`seams ARGS` from `tmp_path`, its data dir inside it, with only the `env` settings."""
    environment = seams_env(SEAMS_DATA_DIR=str(tmp_path / "data"), **env)
    return run_seams(*args, env=environment, timeout=120, cwd=tmp_path)


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
