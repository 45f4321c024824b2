"""`seams worker`: a Celery worker for the `seams` code location (wraps `dagster-celery worker
start`), refusing to start where it would lose data.

A worker executes steps of runs submitted elsewhere, so it must reach what they reach: the one
shared PostgreSQL (`SEAMS_DATABASE_URL`; without it the worker would start an embedded server of
its own and write there), the broker and result backend (`SEAMS_CELERY_BROKER_URL`,
`SEAMS_CELERY_BACKEND_URL`), the same seams.yaml (`SEAMS_CONFIG`) and the exported model under
its data dir. Each is checked before Celery starts, with a message saying how to provide it,
against the environment `seams worker`'s entry point resolved (`SeamsEnvironment`).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from seams.environment import (
    CELERY_BACKEND_ENV,
    CELERY_BROKER_ENV,
    DATA_DIR_ENV,
    SeamsEnvironment,
)
from seams.errors import ConfigError, SeamsError
from seams.models.model_store import default_model_dir, load_manifest
from seams.orchestration.definitions import celery_config
from seams.orchestration.instance import prepare_instance
from seams.orchestration.launch import check_shared_database
from seams.orchestration.priority import lower_priority
from seams.settings import SeamsSettings

CELERY_APP = "dagster_celery.app"
"""The Celery app module `dagster-celery` ships; its tasks execute Dagster steps."""


@dataclass(frozen=True)
class WorkerLaunch:
    """The command that becomes the worker, and its environment."""

    command: list[str]
    env: dict[str, str]
    home: Path


def check_model(environment: SeamsEnvironment) -> None:
    """The exported model must be on this machine; say where it was looked for and how to get it."""
    try:
        load_manifest(default_model_dir(environment))
    except SeamsError as exc:
        configured = environment.variables.get(DATA_DIR_ENV, "<unset>")
        raise ConfigError(
            f"`seams worker` cannot embed: {exc} A worker looks for the model under "
            f"{environment.models_dir} ({DATA_DIR_ENV}={configured}). "
            "Provide it before starting the worker: run `seams model export` on this machine "
            "with the same SEAMS_DATA_DIR, or mount that folder from a shared volume or bake it "
            "into the worker's image layer."
        ) from None


def prepare_worker(
    settings: SeamsSettings,
    environment: SeamsEnvironment,
    *,
    name: str,
    concurrency: int,
    loglevel: str = "INFO",
) -> WorkerLaunch:
    """Check everything a worker needs in `environment`, prepare DAGSTER_HOME, and build the
    command (whose environment is `environment`'s variables plus the instance's)."""
    check_shared_database("`seams worker`", environment.database_url)
    try:
        import dagster_celery  # noqa: F401
    except ImportError:
        raise ConfigError(
            "`seams worker` needs the Celery extra: pip install 'seams-chunking[celery]'"
        ) from None
    celery_urls = {
        CELERY_BROKER_ENV: environment.celery_broker_url,
        CELERY_BACKEND_ENV: environment.celery_backend_url,
    }
    for variable, url in celery_urls.items():
        if not url:
            raise ConfigError(
                f"`seams worker` needs {variable} (e.g. redis://host:6379/0): the same broker and "
                "result backend as the process that submits the runs"
            )
    if settings.execution.executor != "celery":
        print(
            f"seams: note: seams.yaml has execution.executor: {settings.execution.executor}; "
            "runs reach this worker only with `executor: celery`",
            file=sys.stderr,
            flush=True,
        )
    check_model(environment)
    seams_instance = prepare_instance(environment)  # creates DAGSTER_HOME (dagster-celery needs it)
    home = seams_instance.home
    config_file = home / "celery.yaml"
    config_file.write_text(
        yaml.safe_dump({"execution": {"config": celery_config(settings.execution)}}),
        encoding="utf-8",
    )
    bin_dir = Path(sys.executable).parent
    env = seams_instance.environment()
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"  # dagster-celery runs `celery`
    command = [
        str(bin_dir / "dagster-celery"), "worker", "start",
        "-A", CELERY_APP,
        "-y", str(config_file),
        "-q", settings.execution.celery_queue,
        "-n", name,
        "-l", loglevel,
        "--", f"--concurrency={concurrency}",
    ]  # fmt: skip
    return WorkerLaunch(command, env, home)


def run(args: argparse.Namespace) -> int:
    """Become a Celery worker for this code location (after checking it would not lose data)."""
    launch = prepare_worker(
        args.settings,
        args.environment,
        name=args.name or default_worker_name(),
        concurrency=args.concurrency,
        loglevel=args.loglevel,
    )
    print(
        f"seams: Celery worker {args.name or default_worker_name()} (DAGSTER_HOME {launch.home})",
        flush=True,
    )
    lower_priority(args.settings.execution.niceness)  # kept by the worker exec'd next
    os.execve(launch.command[0], launch.command, launch.env)
    return 0  # not reached: the worker replaced this process


def default_worker_name() -> str:
    """Unique per process on a host: `seams-<pid>` (Celery appends `@host`)."""
    return f"seams-{os.getpid()}"
