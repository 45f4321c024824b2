"""Resources: PostgreSQL (embedded or external), the embedders, the IO manager.

`OnnxEmbedderResource` and `StaticEmbedderResource` are the library's `seams.OnnxEmbedder` and
`seams.StaticEmbedder` as Dagster resources; the other modules are imported where needed.
"""

from seams.resources.embedder import OnnxEmbedderResource
from seams.resources.static_embedder import StaticEmbedderResource

__all__ = ["OnnxEmbedderResource", "StaticEmbedderResource"]
