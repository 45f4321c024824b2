"""`embedding_model`: the ONNX export of the packaged all-MiniLM-L6-v2 (unpartitioned)."""

import dagster as dg

from assets.versions import SETTINGS, code_version
from resources.distill import distill_static_model
from resources.model_export import export_model

MODEL_GROUP = "model"


@dg.asset(
    group_name=MODEL_GROUP,
    code_version=code_version("1", SETTINGS.embedder.variant),
    description="Exports the packaged all-MiniLM-L6-v2 to ONNX and distils its static boundary "
    "model (the `fast` preset) under the data dir, once; a re-materialization verifies and reuses "
    "them. Its data version is the ONNX model file's sha256.",
)
def embedding_model(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    manifest = export_model()
    static = distill_static_model()
    variant = manifest.variant(SETTINGS.embedder.variant)
    context.log.info(f"model {manifest.model_id[:12]} in {manifest.directory}")
    return dg.MaterializeResult(
        data_version=dg.DataVersion(variant.sha256),
        metadata={
            "model_id": variant.sha256,
            "directory": dg.MetadataValue.path(str(manifest.directory)),
            "variants": ", ".join(sorted(manifest.variants)),
            "dims": manifest.dims,
            "max_tokens": manifest.max_tokens,
            "static_model_id": static.model_id,
        },
    )
