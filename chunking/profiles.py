"""Profiles: route a document class to a preset (seed 004's routing rules).

A rule matches a document by a path glob and/or metadata values; the most specific matching rule
wins (one point for the glob, one per metadata key), ties go to the rule listed first, and no
match gives `default`. Rules may override single fields of their preset. Every rule's config is
built and validated when the profiles are created, so a bad rule fails at load time, not on the
thousandth document.

    profiles = ChunkingProfiles(
        rules=[
            ProfileRule(path_glob="*.md", preset="technical_docs"),
            ProfileRule(metadata={"doc_class": "novel"}, preset="narrative"),
            ProfileRule(path_glob="legal/*", metadata={"tenant": "acme"}, preset="default",
                        overrides={"chunk_size_target": 180}),
        ],
        default="default",
    )
    config = profiles.config_for("docs/setup.md", {"tenant": "acme"})
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from chunking.config import ChunkingConfig, describe_validation_error
from chunking.errors import ConfigError


class ProfileRule(BaseModel):
    """Documents whose path matches `path_glob` (fnmatch on the POSIX path or the file name)
    and whose metadata has all of `metadata`'s values get `preset` with `overrides`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    preset: str = "default"
    path_glob: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    overrides: dict[str, Any] = Field(default_factory=dict)
    name: str | None = None

    def matches(self, path: str | PurePath | None, metadata: Mapping[str, Any] | None) -> bool:
        """Whether a document with this path and metadata belongs to this rule."""
        if self.path_glob is not None:
            if path is None:
                return False
            posix = PurePath(path).as_posix()
            name = PurePath(path).name
            if not (
                fnmatch.fnmatchcase(posix, self.path_glob)
                or fnmatch.fnmatchcase(name, self.path_glob)
            ):
                return False
        given = metadata or {}
        return all(
            key in given and str(given[key]) == value for key, value in self.metadata.items()
        )

    @property
    def specificity(self) -> int:
        return (self.path_glob is not None) + len(self.metadata)

    def build_config(self) -> ChunkingConfig:
        return ChunkingConfig.preset(self.preset, **self.overrides)


class ChunkingProfiles(BaseModel):
    """An ordered set of `ProfileRule`s plus the default preset (see module doc)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rules: list[ProfileRule] = Field(default_factory=list)
    default: str = "default"
    default_overrides: dict[str, Any] = Field(default_factory=dict)

    _configs: list[ChunkingConfig] = PrivateAttr(default_factory=list)
    _default_config: ChunkingConfig | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(
                describe_validation_error(exc).replace("ChunkingConfig", "ChunkingProfiles")
            ) from None

    def model_post_init(self, context: Any, /) -> None:
        configs = []
        for number, rule in enumerate(self.rules):
            try:
                configs.append(rule.build_config())
            except ConfigError as exc:
                label = rule.name or f"rules[{number}]"
                raise ConfigError(f"profile {label}: {exc}") from None
        try:
            default_config = ChunkingConfig.preset(self.default, **self.default_overrides)
        except ConfigError as exc:
            raise ConfigError(f"profile default: {exc}") from None
        self._configs = configs
        self._default_config = default_config

    def rule_for(
        self, path: str | PurePath | None = None, metadata: Mapping[str, Any] | None = None
    ) -> int | None:
        """Index of the winning rule, or None when the default applies."""
        best: int | None = None
        for number, rule in enumerate(self.rules):
            if rule.matches(path, metadata) and (
                best is None or rule.specificity > self.rules[best].specificity
            ):
                best = number
        return best

    def config_for(
        self, path: str | PurePath | None = None, metadata: Mapping[str, Any] | None = None
    ) -> ChunkingConfig:
        """The config for a document with this path and/or metadata."""
        number = self.rule_for(path, metadata)
        if number is None:
            assert self._default_config is not None
            return self._default_config
        return self._configs[number]
