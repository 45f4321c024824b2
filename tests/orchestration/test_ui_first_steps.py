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
