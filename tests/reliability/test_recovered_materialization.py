"""A run stopped after its write committed but before Dagster recorded the materialization: the
data is published, and the next `seams run` / `seams backfill` records what Dagster missed (with
the tags a run's record carries, so nothing shows unsynced), once; `seams check` names it first.
A build made with other settings than the current ones is never claimed.

The stop is a step failing right after the IO manager's write returned, without a retry: the
state a kill -9 at that point leaves once the orphan check marked the run failed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg
import pytest
from psycopg import sql

from seams.environment import SeamsEnvironment
from seams.errors import SeamsError
from seams.orchestration import recovered, runner
from seams.orchestration.cli.entry import main
from seams.orchestration.dagster_internals import (
    CODE_VERSION_TAG,
    StaleStatus,
    stale_status_resolver,
)
from seams.orchestration.definitions import build_definitions
from seams.resources import io_manager
from seams.settings import SeamsSettings, load_settings
from seams.storage import index_publication
from tests.support.samples import SHORT_DOC

CHUNKS, CHUNK_INDEX = recovered.CHUNKS, recovered.CHUNK_INDEX


@contextmanager
def stopped_after_write(monkeypatch: pytest.MonkeyPatch, table: str) -> Iterator[None]:
    """Within the block, the step writing `table` fails once its write has committed (no
    retry), before Dagster records its materialization."""
    write_table = io_manager.write_table

    def then_stop(postgres: Any, written: Any, *args: Any, **kwargs: Any) -> Any:
        result = write_table(postgres, written, *args, **kwargs)
        if written.name == table:
            raise dg.Failure(f"stopped after the {table} write committed", allow_retries=False)
        return result

    with monkeypatch.context() as patch:
        patch.setattr(io_manager, "write_table", then_stop)
        patch.setattr(index_publication, "write_table", then_stop)  # chunk_index's own write
        yield


def _inbox(instance: dg.DagsterInstance, defs: dg.Definitions, tmp_path: Path) -> Path:
    """A folder of one short document; the model recorded as `seams run` records it first."""
    runner.ensure_model(instance, print, defs=defs)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "tides.md").write_text(SHORT_DOC, encoding="utf-8")
    return inbox


def _stopped_run(
    instance: dg.DagsterInstance, defs: dg.Definitions, batches: list[str], **kwargs: Any
) -> str:
    """Materialize `batches` (one run) while the patch stops it; the run's id."""
    summary = runner.RunSummary(batches=batches)
    with pytest.raises(SeamsError, match="stopped after the"):
        runner.materialize_batches(instance, batches, print, summary, defs=defs, **kwargs)
    (run_id,) = summary.run_ids
    run = instance.get_run_by_id(run_id)
    assert run is not None and run.status == dg.DagsterRunStatus.FAILURE
    return run_id


def _latest(instance: dg.DagsterInstance, key: dg.AssetKey, batch: str) -> dg.EventLogRecord:
    (record,) = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[batch]), limit=1
    ).records
    return record


def _rows(defs: dg.Definitions, table: str, batch: str) -> int:
    url = defs.resources["seams_postgres"].resolved_url()
    with psycopg.connect(url) as conn:
        query = sql.SQL("SELECT count(*) FROM {} WHERE batch_key = %s").format(
            sql.Identifier("seams", table)
        )
        return conn.execute(query, (batch,)).fetchone()[0]


def _with(settings: SeamsSettings, section: str, **changes: Any) -> SeamsSettings:
    changed = getattr(settings, section).model_copy(update=changes)
    return settings.model_copy(update={section: changed})


def _command(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert main(list(argv)) == 0
    return capsys.readouterr().out.splitlines()


def assert_recovered(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    key: dg.AssetKey,
    batch: str,
    *,
    run_id: str,
    generation: int,
) -> None:
    """The partition's newest record is the recovered one, naming the run and build, with the
    asset's current code version and the rows the table holds."""
    record = _latest(instance, key, batch)
    event = record.asset_materialization
    assert record.run_id == "" and event is not None  # runless
    meta = {name: value.value for name, value in event.metadata.items()}
    assert (
        run_id in meta[recovered.RECOVERED]
        and "stopped before Dagster recorded it" in (meta[recovered.RECOVERED])
    )
    assert meta[recovered.GENERATION] == generation
    assert meta["dagster/row_count"] == _rows(defs, key.path[-1], batch) > 0
    assert meta["written_by"] == run_id
    assert event.tags[CODE_VERSION_TAG] == defs.resolve_assets_def(key).code_versions_by_key[key]


def test_an_index_published_by_a_stopped_run_is_recorded_once_with_current_settings_only(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    inbox = _inbox(instance, defs, tmp_path)
    (batch,) = runner.register_path(inbox, print, defs=defs)
    with stopped_after_write(monkeypatch, "chunk_index"):
        run_id = _stopped_run(instance, defs, [batch])
    capsys.readouterr()

    # The tags recorded are those a run writes: the run's own record of chunks, rebuilt.
    boundaries = dg.AssetKey("semantic_boundaries")
    real = _latest(instance, CHUNKS, batch).asset_materialization
    assert real is not None
    rebuilt = recovered.provenance_tags(
        defs.resolve_assets_def(CHUNKS).code_versions_by_key[CHUNKS],
        {boundaries: _latest(instance, boundaries, batch)},
    )
    assert rebuilt == {k: v for k, v in real.tags.items() if k in rebuilt}, real.tags
    assert len(rebuilt) == 4  # code version, the input's data version and event, data version

    # Published (search sees it; nothing left to finish) but missing in Dagster.
    assert runner.unfinished(defs) == []
    assert runner.unsynced_assets(instance, [batch], defs=defs) == {batch: [CHUNK_INDEX]}
    lines = _command(capsys, "check")
    assert (
        f"Dagster: batch {batch}: no record of its chunk_index (published by run {run_id}, which "
        "stopped before Dagster recorded it): `"
    ) in "\n".join(lines), lines

    # Other settings (the BM25 analyser) made another index: it is not claimed.
    settings = load_settings()
    other = _with(settings, "retrieval", text_search_config="simple")
    other_defs = build_definitions(other, environment=SeamsEnvironment.from_os())
    (found,) = recovered.unrecorded(instance, other_defs, other)
    assert (found.batch, found.asset, found.run_id) == (batch, CHUNK_INDEX, run_id)
    assert found.other_settings == (
        "its index was analysed with text search configuration english, now simple"
    )
    said: list[str] = []
    assert recovered.record_unrecorded(instance, other_defs, other, said.append) == []
    assert said == []
    resolver = stale_status_resolver(instance, defs.resolve_asset_graph())
    assert resolver.get_status(CHUNK_INDEX, batch) == StaleStatus.MISSING

    # `seams run` (nothing new to register) records it, saying so.
    lines = _command(capsys, "run", str(inbox))
    assert (
        f"seams: recorded chunk_index of batch {batch} in Dagster: published by run {run_id}, "
        "which stopped before Dagster recorded it"
    ) in lines, lines
    assert any(line.startswith("seams: nothing new under ") for line in lines), lines
    assert_recovered(instance, defs, CHUNK_INDEX, batch, run_id=run_id, generation=1)
    resolver = stale_status_resolver(instance, defs.resolve_asset_graph())
    assert resolver.get_status(CHUNK_INDEX, batch) == StaleStatus.FRESH
    assert runner.unsynced_assets(instance, [batch], defs=defs) == {batch: []}
    # The record carries the code version: a settings change still shows as unsynced.
    assert runner.unsynced_assets(instance, [batch], defs=other_defs) == {batch: [CHUNK_INDEX]}

    # Once: a second call records nothing, and `seams check` names nothing.
    assert recovered.record_unrecorded(instance, defs, settings, said.append) == []
    assert said == []
    assert not [line for line in _command(capsys, "check") if line.startswith("Dagster:")]


def test_chunks_of_a_stopped_run_finished_by_a_later_one_are_recorded_by_seams_backfill(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    inbox = _inbox(instance, defs, tmp_path)
    (batch,) = runner.register_path(inbox, print, defs=defs)
    with stopped_after_write(monkeypatch, "chunks"):
        stopped = _stopped_run(instance, defs, [batch])
    # Chunks of elsewhere recorded meanwhile: the next run's record of the index names that
    # event as its chunks input (a run names the input asset's newest, whatever the partition).
    instance.report_runless_asset_event(dg.AssetMaterialization(CHUNKS, partition="elsewhere"))
    # The next run resumes at chunk_index and publishes; the chunks it used have no record.
    summary = runner.RunSummary(batches=[batch])
    runner.materialize_batches(instance, [batch], print, summary, defs=defs, resume=[batch])
    (finisher,) = summary.run_ids
    assert runner.unfinished(defs) == []
    assert _latest(instance, CHUNK_INDEX, batch).run_id == finisher
    assert CHUNKS in runner.unsynced_assets(instance, [batch], defs=defs)[batch]
    capsys.readouterr()

    # Chunks cut with other settings are not claimed (nor, then, the index made from them).
    settings = load_settings()
    other = _with(settings, "chunking", overrides={"chunk_size_max": 200})
    other_defs = build_definitions(other, environment=SeamsEnvironment.from_os())
    (found,) = recovered.unrecorded(instance, other_defs, other)
    assert (found.asset, found.run_id, found.recordable) == (CHUNKS, stopped, False)
    assert str(found.other_settings).startswith("its chunks were made by code version ")
    assert recovered.record_unrecorded(instance, other_defs, other, print) == []

    # `seams backfill` records them instead of recomputing them.
    lines = _command(capsys, "backfill")
    assert (
        f"seams: recorded chunks of batch {batch} in Dagster: written by run {stopped}, which "
        "stopped before Dagster recorded it"
    ) in lines, lines
    # The index's record named older chunks: recorded again, over the chunks' new record.
    assert (
        f"seams: recorded chunk_index of batch {batch} again in Dagster, after its chunks "
        f"(published by run {finisher})"
    ) in lines, lines
    assert "seams: 1 batch up to date: nothing to backfill" in lines, lines
    assert_recovered(instance, defs, CHUNKS, batch, run_id=stopped, generation=1)
    assert runner.unsynced_assets(instance, [batch], defs=defs) == {batch: []}
    resolver = stale_status_resolver(instance, defs.resolve_asset_graph())
    assert resolver.get_status(CHUNKS, batch) == StaleStatus.FRESH
    assert resolver.get_status(CHUNK_INDEX, batch) == StaleStatus.FRESH

    said: list[str] = []
    assert recovered.record_unrecorded(instance, defs, settings, said.append) == []
    assert said == []
