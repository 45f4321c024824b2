"""The Dagster range of pyproject.toml resolves at both ends: the oldest and the newest release
of the supported minors install with the pipeline extra (each integration pins its core, so the
resolver must find the whole family). `make test-dagster-oldest` runs the Dagster tests on the
oldest; `make test` runs them on the newest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OLDEST = "1.12.22"
NEWEST = "1.13.27"
"""The newest 1.13 release whose whole family (webserver, graphql, postgres, celery) is out."""


@pytest.mark.slow
@pytest.mark.parametrize("version", [OLDEST, NEWEST])
def test_the_range_resolves_at_both_ends(version: str) -> None:
    uv = Path(sys.executable).parent / "uv"
    done = subprocess.run(
        [str(uv), "pip", "install", "--dry-run", "--python", sys.executable,
         f"dagster=={version}", "-e", f"{ROOT}[pipeline,celery]"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    installed = subprocess.run(
        [sys.executable, "-c", "import dagster; print(dagster.__version__)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # Either this environment already has it, or the resolver would install it.
    assert installed == version or f"+ dagster=={version}" in done.stderr + done.stdout
