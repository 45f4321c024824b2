"""A broken seams.yaml is one line naming the file, the field and what is allowed, for every
command that reads it; help still works."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from seams.orchestration import cli

COMMANDS = [
    ["run"], ["backfill"], ["search", "tides"], ["check"], ["dev"], ["model", "export"],
    ["export", "chunks.jsonl"], ["worker"], ["eval", "questions.jsonl"], ["serve"], ["sync"],
]  # fmt: skip
BROKEN = {
    "embedder:\n  variant: fp16\n": ("embedder.variant", "'fp32' or 'int8'"),
    "retrieval:\n  mode: fancy\n": ("retrieval.mode", "'text', 'pooled' or 'late'"),
    "chunking:\n  preset: nope\n": ("preset", "default, technical_docs, narrative"),
    "chunking: [unclosed\n": ("not valid YAML at line 2", ""),
}


def test_every_command_reads_the_settings_or_is_db() -> None:
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(sub.choices) == {c[0] for c in COMMANDS} | {"db"}


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
@pytest.mark.parametrize("text", list(BROKEN), ids=["variant", "mode", "preset", "yaml"])
def test_a_broken_seams_yaml_is_one_line_for_every_command(
    argv: list[str],
    text: str,
    seams_yaml: Callable[[str], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = seams_yaml(text)
    assert cli.main(argv) == cli.EXIT_ERROR
    out, err = capsys.readouterr()
    field, allowed = BROKEN[text]
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith(f"seams: error: {settings}: ") and field in err and allowed in err


@pytest.mark.services
def test_help_works_with_a_broken_seams_yaml(tmp_path: Path) -> None:
    (tmp_path / "seams.yaml").write_text("embedder: {variant: fp16}\n", encoding="utf-8")
    for argv in (["--help"], *[[*c[:1], "--help"] for c in COMMANDS]):
        done = subprocess.run(
            [sys.executable, "-m", "seams", *argv],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0 and "usage: seams" in done.stdout, done.stderr
