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

from pathlib import Path

import dagster as dg

from seams.assets.automation import settings_changed_condition
from seams.assets.boundaries import build_boundaries_asset
from seams.assets.candidates import build_candidates_asset
from seams.assets.chunks import build_chunks_asset
from seams.assets.embeddings import build_embeddings_asset
from seams.assets.extraction import build_extraction_asset
from seams.assets.model import build_model_asset
from seams.assets.partitions import PIPELINE_GROUP
from seams.assets.retrieval import RETRIEVAL_GROUP, IndexModel, build_index_asset, index_mode
from seams.assets.retrieval_eval import INDEX_KEY, EvalSetup, build_evaluation
from seams.assets.versions import StageParts
from seams.environment import CELERY_BACKEND_ENV, CELERY_BROKER_ENV, SeamsEnvironment
from seams.errors import ConfigError
from seams.models.chunk_vectors import RetrievalMode
from seams.orchestration.jobs import build_backfill_unsynced_job, chunk_batches_job
from seams.orchestration.sensors import build_inbox_sensor, build_seal_schedule
from seams.orchestration.sync import build_sync_check, build_sync_sensor
from seams.resources.embedder import OnnxEmbedderResource, PipelineModels
from seams.resources.io_manager import PostgresIOManager
from seams.resources.postgres import PostgresResource
from seams.resources.static_embedder import StaticEmbedderResource
from seams.settings import BackfillSettings, ExecutionSettings, SeamsSettings

__all__ = ["CELERY_BACKEND_ENV", "CELERY_BROKER_ENV", "build_definitions", "celery_config"]

SETTINGS_CHANGED_SENSOR = "seams_settings_changed"
RETRIEVAL_EMBEDDER = "retrieval_embedder"
"""The resource that builds the index and embeds queries (`retrieval.model`, its prompts)."""
BOUNDARY_EMBEDDER = "boundary_embedder"
"""The resource that embeds candidates when `embedder.model` names a model folder."""


def build_resources(
    settings: SeamsSettings, environment: SeamsEnvironment
) -> dict[str, dg.ConfigurableResource]:
    """`postgres`, `io_manager`, `embedder` (the packaged model: sizes, and embeds unless the
    settings name another model), `static_embedder`, `retrieval_embedder` (the index's and the
    queries' model, with retrieval's prompts) and, when `embedder.model` names a folder,
    `boundary_embedder`; each built once, from `environment` (the database, the model folders
    under its data dir)."""
    postgres = PostgresResource.for_environment(environment)
    models = PipelineModels.of(settings, environment)
    embedder = OnnxEmbedderResource.for_environment(environment, settings.embedder)
    resources: dict[str, dg.ConfigurableResource] = {
        "postgres": postgres,
        "io_manager": PostgresIOManager(postgres=postgres),
        "embedder": embedder,
        "static_embedder": StaticEmbedderResource.for_environment(environment),
        RETRIEVAL_EMBEDDER: models.retrieval_resource(embedder),
    }
    if (boundary := models.boundary_resource()) is not None:
        resources[BOUNDARY_EMBEDDER] = boundary
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
    """Every asset of the pipeline, in pipeline order, shaped by `settings` (model folders in
    them resolved against `environment`'s settings file; default this process's)."""
    models = PipelineModels.of(settings, environment or SeamsEnvironment.from_os())
    config = settings.chunking_config()
    parts = StageParts.of(config, settings.embedder.variant, models.boundary_identity)
    retrieval = settings.retrieval
    automation = settings_changed_condition(settings.backfill.automatic)
    assets = [
        build_model_asset(settings.embedder.variant, static=config.boundary_model == "static"),
        build_extraction_asset(settings.extraction_limits()),
        build_candidates_asset(config, parts, automation_condition=automation),
        build_embeddings_asset(
            config,
            parts,
            automation_condition=automation,
            model_resource=BOUNDARY_EMBEDDER if models.boundary.folder is not None else None,
        ),
        build_boundaries_asset(config, parts, automation_condition=automation),
        build_chunks_asset(config, parts, automation_condition=automation),
        build_index_asset(
            config,
            parts,
            retrieval.mode,
            retrieval.late_overlap_tokens,
            automation_condition=automation,
            text_search_config=retrieval.text_search_config,
            model=IndexModel(
                resource=(
                    "embedder" if models.uses_packaged_resource_for_index else RETRIEVAL_EMBEDDER
                ),
                identity=models.retrieval_identity,
                reuses_candidates=models.index_reuses_candidates,
                described=models.retrieval.describe(),
            ),
        ),
    ]
    return [_with_backfill_policy(asset, settings.backfill) for asset in assets]


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
    """The `executor=` of the definitions; None keeps Dagster's default (multiprocess, or
    in-process when a run's config asks for it)."""
    if execution.executor == "in_process":
        return dg.in_process_executor
    if execution.executor == "multiprocess":
        return None
    try:
        from dagster_celery import celery_executor
    except ImportError:
        raise ConfigError(
            "execution.executor: celery needs the Celery extra: pip install 'seams[celery]'"
        ) from None
    # Resolved when a run starts, in the process that submits steps: no URL is frozen in here.
    return celery_executor.configured(
        celery_config(execution),
        name="seams_celery",
    )


def celery_config(execution: ExecutionSettings) -> dict[str, object]:
    """The Celery executor's config, shared by the runs that submit steps and `seams worker`
    (both sides must agree on broker, backend and queue)."""
    return {
        "broker": {"env": CELERY_BROKER_ENV},
        "backend": {"env": CELERY_BACKEND_ENV},
        "config_source": {"task_default_queue": execution.celery_queue},
    }


def build_automation_sensors(backfill: BackfillSettings) -> list[dg.SensorDefinition]:
    """With `backfill.automatic`, a running sensor that evaluates the assets' automation
    conditions, so the daemon starts the settings-change backfill itself after a reload."""
    if not backfill.automatic:
        return []
    return [
        dg.AutomationConditionSensorDefinition(
            SETTINGS_CHANGED_SENSOR,
            target=dg.AssetSelection.groups(PIPELINE_GROUP, RETRIEVAL_GROUP),
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
    base = (
        environment.config_path.parent
        if environment.config_path is not None
        else environment.project_dir
    )
    questions = Path(evaluation.questions).expanduser()
    if not questions.is_absolute():
        if base is None:
            raise ConfigError(
                f"evaluation.questions: {questions} is relative and there is no settings file "
                "or project folder to count from: give an absolute path"
            )
        questions = base / questions
    questions = questions.resolve()
    retrieval = settings.retrieval
    setup = EvalSetup.of(
        questions,
        evaluation.budgets,
        evaluation.floor,
        retrieval.search,
        retrieval.lexical_weight,
        retrieval.sentence_weight,
    )
    index = next(asset for asset in assets if INDEX_KEY in asset.keys)
    return build_evaluation(setup, index.code_versions_by_key[INDEX_KEY])


def build_definitions(
    settings: SeamsSettings, *, environment: SeamsEnvironment | None = None
) -> dg.Definitions:
    """The one `Definitions` of the Seams code location for `settings` (contract) in
    `environment` (the entry point's). Leaving `environment` out makes this call the entry
    point: it resolves this process's (tests and scripts that build definitions themselves).
    """
    environment = environment or SeamsEnvironment.from_os()
    inbox = settings.inbox.for_environment(environment)

    def this_location() -> dg.Definitions:
        """What `in_sync` and `backfill_unsynced` judge staleness against in every run (one that
        holds only the check too): these definitions, the whole code location."""
        return location

    assets = build_assets(settings, environment)
    evaluation, evaluation_checks, evaluation_sensors = build_evaluation_definitions(
        settings, environment, assets
    )
    location = dg.Definitions(
        assets=[*assets, *evaluation],
        asset_checks=[build_sync_check(this_location), *evaluation_checks],
        jobs=[chunk_batches_job, build_backfill_unsynced_job(this_location)],
        sensors=[
            build_inbox_sensor(inbox),
            build_sync_sensor(),
            *build_automation_sensors(settings.backfill),
            *evaluation_sensors,
        ],
        schedules=[build_seal_schedule(inbox)],
        resources=build_resources(settings, environment),
        executor=build_executor(settings.execution),
    )
    return location
