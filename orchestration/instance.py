"""Prepares the Dagster instance: `DAGSTER_HOME` under the data dir, storage in PostgreSQL.

Every `seams` command that talks to Dagster calls `prepare_environment()` first, so the webserver,
daemon, run workers and in-process runs all see the same instance and the same database.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from chunking.errors import ConfigError
from resources.database import URL_ENV, DatabaseUrls, resolve
from resources.paths import PROJECT_ROOT, data_dir

DAGSTER_URL_VAR = "SEAMS_DAGSTER_PG_URL"
INSTANCE_YAML = PROJECT_ROOT / "dagster.yaml"


def dagster_home() -> Path:
    return data_dir() / "dagster_home"


def prepare_environment(*, start: bool = True) -> DatabaseUrls:
    """Resolve (and start) PostgreSQL, write `$DAGSTER_HOME/dagster.yaml`, export the variables.

    Child processes (dagster dev, run workers) inherit `DAGSTER_HOME`, `SEAMS_DAGSTER_PG_URL` and
    `SEAMS_DATABASE_URL`, so they reach the same server without starting another.
    """
    if not INSTANCE_YAML.is_file():
        raise ConfigError(
            f"the Dagster instance file {INSTANCE_YAML} is missing: restore it from git"
        )
    urls = resolve(start=start)
    home = dagster_home()
    home.mkdir(parents=True, exist_ok=True)
    target = home / "dagster.yaml"
    if not target.exists() or target.read_bytes() != INSTANCE_YAML.read_bytes():
        shutil.copyfile(INSTANCE_YAML, target)
    os.environ["SEAMS_DATA_DIR"] = str(data_dir())  # absolute, whatever the children's cwd
    os.environ["DAGSTER_HOME"] = str(home)
    os.environ[DAGSTER_URL_VAR] = urls.dagster
    os.environ[URL_ENV] = urls.data
    return urls
