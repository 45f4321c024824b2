"""Resources: PostgreSQL (embedded or external), the embedders, the IO manager.

`OnnxEmbedderResource` and `StaticEmbedderResource` are the library's `seams.OnnxEmbedder` and
`seams.StaticEmbedder` as Dagster resources, loaded on first use so that the readers' modules
here (`postgres_pool`, `database`, `readers`) import without Dagster; the other modules are
imported where needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from seams.resources.embedder import OnnxEmbedderResource
    from seams.resources.static_embedder import StaticEmbedderResource

__all__ = ["OnnxEmbedderResource", "StaticEmbedderResource"]

_HOMES = {
    "OnnxEmbedderResource": "seams.resources.embedder",
    "StaticEmbedderResource": "seams.resources.static_embedder",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
