"""`seams` as a child process, as a user runs it, and what its failures must look like."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import processes


def seams_env(**overrides: str) -> dict[str, str]:
    """The environment of a `seams` child process: none of this process's `SEAMS_*` and
    `DAGSTER_*` settings (each test names its own), unbuffered output, then `overrides`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEAMS_", "DAGSTER_"))}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(overrides)
    return env


def run_seams(
    *args: str, env: dict[str, str], timeout: float = 300, cwd: Path | str = "/"
) -> subprocess.CompletedProcess:
    """`python -m seams ARGS` as a user runs it, from `cwd` (by default `/`: no project
    seams.yaml nearby)."""
    processes.require_children(f"`seams {' '.join(args[:1])}`")
    return subprocess.run(
        [sys.executable, "-m", "seams", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The command failed with exactly one line on stderr, and no traceback anywhere."""
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "Traceback" not in output, output
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("seams: error: "), lines[0]
    return lines[0]
