"""Faults while the pipeline runs: the database goes away mid-write, the run process is killed,
the embedding model breaks. Each test proves that nothing is half-written or lost and that the
next attempt (a step retry, a rerun) finishes the job.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from seams.errors import EmbeddingError, SeamsError
from seams.models.model_store import MODEL_NAME, ModelManifest
from seams.models.onnx_runtime import EmbeddingRuntime
from seams.orchestration import runner
from seams.resources import database
from seams.resources import postgres_pool as postgres_module
from seams.resources.database import EmbeddedPostgres, database_url_for
from seams.resources.embedded_server import server_tempdir
from seams.resources.postgres import close_pool
from seams.storage import partition_tables as io_module
from seams.storage import schema
from tests.support.cli import run_seams, seams_env
from tests.support.databases import fresh_database, held_locks, rows
from tests.support.instances import current_definitions, export_instance, keep_environment
from tests.support.samples import SHORT_DOC, copy_samples, run_path

SAMPLES = ("field_notes.md", "history_of_maps.txt")
PASSWORD = "Pw-stop-9f3a"


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    return copy_samples(tmp_path / "inbox", SAMPLES)


class ChunksWriteHook:
    """Runs `action` once, after `after_rows` rows of the next `chunks` COPY were sent: the
    partition's old rows are deleted and the new ones half sent, inside one transaction."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, after_rows: int = 2) -> None:
        self.after_rows = after_rows
        self.action: Callable[[], None] | None = None
        self.fired = 0
        self._table: str | None = None
        copy_rows, iter_rows = io_module._copy_rows, io_module.iter_rows

        def tracking_copy(conn: Any, table: Any, columns: Any, copy_format: Any) -> Any:
            self._table = table.name
            try:
                return copy_rows(conn, table, columns, copy_format)
            finally:
                self._table = None

        def hooked_rows(columns: list[list[Any]]) -> Iterator[tuple[Any, ...]]:
            for i, row in enumerate(iter_rows(columns)):
                if self._table == "chunks" and i == self.after_rows and self.action:
                    action, self.action = self.action, None
                    self.fired += 1
                    action()
                yield row

        monkeypatch.setattr(io_module, "_copy_rows", tracking_copy)
        monkeypatch.setattr(io_module, "iter_rows", hooked_rows)


def _step_errors(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """The error message of every failed attempt of every step of a run, in order."""
    messages = []
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None:
            continue
        if event.is_step_up_for_retry:
            messages.append(_error_chain(event.step_retry_data.error))
        elif event.is_step_failure and event.step_failure_data.error:
            messages.append(_error_chain(event.step_failure_data.error))
    return messages


def _error_chain(error: Any) -> str:
    """An error's message and those of its causes (a retry wraps the error that caused it)."""
    parts = []
    while error is not None:
        parts.append(error.message.strip())
        error = error.cause or error.context
    return " <- ".join(parts)


@pytest.fixture
def own_server(
    database_url: str, monkeypatch: pytest.MonkeyPatch, exported_model: ModelManifest
) -> Iterator[tuple[EmbeddedPostgres, str]]:
    """A dedicated embedded server for the data (which the test stops), with Dagster's own
    storage on the session server (which stays up). Yields the server and the data URL, whose
    password the embedded server's trust auth ignores but which must never be shown."""
    root = server_tempdir("seams-pgf-")
    server = EmbeddedPostgres(root / "pgdata")
    data_url = database_url_for(server.start(), database.DATA_DATABASE)
    data_url = data_url.replace("postgres:@", f"postgres:{PASSWORD}@", 1)
    keep_environment(monkeypatch)
    monkeypatch.setenv(database.URL_ENV, data_url)
    monkeypatch.setenv(database.DAGSTER_URL_ENV, database_url)
    export_instance(monkeypatch)
    # A stopped server fails each connection attempt at once; don't wait 30 s per attempt.
    monkeypatch.setattr(postgres_module, "POOL_TIMEOUT_S", 3.0)
    try:
        yield server, data_url
    finally:
        close_pool(data_url)
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_postgres_stopped_mid_partition_write_keeps_rows_fails_clearly_and_recovers(
    own_server: tuple[EmbeddedPostgres, str], inbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, data_url = own_server
    snapshot = "SELECT run_id, chunk_id, text FROM seams.chunks ORDER BY document_id, chunk_index"
    hook = ChunksWriteHook(monkeypatch)
    defs = current_definitions()  # the environment `own_server` exported
    with dg.DagsterInstance.get() as instance:
        first = run_path(instance, inbox, defs=defs)
        (batch,) = first.batches
        before = rows(data_url, snapshot)
        assert len(before) >= 4 and {r[0] for r in before} == {first.run_ids[0]}

        # 1. The server stops in the middle of the chunks COPY and stays down: the retries of
        # the step fail too, and the run fails with a message naming the redacted URL.
        hook.action = server.stop
        down = runner.RunSummary(batches=[batch])
        with pytest.raises(SeamsError) as failed:
            runner.materialize_batches(instance, [batch], print, down, defs=defs)
        assert hook.fired == 1 and not server.is_running()
        attempts = _step_errors(instance, down.run_ids[0])
        assert len(attempts) == 3, attempts  # the first try and two retries (RetryPolicy)
        assert "lost the connection to PostgreSQL at postgresql://postgres:***@" in attempts[0]
        assert all("PostgreSQL at postgresql://postgres:***@" in m for m in attempts), attempts
        assert PASSWORD not in str(failed.value) + "".join(attempts)
        runner_message = str(failed.value)  # what `seams run` prints; asserted at the end

        server.start()
        assert rows(data_url, snapshot) == before  # the partition kept its previous rows

        # 2. The server stops mid-write again but is back before the retry: the step's
        # RetryPolicy finishes the run, and the partition holds exactly the new rows.
        seen_while_down: list[list[tuple]] = []

        def stop_and_restart_soon() -> None:
            server.stop()

            def restart() -> None:
                time.sleep(0.5)
                server.start()
                seen_while_down.append(rows(data_url, snapshot))

            threading.Thread(target=restart, daemon=True).start()

        hook.action = stop_and_restart_soon
        again = runner.RunSummary(batches=[batch])
        runner.materialize_batches(instance, [batch], print, again, defs=defs)
        assert hook.fired == 2 and seen_while_down == [before]
        assert any("lost the connection" in m for m in _step_errors(instance, again.run_ids[0]))
        after = rows(data_url, snapshot)
        assert {r[0] for r in after} == {again.run_ids[0]}
        assert [r[1:] for r in after] == [r[1:] for r in before]  # same chunks, no duplicates
    assert held_locks(data_url) == []
    # The one line a `seams run` user sees names the cause, not just "step failed".
    assert "PostgreSQL at postgresql://postgres:***@" in runner_message, runner_message


# --- the run process killed -------------------------------------------------------------------
#
# `seams run` SIGKILLs itself at one place (tests/reliability/kill_at.py): at every boundary
# between registration and the steps, inside each table's COPY and after each table's write
# committed (before Dagster records the step). One test kills a run at each place in turn, each
# rerun recovering from the kill before it: every rerun says what it finishes and where it
# resumes, and the last one leaves exactly the index a run never killed leaves: the same chunks,
# vectors, BM25 rows and statistics, every chunk published, no other generation left behind.

KILL_AT = Path(__file__).with_name("kill_at.py")
TABLES = tuple(schema.ASSET_TABLES)
KILL_PLACES = (
    "register",
    "registered",
    "run-created",
    *(place for t in TABLES for place in (f"copy:{t}", f"after:{t}")),
)
KILL_CORPUS = ("field_notes.md", "history_of_maps.txt")

# Everything readers can see, without what differs between two runs of the same files (batch
# keys are timestamps; run ids; the generation a build got).
INDEX_QUERIES = {
    "chunks": "SELECT chunk_id, document_id, chunk_index, total_chunks, text, start_char,"
    " end_char, overlap_start, overlap_end, token_count, sentence_count, page_start, page_end,"
    " section, cohesion, boundary_method, strategy, config_hash, model_id, source_sha256,"
    " code_version FROM seams.chunks ORDER BY document_id, chunk_index",
    "current_chunks": "SELECT chunk_id FROM seams.current_chunks ORDER BY chunk_id",
    "vectors": "SELECT chunk_id, document_id, mode, model_id, embedding::text, text_search_config"
    " FROM seams.chunk_index ORDER BY chunk_id, mode",
    "lexical_chunks": "SELECT text_search_config, document_id, chunk_id, length, lexemes::text"
    " FROM seams.lexical_chunks ORDER BY chunk_id",
    "lexical_postings": "SELECT text_search_config, lexeme, impact, document_id, chunk_id"
    " FROM seams.lexical_postings ORDER BY lexeme, chunk_id",
    "lexical_terms": "SELECT * FROM seams.lexical_terms ORDER BY text_search_config, lexeme",
    "lexical_totals": "SELECT * FROM seams.lexical_totals ORDER BY text_search_config",
    "builds": "SELECT state, parts FROM seams.batch_builds WHERE state <> 'superseded'",
    "current_documents": "SELECT document_id, source_sha256 FROM seams.current_documents"
    " ORDER BY document_id",
}


def _index(url: str) -> dict[str, list[tuple]]:
    return {name: rows(url, query) for name, query in INDEX_QUERIES.items()}


@pytest.fixture(scope="module")
def kill_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for every kill test and the clean run: document ids follow the file's path."""
    inbox = copy_samples(tmp_path_factory.mktemp("kill") / "inbox", KILL_CORPUS)
    (inbox / "tides.md").write_text(SHORT_DOC, encoding="utf-8")
    return inbox


def _seams_env(url: str, manifest: ModelManifest) -> dict[str, str]:
    return seams_env(SEAMS_DATABASE_URL=url, SEAMS_DATA_DIR=str(manifest.directory.parents[1]))


@pytest.fixture(scope="module")
def clean_index(
    pg_server_url: str, exported_model: ModelManifest, kill_corpus: Path
) -> dict[str, list[tuple]]:
    """The index a `seams run` of the corpus leaves when nothing kills it."""
    with fresh_database(pg_server_url) as url:
        done = run_seams("run", str(kill_corpus), env=_seams_env(url, exported_model))
        assert done.returncode == 0, done.stdout + done.stderr
        index = _index(url)
    assert index["chunks"] and index["vectors"] and index["lexical_postings"]
    assert index["builds"] == [("published", list(TABLES))]
    return index


@pytest.mark.slow
def test_a_run_killed_at_every_place_in_turn_reruns_to_exactly_the_clean_index(
    database_url: str,
    exported_model: ModelManifest,
    kill_corpus: Path,
    clean_index: dict[str, list[tuple]],
) -> None:
    env = _seams_env(database_url, exported_model)
    previous = None
    for place in KILL_PLACES:
        killed = subprocess.run(
            [sys.executable, str(KILL_AT), place, "run", str(kill_corpus)],
            env=env, capture_output=True, text=True, timeout=300, cwd="/",
        )  # fmt: skip
        said = killed.stdout + killed.stderr
        assert killed.returncode == -signal.SIGKILL, f"{place} was never reached: {said}"
        # Its sessions die with it: no advisory lock (the command's, a partition's) stays behind.
        deadline = time.monotonic() + 10
        while held_locks(database_url) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert held_locks(database_url) == [], place
        if place != "after:chunk_index":  # published in that write's transaction
            # Readers saw nothing of the unfinished batch.
            assert rows(database_url, "SELECT count(*) FROM seams.current_chunks") == [(0,)]
        # This run finished what the kill before it left, and said so in one line.
        finishing = [line for line in killed.stdout.splitlines() if "left unpublished" in line]
        if previous in (None, "register"):  # nothing was committed before: a first run
            assert not finishing, said
        else:
            assert len(finishing) == 1, (place, said)
            assert finishing[0].startswith("seams: finishing 1 batch left unpublished: batch ")
            assert finishing[0].endswith(_resumed_at(previous)), (previous, finishing)
        previous = place

    # Killed after chunk_index committed, the batch was published: nothing is left to run.
    rerun = run_seams("run", str(kill_corpus), env=env)
    said = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, said
    assert "nothing new under" in rerun.stdout and "left unpublished" not in said, said
    # No killed run stays NOT_STARTED/STARTED (holding a queue slot for hours): every run that
    # was created (at run-created and after) is marked failed by the next command.
    statuses = [r[0] for r in rows(database_url, "SELECT status FROM runs ORDER BY id")]
    created = len(KILL_PLACES) - KILL_PLACES.index("run-created")
    assert statuses == ["FAILURE"] * created, statuses
    assert "which is gone: marked failed" in said

    assert _index(database_url) == clean_index
    assert rows(database_url, "SELECT count(*) FROM seams.batches") == [(1,)]
    assert held_locks(database_url) == []


def _resumed_at(place: str) -> str:
    """What the rerun's line says it does with the batch a kill at `place` left."""
    kind, _, table = place.partition(":")
    if kind in ("registered", "run-created") or place == "copy:extracted_text":
        return "from the start"
    if kind == "copy":
        return f"resuming at {table}"
    return f"resuming at {TABLES[TABLES.index(table) + 1]}"


# --- the embedding model fails ---------------------------------------------------------------


def _chunk_methods(url: str) -> dict[str, set[str]]:
    methods: dict[str, set[str]] = {}
    for doc, method in rows(url, "SELECT document_id, boundary_method FROM seams.chunks"):
        methods.setdefault(doc, set()).add(method)
    return methods


def _embedding_metadata(instance: dg.DagsterInstance, run_id: str) -> dict[str, Any]:
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event and event.is_step_materialization:
            materialization = event.step_materialization_data.materialization
            if materialization.asset_key == dg.AssetKey("candidate_embeddings"):
                return {k: v.value for k, v in materialization.metadata.items()}
    raise AssertionError("no candidate_embeddings materialization")


def _assert_jaccard_fallback(instance: dg.DagsterInstance, url: str, run_id: str) -> None:
    embedded, null = rows(
        url, "SELECT count(embedding), count(*) - count(embedding) FROM seams.candidate_embeddings"
    )[0]
    assert embedded == 0 and null > 0
    methods = _chunk_methods(url)
    assert methods and all(m == {"jaccard"} for m in methods.values()), methods
    assert _embedding_metadata(instance, run_id)["fallback"] is True
    warnings = [
        r.user_message
        for r in instance.all_logs(run_id)
        if r.level >= 30 and "lexical fallback" in (r.user_message or "")
    ]
    assert warnings, "the fallback should be logged as a warning"


@pytest.mark.slow
def test_inference_failing_mid_batch_falls_back_to_jaccard_and_the_run_succeeds(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    inbox: Path,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    real_run = EmbeddingRuntime._run

    def fails_after_one_batch(self: EmbeddingRuntime, input_ids: Any, mask: Any) -> Any:
        calls.append(len(input_ids))
        if len(calls) > 1:
            raise EmbeddingError(f"onnxruntime inference failed on a batch of shape "
                                 f"{input_ids.shape}: injected fault")  # fmt: skip
        return real_run(self, input_ids, mask)

    monkeypatch.setattr(EmbeddingRuntime, "_run", fails_after_one_batch)
    summary = run_path(instance, inbox, defs=defs)
    assert len(calls) >= 2  # the model answered once, then failed mid-batch
    _assert_jaccard_fallback(instance, database_url, summary.run_ids[0])
    # Nothing half-embedded reached the cache, so a later healthy run embeds everything.
    assert rows(database_url, "SELECT count(*) FROM seams.embedding_cache")[0][0] == 0


@pytest.fixture
def corrupt_model_data_dir(
    exported_model: ModelManifest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A data dir whose model folder is a copy of the export with a corrupted ONNX graph (the
    session's export is linked, never touched)."""
    models = tmp_path / "data" / "models" / MODEL_NAME
    models.mkdir(parents=True)
    for item in exported_model.directory.iterdir():
        os.symlink(item, models / item.name)
    graph = models / exported_model.variants["fp32"].file
    graph.unlink()
    original = (exported_model.directory / graph.name).read_bytes()
    graph.write_bytes(original[: len(original) // 2])  # a truncated copy: sha256 mismatch
    return tmp_path / "data"


def test_corrupt_model_file_falls_back_to_jaccard_and_the_run_succeeds(
    database_url: str,
    exported_model: ModelManifest,
    corrupt_model_data_dir: Path,
    inbox: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keep_environment(monkeypatch)
    monkeypatch.setenv("SEAMS_DATA_DIR", str(corrupt_model_data_dir))
    monkeypatch.setenv(database.URL_ENV, database_url)
    monkeypatch.delenv(database.DAGSTER_URL_ENV, raising=False)
    export_instance(monkeypatch)
    with dg.DagsterInstance.get() as instance:
        summary = run_path(instance, inbox, defs=current_definitions())
        _assert_jaccard_fallback(instance, database_url, summary.run_ids[0])
    assert (exported_model.directory / exported_model.variants["fp32"].file).stat().st_size > 0
