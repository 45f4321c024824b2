"""`seams check` says which settings file is in use and whether search sees every batch: a batch
whose build stopped before publication is named, with why and the command that finishes it."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from seams.orchestration import command_lock, runner
from seams.orchestration.cli.entry import main
from tests.support.samples import copy_samples


def _check(capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    status = main(["check"])
    out = capsys.readouterr().out
    return status, out.splitlines()


def test_check_names_the_settings_and_every_batch_search_does_not_see(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inbox = copy_samples(tmp_path / "inbox", ("field_notes.md",))
    (batch,) = runner.register_path(inbox, print, defs=defs)
    capsys.readouterr()

    status, lines = _check(capsys)
    assert status == 1, lines
    assert any(line.startswith("Settings: ") for line in lines), lines
    # The three models at work, by the settings that name them.
    assert [line for line in lines if line.startswith("Model ")] == [
        "Model (boundaries, embedder.model): packaged",
        "Model (retrieval, retrieval.model): packaged (the embedder's)",
        "Model (serving, the published index): none yet (nothing published)",
    ]
    index = [line for line in lines if line.startswith("Index: ")]
    assert index[0] == "Index: 0 batches published, 1 not published", index
    assert index[1].startswith(f"Index: batch {batch} (cli:{inbox}) not published: not built yet")
    assert index[1].endswith(f" run {inbox}`"), index

    # Built up to chunks (a run killed before chunk_index): named with where it stopped.
    through_chunks = runner.job_assets_in_order(defs)[:-1]
    summary = runner.RunSummary(batches=[batch])
    runner.run_backfill(
        instance, {batch: through_chunks}, print, summary, defs=defs, started_by="test"
    )
    capsys.readouterr()
    status, lines = _check(capsys)
    index = [line for line in lines if line.startswith("Index: ")]
    assert status == 1 and "stopped after chunks" in index[1], index
    assert f"(run {summary.run_ids[0]}, " in index[1] and "search shows none of it" in index[1]

    # While a `seams run` holds the data, the batch is being built: no failure.
    url = defs.resources["seams_postgres"].resolved_url()
    with command_lock.command_lock(url, f"seams run {inbox}", print):
        status, lines = _check(capsys)
    assert status == 0, lines
    assert any(f"being built now by `seams run {inbox}` (pid " in line for line in lines), lines
    building = next(line for line in lines if line.startswith(f"Index: batch {batch} "))
    assert "in progress (chunks written so far)" in building and "stopped" not in building

    # `seams run` finishes it: every batch searchable.
    assert main(["run", str(inbox)]) == 0
    out = capsys.readouterr().out
    assert f"finishing 1 batch left unpublished: batch {batch}: resuming at chunk_index" in out
    status, lines = _check(capsys)
    assert status == 0, lines
    assert any(
        line.startswith("Index: 1 batch published (publication ")
        and line.endswith(", every registered batch searchable")
        for line in lines
    ), lines
    serving = next(line for line in lines if line.startswith("Model (serving"))
    assert serving.startswith("Model (serving, the published index): ") and "none" not in serving

    # A settings change names the batches it leaves unsynced, and what recomputes them.
    changed = tmp_path / "seams.yaml"
    changed.write_text("chunking: {overrides: {cut_cost: 2.0}}\n", encoding="utf-8")
    monkeypatch.setenv("SEAMS_CONFIG", str(changed))
    status, lines = _check(capsys)
    (sync,) = [line for line in lines if line.startswith("Sync: ")]
    assert sync.startswith(f"Sync: 1 of 1 batch unsynced with the current settings ({batch}: ")
    assert "chunks" in sync and sync.endswith("backfill` recomputes them"), sync
