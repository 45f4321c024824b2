"""`embedding_model`: the ONNX export of the packaged all-MiniLM-L6-v2 (unpartitioned), and the
static boundary model distilled from it when the settings use one (the `fast` preset).

The model may also reach the data dir without this asset: copied in (as the test suite and people
moving a data dir do) or exported by `seams model export`. `seams.orchestration.found_model` then
reports the asset materialized with the data version a materialization would give (the ONNX
file's sha256) and `found_model_metadata`, so the UI does not say "Never materialized" about a
model every run uses.
"""

from pathlib import Path

import dagster as dg

from seams.assets.display import asset_attributes
from seams.assets.versions import code_version
from seams.errors import SeamsError
from seams.models.distill import distill_static_model
from seams.models.model_export import export_model
from seams.models.model_store import ModelManifest, load_static_manifest
from seams.resources.embedder import OnnxEmbedderResource
from seams.resources.static_embedder import StaticEmbedderResource

MODEL_GROUP = "model"
MODEL_VERSION = "1"
MODEL_KEY = dg.AssetKey("embedding_model")
DISTILS_STATIC = "distils_static_model"
"""Definition metadata of `embedding_model`: whether it distils the static model too."""


def build_model_asset(variant: str, *, static: bool) -> dg.AssetsDefinition:
    """The `embedding_model` asset whose data version is the `variant` graph's sha256; `static`:
    it also distils the static boundary model, which only settings that find boundaries with it
    need (a distillation costs tens of seconds and the export extra's torch)."""

    attributes = asset_attributes("embedding_model", stage="model", kinds=("onnx",))
    attributes["metadata"] = {**attributes["metadata"], DISTILS_STATIC: static}

    @dg.asset(
        group_name=MODEL_GROUP,
        **attributes,
        code_version=model_code_version(variant, static=static),
        description="Exports the packaged all-MiniLM-L6-v2 to ONNX under the data dir, once (and "
        "distils its static boundary model when the settings use it: the `fast` preset); a "
        "re-materialization verifies and reuses them. Its data version is the ONNX model "
        "file's sha256.",
    )
    def embedding_model(
        context: dg.AssetExecutionContext,
        seams_embedder: OnnxEmbedderResource,
        seams_static_embedder: StaticEmbedderResource,
    ) -> dg.MaterializeResult:
        # Into the folders the resources read (under the entry point's data dir).
        manifest = export_model(seams_embedder.resolved_model_dir())
        static_dir = seams_static_embedder.resolved_model_dir()
        static_id = distill_static_model(static_dir).model_id if static else None
        graph = manifest.variant(variant)
        context.log.info(f"model {manifest.model_id[:12]} in {manifest.directory}")
        return dg.MaterializeResult(
            data_version=dg.DataVersion(graph.sha256),
            metadata=model_metadata(manifest, variant, static_id),
        )

    return embedding_model


def model_code_version(variant: str, *, static: bool) -> str:
    """The asset's code version (the same string for a model found in the data dir); without
    the static model it is what it always was, so existing data dirs stay in sync."""
    return code_version(MODEL_VERSION, variant, *(("static",) if static else ()))


def distils_static(defs: dg.Definitions) -> bool:
    """Whether `defs`' `embedding_model` distils the static model (its settings use it)."""
    spec = defs.resolve_assets_def(MODEL_KEY).specs_by_key[MODEL_KEY]
    return bool(spec.metadata.get(DISTILS_STATIC, False))


def model_metadata(
    manifest: ModelManifest, variant: str, static_model_id: str | None
) -> dict[str, object]:
    """What the UI shows about the model (the same whether exported here or found)."""
    metadata: dict[str, object] = {
        "model_id": manifest.variant(variant).sha256,
        "directory": dg.MetadataValue.path(str(manifest.directory)),
        "variants": ", ".join(sorted(manifest.variants)),
        "dims": manifest.dims,
        "max_tokens": manifest.max_tokens,
    }
    if static_model_id is not None:
        metadata["static_model_id"] = static_model_id
    return metadata


def found_model_metadata(
    manifest: ModelManifest, variant: str, static_dir: Path
) -> dict[str, object]:
    """What the UI shows about a model found in the data dir: `model_metadata`, and where from
    (`static_dir`: the static model's folder, whose id is shown when it is distilled)."""
    try:
        static_model_id: str | None = load_static_manifest(static_dir).model_id
    except (SeamsError, OSError, ValueError):
        static_model_id = None  # not distilled yet: the `fast` preset distils it when used
    metadata = model_metadata(manifest, variant, static_model_id)
    metadata["found"] = "in the data dir (copied in or exported by `seams model export`)"
    return metadata
