"""`seams check`: prove the installation works."""

from __future__ import annotations

import argparse

from seams.orchestration.cli.context import definitions
from seams.orchestration.instance import prepare_instance
from seams.resources.database import redact


def run(args: argparse.Namespace) -> int:
    """Prove the installation works: PostgreSQL reachable, Dagster instance and definitions load."""
    seams_instance = prepare_instance(args.environment)
    repo = definitions(args).get_repository_def()
    with seams_instance.open() as instance:
        storage = type(instance.run_storage).__name__
    urls = seams_instance.urls
    where = "embedded" if urls.embedded else "external"
    print(
        f"PostgreSQL ({where}): {redact(urls.data)}\n"
        f"Dagster instance: {seams_instance.home} ({storage})\n"
        f"Definitions: {len(repo.assets_defs_by_key)} assets, {len(repo.get_all_jobs())} jobs, "
        f"{len(repo.sensor_defs)} sensors, {len(repo.schedule_defs)} schedules\n"
        "Next: `seams dev` and open the UI."
    )
    return 0
