"""The Dagster range of pyproject.toml resolves at both ends: the oldest and the newest release
of the supported minors install with the pipeline extra (each integration pins its core, so the
resolver must find the whole family). `make test` runs the Dagster tests on the newest; the slow
lane runs them on the oldest too (`make test-dagster-oldest`, in a virtualenv of its own)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OLDEST = "1.12.22"
NEWEST = "1.13.27"
"""The newest 1.13 release whose whole family (webserver, graphql, postgres, celery) is out:
dagster 1.13.28 is on PyPI, but no dagster-postgres 0.29.28 yet, so `dagster==1.13.28` with the
pipeline extra cannot resolve (for any project that stores its instance in PostgreSQL)."""


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


@pytest.mark.slow  # a second virtualenv, then the Dagster tests in it: minutes
@pytest.mark.timeout(1800)
def test_the_dagster_tests_pass_on_the_oldest_release() -> None:
    """What `make test-dagster-oldest` runs: the tests that reach into Dagster (its private API,
    the merged definitions, backfills, per-batch metadata) on dagster==OLDEST, in a virtualenv
    without torch (as a user's `pip install 'seams-chunking[pipeline]'`)."""
    # The inner pytest is a session of its own, not a worker of this one.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SEAMS_"))}
    done = subprocess.run(
        ["make", "test-dagster-oldest", f"DAGSTER_OLDEST={OLDEST}", "PYTEST_WORKERS=0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert re.search(r"^=+ \d+ passed", done.stdout, re.MULTILINE), done.stdout[-2000:]
    version = subprocess.run(
        [str(ROOT / ".venv-dagster-oldest" / "bin" / "python"), "-c",
         "import dagster, importlib.util as u; print(dagster.__version__, u.find_spec('torch'))"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert version == [OLDEST, "None"]
