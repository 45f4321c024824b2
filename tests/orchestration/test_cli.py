"""`seams` as a user runs it: help, and `seams dev` serving the UI and stopping on Ctrl-C."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from seams.orchestration.cli import build_parser
from seams.resources.embedded_server import server_tempdir
from tests.support.processes import free_port


def test_help_lists_every_command() -> None:
    text = build_parser().format_help()
    for command in ("db", "dev"):
        assert command in text


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["serach", "bees"], "invalid choice: 'serach'; did you mean 'search'?"),
        (["db", "strat"], "invalid choice: 'strat'; did you mean 'start'?"),
        (["search", "bees", "--search", "lexcal"], "did you mean 'lexical'?"),
    ],
)
def test_a_mistyped_command_or_choice_names_the_nearest_one(
    argv: list[str], says: str, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    assert says in capsys.readouterr().err


def test_every_command_has_its_module() -> None:
    """`main` runs `seams.orchestration.cli.<command>.run`: a command the parser offers without
    its module would fail only when someone types it."""
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for command in sub.choices:
        module = importlib.import_module(f"seams.orchestration.cli.{command}")
        assert callable(module.run), command


def _graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture
def reachable_dir() -> Iterator[Path]:
    """A temp folder (0711) the embedded server's own user can enter when tests run as root;
    pytest's tmp_path is 0700 and Seams never loosens folders it did not create."""
    root = server_tempdir("seams-dev-")
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_seams_dev_serves_ui_and_ctrl_c_leaves_nothing_behind(
    tmp_path: Path, reachable_dir: Path
) -> None:
    port = free_port()
    log = tmp_path / "seams-dev.log"
    env = {**os.environ, "SEAMS_DATA_DIR": str(reachable_dir / "data")}
    env.pop("SEAMS_DATABASE_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "seams", "dev", "--port", str(port)],
        env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    family: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        answer = None
        while time.monotonic() < deadline and answer is None:
            assert proc.poll() is None, "seams dev exited early"
            try:
                answer = _graphql(
                    port,
                    "{ repositoriesOrError { ... on RepositoryConnection "
                    "{ nodes { name location { name } } } } }",
                )
            except OSError:
                time.sleep(0.5)
        assert answer is not None, "the UI never answered"
        nodes = answer["data"]["repositoriesOrError"]["nodes"]
        assert [n["location"]["name"] for n in nodes] == ["seams"]
        family = {p.pid for p in psutil.Process(proc.pid).children(recursive=True)}
        postgres = [
            p.pid for p in psutil.process_iter(["cmdline"])
            if str(reachable_dir) in " ".join(p.info["cmdline"] or [])
        ]  # fmt: skip
        assert postgres, "the embedded PostgreSQL is not running"
        family |= set(postgres)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=180)
        assert code == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 10
    alive = family
    while alive and time.monotonic() < deadline:
        alive = {pid for pid in alive if psutil.pid_exists(pid) and
                 psutil.Process(pid).status() != psutil.STATUS_ZOMBIE}  # fmt: skip
        time.sleep(0.2)
    assert not alive, f"processes left behind: {alive}"
