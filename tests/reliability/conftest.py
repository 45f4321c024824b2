"""Fixtures and helpers shared by the reliability tests (faults, hostile input, load, secrets).

They reuse the session fixtures of `tests/conftest.py` (`database_url`, `pg_server_url`,
`exported_model`, `isolated_environment`); nothing here starts a second model export.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg

from seams.orchestration import runner
from tests.conftest import keep_environment  # noqa: F401  (re-exported for the tests here)

SHORT_DOC = (
    "# Tides\n\nThe tide rises twice a day along this coast. Fishermen read the tables before "
    "they leave the harbour.\n\nOyster beds lie bare at the lowest tides of spring.\n"
)


def seams_env(**overrides: str) -> dict[str, str]:
    """The environment of a `seams` child process: none of this process's `SEAMS_*` and
    `DAGSTER_*` settings (each test names its own), unbuffered output, then `overrides`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEAMS_", "DAGSTER_"))}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(overrides)
    return env


def run_seams(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m seams ARGS` as a user runs it, from `/` (no project seams.yaml nearby)."""
    return subprocess.run(
        [sys.executable, "-m", "seams", *args],
        env=env, capture_output=True, text=True, timeout=timeout, cwd="/",
    )  # fmt: skip


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The command failed with exactly one line on stderr, and no traceback anywhere."""
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "Traceback" not in output, output
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("seams: error: "), lines[0]
    return lines[0]


def run_path(
    instance: dg.DagsterInstance, path: Path, report: Any = print, *, defs: dg.Definitions
) -> runner.RunSummary:
    """Register `path` and materialize its batches, as `seams run PATH` does (in-process)."""
    keys = runner.register_path(path, report, defs=defs)
    summary = runner.RunSummary(batches=keys)
    runner.materialize_batches(instance, keys, report, summary, defs=defs)
    return summary


def rows(url: str, query: str, *params: object) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(query, params).fetchall()


def advisory_locks(url: str) -> list[tuple]:
    """Advisory locks held or awaited in `url`'s database, by anyone."""
    return rows(
        url,
        "SELECT l.pid, l.granted, l.objid FROM pg_locks l JOIN pg_database d ON d.oid = l.database"
        " WHERE l.locktype = 'advisory' AND d.datname = current_database()",
    )


_NON_SPACE = re.compile(r"\S")


def invariant_problems(text: str, chunks: Sequence[dict[str, Any]], size_max: int) -> list[str]:
    """The chunk invariants of design.md section 2, checked independently of `assets/checks.py`.

    `chunks` are one document's chunks in order, with the `seams.chunks` columns text,
    start_char, end_char, overlap_end, chunk_index, total_chunks, token_count, metadata. The
    cores (`overlap_end:end_char`) must tile the text in order with every non-space character
    in one; a chunk's size (metadata "size", else token_count) may pass `size_max` only when
    the chunk is flagged oversized.
    """
    problems = []
    covered = [False] * len(text)
    previous_end = 0
    for position, chunk in enumerate(chunks):
        start, end = chunk["start_char"], chunk["end_char"]
        if text[start:end] != chunk["text"]:
            problems.append(f"chunk {position}: text is not source[{start}:{end}]")
        if chunk["chunk_index"] != position or chunk["total_chunks"] != len(chunks):
            problems.append(f"chunk {position}: index/total {chunk['chunk_index']}/"
                            f"{chunk['total_chunks']}")  # fmt: skip
        core_start = chunk["overlap_end"]
        if core_start < previous_end:
            problems.append(f"chunk {position}: core starts at {core_start} < {previous_end}")
        previous_end = end
        for i in range(core_start, end):
            covered[i] = True
        metadata = chunk.get("metadata") or {}
        size = metadata.get("size", chunk["token_count"])
        if size > size_max and not metadata.get("oversized"):
            problems.append(f"chunk {position}: size {size} > {size_max}, not flagged")
    lost = next((m.start() for m in _NON_SPACE.finditer(text) if not covered[m.start()]), None)
    if lost is not None:
        problems.append(f"character {lost} ({text[lost]!r}) is in no chunk")
    return problems
