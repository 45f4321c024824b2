"""Seams merged into a team's own definitions (docs/dagster.md, "Merged into your definitions").

The team's project is the page's python block, run as written: one asset stored by the team's own
`io_manager` (a `FilesystemIOManager`) under its own executor, merged with Seams' definitions.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import dagster as dg
import pytest

from seams.models.model_store import ModelManifest
from seams.orchestration.definitions import build_definitions
from seams.resources.io_manager import PostgresIOManager
from seams.settings import SeamsSettings
from tests.support.databases import rows
from tests.support.samples import copy_samples, run_path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "dagster.md"
THEIRS = dg.AssetKey("my_numbers")


def team_definitions() -> dg.Definitions:
    """The merged definitions of the page's "Merged into your definitions" block, run as is."""
    page = PAGE.read_text(encoding="utf-8")
    (code,) = re.findall(r"^```python\n(.*?)^```$", page, re.DOTALL | re.MULTILINE)
    namespace: dict[str, object] = {"__name__": "team_definitions"}
    exec(compile(code, f"{PAGE}: python block", "exec"), namespace)
    defs = namespace["defs"]
    assert isinstance(defs, dg.Definitions)
    return defs


def materialize_theirs(defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(instance=instance, asset_selection=[THEIRS])
    assert result.success


def test_seams_takes_no_key_and_no_executor_of_the_team() -> None:
    seams = build_definitions(SeamsSettings())
    assert seams.executor is None
    assert all(key.startswith("seams_") for key in seams.resources)
    for assets_def in seams.assets or []:
        assert isinstance(assets_def, dg.AssetsDefinition)
        for key in assets_def.keys:
            assert assets_def.get_io_manager_key_for_asset_key(key) == "seams_io_manager", key
    settings = SeamsSettings.model_validate({"execution": {"executor": "in_process"}})
    in_process = build_definitions(settings)
    assert in_process.executor is None
    for job in in_process.jobs or []:
        executor = in_process.resolve_job_def(job.name).executor_def
        assert executor.name == dg.in_process_executor.name
        assert executor.config_schema is dg.in_process_executor.config_schema


def test_their_asset_keeps_their_io_manager_and_touches_nothing_of_seams(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Merging works, and materializing the team's asset starts no server and writes no folder
    of Seams' (its data dir stays absent)."""
    data_dir = tmp_path / "seams-data"
    monkeypatch.setenv("SEAMS_DATA_DIR", str(data_dir))
    monkeypatch.delenv("SEAMS_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    defs = team_definitions()
    assert isinstance(defs.resources["io_manager"], dg.FilesystemIOManager)
    assert isinstance(defs.resources["seams_io_manager"], PostgresIOManager)
    assert defs.executor is not None and defs.executor.name == "multiprocess"
    with dg.DagsterInstance.ephemeral() as instance:
        materialize_theirs(defs, instance)
    stored = tmp_path / "warehouse" / "my_numbers"
    assert pickle.loads(stored.read_bytes()) == [1, 2, 3]
    assert not data_dir.exists()


def test_their_asset_and_a_seams_batch_in_one_instance(
    instance: dg.DagsterInstance,
    database_url: str,
    exported_model: ModelManifest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    defs = team_definitions()
    materialize_theirs(defs, instance)
    summary = run_path(instance, copy_samples(tmp_path / "inbox", ["field_notes.md"]), defs=defs)
    (batch,) = summary.batches
    theirs = instance.get_latest_materialization_event(THEIRS)
    assert theirs is not None and theirs.asset_materialization is not None
    chunks = instance.get_latest_materialization_event(dg.AssetKey("chunks"))
    assert chunks is not None and chunks.asset_materialization is not None
    assert chunks.asset_materialization.partition == batch
    assert rows(database_url, "SELECT count(*) FROM seams.chunks")[0][0] > 0
    assert pickle.loads((tmp_path / "warehouse" / "my_numbers").read_bytes()) == [1, 2, 3]
