"""One asset per target, downstream of the receiving collections' indexes: it syncs the store,
reports what it sent, and a store that cannot be reached fails it alone, in one line."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from seams.assets.targets import TARGETS_SENSOR, target_key
from seams.environment import SeamsEnvironment
from seams.orchestration.definitions import build_definitions
from seams.resources.postgres import PostgresResource
from seams.settings import load_settings
from tests.storage.targets import corpus


def settings_with_targets(folder: Path):
    for name in ("handbook", "contracts"):
        (folder / name).mkdir()
    path = folder / "seams.yaml"
    path.write_text(
        "collections:\n  handbook: {source: handbook}\n  contracts: {source: contracts}\n"
        "targets:\n"
        "  docs: {kind: lancedb, table: rag, path: lance, collections: [handbook]}\n"
        "  down: {kind: pgvector, table: rag, url_env: TARGET_NOWHERE_URL}\n",
        encoding="utf-8",
    )
    return load_settings(path)


def test_each_target_is_an_asset_that_syncs_and_a_store_down_fails_it_alone_in_one_line(
    postgres: PostgresResource, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TARGET_NOWHERE_URL", raising=False)
    monkeypatch.setenv("SEAMS_DATABASE_URL", database_url)
    monkeypatch.setenv("SEAMS_CONFIG", str(tmp_path / "seams.yaml"))
    settings = settings_with_targets(tmp_path)
    corpus.publish_batch(postgres, "h1", {"guide": ["a", "b", "c"]}, "m", 8, "handbook")
    corpus.publish_batch(postgres, "c1", {"deal": ["x", "y"]}, "m", 8, "contracts")
    defs = build_definitions(settings, environment=SeamsEnvironment.from_os())
    graph = defs.resolve_asset_graph()  # downstream of the indexes of what each receives
    docs, down = graph.get(target_key("docs")), graph.get(target_key("down"))
    assert docs.parent_keys == {dg.AssetKey(["handbook", "chunk_index"])}
    assert down.parent_keys == {
        dg.AssetKey(["handbook", "chunk_index"]),
        dg.AssetKey(["contracts", "chunk_index"]),
    }
    assert not docs.is_partitioned and docs.group_name == "targets"
    assert defs.resolve_sensor_def(TARGETS_SENSOR) is not None
    assets = [defs.resolve_assets_def(target_key(n)) for n in ("docs", "down")]
    result = dg.materialize(assets, raise_on_error=False, selection=[assets[0]])
    assert result.success
    (event,) = result.get_asset_materialization_events()
    metadata = event.step_materialization_data.materialization.metadata
    assert (metadata["written"].value, metadata["dagster/row_count"].value) == (3, 3)

    failed = dg.materialize(assets, raise_on_error=False, selection=[assets[1]])
    assert not failed.success
    (failure,) = [e for e in failed.all_events if e.is_step_failure]
    description = failure.step_failure_data.user_failure_data.description
    assert description == (
        "targets.down.url_env: TARGET_NOWHERE_URL is not set: export it with the pgvector "
        "store's URL"
    )
