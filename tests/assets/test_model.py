"""`embedding_model` is materialized in the UI whether the model was exported here or copied into
the data dir (as the test session itself does, and people moving a data dir)."""

from __future__ import annotations

import dagster as dg

from seams.models.model_store import ModelManifest
from seams.orchestration import runner
from seams.orchestration.dagster_internals import DATA_VERSION_TAG
from seams.settings import load_settings


def test_a_copied_model_shows_as_materialized_once(
    instance: dg.DagsterInstance, defs: dg.Definitions, exported_model: ModelManifest
) -> None:
    key = dg.AssetKey("embedding_model")
    assert instance.get_latest_materialization_event(key) is None  # copied: never materialized
    said: list[str] = []

    runner.ensure_model(instance, said.append, defs=defs)
    runner.ensure_model(
        instance, said.append, defs=defs
    )  # the same model again: nothing new to report

    records = instance.fetch_materializations(key, limit=10).records
    assert len(records) == 1 and said == []  # nothing exported: it was found
    materialization = records[0].asset_materialization
    variant = load_settings().embedder.variant
    assert materialization.tags[DATA_VERSION_TAG] == exported_model.variant(variant).sha256
    assert materialization.metadata["model_id"].value == exported_model.variant(variant).sha256
