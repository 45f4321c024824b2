"""`StaticEmbedderResource`: the fast boundary model as a Dagster resource.

`seams.models.embedders.StaticEmbedder` (the library class: numpy lookups over MiniLM's
tokenizer) with Dagster's `ConfigurableResource` mixed in: the same fields, methods and
results. Seams builds it one way, `for_environment`: the distilled model under the entry
point's data dir.
"""

from __future__ import annotations

import dagster as dg

from seams.environment import SeamsEnvironment
from seams.models import embedders
from seams.models.model_store import default_static_dir


class StaticEmbedderResource(dg.ConfigurableResource, embedders.StaticEmbedder):
    """Static sentence embeddings for the pipeline's boundary detection: `embed(texts) ->
    (n, 256)` float32 unit rows; see `seams.models.embedders.StaticEmbedder`."""

    @classmethod
    def for_environment(cls, environment: SeamsEnvironment) -> StaticEmbedderResource:
        """The pipeline's static model: the distilled folder under `environment`'s data dir."""
        return cls(model_dir=str(default_static_dir(environment)))
