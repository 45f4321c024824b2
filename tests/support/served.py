"""`seams serve` as a child process, as an operator runs it, and a client for it."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.support import processes

READY_S = 120.0


@contextlib.contextmanager
def serving(env: dict[str, str], log: Path, *args: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """`python -m seams serve --port P ARGS` in its own process group, once `/health` says
    ready: (the process, its base URL); stopped (SIGTERM, then SIGKILL) on exit."""
    processes.require_children("`seams serve`")
    port = processes.free_port()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "seams", "serve", "--port", str(port), *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd="/",
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, proc, log)
        yield proc, base
    finally:
        processes.stop_group(proc)


def wait_ready(base: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"seams serve exited {proc.returncode}:\n{log.read_text()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise AssertionError(f"seams serve not ready in {READY_S:.0f} s:\n{log.read_text()}")
