"""The Dagster instance of Seams: `DAGSTER_HOME` under the data dir, storage in PostgreSQL.

Every `seams` command that talks to Dagster calls `prepare_instance(environment)` once with the
environment its entry point resolved, and gets a `SeamsInstance`: `open()` gives the in-process
`DagsterInstance` (its storage URL passed as an override, never through `os.environ`), and
`environment()` the explicit variables a child process (dagster dev, the webserver, the daemon,
run workers) needs to reach the same instance and database without starting another server.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import dagster as dg
import psycopg

from seams.environment import (
    DATA_DIR_ENV,
    LEGACY_DAGSTER_DATABASE_URL_ENV,
    SeamsEnvironment,
)
from seams.errors import ConfigError
from seams.orchestration.dagster_internals import InstanceRef
from seams.paths import packaged_default, secure_data_dir
from seams.resources.database import (
    CONNECT_TIMEOUT_S,
    DAGSTER_URL_ENV,
    URL_ENV,
    DatabaseUrls,
    check_free_space,
    dagster_url,
    psycopg_url,
    resolve,
)

INSTANCE_YAML = packaged_default("dagster.yaml")
"""The instance template (package data; the checkout's `dagster.yaml` is its source)."""
LOCATION_NAME = "seams"
LOCATION_MODULE = "seams.orchestration.location"
WORKSPACE_YAML = f"""\
# Written by `seams`: the one code location, named as the UI shows it.
load_from:
  - python_module:
      module_name: {LOCATION_MODULE}
      location_name: {LOCATION_NAME}
"""


def workspace_file(home: Path) -> Path:
    """`$DAGSTER_HOME/workspace.yaml`: loads `seams.orchestration.location` as location `seams`
    (a `-m` flag would name the location after the module)."""
    return home / "workspace.yaml"


@dataclass(frozen=True)
class SeamsInstance:
    """A prepared Dagster home and the databases it stores into."""

    home: Path
    urls: DatabaseUrls
    seams_environment: SeamsEnvironment
    """The environment the entry point resolved: the data dir and the variables children get."""

    @property
    def workspace_file(self) -> Path:
        return workspace_file(self.home)

    def open(self) -> dg.DagsterInstance:
        """The Dagster instance, run storage in PostgreSQL (use it as a context manager).

        Opening creates Dagster's tables on a fresh database; two processes doing that at once
        race (dagster-postgres retries with "Retrying failed database creation" warnings and
        can give up), so openings that create them are serialised by an advisory lock in that
        database (`storage_creation_lock`).
        """
        if self.seams_environment.team_instance:  # the team's dagster.yaml, as it is
            return dg.DagsterInstance.from_config(str(self.home))
        storage = {"postgres": {"postgres_url": self.urls.dagster}}
        ref = InstanceRef.from_dir(str(self.home), overrides={"storage": storage})
        with storage_creation_lock(self.urls.dagster):
            return dg.DagsterInstance.from_ref(ref)

    def variables(self) -> dict[str, str]:
        """What a child process must be told: where the instance, data, settings and databases
        are. Absolute paths, so the child's working directory does not matter. The settings go
        as a rule, not a frozen file (`SeamsEnvironment.child_variables`): each load of the code
        location ("Reload definitions") finds the seams.yaml the project folder holds then."""
        values = {
            "DAGSTER_HOME": str(self.home),
            DATA_DIR_ENV: str(self.seams_environment.data_dir),
            URL_ENV: self.urls.data,
            DAGSTER_URL_ENV: self.urls.dagster,
        }
        values.update(self.seams_environment.child_variables())
        return values

    def environment(self) -> dict[str, str]:
        """This process's environment (as its entry point read it) plus `variables()`: the `env`
        of a child process."""
        inherited = self.seams_environment.variables
        env = {k: v for k, v in inherited.items() if k != LEGACY_DAGSTER_DATABASE_URL_ENV}
        env.update(self.variables())
        return env


STORAGE_LOCK = "seams:dagster-storage"
DAGSTER_TABLES = ("runs", "instance_info", "event_logs", "jobs")
"""The tables whose absence makes Dagster create its storage when it opens."""


@contextlib.contextmanager
def storage_creation_lock(url: str) -> Iterator[None]:
    """Hold the advisory lock `STORAGE_LOCK` in the database of `url` (a Dagster storage URL)
    for the block while Dagster has tables to create there. Once they exist it holds nothing:
    no opening creates anything then, and nobody else holding that key (any role that may
    connect there can) makes an opening wait. Without a connection it holds nothing either:
    Dagster's own attempt then fails with the error Seams reports."""
    try:
        conn = psycopg.connect(psycopg_url(url), autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error:
        yield
        return
    created = conn.execute(
        "SELECT bool_and(to_regclass(t) IS NOT NULL) FROM unnest(%s::text[]) AS t",
        (list(DAGSTER_TABLES),),
    ).fetchone()
    if created and created[0]:
        conn.close()
        yield
        return
    with conn:
        conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (STORAGE_LOCK,))
        try:
            yield
        finally:
            with contextlib.suppress(psycopg.Error):
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (STORAGE_LOCK,))


def prepare_instance(
    environment: SeamsEnvironment | None = None, *, start: bool = True
) -> SeamsInstance:
    """Resolve (and start) PostgreSQL and write `$DAGSTER_HOME/dagster.yaml` + `workspace.yaml`
    under `environment`'s data dir (the entry point's; a test or a script may leave it out and
    get this process's). A team's `DAGSTER_HOME` (`SeamsEnvironment.team_instance`) is used as
    it is: its dagster.yaml and workspace are the team's, and must exist."""
    environment = environment or SeamsEnvironment.from_os()
    if not INSTANCE_YAML.is_file():
        raise ConfigError(
            f"the Dagster instance template {INSTANCE_YAML} is missing from the installed "
            "package: reinstall seams (in a checkout, restore dagster.yaml from git)"
        )
    home = environment.dagster_home
    if environment.team_instance and not (home / "dagster.yaml").is_file():
        raise ConfigError(
            f"DAGSTER_HOME {home} holds no dagster.yaml: point it at your Dagster "
            "deployment's home, or unset it to use Seams' own instance"
        )
    check_free_space(secure_data_dir(environment.data_dir))  # before the server, model, Dagster
    urls = _with_legacy_dagster_url(environment, resolve(environment, start=start))
    if environment.team_instance:
        return SeamsInstance(home, urls, environment)
    home.mkdir(mode=0o700, exist_ok=True)
    target = home / "dagster.yaml"
    template = INSTANCE_YAML.read_bytes()
    if not target.exists() or target.read_bytes() != template:
        target.write_bytes(template)
    workspace = workspace_file(home)
    if not workspace.exists() or workspace.read_text(encoding="utf-8") != WORKSPACE_YAML:
        workspace.write_text(WORKSPACE_YAML, encoding="utf-8")
    return SeamsInstance(home, urls, environment)


def _with_legacy_dagster_url(environment: SeamsEnvironment, urls: DatabaseUrls) -> DatabaseUrls:
    """Honour `SEAMS_DAGSTER_PG_URL` where `SEAMS_DAGSTER_DATABASE_URL` would count, and say so."""
    legacy = environment.legacy_dagster_database_url
    if not legacy:
        return urls
    print(
        f"seams: {LEGACY_DAGSTER_DATABASE_URL_ENV} is deprecated: set {DAGSTER_URL_ENV} instead "
        f"(it names the database of Dagster's run storage; default: {URL_ENV})",
        file=sys.stderr,
        flush=True,
    )
    if urls.embedded or environment.dagster_database_url:
        return urls
    return replace(urls, dagster=dagster_url(legacy))
