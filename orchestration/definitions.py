"""`orchestration.defs` (contract): the one `Definitions` object of the Seams code location.

Resources come from the environment, so the same code location runs on a laptop (embedded
PostgreSQL), in CI and on Kubernetes (`SEAMS_DATABASE_URL` pointing at a shared server).
"""

from __future__ import annotations

import os

import dagster as dg

from assets import boundaries, candidates, chunks, embeddings, extraction, model, retrieval
from assets.versions import SETTINGS
from orchestration.jobs import chunk_batches_job
from orchestration.sensors import inbox_sensor, seal_inbox_schedule
from resources.database import URL_ENV
from resources.embedder import OnnxEmbedder
from resources.io_manager import PostgresIOManager
from resources.postgres import PostgresResource
from resources.static_embedder import StaticEmbedder


def build_resources() -> dict[str, object]:
    """`postgres`, `io_manager` and `embedder`, configured from the environment and seams.yaml."""
    postgres = (
        PostgresResource(url=dg.EnvVar(URL_ENV)) if os.environ.get(URL_ENV) else PostgresResource()
    )
    return {
        "postgres": postgres,
        "io_manager": PostgresIOManager(postgres=postgres),
        "embedder": OnnxEmbedder(
            variant=SETTINGS.embedder.variant,
            batch_size=SETTINGS.embedder.batch_size,
            intra_op_threads=SETTINGS.embedder.threads,
        ),
        "static_embedder": StaticEmbedder(),
    }


defs = dg.Definitions(
    assets=dg.load_assets_from_modules(
        [model, extraction, candidates, embeddings, boundaries, chunks, retrieval]
    ),
    jobs=[chunk_batches_job],
    sensors=[inbox_sensor],
    schedules=[seal_inbox_schedule],
    resources=build_resources(),
)
