"""The header every benchmark result JSON carries: what ran, on which code, when, on what machine.

Figures are only comparable with the command, the commit and the machine that produced them, so
every script that writes a result JSON puts `run_header()` under the `"header"` key
(`with_header`), always the first key of the file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command as typed: `python -m MODULE ARGS` when run as a module, else `sys.argv` joined.

    `argv` replaces the arguments when a script's `main(argv)` was called with its own list.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:
        module = spec.name.removesuffix(".__main__")
        return " ".join(["python -m", module, *args])
    return " ".join([sys.argv[0] if sys.argv else "python", *args])


def git_commit() -> str:
    """The checkout's HEAD commit, or "unknown" outside a git checkout or without git."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else "unknown"


def run_header(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Command, commit, UTC date (ISO 8601) and machine (platform, CPUs, Python) of this run."""
    return {
        "command": command_line(argv),
        "commit": git_commit(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
    }


def with_header(payload: dict[str, Any], argv: Sequence[str] | None = None) -> dict[str, Any]:
    """`payload` with `run_header(argv)` as its first key, `"header"`."""
    return {"header": run_header(argv), **payload}


def write_result(
    path: Path | None, payload: dict[str, Any], argv: Sequence[str] | None = None
) -> None:
    """Write `payload` under its header to `path` as indented JSON (the folder made if needed):
    the one shape of every result file. No `path` (no `--json` given): nothing is written."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(with_header(payload, argv), indent=2) + "\n", encoding="utf-8")


def repeated_study(
    argv: Sequence[str] | None,
    description: str,
    measure: Callable[[int], Any],
    table: Callable[[Any], str],
    *,
    repeats: str,
) -> int:
    """The `main` of a study measured `--repeats` times (`repeats` says of what): `measure`,
    print its `table`, and with `--json` write every number."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--repeats", type=int, default=3, help=repeats)
    parser.add_argument("--json", type=Path, help="also write every number here")
    args = parser.parse_args(argv)
    results = measure(args.repeats)
    print(table(results))
    write_result(args.json, results, argv)
    return 0
