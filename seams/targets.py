"""Targets: the vector stores that mirror Seams' published chunks (the `targets:` block of
seams.yaml; docs/targets.md shows it and each store's settings).

The rules this module owns (the settings loader, the assets and `seams sync` call it):

- **Kinds**: pgvector, qdrant, lancedb, chroma, milvus. pgvector and lancedb name a `table:`,
  the others a `collection:` (the store's own word). The name readers use is 1-40 characters
  of letters, digits and `_` (pgvector: optionally `schema.table`).
- **Location**: exactly one of `url_env:` (an environment variable holding the URL: secrets
  stay out of the file) and `path:` (a local folder or file; relative paths count from the
  settings file's folder). pgvector needs `url_env`.
- **Tenants**: a target receives the collections of one tenant at most (collections without a
  tenant count as one more): each tenant's chunks then live in their own table or collection,
  and an application reading one target can never be handed another tenant's chunks. Mixing
  them is refused when the settings are read; a team that wants one shared store filters on
  the `collection` field every record carries, with targets named per tenant.

The variable a target names is read when the target is opened (a sync, `seams sync`), not when
the settings are read: a machine that only loads the definitions needs no store's URL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from seams.chunking.config import Section
from seams.errors import ConfigError

KINDS = ("pgvector", "qdrant", "lancedb", "chroma", "milvus")
"""The stores a target can be; each one's client is the optional extra `seams-chunking[<kind>]`."""
TABLE_KINDS = ("pgvector", "lancedb")
"""Kinds whose readers' object is a `table:`; the others name a `collection:`."""
LOCAL_KINDS = ("qdrant", "lancedb", "chroma", "milvus")
"""Kinds that can live in a local `path:` (Qdrant's local mode, LanceDB's folder, Chroma's
persistent client, Milvus Lite's file)."""

ATOMIC_SWITCH_KINDS = ("pgvector", "qdrant", "lancedb", "milvus")
"""Kinds whose model switch changes what readers see in one step (a view, an alias, one
commit); a Chroma switch renames collections in two requests, between which a reader may find
the readers' collection missing (`seams check` says so)."""

_STORE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,39}$")
_QUALIFIED = re.compile(r"^([a-z_][a-z0-9_]{0,39}\.)?[A-Za-z_][A-Za-z0-9_]{0,39}$")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_TARGET_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


class TargetSettings(Section):
    """One target as written in seams.yaml (checked per kind by `_per_kind`)."""

    kind: Literal["pgvector", "qdrant", "lancedb", "chroma", "milvus"]
    """The store; its client is the extra `seams-chunking[<kind>]` (pgvector needs none)."""
    table: str | None = Field(None, min_length=1, max_length=81)
    """pgvector and LanceDB: the table readers use (pgvector: a view, `name` or `schema.name`)."""
    collection: str | None = Field(None, min_length=1, max_length=40)
    """Qdrant, Chroma and Milvus: the collection (or alias) readers use."""
    url_env: str | None = None
    """The environment variable holding the store's URL (never the URL itself)."""
    path: str | None = Field(None, min_length=1, max_length=4096)
    """A local store instead of `url_env`: a folder (LanceDB, Qdrant local mode, Chroma) or a
    Milvus Lite `.db` file; relative to the settings file's folder."""
    collections: list[str] | None = Field(None, min_length=1)
    """The Seams collections it receives, all of one tenant; null: every collection."""

    @model_validator(mode="after")
    def _per_kind(self) -> TargetSettings:
        own, other = (
            ("table", "collection") if self.kind in TABLE_KINDS else ("collection", "table")
        )
        if getattr(self, other) is not None:
            raise ValueError(
                f"{other}={getattr(self, other)!r}: a {self.kind} target names a `{own}:`, "
                f"not a `{other}:`"
            )
        name = getattr(self, own)
        if name is None:
            raise ValueError(
                f"{own}=None: a {self.kind} target needs `{own}:` (the name readers use)"
            )
        pattern = _QUALIFIED if self.kind == "pgvector" else _STORE_NAME
        if not pattern.match(name) or "__" in name.rsplit(".", 1)[-1]:
            raise ValueError(
                f"{own}={name!r}: 1-40 letters, digits and _ (no '__': Seams names the model "
                "tables beside it `<name>__<model>`)"
            )
        if self.url_env is not None and not _VARIABLE.match(self.url_env):
            raise ValueError(f"url_env={self.url_env!r}: the NAME of an environment variable")
        if (self.url_env is None) == (self.path is None):
            where = "url_env: VARIABLE" if self.kind not in LOCAL_KINDS else "url_env or path"
            raise ValueError(
                f"url_env={self.url_env!r}: a {self.kind} target needs exactly one of {where}"
            )
        if self.path is not None and self.kind not in LOCAL_KINDS:
            raise ValueError(
                f"path={self.path!r}: a {self.kind} target is reached by url_env, not a path"
            )
        if self.collections is not None and len(set(self.collections)) != len(self.collections):
            raise ValueError(f"collections={self.collections}: a collection is listed twice")
        return self

    @property
    def store_name(self) -> str:
        """The name readers use: the table or collection."""
        return str(self.table if self.kind in TABLE_KINDS else self.collection)

    def url(self, target: str, variables: Mapping[str, str]) -> str:
        """The store's URL from `url_env` among the process's `variables`
        (`SeamsEnvironment.variables`); a one-line `ConfigError` naming the target and the
        variable when it is unset or empty."""
        variable = str(self.url_env)
        value = variables.get(variable, "").strip()
        if not value:
            raise ConfigError(
                f"targets.{target}.url_env: {variable} is not set: export it with the "
                f"{self.kind} store's URL"
            )
        return value


def check_targets(targets: Mapping[str, TargetSettings], tenants: Mapping[str, str | None]) -> None:
    """Every target's name, the collections it receives (known ones, of one tenant at most);
    `tenants` is collection -> tenant of the project. A `ValueError` naming the field."""
    for name, target in targets.items():
        if not _TARGET_NAME.match(name) or "__" in name:
            raise ValueError(
                f"targets.{name}: a target name is 1-40 characters of a-z, 0-9 and _, "
                "starting with a letter, without '__'"
            )
        received = received_collections(target, tenants)
        unknown = sorted(set(received) - set(tenants))
        if unknown:
            raise ValueError(
                f"targets.{name}.collections: {unknown[0]!r} is not a collection of this "
                f"project ({', '.join(sorted(tenants))})"
            )
        owners = {tenants[c] for c in received}
        if len(owners) > 1:
            shown = ", ".join(f"{c} ({tenants[c] or 'no tenant'})" for c in received)
            raise ValueError(
                f"targets.{name}.collections: {shown} belong to different tenants: a target "
                "holds one tenant's collections (name `collections:` per target)"
            )


def received_collections(
    target: TargetSettings, tenants: Mapping[str, str | None]
) -> tuple[str, ...]:
    """The collections `target` receives, in name order: those it lists, else all."""
    return tuple(sorted(target.collections if target.collections is not None else tenants))


def project_tenants(raw_collections: Any) -> dict[str, str | None]:
    """Collection -> tenant as the `collections:` block writes them ({"default": None} without
    one); the block's own rules are `seams.collections`'."""
    if not isinstance(raw_collections, Mapping) or not raw_collections:
        return {"default": None}
    return {
        str(name): (block.get("tenant") if isinstance(block, Mapping) else None)
        for name, block in raw_collections.items()
    }
