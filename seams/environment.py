"""What Seams takes from its process: one value, `SeamsEnvironment`, resolved once per process.

`SeamsEnvironment.from_os()` is the one reader of the environment variables and the working
directory; the entry points call it once (the `seams` command, the code location, a library call
given no folder or settings of its own) and everything below receives the value, so what a
process does follows from one value a test can build by hand. The standard library only.

The precedence rules are contracts:
- project folder (what `./` means below): `SEAMS_PROJECT_DIR`, else the working directory
  (`seams dev` hands its own to the UI's processes, which run elsewhere);
- data dir: `SEAMS_DATA_DIR`; else `./.seams` when that folder exists; else
  `$XDG_DATA_HOME/seams` (default `~/.local/share/seams`). Settings never choose it, so editing
  a seams.yaml never moves the data to another (empty) server;
- settings: `SEAMS_CONFIG`, else `./seams.yaml` when it is a file, else the packaged defaults
  (`config_path` None);
- database: `SEAMS_DATABASE_URL` names a real server; unset, the embedded PostgreSQL under the
  data dir. `SEAMS_DAGSTER_DATABASE_URL` (old name `SEAMS_DAGSTER_PG_URL`) moves Dagster's own
  storage elsewhere;
- API keys: `SEAMS_API_KEYS` names the file of `seams serve`'s keys (relative: to the working
  directory); unset, the server has none and answers on the loopback interface only;
- Dagster instance: `DAGSTER_HOME` (a team's own deployment, recording Seams' runs, partitions
  and backfills); else Seams' own, `<data dir>/dagster_home`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from seams.errors import ConfigError

DATA_DIR_ENV = "SEAMS_DATA_DIR"
CONFIG_ENV = "SEAMS_CONFIG"
PROJECT_DIR_ENV = "SEAMS_PROJECT_DIR"
DATABASE_URL_ENV = "SEAMS_DATABASE_URL"
DAGSTER_DATABASE_URL_ENV = "SEAMS_DAGSTER_DATABASE_URL"
LEGACY_DAGSTER_DATABASE_URL_ENV = "SEAMS_DAGSTER_PG_URL"
"""The old name of `SEAMS_DAGSTER_DATABASE_URL`: still honoured, with a deprecation message."""
API_KEYS_ENV = "SEAMS_API_KEYS"
"""The file of `seams serve`'s API keys, one `TENANT KEY` pair per line (contract)."""
CELERY_BROKER_ENV = "SEAMS_CELERY_BROKER_URL"
CELERY_BACKEND_ENV = "SEAMS_CELERY_BACKEND_URL"
HUB_OFFLINE_ENV = "HF_HUB_OFFLINE"
DAGSTER_HOME_ENV = "DAGSTER_HOME"

PROJECT_DATA_DIR = ".seams"
PROJECT_SETTINGS = "seams.yaml"


@dataclass(frozen=True)
class SeamsEnvironment:
    """Everything Seams takes from its process, resolved: paths absolute, empty values None."""

    data_dir: Path
    """Database, models, Dagster home and inbox live under it (not created here)."""
    config_path: Path | None
    """The seams.yaml to read; None: the defaults shipped in the package."""
    config_from_variable: bool = False
    """Whether `config_path` came from `SEAMS_CONFIG` (a missing file is then its error)."""
    database_url: str | None = field(default=None, repr=False)
    """`SEAMS_DATABASE_URL`: Seams' data on that server; None: the embedded server."""
    dagster_database_url: str | None = field(default=None, repr=False)
    """`SEAMS_DAGSTER_DATABASE_URL`: Dagster's storage on that server; None: beside the data."""
    legacy_dagster_database_url: str | None = field(default=None, repr=False)
    """`SEAMS_DAGSTER_PG_URL`, the deprecated name of `dagster_database_url`."""
    celery_broker_url: str | None = field(default=None, repr=False)
    celery_backend_url: str | None = field(default=None, repr=False)
    api_keys_file: Path | None = None
    """`SEAMS_API_KEYS` (absolute): the file of `seams serve`'s API keys; None: no keys."""
    runtime_dir: Path | None = None
    """`XDG_RUNTIME_DIR`: where the embedded server's socket may go when the data dir's path is
    too long for a Unix socket."""
    project_dir: Path | None = None
    """The folder whose `seams.yaml` and `.seams` count (`SEAMS_PROJECT_DIR`, else the working
    directory); None in a value built by hand."""
    dagster_home_variable: Path | None = None
    """`DAGSTER_HOME`: the Dagster home whose instance Seams records into; None: its own."""
    variables: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}), repr=False, compare=False
    )
    """The process's variables as they were: the base of a child process's environment.
    (URLs may hold passwords: none of them is in the `repr`.)"""

    @classmethod
    def from_os(
        cls, environ: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> SeamsEnvironment:
        """The one resolver: this process's variables (`environ`) and working directory (`cwd`)
        by the rules above. Call it at an entry point, once, and pass the value down."""
        environ = dict(os.environ if environ is None else environ)
        cwd = Path.cwd() if cwd is None else cwd

        def value(name: str) -> str | None:
            return environ.get(name, "").strip() or None

        project = value(PROJECT_DIR_ENV)
        project_dir = (cwd / Path(project).expanduser() if project else cwd).resolve()
        configured_config = value(CONFIG_ENV)
        if configured_config:
            # Absolute (against the working directory): children run elsewhere.
            config_path: Path | None = (cwd / Path(configured_config).expanduser()).absolute()
        else:
            local = project_dir / PROJECT_SETTINGS
            config_path = local if local.is_file() else None
        runtime = value("XDG_RUNTIME_DIR")
        api_keys = value(API_KEYS_ENV)
        home = value(DAGSTER_HOME_ENV)
        return cls(
            data_dir=_data_dir(value(DATA_DIR_ENV), project_dir, value("XDG_DATA_HOME")),
            config_path=config_path,
            config_from_variable=configured_config is not None,
            database_url=value(DATABASE_URL_ENV),
            dagster_database_url=value(DAGSTER_DATABASE_URL_ENV),
            legacy_dagster_database_url=value(LEGACY_DAGSTER_DATABASE_URL_ENV),
            celery_broker_url=value(CELERY_BROKER_ENV),
            celery_backend_url=value(CELERY_BACKEND_ENV),
            api_keys_file=(cwd / Path(api_keys).expanduser()).absolute() if api_keys else None,
            runtime_dir=Path(runtime) if runtime else None,
            project_dir=project_dir,
            dagster_home_variable=(cwd / Path(home).expanduser()).resolve() if home else None,
            variables=MappingProxyType(environ),
        )

    def settings_relative(self, value: str, field: str) -> Path:
        """`value` (a path a setting names) absolute and resolved: a relative one counts from
        the settings file's folder, the project folder without one, never the working
        directory, so a seams.yaml and what it names can move together. A one-line
        `ConfigError` naming `field` when there is neither to count from."""
        path = Path(value).expanduser()
        if not path.is_absolute():
            base = self.config_path.parent if self.config_path is not None else self.project_dir
            if base is None:
                raise ConfigError(
                    f"{field}: {value!r} is relative and there is no settings file or project "
                    "folder to count from: give an absolute path"
                )
            path = base / path
        return path.resolve()

    def describe_settings(self) -> str:
        """Which settings file is in use and why, in one line (`seams check`, the UI): the
        rule above applied, so a user sees at once whether their seams.yaml counts."""
        if self.config_from_variable:
            return f"settings: {self.config_path} (from {CONFIG_ENV})"
        if self.config_path is not None:
            return f"settings: {self.config_path} (the seams.yaml of the project folder)"
        where = f" in {self.project_dir}" if self.project_dir is not None else ""
        return f"settings: the packaged defaults (no {PROJECT_SETTINGS}{where}, {CONFIG_ENV} unset)"

    def child_variables(self) -> dict[str, str]:
        """What a child process running in another folder must be told to resolve the same
        settings file *at each load*: `SEAMS_CONFIG` when the user set it (absolute), else the
        project folder, so a seams.yaml written there later is found (never a frozen path)."""
        if self.config_from_variable and self.config_path is not None:
            return {CONFIG_ENV: str(self.config_path)}
        if self.project_dir is not None:
            return {PROJECT_DIR_ENV: str(self.project_dir)}
        return {}

    @property
    def models_dir(self) -> Path:
        """Exported embedding models, one sub-folder per model."""
        return self.data_dir / "models"

    @property
    def own_dagster_home(self) -> Path:
        """Seams' own Dagster home, which `seams` writes its dagster.yaml and workspace into."""
        return self.data_dir / "dagster_home"

    @property
    def dagster_home(self) -> Path:
        """The Dagster home in use: `DAGSTER_HOME` when set, else Seams' own."""
        return self.dagster_home_variable or self.own_dagster_home

    @property
    def team_instance(self) -> bool:
        """Whether `DAGSTER_HOME` names another deployment's home than Seams' own: its
        dagster.yaml (storage, run coordinator) is the team's, never rewritten by Seams."""
        home = self.dagster_home_variable
        return home is not None and home != self.own_dagster_home.resolve()

    @property
    def pgdata(self) -> Path:
        """The embedded PostgreSQL's folder by default. As root, when the server's own user cannot
        enter a folder above the data dir, it lives elsewhere and the data dir's
        `postgres.location` names it (`resources.server_files.recorded_pgdata`)."""
        return self.data_dir / "postgres"

    @property
    def inbox_dir(self) -> Path:
        """The inbox the sensor watches when seams.yaml names none."""
        return self.data_dir / "inbox"

    @property
    def external_database(self) -> bool:
        """Whether Seams' data lives on a server named by `SEAMS_DATABASE_URL`."""
        return self.database_url is not None


def user_data_dir(xdg_data_home: str | None) -> Path:
    """The per-user data directory: `$XDG_DATA_HOME/seams`, default `~/.local/share/seams`."""
    return (Path(xdg_data_home) if xdg_data_home else Path.home() / ".local" / "share") / "seams"


def _data_dir(configured: str | None, project: Path, xdg_data_home: str | None) -> Path:
    """Where the data is, never where the settings are: a `.seams` that exists in the project
    folder, else the per-user folder. (A seams.yaml does not count: writing one where a user
    already works must not switch them to a new, empty database.)"""
    if configured:
        return (project / Path(configured).expanduser()).resolve()
    local = project / PROJECT_DATA_DIR
    return (local if local.is_dir() else user_data_dir(xdg_data_home)).resolve()


def keep_hub_offline(*, override: bool = False) -> None:
    """Tell `huggingface_hub` (which reads `HF_HUB_OFFLINE` once, at import) never to reach the
    hub: the model ships in a package, and no machine Seams runs on needs the network for it.

    Call it before importing transformers, sentence-transformers or model2vec. It writes this
    process's environment on purpose: that variable is the only switch the library reads.
    `override` replaces a value the user set; otherwise theirs wins.
    """
    if override:
        os.environ[HUB_OFFLINE_ENV] = "1"
    else:
        os.environ.setdefault(HUB_OFFLINE_ENV, "1")
