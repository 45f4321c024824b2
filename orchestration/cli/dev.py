"""`seams dev`: PostgreSQL and the Dagster UI (`dagster dev`) until Ctrl-C, leaving nothing
behind: every process `dagster dev` started is stopped, and the embedded server too when this
command started it."""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from typing import Any

from seams.errors import ConfigError
from seams.orchestration.cli.terminal import say
from seams.orchestration.instance import prepare_instance
from seams.orchestration.ownership import reap_orphans, remove_dev_marker, write_dev_marker
from seams.resources.database import EmbeddedPostgres


def _reset_signals() -> None:
    # A shell that starts us with `&` makes us ignore SIGINT; dagster dev must not inherit that.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run(args: argparse.Namespace) -> int:
    """Run `dagster dev` on this environment's instance; its exit status (0 after Ctrl-C)."""
    if args.environment.team_instance:  # their webserver and daemon serve it, not ours
        raise ConfigError(
            f"DAGSTER_HOME {args.environment.dagster_home} is your Dagster deployment's: run its "
            "webserver and daemon with a workspace.yaml that names Seams (docs/dagster.md), or "
            "unset DAGSTER_HOME to run seams dev on Seams' own instance"
        )
    server = EmbeddedPostgres.for_environment(args.environment)
    was_running = server.is_running()
    seams_instance = prepare_instance(args.environment)
    verbose = bool(getattr(args, "verbose", False))
    with seams_instance.open() as instance:  # a killed `seams` left work: not for this daemon
        reap_orphans(instance, say)
    command = [
        # Seams runs `dagster dev` for the user: its "use `dg dev`" notice is not theirs to act on.
        sys.executable, "-W", "ignore:Function `dev_command` is superseded", "-m", "dagster", "dev",
        "-w", str(seams_instance.workspace_file),
        "-h", args.host, "-p", str(args.port),
        "--log-level", "debug" if verbose else "info",
    ]  # fmt: skip
    url = f"http://{args.host}:{args.port}"
    say(f"starting the Dagster UI on {url} (its address follows once it answers)")
    child = subprocess.Popen(
        command,
        cwd=seams_instance.home,
        env=seams_instance.environment(),
        preexec_fn=_reset_signals,
        start_new_session=True,
        stdout=None if verbose else subprocess.PIPE,
        stderr=None if verbose else subprocess.STDOUT,
    )
    write_dev_marker(seams_instance.home, child.pid, url)
    threading.Thread(target=_announce_when_up, args=(url, child), daemon=True).start()
    if not verbose:  # runs launched from the UI log every event at DEBUG: keep INFO and up
        threading.Thread(target=_readable_log, args=(child.stdout,), daemon=True).start()

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    try:
        code = child.wait()
    finally:
        _stop_group(child)
        remove_dev_marker(seams_instance.home)
        with contextlib.suppress(Exception), seams_instance.open() as instance:
            instance.wipe_daemon_heartbeats()  # stopped: no later command mistakes it for alive
        if seams_instance.urls.embedded and not was_running:
            server.stop()
    return 0 if code in (0, -signal.SIGINT, -signal.SIGTERM, 130) else code


UP_POLL_S = 0.5


def _announce_when_up(url: str, child: subprocess.Popen) -> None:
    """Print the UI's address once its webserver answers (`/server_info`), not before: loading
    the code location takes a while, and an address that does not answer yet looks broken."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).is_unspecified:  # bound to every interface: ask loopback
            host = "127.0.0.1"
    probe = f"{parts.scheme}://{host}:{parts.port}/server_info"
    while child.poll() is None:
        try:
            with urllib.request.urlopen(probe, timeout=2) as response:
                if response.status == 200:
                    print(f"Dagster UI: {url}  (Ctrl-C stops everything)", flush=True)
                    return
        except (OSError, ValueError):
            pass
        time.sleep(UP_POLL_S)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d")


def _readable_log(stream: Any) -> None:
    """Copy `dagster dev`'s output to the terminal without DEBUG records (and the lines that
    continue them): INFO and up, as `seams dev -v` would show everything."""
    dropping = False
    for line in iter(stream.readline, b""):
        plain = _ANSI.sub("", line.decode("utf-8", "replace"))
        if _LOG_LINE.match(plain):
            dropping = " - DEBUG - " in plain
        if not dropping:
            sys.stdout.write(plain)
            sys.stdout.flush()


def _stop_group(child: subprocess.Popen) -> None:
    """Make sure nothing dagster dev started outlives it (webserver, daemon, code servers)."""
    for sig, grace_s in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
        if not _group_alive(child.pid):
            return
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and _group_alive(child.pid):
            child.poll()  # reap the leader so it does not linger as a zombie
            time.sleep(0.1)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
