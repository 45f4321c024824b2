"""The composition root: `build_definitions(settings)` (contract) wires the whole code location.

Settings and the environment are read once by the caller (`seams.orchestration.location` for the
code location, the CLI for its commands, tests for theirs) and passed down: resources are built
here, once, from the environment (`SeamsEnvironment`: the data dir, `SEAMS_DATABASE_URL`, else
the embedded server), and every asset is made by its module's factory from the config slice it
reads, with the code version that slice implies. Nothing below this module reads seams.yaml, the
process environment, or holds settings.

Every process that loads the code location (webserver, daemon, run and step workers, Celery
workers) resolves its own environment when it imports `location`, so the same code runs on a
laptop, in CI and on Kubernetes; the embedded server is started at first use, never here.
"""

from __future__ import annotations

import dagster as dg

from seams.assets.automation import settings_changed_condition
from seams.assets.boundaries import build_boundaries_asset
from seams.assets.candidates import build_candidates_asset
from seams.assets.chunks import build_chunks_asset
from seams.assets.embeddings import build_embeddings_asset
from seams.assets.extraction import build_extraction_asset
from seams.assets.model import build_model_asset
from seams.assets.partitions import DEFAULT_LINEAGE, Lineage
from seams.assets.retrieval import IndexModel, build_index_asset, index_mode
from seams.assets.retrieval_eval import INDEX_KEY, EvalSetup, build_evaluation
from seams.assets.stages import ChunkingStages
from seams.assets.targets import build_targets
from seams.assets.versions import StageParts
from seams.environment import CELERY_BACKEND_ENV, CELERY_BROKER_ENV, SeamsEnvironment
from seams.errors import ConfigError
from seams.models.chunk_vectors import RetrievalMode
from seams.orchestration.jobs import build_backfill_unsynced_job, build_chunk_batches_job
from seams.orchestration.lineages import lineages_metadata
from seams.orchestration.priority import lowered
from seams.orchestration.sensors import build_inbox_sensor, build_seal_schedule
from seams.orchestration.sync import build_sync_check, build_sync_sensor
from seams.resources.embedder import OnnxEmbedderResource, PipelineModels
from seams.resources.io_manager import PostgresIOManager
from seams.resources.keys import (
    BOUNDARY_EMBEDDER_KEY,
    EMBEDDER_KEY,
    IO_MANAGER_KEY,
    POSTGRES_KEY,
    RETRIEVAL_EMBEDDER_KEY,
    STATIC_EMBEDDER_KEY,
)
from seams.resources.postgres import PostgresResource
from seams.resources.static_embedder import StaticEmbedderResource
from seams.settings import BackfillSettings, ExecutionSettings, SeamsSettings
from seams.targets import project_tenants, received_collections

__all__ = ["CELERY_BACKEND_ENV", "CELERY_BROKER_ENV", "build_definitions", "celery_config"]

SETTINGS_CHANGED_SENSOR = "seams_settings_changed"


def build_resources(
    settings: SeamsSettings, environment: SeamsEnvironment
) -> dict[str, dg.ConfigurableResource]:
    """`seams_postgres`, `seams_io_manager`, `seams_embedder` (the packaged model: sizes, and
    embeds unless the settings name another model), `seams_static_embedder`,
    `seams_retrieval_embedder` (the index's and the queries' model, with retrieval's prompts)
    and, when `embedder.model` names a folder, `seams_boundary_embedder` (`resources.keys`: none
    a team's own definitions would hold); each built once, from `environment` (the database,
    the model folders under its data dir)."""
    postgres = PostgresResource.for_environment(environment)
    models = PipelineModels.of(settings, environment)
    embedder = OnnxEmbedderResource.for_environment(environment, settings.embedder)
    resources: dict[str, dg.ConfigurableResource] = {
        POSTGRES_KEY: postgres,
        IO_MANAGER_KEY: PostgresIOManager(postgres=postgres),
        EMBEDDER_KEY: embedder,
        STATIC_EMBEDDER_KEY: StaticEmbedderResource.for_environment(environment),
        RETRIEVAL_EMBEDDER_KEY: models.retrieval_resource(embedder),
    }
    if (boundary := models.boundary_resource()) is not None:
        resources[BOUNDARY_EMBEDDER_KEY] = boundary
    return resources


def built_index_mode(settings: SeamsSettings, environment: SeamsEnvironment) -> RetrievalMode:
    """The mode `chunk_index` builds under `settings` (`retrieval.mode`, made `text` where
    pooled vectors cannot be reused: the static boundary model, or another retrieval model)."""
    models = PipelineModels.of(settings, environment)
    return index_mode(
        settings.retrieval.mode,
        settings.chunking_config(),
        reuses_candidates=models.index_reuses_candidates,
    )


def build_assets(
    settings: SeamsSettings, environment: SeamsEnvironment | None = None
) -> list[dg.AssetsDefinition]:
    """Every asset of the pipeline: the shared model, then each collection's lineage in
    pipeline order, shaped by that collection's settings (model folders in them resolved
    against `environment`'s settings file; default this process's)."""
    environment = environment or SeamsEnvironment.from_os()
    per_collection = settings.collection_settings()
    assets = [build_model_asset(settings.embedder.variant, static=settings.uses_static_model())]
    for name, own in per_collection.items():
        assets.extend(build_lineage(own, environment, Lineage(name)))
    return [_with_backfill_policy(asset, settings.backfill) for asset in assets]


def build_lineage(
    settings: SeamsSettings, environment: SeamsEnvironment, lineage: Lineage = DEFAULT_LINEAGE
) -> list[dg.AssetsDefinition]:
    """One collection's per-batch assets, shaped by its `settings`, under its lineage's keys,
    partitions and group."""
    models = PipelineModels.of(settings, environment)
    config = settings.chunking_config()
    parts = StageParts.of(config, settings.embedder.variant, models.boundary_identity)
    retrieval = settings.retrieval
    automation = settings_changed_condition(settings.backfill.automatic)
    stages = ChunkingStages(config, parts, automation, lineage)
    assets = [
        build_extraction_asset(settings.extraction_limits(), lineage, settings.inbox.endpoint_url),
        build_candidates_asset(stages),
        build_embeddings_asset(
            stages,
            model_resource=BOUNDARY_EMBEDDER_KEY if models.boundary.folder is not None else None,
        ),
        build_boundaries_asset(stages),
        build_chunks_asset(stages),
        build_index_asset(
            config,
            parts,
            retrieval.mode,
            retrieval.late_overlap_tokens,
            automation_condition=automation,
            text_search_config=retrieval.text_search_config,
            model=IndexModel(
                resource=(
                    EMBEDDER_KEY
                    if models.uses_packaged_resource_for_index
                    else RETRIEVAL_EMBEDDER_KEY
                ),
                identity=models.retrieval_identity,
                reuses_candidates=models.index_reuses_candidates,
                described=models.retrieval.describe(),
            ),
            lineage=lineage,
        ),
    ]
    return [lineage.placed(asset) for asset in assets]


def _with_backfill_policy(
    asset: dg.AssetsDefinition, backfill: BackfillSettings
) -> dg.AssetsDefinition:
    """`backfill.max_batches_per_run: k` fans a backfill out into runs of k batches (one per
    worker); unset, the assets keep their single-run policy (one run for the whole backfill)."""
    if backfill.max_batches_per_run is None or asset.partitions_def is None:
        return asset
    return asset.with_attributes(
        backfill_policy=dg.BackfillPolicy.multi_run(backfill.max_batches_per_run)
    )


def build_executor(execution: ExecutionSettings) -> dg.ExecutorDefinition | None:
    """The executor `execution.executor` names, set on each of Seams' jobs (never on the
    definitions, where it would clash with a team's own when merged); None keeps Dagster's
    default (multiprocess, or in-process when a run's config asks for it). A launched run's
    worker lowers itself to `execution.niceness` (`priority.lowered`)."""
    if execution.executor == "in_process":
        return lowered(dg.in_process_executor, execution.niceness)
    if execution.executor == "multiprocess":
        return None
    try:
        from dagster_celery import celery_executor
    except ImportError:
        raise ConfigError(
            "execution.executor: celery needs the Celery extra: "
            "pip install 'seams-chunking[celery]'"
        ) from None
    # Resolved when a run starts, in the process that submits steps: no URL is frozen in here.
    return lowered(
        celery_executor.configured(celery_config(execution), name="seams_celery"),
        execution.niceness,
    )


def default_executor(execution: ExecutionSettings) -> dg.ExecutorDefinition:
    """The executor of Seams' own code location (what the UI launches outside Seams' jobs, and
    Seams' jobs whose executor is Dagster's default): `build_executor`'s, or Dagster's default,
    lowered all the same."""
    return build_executor(execution) or lowered(dg.multi_or_in_process_executor, execution.niceness)


def celery_config(execution: ExecutionSettings) -> dict[str, object]:
    """The Celery executor's config, shared by the runs that submit steps and `seams worker`
    (both sides must agree on broker, backend and queue)."""
    return {
        "broker": {"env": CELERY_BROKER_ENV},
        "backend": {"env": CELERY_BACKEND_ENV},
        "config_source": {"task_default_queue": execution.celery_queue},
    }


def build_automation_sensors(
    backfill: BackfillSettings, lineages: list[Lineage] | None = None
) -> list[dg.SensorDefinition]:
    """With `backfill.automatic`, a running sensor that evaluates the assets' automation
    conditions (every collection's), so the daemon starts the settings-change backfill itself
    after a reload."""
    if not backfill.automatic:
        return []
    keys = [key for lineage in lineages or [DEFAULT_LINEAGE] for key in lineage.keys]
    return [
        dg.AutomationConditionSensorDefinition(
            SETTINGS_CHANGED_SENSOR,
            target=dg.AssetSelection.assets(*keys),
            default_status=dg.DefaultSensorStatus.RUNNING,
            emit_backfills=True,
            description="Backfills the assets a settings change made unsynced "
            "(backfill.automatic: true in seams.yaml).",
        )
    ]


def build_evaluation_definitions(
    settings: SeamsSettings,
    environment: SeamsEnvironment,
    assets: list[dg.AssetsDefinition],
) -> tuple[list[dg.AssetsDefinition], list[dg.AssetChecksDefinition], list[dg.SensorDefinition]]:
    """`retrieval_eval`, its floor check and its sensor when seams.yaml names a questions file
    (`evaluation.questions`, a relative path counting from the settings file's folder, else
    from the project folder); else nothing, and the definitions are what they were without it."""
    evaluation = settings.evaluation
    if evaluation.questions is None:
        return [], [], []
    questions = environment.settings_relative(evaluation.questions, "evaluation.questions")
    retrieval = settings.retrieval
    setup = EvalSetup.of(
        questions,
        evaluation.budgets,
        evaluation.floor,
        retrieval.search,
        retrieval.lexical_weight,
        retrieval.sentence_weight,
    )
    indexes = {
        key: version
        for asset in assets
        for key, version in asset.code_versions_by_key.items()
        if key.path[-1] == INDEX_KEY.path[-1] and version is not None
    }
    return build_evaluation(setup, indexes)


def build_target_definitions(
    settings: SeamsSettings, environment: SeamsEnvironment, lineages: list[Lineage]
) -> tuple[list[dg.AssetsDefinition], list[dg.SensorDefinition]]:
    """One asset per target of seams.yaml, downstream of the indexes of the collections it
    receives, and the sensor that syncs them after a publication; nothing without targets."""
    tenants = project_tenants(settings.collections)
    indexes = {lineage.collection: lineage.key(INDEX_KEY.path[-1]) for lineage in lineages}
    targets = {}
    for name, target in settings.targets.items():
        collections = received_collections(target, tenants)
        targets[name] = (target, collections, [indexes[c] for c in collections if c in indexes])
    return build_targets(targets, environment)


def build_definitions(
    settings: SeamsSettings, *, environment: SeamsEnvironment | None = None
) -> dg.Definitions:
    """The one `Definitions` of the Seams code location for `settings` (contract) in
    `environment` (the entry point's). Leaving `environment` out makes this call the entry
    point: it resolves this process's (tests and scripts that build definitions themselves).

    They merge into a team's own (`dg.Definitions.merge(theirs, seams)`): every resource under
    a `seams_` key, every asset on `seams_io_manager`, the executor on Seams' jobs, not on the
    definitions (the code location adds it there for its own UI runs: `location`).
    """
    environment = environment or SeamsEnvironment.from_os()
    per_collection = settings.collection_settings()
    declared = settings.declared_collections() or None
    lineages = [Lineage(name) for name in per_collection]

    def this_location() -> dg.Definitions:
        """What `in_sync` and `backfill_unsynced` judge staleness against in every run (one that
        holds only the check too): these definitions, the whole code location."""
        return location

    assets = build_assets(settings, environment)
    evaluation, evaluation_checks, evaluation_sensors = build_evaluation_definitions(
        settings, environment, assets
    )
    targets, target_sensors = build_target_definitions(settings, environment, lineages)
    executor = build_executor(settings.execution)
    jobs, inboxes, seals = [], [], []
    for lineage, own in zip(lineages, per_collection.values(), strict=True):
        job = build_chunk_batches_job(lineage, executor)
        inbox = own.inbox.for_environment(environment)
        jobs.append(job)
        max_bytes = own.extraction_limits().file_bytes_max  # objects over it are never read
        inboxes.append(build_inbox_sensor(inbox, lineage, declared, max_bytes))
        seals.append(build_seal_schedule(inbox, lineage, declared, max_bytes))
    location = dg.Definitions(
        assets=[*assets, *evaluation, *targets],
        asset_checks=[build_sync_check(this_location, lineages), *evaluation_checks],
        jobs=[*jobs, build_backfill_unsynced_job(this_location, executor)],
        sensors=[
            *inboxes,
            build_sync_sensor(lineages=lineages, location=this_location),
            *build_automation_sensors(settings.backfill, lineages),
            *evaluation_sensors,
            *target_sensors,
        ],
        schedules=seals,
        resources=build_resources(settings, environment),
        metadata=lineages_metadata([lineage.collection for lineage in lineages]),
    )
    return location
