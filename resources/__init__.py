"""Resources: PostgreSQL (embedded or external), the ONNX embedder, the IO manager.

`resources.OnnxEmbedder` is a contract name; the other modules are imported where needed.
"""

from resources.embedder import OnnxEmbedder

__all__ = ["OnnxEmbedder"]
