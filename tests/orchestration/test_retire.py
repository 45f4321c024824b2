"""Deleted sources retire: a file that was in a folder's earlier batch and is gone when `seams run`
scans that folder again leaves `seams.current_chunks` (and so search), with a tombstone row, while
its history stays queryable; it comes back when the file does. `seams run FILE` chunks one file.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import dagster as dg
import psycopg
import pytest

from seams.assets.partitions import document_batches
from seams.environment import SeamsEnvironment
from seams.orchestration import runner
from seams.orchestration.cli.search import format_response
from seams.storage.batches import document_id_for
from seams.storage.search import search_response
from tests.support.samples import copy_samples

pytestmark = pytest.mark.usefixtures("exported_model")  # every test runs the packaged model

SAMPLES = ("field_notes.md", "city_notes.txt")


def _home() -> Path:
    """This test process's Dagster home (the fixtures chose its data dir)."""
    return SeamsEnvironment.from_os().dagster_home


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    return copy_samples(tmp_path / "inbox", SAMPLES)


def _seams_run(
    instance: dg.DagsterInstance,
    path: Path,
    retired: list[str] | None = None,
    *,
    defs: dg.Definitions,
) -> list[str]:
    """What `seams run PATH` does: register (and retire), then materialize every new batch."""
    keys = runner.register_path(path, print, defs=defs, retired=retired)
    if keys:
        instance.add_dynamic_partitions(document_batches.name, keys)
        job = defs.resolve_job_def(runner.JOB_NAME)
        for key in keys:
            result = job.execute_in_process(
                instance=instance, partition_key=key, run_config=runner.QUIET
            )
            assert result.success
    return keys


def _current(database_url: str) -> dict[str, int]:
    with psycopg.connect(database_url) as conn:
        return dict(
            conn.execute(
                "SELECT document_id, count(*) FROM seams.current_chunks GROUP BY document_id"
            ).fetchall()
        )


def test_a_removed_file_drops_out_of_current_chunks_on_the_next_run(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    inbox: Path,
    database_url: str,
) -> None:
    _seams_run(instance, inbox, defs=defs)
    gone, kept = (document_id_for((inbox / name).absolute().as_uri()) for name in SAMPLES)
    before = _current(database_url)
    assert set(before) == {gone, kept}

    (inbox / SAMPLES[0]).unlink()
    retired: list[str] = []
    assert _seams_run(instance, inbox, retired, defs=defs) == []  # nothing new to chunk...
    assert retired == [(inbox / SAMPLES[0]).absolute().as_uri()]  # ...but one file retired
    assert _current(database_url) == {kept: before[kept]}
    with psycopg.connect(database_url) as conn:
        tombstones = conn.execute(
            "SELECT document_id, source_uri FROM seams.document_tombstones"
        ).fetchall()
        history = conn.execute(
            "SELECT count(*) FROM seams.chunks WHERE document_id = %s", (gone,)
        ).fetchone()[0]
    assert tombstones == [(gone, retired[0])]
    assert history == before[gone]  # its chunks stay queryable as history
    # Search no longer finds it, and names the files it does find by name.
    resources = defs.resources
    response = search_response(
        resources["seams_postgres"], resources["seams_embedder"], "field notes", k=10
    )
    assert response.hits and {hit.document_id for hit in response.hits} == {kept}
    shown = format_response(response)
    assert f"  {SAMPLES[1]}  [chunk " in shown and "file://" not in shown

    # Scanning again retires nothing twice; the summary says what happened.
    again: list[str] = []
    _seams_run(instance, inbox, again, defs=defs)
    assert again == []
    summary = runner.format_summary(runner.RunSummary(retired=retired), home=_home())
    assert "retired:        1 document" in summary

    # The same file put back is live again, even with the very same bytes.
    shutil.copy(runner.SAMPLE_CORPUS / SAMPLES[0], inbox / SAMPLES[0])
    assert len(_seams_run(instance, inbox, defs=defs)) == 1
    assert _current(database_url) == before


def test_seams_run_file_chunks_that_one_file_and_retires_nothing(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    inbox: Path,
    database_url: str,
) -> None:
    _seams_run(instance, inbox, defs=defs)
    new = inbox / "kitchen_science.md"
    shutil.copy(runner.SAMPLE_CORPUS / new.name, new)
    retired: list[str] = []
    (batch,) = _seams_run(instance, new, retired, defs=defs)
    assert retired == []
    with psycopg.connect(database_url) as conn:
        documents = conn.execute(
            "SELECT DISTINCT document_id FROM seams.chunks WHERE batch_key = %s", (batch,)
        ).fetchall()
    assert documents == [(document_id_for(new.absolute().as_uri()),)]
    assert len(_current(database_url)) == len(SAMPLES) + 1


@pytest.mark.slow
def test_the_printed_python_one_liner_lists_current_chunks(
    instance: dg.DagsterInstance, defs: dg.Definitions, inbox: Path
) -> None:
    _seams_run(instance, inbox, defs=defs)
    summary = runner.format_summary(runner.RunSummary(), home=_home())
    (line,) = [row.strip() for row in summary.splitlines() if "current_chunks" in row]
    done = subprocess.run(line, shell=True, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout.strip().splitlines()) == 10
