"""`OnnxEmbedderResource`: the sentence embedder as a Dagster resource.

`seams.models.embedders.OnnxEmbedder` (the library class: onnxruntime, `tokenizers` and numpy
only) with Dagster's `ConfigurableResource` mixed in: the same fields, methods and results,
configurable from the code location and Dagster run config. `for_environment` builds the
packaged model's (the folder under the entry point's data dir, the knobs from seams.yaml's
`embedder` section): the `embedder` resource, which sizes every candidate and chunk (its
tokenizer is the size unit, whatever model embeds) and embeds when the settings name no other
model. `PipelineModels` resolves seams.yaml's `embedder.model` and `retrieval.model` into the
`boundary_embedder` and `retrieval_embedder` resources and the identities code versions fold in.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

import dagster as dg

from seams.environment import SeamsEnvironment
from seams.errors import ConfigError
from seams.models import embedders
from seams.models.chunk_vectors import late_model_problem
from seams.models.embedders import model_identity
from seams.models.known_models import check_model_folder, folder_recipe
from seams.models.model_store import default_model_dir
from seams.settings import PACKAGED_MODEL, STATIC_MODEL, EmbedderSettings, SeamsSettings


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
            models_dir=str(environment.models_dir),
        )


@dataclass(frozen=True)
class ModelSetting:
    """`embedder.model` or `retrieval.model`, resolved: the packaged model, the static model,
    or a model folder (an absolute path that exists and holds a model)."""

    kind: Literal["packaged", "static", "folder"]
    folder: Path | None = None

    def describe(self) -> str:
        return str(self.folder) if self.folder is not None else self.kind


def resolve_model_setting(value: str, field: str, environment: SeamsEnvironment) -> ModelSetting:
    """`packaged`, `static` or a folder path; a relative path counts from the settings file's
    folder (the project folder without one, as `evaluation.questions` does), so a seams.yaml and
    its model can move together.
    ConfigError naming `field` and the path when it holds no model."""
    if value == PACKAGED_MODEL:
        return ModelSetting("packaged")
    if value == STATIC_MODEL:
        return ModelSetting("static")
    folder = environment.settings_relative(value, field)
    try:
        check_model_folder(folder)
    except ConfigError as exc:
        raise ConfigError(f"{field}: {value!r}: {exc}") from None
    return ModelSetting("folder", folder)


@dataclass(frozen=True)
class PipelineModels:
    """The models seams.yaml names, resolved once by the composition root: which embeds
    candidates (boundaries), which builds the index and embeds queries, and the identities the
    code versions fold in (None wherever the default is used, so default settings keep their
    code versions byte for byte)."""

    boundary: ModelSetting
    retrieval: ModelSetting
    query_prompt: str | None
    document_prompt: str | None
    environment: SeamsEnvironment
    settings: EmbedderSettings

    @classmethod
    def of(cls, settings: SeamsSettings, environment: SeamsEnvironment) -> PipelineModels:
        """The settings' models resolved in `environment`; a ConfigError names the settings
        file, the field and the path when one holds no usable model."""
        try:
            return cls._of(settings, environment)
        except ConfigError as exc:
            source = environment.config_path
            raise ConfigError(f"{source}: {exc}" if source is not None else str(exc)) from None

    @classmethod
    def _of(cls, settings: SeamsSettings, environment: SeamsEnvironment) -> PipelineModels:
        boundary = resolve_model_setting(settings.embedder.model, "embedder.model", environment)
        retrieval_value = settings.retrieval.model
        if retrieval_value is None:
            # The static model finds boundaries only: the index then uses the packaged model.
            retrieval = boundary if boundary.kind != "static" else ModelSetting("packaged")
        else:
            retrieval = resolve_model_setting(retrieval_value, "retrieval.model", environment)
            if retrieval.kind == "static":
                raise ConfigError(
                    "retrieval.model: 'static': the static model finds boundaries only; give "
                    "`packaged`, a model folder, or null for the embedder's model"
                )
        if settings.retrieval.mode == "late" and retrieval.folder is not None:
            recipe = folder_recipe(retrieval.folder)
            prompt = settings.retrieval.document_prompt
            problem = late_model_problem(
                recipe, recipe.document_prompt() if prompt is None else prompt
            )
            if problem:
                raise ConfigError(
                    f"retrieval.mode: late cannot run retrieval.model {retrieval.describe()}: "
                    f"{problem}; use mode text (or pooled)"
                )
        return cls(
            boundary,
            retrieval,
            settings.retrieval.query_prompt,
            settings.retrieval.document_prompt,
            environment,
            settings.embedder,
        )

    @property
    def boundary_is_static(self) -> bool:
        return self.boundary.kind == "static"

    @property
    def index_reuses_candidates(self) -> bool:
        """Whether the index's model is the one that embedded the candidates, prompt included,
        so `pooled` may pool their vectors (else the index embeds each chunk's text)."""
        return self.retrieval == self.boundary and self.document_prompt is None

    @cached_property
    def boundary_identity(self) -> str | None:
        """The candidates' model in the embedding stage's code version (None: packaged or
        static, which the variant and `boundary_model` already say)."""
        if self.boundary.folder is None:
            return None
        return model_identity(self.boundary.folder, document_prompt=None)

    @cached_property
    def retrieval_identity(self) -> str | None:
        """The index's model in chunk_index's code version: None when it is already in the
        chunks' parts (the candidates' model, its prompt unchanged) or is the packaged model
        with its own prompt (as before these settings existed)."""
        if self.index_reuses_candidates:
            return None
        if self.retrieval.folder is None:
            if self.document_prompt is None:
                return None
            return f"packaged:{hashlib.sha256(self.document_prompt.encode()).hexdigest()}"
        return model_identity(self.retrieval.folder, document_prompt=self.document_prompt)

    @property
    def uses_packaged_resource_for_index(self) -> bool:
        """Whether the index embeds with the `embedder` resource itself (the packaged model,
        no prompt overrides): then chunk_index asks for `embedder`, as before."""
        return (
            self.retrieval.kind == "packaged"
            and self.query_prompt is None
            and self.document_prompt is None
        )

    def boundary_resource(self) -> OnnxEmbedderResource | None:
        """The `boundary_embedder` resource for a folder in `embedder.model` (None otherwise:
        `embedder` or `static_embedder` embed the candidates)."""
        if self.boundary.folder is None:
            return None
        return self._resource(self.boundary.folder, None, None)

    def retrieval_resource(self, embedder: OnnxEmbedderResource) -> OnnxEmbedderResource:
        """The `retrieval_embedder` resource: the index's model with retrieval's prompts
        (`embedder`, the packaged one, when nothing else is set)."""
        if self.retrieval.folder is None:
            if self.query_prompt is None and self.document_prompt is None:
                return embedder
            return embedder.with_changes(
                query_prompt=self.query_prompt, document_prompt=self.document_prompt
            )
        return self._resource(self.retrieval.folder, self.query_prompt, self.document_prompt)

    def _resource(
        self, folder: Path, query_prompt: str | None, document_prompt: str | None
    ) -> OnnxEmbedderResource:
        return OnnxEmbedderResource(
            model_dir=str(folder),
            batch_size=self.settings.batch_size,
            intra_op_threads=self.settings.threads,
            query_prompt=query_prompt,
            document_prompt=document_prompt,
            models_dir=str(self.environment.models_dir),
        )
