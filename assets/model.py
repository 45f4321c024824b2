"""`embedding_model`: the ONNX export of the packaged all-MiniLM-L6-v2 (unpartitioned)."""

import dagster as dg

from seams.assets.display import asset_attributes
from seams.assets.versions import code_version
from seams.models.distill import distill_static_model
from seams.models.model_export import export_model

MODEL_GROUP = "model"
MODEL_VERSION = "1"


def build_model_asset(variant: str) -> dg.AssetsDefinition:
    """The `embedding_model` asset whose data version is the `variant` graph's sha256."""

    @dg.asset(
        group_name=MODEL_GROUP,
        **asset_attributes("embedding_model", stage="model", kinds=("onnx",)),
        code_version=code_version(MODEL_VERSION, variant),
        description="Exports the packaged all-MiniLM-L6-v2 to ONNX and distils its static "
        "boundary model (the `fast` preset) under the data dir, once; a re-materialization "
        "verifies and reuses them. Its data version is the ONNX model file's sha256.",
    )
    def embedding_model(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        manifest = export_model()
        static = distill_static_model()
        graph = manifest.variant(variant)
        context.log.info(f"model {manifest.model_id[:12]} in {manifest.directory}")
        return dg.MaterializeResult(
            data_version=dg.DataVersion(graph.sha256),
            metadata={
                "model_id": graph.sha256,
                "directory": dg.MetadataValue.path(str(manifest.directory)),
                "variants": ", ".join(sorted(manifest.variants)),
                "dims": manifest.dims,
                "max_tokens": manifest.max_tokens,
                "static_model_id": static.model_id,
            },
        )

    return embedding_model
