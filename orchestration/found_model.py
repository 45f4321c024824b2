"""A verified model found in the data dir, recorded as `embedding_model`'s materialization.

A model copied in (as the test suite and people moving a data dir do) or exported by `seams model
export` never ran the asset; reporting it materialized, with the data and code version a run
would have recorded, keeps the UI from saying "Never materialized" about a model every run uses
and keeps the downstream assets' staleness exact.
"""

import dagster as dg

from seams.assets.model import MODEL_KEY, found_model_metadata
from seams.models.model_store import load_manifest
from seams.orchestration.dagster_internals import (
    CODE_VERSION_TAG,
    DATA_VERSION_IS_USER_PROVIDED_TAG,
    DATA_VERSION_TAG,
)
from seams.resources.embedder import OnnxEmbedderResource
from seams.resources.static_embedder import StaticEmbedderResource


def record_found_model(
    instance: dg.DagsterInstance,
    embedder: OnnxEmbedderResource,
    static_embedder: StaticEmbedderResource,
    *,
    version: str,
) -> bool:
    """Report `embedding_model` materialized, with the asset's code `version`, when a verified
    model is in the embedder's folder but the instance's latest materialization (if any) is of
    another model file or code version. True when reported."""
    variant = embedder.variant
    manifest = load_manifest(embedder.resolved_model_dir())
    sha256 = manifest.variant(variant).sha256
    key = MODEL_KEY
    latest = instance.get_latest_materialization_event(key)
    seen = latest.asset_materialization if latest is not None else None
    if (
        seen is not None
        and seen.tags.get(DATA_VERSION_TAG) == sha256
        and seen.tags.get(CODE_VERSION_TAG) == version
    ):
        return False
    instance.report_runless_asset_event(
        dg.AssetMaterialization(
            asset_key=key,
            metadata=found_model_metadata(manifest, variant, static_embedder.resolved_model_dir()),
            tags={
                DATA_VERSION_TAG: sha256,
                DATA_VERSION_IS_USER_PROVIDED_TAG: "true",
                CODE_VERSION_TAG: version,
            },
        )
    )
    return True
