"""`embedding_model` is materialized in the UI whether the model was exported here or copied into
the data dir (as the test session itself does, and people moving a data dir)."""

from __future__ import annotations

import dagster as dg

from seams.assets.model import MODEL_KEY, MODEL_VERSION, distils_static, model_code_version
from seams.assets.versions import code_version
from seams.models.model_store import ModelManifest
from seams.orchestration import runner
from seams.orchestration.dagster_internals import DATA_VERSION_TAG
from seams.orchestration.definitions import build_definitions
from seams.settings import SeamsSettings, load_settings


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


def test_the_static_model_is_distilled_only_for_settings_that_use_it() -> None:
    """The default settings never pay a distillation (tens of seconds, torch); the `fast`
    preset's model asset distils it, and says so in its code version (switching presets marks
    the model asset unsynced, and the model found in the data dir is recorded again)."""
    default = build_definitions(SeamsSettings())
    fast = build_definitions(SeamsSettings.model_validate({"chunking": {"preset": "fast"}}))
    assert not distils_static(default) and distils_static(fast)
    versions = {
        defs.resolve_assets_def(MODEL_KEY).code_versions_by_key[MODEL_KEY]
        for defs in (default, fast)
    }
    assert len(versions) == 2
    variant = SeamsSettings().embedder.variant
    assert model_code_version(variant, static=False) == code_version(MODEL_VERSION, variant)
