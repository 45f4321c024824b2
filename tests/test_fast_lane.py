"""`make test-fast` runs the tests not marked `slow`; those may not start Dagster's webserver and
daemon or Celery workers (tens of seconds each), so the fast lane stays fast as tests are added."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.processes import dagster_services, start_workers


def test_a_test_not_marked_slow_cannot_start_the_ui_or_workers(tmp_path: Path) -> None:
    ui = r"webserver and daemon: mark it @pytest.mark.slow"
    with pytest.raises(AssertionError, match=ui), dagster_services(tmp_path):
        pass
    with pytest.raises(AssertionError, match=r"Celery workers: mark it @pytest.mark.slow"):
        start_workers(["w1"], {}, tmp_path)
    assert not list(tmp_path.iterdir())  # refused before starting anything or opening a log
