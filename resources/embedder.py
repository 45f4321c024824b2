"""`OnnxEmbedderResource`: the sentence embedder as a Dagster resource.

`seams.models.embedders.OnnxEmbedder` (the library class: onnxruntime, `tokenizers` and numpy
only) with Dagster's `ConfigurableResource` mixed in: the same fields, methods and results,
configurable from the code location and Dagster run config. Seams builds it one way,
`for_environment`: the model folder under the entry point's data dir, the knobs from seams.yaml's
`embedder` section.
"""

from __future__ import annotations

import dagster as dg

from seams.environment import SeamsEnvironment
from seams.models import embedders
from seams.models.model_store import default_model_dir
from seams.settings import EmbedderSettings


class OnnxEmbedderResource(dg.ConfigurableResource, embedders.OnnxEmbedder):
    """Sentence embeddings for the pipeline: `embed(texts) -> (n, 384) float32` unit rows; see
    `seams.models.embedders.OnnxEmbedder` for the fields and their meaning."""

    @classmethod
    def for_environment(
        cls, environment: SeamsEnvironment, settings: EmbedderSettings
    ) -> OnnxEmbedderResource:
        """The pipeline's embedder: the exported model under `environment`'s data dir, run as
        `settings` (seams.yaml's `embedder` section) says."""
        return cls(
            model_dir=str(default_model_dir(environment)),
            variant=settings.variant,
            batch_size=settings.batch_size,
            intra_op_threads=settings.threads,
        )
