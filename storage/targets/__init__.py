"""Targets: Seams' published chunks mirrored into the vector stores teams already run.

`base` is what a store kind implements (`TargetStore`) and the records it holds; `published`
reads what a target must hold; `sync` compares and repairs. One module per store kind
(`pgvector`, `qdrant`, `lancedb`, ...), each importing its own client, which is the optional
extra `seams-chunking[<kind>]`: `open_target` imports a kind's module only when a target of
that kind is opened. How a new kind plugs in: see `seams.storage.targets.base`.
"""

from __future__ import annotations

import importlib

from seams.environment import SeamsEnvironment
from seams.errors import ConfigError
from seams.storage.targets.base import TargetStore
from seams.targets import TargetSettings

KIND_MODULES = {
    "pgvector": "seams.storage.targets.pgvector",
    "qdrant": "seams.storage.targets.qdrant",
    "lancedb": "seams.storage.targets.lancedb",
    "chroma": "seams.storage.targets.chroma",
    "milvus": "seams.storage.targets.milvus",
}
"""Each kind's module: it defines `open_store(target, settings, location) -> TargetStore`."""


def open_target(
    target: str, settings: TargetSettings, environment: SeamsEnvironment
) -> TargetStore:
    """The store of `target`, connected. One-line errors name the target and the field: a
    client not installed (`kind`), an unset variable (`url_env`), a store that cannot be
    reached (`url_env` / `path`)."""
    if settings.url_env is not None:
        location = settings.url(target, environment.variables)
    else:
        location = str(environment.settings_relative(str(settings.path), f"targets.{target}.path"))
    try:
        module = importlib.import_module(KIND_MODULES[settings.kind])
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.startswith("seams."):
            raise ConfigError(
                f"targets.{target}.kind: {settings.kind} targets are not available in this "
                "version of Seams"
            ) from None
        raise ConfigError(
            f"targets.{target}.kind: the {settings.kind} client is not installed "
            f"({exc.name}): pip install 'seams-chunking[{settings.kind}]'"
        ) from None
    return module.open_store(target, settings, location)


__all__ = ["KIND_MODULES", "TargetStore", "open_target"]
