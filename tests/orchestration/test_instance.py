"""The Dagster instance Seams configures stores runs in PostgreSQL and loads our definitions."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest
from dagster import asset, materialize

from seams.environment import SeamsEnvironment
from seams.orchestration.instance import LOCATION_MODULE, prepare_instance
from seams.resources import database


@asset
def probe() -> int:
    return 1


def test_instance_writes_runs_to_postgres(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(database.URL_ENV, database_url)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    seams_instance = prepare_instance()
    assert "DAGSTER_HOME" not in os.environ  # nothing is handed on through os.environ
    assert seams_instance.variables()["DAGSTER_HOME"] == str(
        SeamsEnvironment.from_os().dagster_home
    )
    with seams_instance.open() as instance:
        result = materialize([probe], instance=instance)
        assert result.success
        run_id = result.run_id
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT status FROM runs WHERE run_id = %s", (run_id,)).fetchone()
    assert row == ("SUCCESS",)


@pytest.mark.services
def test_dagster_loads_the_definitions(tmp_path) -> None:
    # An ephemeral instance, run outside the project root whose dagster.yaml needs PostgreSQL.
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    done = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate",
         "-m", LOCATION_MODULE],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Validation successful" in done.stdout + done.stderr
