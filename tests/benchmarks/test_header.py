"""The header every benchmark result JSON opens with: command, commit, UTC date, machine."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from benchmarks.header import ROOT, git_commit, run_header, with_header, write_result


def test_header_names_the_command_commit_date_and_machine() -> None:
    header = run_header(["--quick", "--docs", "3"])
    assert header["command"].endswith("--quick --docs 3")
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert header["commit"] == head
    assert datetime.fromisoformat(header["date"]).utcoffset().total_seconds() == 0
    assert set(header["machine"]) == {"platform", "cpus", "python"}
    assert header["machine"]["cpus"] >= 1


def test_with_header_puts_the_header_first_and_keeps_the_payload() -> None:
    payload = {"results": [1, 2], "seconds": 0.5}
    stamped = with_header(payload, [])
    assert next(iter(stamped)) == "header"
    assert {k: v for k, v in stamped.items() if k != "header"} == payload


def test_commit_is_unknown_outside_a_checkout(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("benchmarks.header.ROOT", tmp_path)
    assert git_commit() == "unknown"


def test_a_module_run_records_python_dash_m_and_a_script_run_its_path(tmp_path: Path) -> None:
    code = "import json; from benchmarks.header import run_header; print(json.dumps(run_header()))"
    (tmp_path / "probe.py").write_text(code, encoding="utf-8")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    for argv, expected in (
        (["-m", "probe", "--x", "1"], "python -m probe --x 1"),
        ([str(tmp_path / "probe.py"), "--x", "1"], f"{tmp_path / 'probe.py'} --x 1"),
    ):
        done = subprocess.run(
            [sys.executable, *argv], cwd=tmp_path, capture_output=True, text=True, check=True,
            env=env,
        )  # fmt: skip
        assert json.loads(done.stdout)["command"] == expected


def test_a_result_file_is_indented_json_under_its_header_in_a_folder_made_for_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results" / "run.json"
    write_result(path, {"seconds": 0.5}, ["--quick"])
    text = path.read_text(encoding="utf-8")
    written = json.loads(text)
    assert list(written) == ["header", "seconds"] and written["seconds"] == 0.5
    assert written["header"]["command"].endswith("--quick")
    assert text.endswith("}\n") and text.startswith('{\n  "header"')
