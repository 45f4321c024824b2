"""First steps that cannot go wrong: a bad path fails at once (before any model export or
database work), and a fresh install's `seams search` says what to run first."""

from __future__ import annotations

from pathlib import Path

import pytest

from seams.orchestration.cli import EXIT_ERROR, main
from seams.orchestration.runner import python_command, seams_command


@pytest.fixture
def fresh_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data dir with nothing in it (no model, no database) and no external server."""
    data = tmp_path / "fresh"
    monkeypatch.setenv("SEAMS_DATA_DIR", str(data))
    monkeypatch.delenv("SEAMS_DATABASE_URL", raising=False)
    return data


def test_run_of_a_missing_path_fails_before_any_expensive_work(
    fresh_data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "/no/such/path"]) == EXIT_ERROR
    error = capsys.readouterr().err
    assert "/no/such/path does not exist" in error and "file or a folder" in error
    assert not fresh_data_dir.exists()  # no model exported, no embedded server started


def test_search_on_a_fresh_install_says_to_run_first(
    fresh_data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["search", "how do maps work"]) == EXIT_ERROR
    error = capsys.readouterr().err
    assert "nothing to search yet" in error and f"`{seams_command()} run PATH`" in error
    assert not fresh_data_dir.exists()  # nothing exported or started to say so


def test_advice_names_commands_that_exist() -> None:
    for command in (seams_command(), python_command()):
        executable = command.split()[0]
        assert Path(executable).exists() or executable == "seams", command


def test_seams_dev_prints_info_and_up_not_every_runs_debug_log(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import io

    from seams.orchestration.cli.dev import _readable_log

    output = (
        "2026-11-24 20:00:00 +0000 - dagster.daemon.SensorDaemon - INFO - Checking for new runs\n"
        "\x1b[34m2026-11-24 20:00:01 +0000 - dagster - DEBUG - chunk_batches - STEP_START\x1b[0m\n"
        "    a DEBUG record's second line\n"
        "2026-11-24 20:00:02 +0000 - dagster - ERROR - chunk_batches - 1f2e - step failed\n"
        "Traceback (most recent call last):\n"
        "Serving dagster-webserver on http://127.0.0.1:3000 in process 12\n"
    )
    _readable_log(io.BytesIO(output.encode()))
    shown = capsys.readouterr().out
    assert "Checking for new runs" in shown and "step failed" in shown and "Traceback" in shown
    assert "STEP_START" not in shown and "second line" not in shown
    assert "Serving dagster-webserver" in shown
