"""`PostgresPool`: Seams' connection pool to its data database, and the `seams` schema in it,
without Dagster: what every reader (`seams search`, `seams serve`, the retrievers) and, as the
`PostgresResource` Dagster resource, every writer connects through.

Dagster builds a fresh resource object for every run (and every step process), so the pool lives
in a module-level cache keyed by process and URL: a run reuses the connections of the previous run
in the same process, and a forked child never shares its parent's sockets.

The schema is created and upgraded by writers only (`ensure_schema`, i.e.
`seams.storage.migrations.migrate`: once per schema version, under a lock), never on a reader's
path: a reader's first connection in a process reads the recorded version once and goes on, so
no process start replaces a view a search is reading (the deadlock that used to cost searches).

Connections are handed out in autocommit mode: a caller that writes opens `conn.transaction()`,
so a read never leaves an idle transaction behind and a write is exactly one transaction.
URLs appear in logs and errors only through `resources.database.redact`.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import psycopg
import psycopg.conninfo
from psycopg_pool import ConnectionPool, PoolTimeout
from pydantic import BaseModel, Field

from seams.environment import SeamsEnvironment
from seams.errors import SeamsError, StorageError
from seams.resources.database import (
    CONNECT_TIMEOUT_S,
    EmbeddedPostgres,
    redact,
    resolve_data_url,
)
from seams.storage.connections import connect_direct, connection_lost
from seams.storage.migrations import Migration, SchemaState, migrate, read_state
from seams.storage.vector_type import register_vector

log = logging.getLogger(__name__)

POOL_TIMEOUT_S = 30.0
#: How long `connection()` waits on the pool before asking the server itself whether it is up.
#: A pool whose server is down keeps retrying in the background until `POOL_TIMEOUT_S`, so
#: without the question a search during an outage would wait that long for its one line; a
#: server that answers means every connection is busy, and the rest of the wait is worth it.
PROBE_AFTER_S = 1.0


class PostgresPool(BaseModel):
    """The Seams data database: a pooled psycopg 3 connection per use, and its schema.

    Built from the entry point's environment by `for_environment` (the one constructor Seams
    uses): `database_url` is `SEAMS_DATABASE_URL`, else the embedded server under `data_dir` is
    started at first use, in whichever process runs the step, so no server URL is frozen into
    the definitions. `url` is a URL used as it is (tests, or `dg.EnvVar(...)` in a deployment).
    No field is ever logged unredacted.
    """

    url: str = Field(
        default="",
        description="psycopg URL of the data database, used as is; empty: database_url, else "
        "the embedded server under data_dir.",
    )
    database_url: str = Field(
        default="",
        description="SEAMS_DATABASE_URL as the entry point resolved it (checked at first use); "
        "empty: the embedded server.",
    )
    data_dir: str = Field(
        default="", description="The Seams data dir, home of the embedded server."
    )
    runtime_dir: str = Field(
        default="", description="XDG_RUNTIME_DIR: where a too-long socket path may go."
    )
    max_connections: int = Field(
        default=4, ge=1, description="Pool size per process; Dagster steps rarely need more."
    )

    @classmethod
    def for_environment(cls, environment: SeamsEnvironment) -> Self:
        """The data database of `environment`: the one way Seams builds this resource."""
        return cls(
            database_url=environment.database_url or "",
            data_dir=str(environment.data_dir),
            runtime_dir=str(environment.runtime_dir or ""),
        )

    def resolved_url(self) -> str:
        """The URL this resource connects to (resolving and starting the embedded server once
        per process). A pool built bare (`PostgresPool()`, a test's or a script's)
        takes the process's environment, resolved here, as its entry point."""
        if self.url:
            return self.url
        environment = self._environment()
        cache_key = (os.getpid(), environment.database_url or "", str(environment.data_dir))
        with _LOCK:
            url = _RESOLVED.get(cache_key)
            if url is None:
                url = _RESOLVED[cache_key] = resolve_data_url(environment)
        return url

    def _environment(self) -> SeamsEnvironment:
        """The parts of the entry point's environment this resource's config carries, back as
        one value; a bare resource's is this process's."""
        if not (self.database_url or self.data_dir):
            return SeamsEnvironment.from_os()
        return SeamsEnvironment(
            data_dir=Path(self.data_dir),
            config_path=None,
            database_url=self.database_url or None,
            runtime_dir=Path(self.runtime_dir) if self.runtime_dir else None,
        )

    @property
    def redacted_url(self) -> str:
        return redact(self.resolved_url())

    def pool(self) -> ConnectionPool:
        """This process's pool for the URL, created on first use, after one look at the
        schema's version (`_check_schema`; none after `ensure_schema`). Runs no DDL on a
        schema that exists: see `ensure_schema` (writers)."""
        url = self.resolved_url()
        key = (os.getpid(), url)
        with _LOCK:
            pool = _POOLS.get(key)
            if pool is None or pool.closed:
                if key not in _SCHEMA_CHECKED:
                    _SCHEMA_CHECKED[key] = _check_schema(url)
                local = embedded_server(self._environment(), url)
                pool = _POOLS[key] = _open_pool(url, self.max_connections, local_server=local)
        return pool

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in autocommit mode, pgvector adapters registered.

        Open `conn.transaction()` for writes. Connection failures become `StorageError`s naming
        the (redacted) URL; errors raised inside the block pass through unchanged, except a
        missing table or column of a schema older than this Seams: one line saying to run
        `seams db upgrade`.
        """
        pool = self.pool()
        conn = self._getconn(pool)
        try:
            key = (os.getpid(), self.resolved_url())
            try:
                yield conn
            except psycopg.ProgrammingError as exc:
                if isinstance(
                    exc, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedColumn
                ) and _older(_SCHEMA_CHECKED.get(key)):
                    raise StorageError(
                        f"the seams schema at {self.redacted_url} is older than this Seams "
                        f"({str(exc).strip().splitlines()[0]}): run `seams db upgrade` (or any "
                        "`seams run`) to upgrade it"
                    ) from exc
                raise
        finally:
            pool.putconn(conn)  # discards a broken connection, rolls back a stray transaction

    def _getconn(self, pool: ConnectionPool) -> psycopg.Connection[Any]:
        """A connection from `pool`; when none comes within `PROBE_AFTER_S`, one direct
        connection attempt tells a server that is down (a `StorageError` at once, with the
        server's own reason) from a pool whose connections are all busy (wait out the rest)."""
        deadline = time.monotonic() + pool.timeout
        try:
            return pool.getconn(timeout=min(PROBE_AFTER_S, pool.timeout))
        except PoolTimeout:
            pass
        reason = server_down_reason(self.resolved_url())
        if reason is not None:
            raise StorageError(
                f"PostgreSQL at {self.redacted_url} does not answer: {redact(reason)}. Check "
                "that the server is running and reachable (the embedded one: `seams db start`), "
                "then retry"
            )
        try:
            return pool.getconn(timeout=max(0.0, deadline - time.monotonic()))
        except PoolTimeout as exc:
            raise StorageError(
                f"no connection to PostgreSQL at {self.redacted_url} within {pool.timeout:.0f} s: "
                "check that the server is running and reachable, or raise max_connections "
                "if every connection is busy"
            ) from exc

    def ensure_schema(self) -> Migration | None:
        """A writer's entry: bring the database to this Seams' schema version (create or
        upgrade it, `seams.storage.migrations.migrate`), once per process and URL; None when
        this process did so already.

        Safe against concurrent processes (one migration under the DDL lock; the others
        find it done), no DDL at all when the recorded version is the code's, and a refusal
        when a newer Seams upgraded the database. Verifies that the tables match their
        declarations in `seams/storage/schema.py`.
        """
        url = self.resolved_url()  # outside _LOCK: resolving takes it too
        key = (os.getpid(), url)
        if key in _MIGRATED:
            return None
        migration = create_schema(url)
        with _LOCK:
            _MIGRATED.add(key)
            _SCHEMA_CHECKED[key] = None
        return migration


def server_down_reason(url: str) -> str | None:
    """Why the server of `url` refuses a fresh connection (its first line), or None when it
    accepts one: one attempt, `CONNECT_TIMEOUT_S` at most, outside any pool."""
    try:
        with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True):
            return None
    except psycopg.Error as exc:
        text = str(exc).strip()
        return text.splitlines()[0] if text else type(exc).__name__


def _check_schema(url: str) -> SchemaState:
    """A reader's look at the schema, on one direct connection before the pool opens: one
    SELECT, never DDL on a schema that exists. A server that is down fails here at once.

    An older schema is read as it is (upgrades only add, so what a reader reads is there; the
    next writer upgrades it), a newer one too. A database without any `seams` table is set up
    here, once: nobody can be reading tables that do not exist, so creating them cannot
    deadlock with anyone; a role that may not create them is told what to run.
    """
    where = redact(url)
    conn = connect_direct(url, where)
    with conn:
        try:
            with conn.transaction():
                state = read_state(conn)
        except psycopg.OperationalError as exc:
            raise connection_lost(where, "reading the schema version", exc) from exc
        if state.missing:
            try:
                migrate(conn, redacted_url=where)
            except StorageError as exc:
                raise StorageError(
                    f"nothing is indexed yet at {where}, and the seams schema could not be "
                    f"created ({exc}): run `seams db upgrade` or `seams run` as a role that "
                    "may create it"
                ) from exc
    if state.newer:
        log.warning(
            "the seams schema at %s (%s) is newer than this Seams: reading it as it is; "
            "upgrade Seams to write to it",
            where,
            state.describe(),
        )
    elif log.isEnabledFor(logging.INFO) and _older(state):  # a look costs rendering the DDL
        log.info(
            "the seams schema at %s (%s) is older than this Seams: reading it as it is; the "
            "next run or `seams db upgrade` upgrades it",
            where,
            state.describe(),
        )
    return state


def _older(state: SchemaState | None) -> bool:
    """Whether a schema a reader found (None: one this process migrated) is older than this
    Seams: only asked when it matters, since telling costs rendering all of the DDL."""
    return state is not None and not state.missing and state.needs_migration


def close_pool(url: str) -> None:
    """Close this process's pool for `url`, if any (tests drop databases; callers shut down)."""
    with _LOCK:
        pool = _POOLS.pop((os.getpid(), url), None)
        _SCHEMA_CHECKED.pop((os.getpid(), url), None)
        _MIGRATED.discard((os.getpid(), url))
    if pool is not None:
        pool.close()


def renew_connections() -> None:
    """Replace the idle connections of this process's pools (in-use ones as they come back):
    after the process lowered its priority, the backends opened from then on are lowered too
    (`_configure_local`), not only those opened after the pool was."""
    with _LOCK:
        pools = [p for (pid, _), p in _POOLS.items() if pid == os.getpid() and not p.closed]
    for pool in pools:
        pool.drain()


def close_all_pools() -> None:
    with _LOCK:
        pools = [p for (pid, _), p in _POOLS.items() if pid == os.getpid()]
        _POOLS.clear()
        _SCHEMA_CHECKED.clear()
        _MIGRATED.clear()
    for pool in pools:
        pool.close()


def create_schema(url: str) -> Migration:
    """Create or upgrade the `seams` schema at `url` (`seams.storage.migrations.migrate`): one
    transaction under the DDL lock, and only when the recorded version is not the
    code's. Errors name the redacted URL."""
    return migrate(url, redacted_url=redact(url))


def embedded_server(environment: SeamsEnvironment, url: str) -> bool:
    """Whether `url` is on the embedded server of `environment`'s data dir, whose backends run
    on this machine: no `SEAMS_DATABASE_URL`, or one naming that running server (as `seams dev`
    hands its children, the run workers of launched runs among them)."""
    if environment.database_url is None:
        return True
    try:
        running = EmbeddedPostgres.for_environment(environment).url()
        if running is None:
            return False
        ours, theirs = (psycopg.conninfo.conninfo_to_dict(u) for u in (url, running))
    except (SeamsError, OSError, psycopg.ProgrammingError):
        return False
    return all(ours.get(k) == theirs.get(k) for k in ("host", "port")) and bool(ours.get("host"))


def _open_pool(url: str, max_size: int, *, local_server: bool = False) -> ConnectionPool:
    log.debug("opening a PostgreSQL pool to %s", redact(url))
    pool = ConnectionPool(
        url,
        kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
        # No standing connections: a pool never reconnects in the background to a database that
        # was dropped or stopped; idle connections are kept for max_idle and reused meanwhile.
        min_size=0,
        max_size=max_size,
        open=False,
        configure=_configure_local if local_server else _configure_connection,
        check=ConnectionPool.check_connection,
        timeout=POOL_TIMEOUT_S,
        num_workers=1,
        name=f"seams-{os.getpid()}",
    )
    try:
        pool.open(wait=True, timeout=POOL_TIMEOUT_S)
    except PoolTimeout as exc:
        pool.close()
        raise StorageError(
            f"could not open connections to PostgreSQL at {redact(url)} within "
            f"{POOL_TIMEOUT_S:.0f} s: check that the server is running and reachable"
        ) from exc
    return pool


def _configure_connection(conn: psycopg.Connection[Any]) -> None:
    register_vector(conn)


def _configure_local(conn: psycopg.Connection[Any]) -> None:
    """A connection to the embedded server: its backend, a process on this machine, runs at
    no higher priority than the process it works for, so a batch command that yields the CPU
    to readers (`execution.niceness`) does not hand it back through its backends. Only ever
    lowers a priority; a system that refuses leaves it as it was."""
    _configure_connection(conn)
    try:
        own = os.getpriority(os.PRIO_PROCESS, 0)
        backend = conn.info.backend_pid
        if own > os.getpriority(os.PRIO_PROCESS, backend):
            os.setpriority(os.PRIO_PROCESS, backend, own)
    except (AttributeError, OSError) as exc:
        log.debug("left the backend's priority as it was: %s", exc)


_LOCK = threading.Lock()
_POOLS: dict[tuple[int, str], ConnectionPool] = {}
_RESOLVED: dict[tuple[int, str, str], str] = {}
#: (pid, url) whose schema version this process has read (readers: what it found) or migrated
#: (writers: None).
_SCHEMA_CHECKED: dict[tuple[int, str], SchemaState | None] = {}
_MIGRATED: set[tuple[int, str]] = set()
atexit.register(close_all_pools)
