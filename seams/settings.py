"""The project's settings: `SEAMS_CONFIG`, else `./seams.yaml`, else the packaged defaults.

Which file that is the environment decides (`SeamsEnvironment.config_path`, resolved at the
entry point); this module reads and validates it.

Assets derive their `code_version` from the slice of these settings they read, so the settings
are loaded when the code location loads (`orchestration.location`) or a command starts, never per
run, and passed down from there: what the UI calls "unsynced" is exactly what a run would now
compute differently. Nothing keeps them in a module global.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from seams.chunking.config import (
    ChunkingConfig,
    Section,
    unknown_field,
)
from seams.collections import Collection, effective_settings, parse_collections
from seams.environment import CONFIG_ENV, PROJECT_SETTINGS, SeamsEnvironment
from seams.errors import ConfigError
from seams.extraction.limits import ExtractionLimits
from seams.paths import packaged_default
from seams.settings_yaml import load_settings_yaml
from seams.storage.object_store import ObjectPrefix, is_object_uri
from seams.storage.search import DEFAULT_TEXT_SEARCH_CONFIG, LEXICAL_WEIGHT, SENTENCE_WEIGHT
from seams.targets import TargetSettings, check_targets, project_tenants

PACKAGED_MODEL = "packaged"
"""`embedder.model` / `retrieval.model`: all-MiniLM-L6-v2, exported on first use."""
STATIC_MODEL = "static"
"""`embedder.model`: the `fast` preset's static model (`boundary_model: static`)."""


class ChunkingSettings(Section):
    preset: str = "default"
    overrides: dict[str, Any] = Field(default_factory=dict)


class EmbedderSettings(Section):
    # The model that places boundaries (candidate embeddings): `packaged` (all-MiniLM-L6-v2,
    # exported on first use), `static` (the `fast` preset's distilled model), or the path of a
    # model folder (sentence-transformers, exported once; or one holding model.onnx +
    # tokenizer.json). A change marks embeddings, boundaries, chunks and the index unsynced.
    model: str = Field("packaged", min_length=1, max_length=4096)
    variant: Literal["fp32", "int8"] = "fp32"
    batch_size: int = Field(32, ge=1, le=4096)
    threads: int = Field(0, ge=0, le=256)


class RetrievalSettings(Section):
    # The model of the search index and of queries: null = the embedder's model; else
    # `packaged`, or the path of a model folder (as `embedder.model`). A change marks only
    # chunk_index unsynced: chunks and their ids stay, and search keeps answering from the
    # previous model's vectors until every current chunk has one of the new model.
    model: str | None = Field(None, min_length=1, max_length=4096)
    # Text put before each query; null = the query prompt the model folder stores
    # (sentence-transformers' `prompts`, e.g. e5's "query: ").
    query_prompt: str | None = Field(None, max_length=4096)
    # Text put before each chunk text the retrieval model indexes; null = the folder's document
    # prompt (e.g. e5's "passage: ").
    document_prompt: str | None = Field(None, max_length=4096)
    # pooled: token-weighted mean of the chunk's candidate embeddings; text: embed the chunk
    # text; late: late chunking (seams.models.chunk_vectors). `pooled` is the default: it
    # retrieves at least as well as `text` and costs no model call; `late` gains nothing when
    # chunks already fit the model's window. Search reads the mode back from the index.
    mode: Literal["text", "pooled", "late"] = "pooled"
    late_overlap_tokens: int = Field(64, ge=0, le=200)
    # `seams search` scores a chunk by its vector and its best sentence (the pipeline's candidate
    # vectors): share of the sentence, 0 = the chunk vector alone (storage.search.sentence_rerank).
    sentence_weight: float = Field(SENTENCE_WEIGHT, ge=0.0, le=1.0)
    # Which scores rank `seams search`'s hits: hybrid (dense + BM25, seams.storage.search's
    # fuse_scores), dense, or lexical (BM25 over current chunks, seams.storage.search.lexical).
    search: Literal["hybrid", "dense", "lexical"] = "hybrid"
    # Share of the min-max normalised BM25 score in a hybrid score (0: dense order, 1: BM25).
    lexical_weight: float = Field(LEXICAL_WEIGHT, ge=0.0, le=1.0)
    # PostgreSQL text search configuration of the BM25 index (stemming + stop words): english,
    # simple (lower-cased words, no stemming: other languages), german, ... A change marks
    # chunk_index unsynced; a backfill re-analyses every batch.
    text_search_config: str = Field(DEFAULT_TEXT_SEARCH_CONFIG, pattern=r"^[a-z_][a-z0-9_]{0,62}$")


SEAL_CRON = "0 * * * *"
"""The default `inbox.seal_cron`: every hour, on the hour."""


class InboxSettings(Section):
    # A folder, or every object under an S3 prefix (`s3://bucket/prefix`): credentials, region
    # and endpoint come from the environment's S3 configuration (AWS_* variables, ~/.aws/).
    path: str | None = None
    # The endpoint of an S3-compatible store (MinIO, Ceph, R2, ...): null = the environment's
    # (AWS_ENDPOINT_URL, ~/.aws/config), else AWS. Read by the inbox and by every worker.
    endpoint_url: str | None = Field(None, pattern=r"^https?://[^\s/]+(/\S*)?$", max_length=2048)
    min_files: int = Field(20, ge=1, le=1_000_000)
    max_wait_minutes: float = Field(10.0, ge=0.0, le=7 * 24 * 60)
    seal_cron: str = SEAL_CRON

    @field_validator("seal_cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        if value == SEAL_CRON:  # valid; spares the quick commands Dagster's import
            return value
        import warnings

        import dagster as dg

        try:  # Dagster's own check of a schedule's cron (its warnings come with the schedule)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                dg.ScheduleDefinition(name="seal", cron_schedule=value, job_name="seal")
        except dg.DagsterInvalidDefinitionError:
            raise ValueError(f"seal_cron={value!r}: not a valid 5-field cron expression") from None
        return value

    @field_validator("path")
    @classmethod
    def _object_prefix(cls, value: str | None) -> str | None:
        if is_object_uri(value):
            try:
                return ObjectPrefix.parse(value).uri
            except ConfigError as exc:
                raise ValueError(f"path={exc}") from None
        return value

    def location(self, environment: SeamsEnvironment | None = None) -> Path | ObjectPrefix:
        """`path` (a folder or an `s3://` prefix), else the data dir's `inbox`. The composition
        root fills `path` in from its environment (`for_environment`); a caller holding
        neither resolves the process's."""
        if is_object_uri(self.path):
            return ObjectPrefix.parse(self.path)
        if self.path:
            return Path(self.path).expanduser().resolve()
        return (environment or SeamsEnvironment.from_os()).inbox_dir

    def for_environment(self, environment: SeamsEnvironment) -> InboxSettings:
        """These settings with `path` resolved against `environment`: the sensor and schedule
        then watch one source, whatever process evaluates them."""
        return self.model_copy(update={"path": str(self.location(environment))})


class ExecutionSettings(Section):
    """How the code location executes a run's steps (the `executor=` of the definitions).

    in_process (the default): every step in the run's own process. The pipeline is a linear
    chain, so a process per step (`multiprocess`, Dagster's own default) runs nothing in
    parallel and pays Python's and Dagster's start-up (seconds of CPU) once per step instead of
    once per run. celery: steps go to Celery workers
    (`seams worker`, extra `seams-chunking[celery]`), broker and backend from
    `SEAMS_CELERY_BROKER_URL` and `SEAMS_CELERY_BACKEND_URL`. `seams run`/`seams backfill` execute
    in-process unless this is `celery`, when they submit the runs and follow them.
    """

    executor: Literal["in_process", "multiprocess", "celery"] = "in_process"
    celery_queue: str = Field("dagster", pattern=r"^[A-Za-z0-9_.-]{1,200}$")
    # Scheduling priority of `seams run`, `seams backfill`, `seams worker` and the run workers of
    # runs launched from the UI or the daemon (and, on the embedded server, of their PostgreSQL
    # backends), as `nice -n`: batch work yields the CPU to readers searching on the same
    # machine. 0 keeps the normal priority.
    niceness: int = Field(10, ge=0, le=19)


class BackfillSettings(Section):
    """How backfills are planned and started.

    max_batches_per_run: None keeps the assets' single-run policy (a backfill in one run,
    Dagster's per-run overhead paid once: best on one machine); k: `BackfillPolicy.multi_run(k)`
    so N workers get N runs. automatic: the daemon backfills the assets a settings change made
    unsynced by itself after "Reload definitions" (declarative automation); off by default.
    """

    automatic: bool = False
    max_batches_per_run: int | None = Field(None, ge=1, le=1_000_000)


class EvaluationSettings(Section):
    """The `retrieval_eval` asset: recall of the current search on the user's own questions,
    measured after every index change (see docs/evaluation.md)."""

    questions: str | None = None
    """A `seams eval` questions file (JSON Lines); a relative path counts from the folder of
    the settings file (of the project without one). null: no `retrieval_eval` asset."""
    budgets: tuple[int, ...] = Field((250, 500, 1000), min_length=1, max_length=20)
    """The context budgets (tokens) at which recall is measured: one `recall@B` per budget."""
    floor: dict[int, float] = Field(default_factory=dict)
    """Per budget, the lowest acceptable recall, e.g. `{250: 0.6, 1000: 0.85}`: the
    `recall_above_floor` check fails below it. Empty: no check."""

    @field_validator("budgets")
    @classmethod
    def _budgets(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(budget < 1 or budget > 1_000_000 for budget in value):
            raise ValueError(f"budgets={list(value)}: each budget is 1 to 1000000 tokens")
        if len(set(value)) != len(value):
            raise ValueError(f"budgets={list(value)}: a budget is listed twice")
        return value

    @field_validator("floor", mode="before")
    @classmethod
    def _no_boolean_floors(cls, value: Any) -> Any:
        if isinstance(value, dict) and any(isinstance(v, bool) for v in value.values()):
            raise ValueError(f"floor={value}: a recall floor is a number from 0 to 1")
        return value

    @model_validator(mode="after")
    def _floors(self) -> EvaluationSettings:
        for budget, floor in self.floor.items():
            if budget not in self.budgets:
                raise ValueError(
                    f"floor={self.floor}: budget {budget} is not among budgets "
                    f"{list(self.budgets)}: add it there or drop its floor"
                )
            if not 0.0 <= floor <= 1.0:
                raise ValueError(f"floor={self.floor}: a recall floor is 0 to 1, got {floor}")
        return self


class SeamsSettings(Section):
    chunking: ChunkingSettings = Field(default_factory=ChunkingSettings)
    extraction: dict[str, int | float] = Field(default_factory=dict)
    """Per-document limits, `seams.extraction.ExtractionLimits` fields: {chars_max: 20000000}."""
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    inbox: InboxSettings = Field(default_factory=InboxSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    execution: ExecutionSettings = Field(default_factory=ExecutionSettings)
    backfill: BackfillSettings = Field(default_factory=BackfillSettings)
    evaluation: EvaluationSettings = Field(default_factory=EvaluationSettings)
    collections: dict[str, Any] | None = None
    """Several sources, each with its own settings and tenant (`seams.collections`), as
    written; None: one collection, `default`, read from `inbox`."""
    targets: dict[str, TargetSettings] = Field(default_factory=dict)
    """Vector stores that mirror the published chunks (`seams.targets`); {}: none."""

    def declared_collections(self) -> dict[str, Collection]:
        """The `collections:` block validated, sources absolute; {} without one."""
        return parse_collections(self.collections, base=None)

    def collection_settings(self) -> dict[str, SeamsSettings]:
        """Each collection's own settings (the top level with its blocks merged in), in the
        order written; `{"default": self}` without `collections:`. Derived anew on every
        call (a few milliseconds), never cached: a `model_copy` with changed fields would
        carry a cache of the fields it replaced."""
        return effective_settings(self, self.declared_collections() or None, base=None)

    def chunking_config(self) -> ChunkingConfig:
        """The chunking config the pipeline runs: the preset and overrides, with
        `boundary_model` following `embedder.model` (`static` is `boundary_model: static`; a
        model folder places the boundaries even under the `fast` preset, whose other settings
        stay)."""
        config = ChunkingConfig.preset(self.chunking.preset, **self.chunking.overrides)
        model = self.embedder.model
        if model == STATIC_MODEL and config.boundary_model != "static":
            return config.with_overrides(boundary_model="static")
        if model not in (PACKAGED_MODEL, STATIC_MODEL) and config.boundary_model == "static":
            if self.chunking.overrides.get("boundary_model") == "static":
                raise ConfigError(
                    f"chunking.overrides.boundary_model: 'static' contradicts embedder.model: "
                    f"{model!r}: drop one (the static model or the folder places the boundaries)"
                )
            return config.with_overrides(boundary_model="model")
        return config

    def uses_static_model(self) -> bool:
        """Whether some collection finds its boundaries with the static model (the `fast`
        preset, `embedder.model: static`), so the static model must be distilled for a run."""
        return any(
            own.chunking_config().boundary_model == "static"
            for own in self.collection_settings().values()
        )

    def extraction_limits(self) -> ExtractionLimits:
        return ExtractionLimits.from_settings(self.extraction)

    @field_validator("extraction")
    @classmethod
    def _check_limits(cls, value: dict[str, int | float]) -> dict[str, int | float]:
        try:
            ExtractionLimits.from_settings(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return value


def load_settings(
    path: Path | None = None, *, environment: SeamsEnvironment | None = None
) -> SeamsSettings:
    """Read and validate the settings: `path`, else the file `environment` names (entry points
    pass theirs; a caller holding none, like a test or a script, gets this process's).

    Every problem is one line that names the file, the field and what is allowed.
    """
    named_by_variable = False
    if path is None:
        environment = environment or SeamsEnvironment.from_os()
        path, named_by_variable = environment.config_path, environment.config_from_variable
    if path is None:
        default = packaged_default(PROJECT_SETTINGS)
        return _parse(default.read_text(encoding="utf-8"), f"the packaged default {default}")
    if not path.exists():
        if named_by_variable:
            raise ConfigError(f"{CONFIG_ENV}={path} does not exist: point it at a seams.yaml")
        raise ConfigError(f"{path} does not exist: point SEAMS_CONFIG at a seams.yaml")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid YAML: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    return _parse(text, str(path), base=path.resolve().parent)


def _parse(text: str, source: str, *, base: Path | None = None) -> SeamsSettings:
    try:
        raw = load_settings_yaml(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML{_where(exc)}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level")
    if base is not None:  # relative collection sources count from the settings file's folder
        raw = {**raw, "collections": _sources_from(raw.get("collections"), base)}
        if raw["collections"] is None:
            del raw["collections"]
    try:
        settings = SeamsSettings.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_problems(exc)}") from None
    try:
        settings.chunking_config()
    except ConfigError as exc:
        raise ConfigError(f"{source}: chunking: {exc}") from None
    try:
        settings.collection_settings()
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    try:  # the collections each target receives are the project's, of one tenant
        check_targets(settings.targets, project_tenants(settings.collections))
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return settings


def _sources_from(collections: Any, base: Path) -> Any:
    """The `collections:` block with each relative `source` made absolute against `base` (what
    is not a well-formed block is left for `seams.collections` to refuse)."""
    if not isinstance(collections, dict):
        return collections
    resolved = {}
    for name, block in collections.items():
        source = block.get("source") if isinstance(block, dict) else None
        if is_object_uri(source):  # an object prefix is where it is
            source = None
        if isinstance(source, str) and source and not Path(source).expanduser().is_absolute():
            block = {**block, "source": str(base / source)}
        resolved[name] = block
    return resolved


_NAMED_PROBLEM = re.compile(r"^([A-Za-z_]\w*)=")


def _problems(exc: ValidationError) -> str:
    """One `field=value: problem` per error, each field named with its section
    (`embedder.batch_size`, `inbox.seal_cron`): a validator's own message names the bare field,
    which does not say where in seams.yaml it is."""
    problems = []
    for error in exc.errors():
        loc = [str(part) for part in error.get("loc", ())]
        message = error.get("msg", "invalid value").removeprefix("Value error, ")
        if not loc:
            problems.append(message)
            continue
        if error.get("type") == "extra_forbidden":
            problems.append(f"{'.'.join(loc)}: {unknown_field(SeamsSettings, loc)}")
            continue
        if error.get("type") not in {"value_error", "assertion_error"}:
            problems.append(f"{'.'.join(loc)}={error.get('input')!r}: {message}")
            continue
        named = _NAMED_PROBLEM.match(message)
        if named is not None:
            section = loc[:-1] if loc[-1] == named.group(1) else loc
            message = ".".join([*section, message]) if section else message
        problems.append(message)
    return "; ".join(problems)


def _where(exc: yaml.YAMLError) -> str:
    """`at line L, column C: problem` of a YAML error, on one line."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{at}: {problem}"
