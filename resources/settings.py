"""The project's settings file (`seams.yaml`, or `SEAMS_CONFIG`), validated once at load.

Assets derive their `code_version` from the slice of these settings they read, so the settings
are loaded when the code location loads, never per run: what the UI calls "unsynced" is exactly
what a run would now compute differently.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from chunking.config import ChunkingConfig, describe_validation_error, reject_booleans_as_numbers
from chunking.errors import ConfigError
from resources.paths import PROJECT_ROOT, data_dir

CONFIG_ENV = "SEAMS_CONFIG"


class Section(BaseModel):
    """A block of seams.yaml: unknown keys and booleans-as-numbers are errors, not ignored."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_booleans_as_numbers(cls, data: Any) -> Any:
        return reject_booleans_as_numbers(cls, data)


class ChunkingSettings(Section):
    preset: str = "default"
    overrides: dict[str, Any] = Field(default_factory=dict)


class EmbedderSettings(Section):
    variant: Literal["fp32", "int8"] = "fp32"
    batch_size: int = Field(32, ge=1, le=4096)
    threads: int = Field(0, ge=0, le=256)


class RetrievalSettings(Section):
    # pooled: token-weighted mean of the chunk's candidate embeddings (free, best recall@1 in
    # benchmarks/retrieval_eval.py); text: embed the chunk text; late: late chunking.
    mode: Literal["text", "pooled", "late"] = "pooled"
    late_overlap_tokens: int = Field(64, ge=0, le=200)


class InboxSettings(Section):
    path: str | None = None
    min_files: int = Field(20, ge=1, le=1_000_000)
    max_wait_minutes: float = Field(10.0, ge=0.0, le=7 * 24 * 60)
    seal_cron: str = "0 * * * *"

    @field_validator("seal_cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        from dagster._utils.schedules import is_valid_cron_string

        if not is_valid_cron_string(value):
            raise ValueError(f"seal_cron={value!r}: not a valid 5-field cron expression")
        return value

    def folder(self) -> Path:
        return Path(self.path).expanduser().resolve() if self.path else data_dir() / "inbox"


class SeamsSettings(Section):
    chunking: ChunkingSettings = Field(default_factory=ChunkingSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    inbox: InboxSettings = Field(default_factory=InboxSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)

    def chunking_config(self) -> ChunkingConfig:
        return ChunkingConfig.preset(self.chunking.preset, **self.chunking.overrides)


def settings_path() -> Path:
    return Path(os.environ.get(CONFIG_ENV) or PROJECT_ROOT / "seams.yaml")


def load_settings(path: Path | None = None) -> SeamsSettings:
    """Read and validate the settings; every problem names the file and the field."""
    path = path or settings_path()
    if not path.exists():
        if CONFIG_ENV in os.environ:
            raise ConfigError(f"{CONFIG_ENV}={path} does not exist: point it at a seams.yaml")
        return SeamsSettings()
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    try:
        settings = SeamsSettings.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {describe_validation_error(exc)}") from None
    try:
        settings.chunking_config()
    except ConfigError as exc:
        raise ConfigError(f"{path}: chunking: {exc}") from None
    return settings


@lru_cache(maxsize=1)
def current_settings() -> SeamsSettings:
    """The settings this code location was loaded with (a reload starts a new process)."""
    return load_settings()
