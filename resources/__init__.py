"""Resources: PostgreSQL (embedded or external), the embedders, the IO manager.

`resources.OnnxEmbedder` and `resources.StaticEmbedder` are contract names; the other modules are
imported where needed.
"""

from seams.resources.embedder import OnnxEmbedder
from seams.resources.static_embedder import StaticEmbedder

__all__ = ["OnnxEmbedder", "StaticEmbedder"]
