"""`make test-fast` runs the tests marked neither `slow` nor `services`: those may not start
Dagster's webserver and daemon or Celery workers (tens of seconds each), nor a `seams` command in
a child process, so the fast lane stays fast as tests are added."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run_seams, seams_env
from tests.support.processes import dagster_services, start_workers


def test_a_test_not_marked_slow_cannot_start_the_ui_or_workers(tmp_path: Path) -> None:
    ui = r"webserver and daemon: mark it @pytest.mark.slow"
    with pytest.raises(AssertionError, match=ui), dagster_services(tmp_path):
        pass
    with pytest.raises(AssertionError, match=r"Celery workers: mark it @pytest.mark.slow"):
        start_workers(["w1"], {}, tmp_path)
    assert not list(tmp_path.iterdir())  # refused before starting anything or opening a log


def test_a_test_not_marked_services_cannot_run_seams_in_a_child_process() -> None:
    with pytest.raises(AssertionError, match=r"`seams db`: mark it @pytest.mark.services"):
        run_seams("db", "url", env=seams_env())


@pytest.mark.services
def test_a_services_test_can() -> None:
    done = run_seams("--help", env=seams_env())
    assert done.returncode == 0 and done.stdout.startswith("usage: seams"), done.stderr
