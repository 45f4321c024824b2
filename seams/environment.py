"""What Seams takes from its process: one value, `SeamsEnvironment`, resolved once per process.

The environment variables and the working directory decide where Seams keeps its files, which
PostgreSQL it uses and which settings file it reads. They are read here, and only here, by
`SeamsEnvironment.from_os()`, which the entry points call once: the `seams` command
(`orchestration.cli.main`), the code location Dagster loads (`orchestration.location`), and a
library caller that gives no folder or settings of its own (`OnnxEmbedder()`, `load_settings()`).
Everything below receives the value and never looks at `os.environ` itself, so what a process
does follows from one value a test can build by hand.

The precedence rules are contracts:
- data dir: `SEAMS_DATA_DIR` when set; else `./.seams` when the working directory is a Seams
  project (it holds a `seams.yaml`, or a `.seams` from earlier runs), so a checkout keeps its data
  beside it; else the per-user folder `$XDG_DATA_HOME/seams` (default `~/.local/share/seams`), so
  an installed `seams` run from anywhere never scatters `.seams` folders;
- settings: `SEAMS_CONFIG` when set, else `./seams.yaml` when it is a file, else the packaged
  defaults (`config_path` None);
- database: `SEAMS_DATABASE_URL` names a real server; unset, Seams runs its embedded PostgreSQL
  under the data dir. `SEAMS_DAGSTER_DATABASE_URL` (old name `SEAMS_DAGSTER_PG_URL`) moves
  Dagster's own storage elsewhere.

This module is the bottom layer: the standard library only (no Dagster, no pydantic).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

DATA_DIR_ENV = "SEAMS_DATA_DIR"
CONFIG_ENV = "SEAMS_CONFIG"
DATABASE_URL_ENV = "SEAMS_DATABASE_URL"
DAGSTER_DATABASE_URL_ENV = "SEAMS_DAGSTER_DATABASE_URL"
LEGACY_DAGSTER_DATABASE_URL_ENV = "SEAMS_DAGSTER_PG_URL"
"""The old name of `SEAMS_DAGSTER_DATABASE_URL`: still honoured, with a deprecation message."""
CELERY_BROKER_ENV = "SEAMS_CELERY_BROKER_URL"
CELERY_BACKEND_ENV = "SEAMS_CELERY_BACKEND_URL"
HUB_OFFLINE_ENV = "HF_HUB_OFFLINE"

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
    runtime_dir: Path | None = None
    """`XDG_RUNTIME_DIR`: where the embedded server's socket may go when the data dir's path is
    too long for a Unix socket."""
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

        configured_config = value(CONFIG_ENV)
        if configured_config:
            config_path: Path | None = Path(configured_config).expanduser()
        else:
            local = cwd / PROJECT_SETTINGS
            config_path = local if local.is_file() else None
        runtime = value("XDG_RUNTIME_DIR")
        return cls(
            data_dir=_data_dir(value(DATA_DIR_ENV), cwd, value("XDG_DATA_HOME")),
            config_path=config_path,
            config_from_variable=configured_config is not None,
            database_url=value(DATABASE_URL_ENV),
            dagster_database_url=value(DAGSTER_DATABASE_URL_ENV),
            legacy_dagster_database_url=value(LEGACY_DAGSTER_DATABASE_URL_ENV),
            celery_broker_url=value(CELERY_BROKER_ENV),
            celery_backend_url=value(CELERY_BACKEND_ENV),
            runtime_dir=Path(runtime) if runtime else None,
            variables=MappingProxyType(environ),
        )

    @property
    def models_dir(self) -> Path:
        """Exported embedding models, one sub-folder per model."""
        return self.data_dir / "models"

    @property
    def dagster_home(self) -> Path:
        return self.data_dir / "dagster_home"

    @property
    def pgdata(self) -> Path:
        """The embedded PostgreSQL's data folder."""
        return self.data_dir / "postgres"

    @property
    def inbox_dir(self) -> Path:
        """The inbox the sensor watches when seams.yaml names none."""
        return self.data_dir / "inbox"

    @property
    def external_database(self) -> bool:
        """Whether Seams' data lives on a server named by `SEAMS_DATABASE_URL`."""
        return self.database_url is not None


def project_dir(cwd: Path) -> Path | None:
    """`cwd` when it is a Seams project (holds seams.yaml or .seams), else None."""
    if (cwd / PROJECT_SETTINGS).is_file() or (cwd / PROJECT_DATA_DIR).is_dir():
        return cwd
    return None


def user_data_dir(xdg_data_home: str | None) -> Path:
    """The per-user data directory: `$XDG_DATA_HOME/seams`, default `~/.local/share/seams`."""
    return (Path(xdg_data_home) if xdg_data_home else Path.home() / ".local" / "share") / "seams"


def _data_dir(configured: str | None, cwd: Path, xdg_data_home: str | None) -> Path:
    if configured:
        return Path(configured).expanduser().resolve()
    project = project_dir(cwd)
    return (project / PROJECT_DATA_DIR if project else user_data_dir(xdg_data_home)).resolve()


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
