"""A file whose extraction kills the run's process is quarantined: the next run records it as
failed instead of dying on it again, the rest of its batch is chunked, and `seams run
--retry-quarantined` reads it once more (issue 19)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from seams.models.model_store import ModelManifest
from seams.orchestration import runner
from seams.resources import database
from seams.storage.quarantine import QUARANTINE_RETRY_TAG
from tests.reliability.test_extraction_limits import docx_with_body_of
from tests.support.databases import rows
from tests.support.samples import SHORT_DOC

ERRORS = "SELECT source_uri, error FROM seams.extracted_text ORDER BY source_uri"


def _errors(url: str) -> dict[str, str | None]:
    return {Path(uri).name: error for uri, error in rows(url, ERRORS)}


def _chunked(url: str) -> set[str]:
    return {
        Path(uri).name
        for (uri,) in rows(
            url,
            "SELECT DISTINCT e.source_uri FROM seams.chunks c"
            " JOIN seams.extracted_text e USING (batch_key, document_id)",
        )
    }


def _attempt(url: str, batch: str, file: str, run_id: str) -> None:
    """The row a run leaves behind when its process dies inside `file`."""
    rows(
        url,
        "INSERT INTO seams.extraction_attempts (batch_key, document_id, source_sha256, run_id)"
        " SELECT batch_key, document_id, source_sha256, %s FROM seams.batch_documents"
        " WHERE batch_key = %s AND source_uri LIKE %s RETURNING 1",
        run_id,
        batch,
        f"%/{file}",
    )


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    folder = tmp_path / "inbox"
    folder.mkdir()
    (folder / "tides.md").write_text(SHORT_DOC, encoding="utf-8")
    (folder / "harbour.md").write_text(
        "# Harbour\n\nThe harbour master keeps the tide tables and rings the bell at noon.\n",
        encoding="utf-8",
    )
    return folder


@pytest.mark.slow
def test_a_file_left_mid_extraction_by_a_dead_run_is_quarantined_until_retried(
    instance: dg.DagsterInstance, defs: dg.Definitions, inbox: Path, database_url: str
) -> None:
    (batch,) = runner.register_path(inbox, print, defs=defs)
    _attempt(database_url, batch, "harbour.md", "a-run-that-died")
    runner.materialize_batches(
        instance, [batch], print, runner.RunSummary(batches=[batch]), defs=defs
    )

    errors = _errors(database_url)
    assert errors["tides.md"] is None
    assert (
        "quarantined: run a-run-that-died died while extracting this file" in errors["harbour.md"]
    )
    assert "--retry-quarantined" in errors["harbour.md"]
    assert _chunked(database_url) == {"tides.md"}
    assert runner.quarantined_batches(runner.source_of(inbox), defs=defs) == [batch]

    runner.materialize_batches(
        instance,
        [batch],
        print,
        runner.RunSummary(batches=[batch]),
        defs=defs,
        tags={QUARANTINE_RETRY_TAG: "true"},
    )
    assert set(_errors(database_url).values()) == {None}
    assert _chunked(database_url) == {"tides.md", "harbour.md"}
    assert rows(database_url, "SELECT count(*) FROM seams.extraction_attempts") == [(0,)]


@pytest.mark.slow
def test_a_file_another_live_run_is_reading_is_not_quarantined(
    instance: dg.DagsterInstance, defs: dg.Definitions, inbox: Path, database_url: str
) -> None:
    (batch,) = runner.register_path(inbox, print, defs=defs)
    live = instance.add_run(
        dg.DagsterRun(job_name="chunk_batches", status=dg.DagsterRunStatus.STARTED)
    )
    _attempt(database_url, batch, "harbour.md", live.run_id)
    runner.materialize_batches(
        instance, [batch], print, runner.RunSummary(batches=[batch]), defs=defs
    )
    assert set(_errors(database_url).values()) == {None}


@pytest.mark.slow
def test_a_run_killed_inside_a_file_quarantines_it_and_the_next_run_finishes(
    database_url: str, exported_model: ModelManifest, inbox: Path
) -> None:
    # A 30 MiB-XML DOCX (under the 32 MiB limit): python-docx parses it for many seconds.
    (inbox / "slow.docx").write_bytes(docx_with_body_of(30))
    env = {**os.environ, "SEAMS_DATABASE_URL": database_url, "DAGSTER_HOME": "",
           "PYTHONUNBUFFERED": "1"}  # fmt: skip
    env.pop(database.DAGSTER_URL_ENV, None)
    seams = [sys.executable, "-m", "seams", "run", str(inbox)]
    proc = subprocess.Popen(seams, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if _reading(database_url, "slow.docx"):
                break
            time.sleep(0.05)
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.stdout}"
        # At once: the attempt row is written as reading starts, and on an idle machine the
        # parse (and the limit check after it) can end within half a second.
        proc.send_signal(signal.SIGKILL)  # as the OOM killer would
    finally:
        if proc.poll() is None:
            proc.kill()
        output = proc.communicate(timeout=30)[0]
    assert proc.returncode == -signal.SIGKILL, output

    rerun = subprocess.run(seams, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    errors = _errors(database_url)
    assert "quarantined" in (errors["slow.docx"] or ""), errors
    assert _chunked(database_url) == {"tides.md", "harbour.md"}
    assert "(1 failed)" in rerun.stdout, rerun.stdout


def _reading(url: str, file: str) -> bool:
    (table,) = rows(url, "SELECT to_regclass('seams.extraction_attempts')")[0]
    if not table:
        return False
    return bool(
        rows(
            url,
            "SELECT 1 FROM seams.extraction_attempts a JOIN seams.batch_documents d"
            " USING (batch_key, document_id) WHERE d.source_uri LIKE %s",
            f"%/{file}",
        )
    )
