"""`PostgresResource`: Seams' connection pool to its data database, and the `seams` schema in it.

Dagster builds a fresh resource object for every run (and every step process), so the pool lives
in a module-level cache keyed by process and URL: a run reuses the connections of the previous run
in the same process, and a forked child never shares its parent's sockets. The first use of a URL
in a process creates the schema (`ensure_schema`) before any pooled connection exists, so every
pooled connection can register the pgvector adapters it needs.

Connections are handed out in autocommit mode: a caller that writes opens `conn.transaction()`,
so a read never leaves an idle transaction behind and a write is exactly one transaction.
URLs appear in logs and errors only through `resources.database.redact`.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
import psycopg
from psycopg.adapt import Buffer, Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo
from psycopg_pool import ConnectionPool, PoolTimeout
from pydantic import Field

from seams.environment import SeamsEnvironment
from seams.errors import StorageError
from seams.resources.database import (
    CONNECT_TIMEOUT_S,
    DDL_LOCK,
    URL_ENV,
    redact,
    resolve_data_url,
)
from seams.storage import schema

log = logging.getLogger(__name__)

POOL_TIMEOUT_S = 30.0
#: How long `connection()` waits on the pool before asking the server itself whether it is up.
#: A pool whose server is down keeps retrying in the background until `POOL_TIMEOUT_S`, so
#: without the question a search during an outage would wait that long for its one line; a
#: server that answers means every connection is busy, and the rest of the wait is worth it.
PROBE_AFTER_S = 1.0


class PostgresResource(dg.ConfigurableResource):
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
    def for_environment(cls, environment: SeamsEnvironment) -> PostgresResource:
        """The data database of `environment`: the one way Seams builds this resource."""
        return cls(
            database_url=environment.database_url or "",
            data_dir=str(environment.data_dir),
            runtime_dir=str(environment.runtime_dir or ""),
        )

    def resolved_url(self) -> str:
        """The URL this resource connects to (resolving and starting the embedded server once
        per process). A resource built bare (`PostgresResource()`, a test's or a script's)
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
        """This process's pool for the URL, created (after `ensure_schema`) on first use."""
        url = self.resolved_url()
        key = (os.getpid(), url)
        with _LOCK:
            pool = _POOLS.get(key)
            if pool is None or pool.closed:
                _ensure_schema_once(url)
                pool = _POOLS[key] = _open_pool(url, self.max_connections)
        return pool

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in autocommit mode, pgvector adapters registered.

        Open `conn.transaction()` for writes. Connection failures become `StorageError`s naming
        the (redacted) URL; errors raised inside the block pass through unchanged.
        """
        pool = self.pool()
        conn = self._getconn(pool)
        try:
            yield conn
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

    def ensure_schema(self) -> None:
        """Create schema `seams` and every declared table, index and view (idempotent).

        Safe against concurrent processes (DDL runs under an advisory lock) and verifies that
        existing tables still match their declarations in `seams/storage/schema.py`.
        """
        url = self.resolved_url()  # outside _LOCK: resolving takes it too
        create_schema(url)
        with _LOCK:
            _SCHEMA_READY.add((os.getpid(), url))


def server_down_reason(url: str) -> str | None:
    """Why the server of `url` refuses a fresh connection (its first line), or None when it
    accepts one: one attempt, `CONNECT_TIMEOUT_S` at most, outside any pool."""
    try:
        with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True):
            return None
    except psycopg.Error as exc:
        text = str(exc).strip()
        return text.splitlines()[0] if text else type(exc).__name__


def close_pool(url: str) -> None:
    """Close this process's pool for `url`, if any (tests drop databases; callers shut down)."""
    with _LOCK:
        pool = _POOLS.pop((os.getpid(), url), None)
        _SCHEMA_READY.discard((os.getpid(), url))
    if pool is not None:
        pool.close()


def close_all_pools() -> None:
    with _LOCK:
        pools = [p for (pid, _), p in _POOLS.items() if pid == os.getpid()]
        _POOLS.clear()
        _SCHEMA_READY.clear()
    for pool in pools:
        pool.close()


def create_schema(url: str) -> None:
    """Run the DDL of `seams.storage.schema` in one transaction under an advisory lock."""
    try:
        with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True) as conn:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (DDL_LOCK,))
                for statement in schema.ddl(**_existing(conn)):
                    conn.execute(statement)
            _check_declared_columns(conn, redact(url))
    except psycopg.errors.FeatureNotSupported as exc:  # pragma: no cover - server specific
        raise StorageError(f"cannot create the seams schema at {redact(url)}: {exc}") from exc
    except (psycopg.errors.UndefinedFile, psycopg.errors.InsufficientPrivilege) as exc:
        raise StorageError(
            f"cannot create the seams schema at {redact(url)}: {str(exc).strip()}. The pgvector "
            "extension must be installed and the user allowed to CREATE in the database "
            "(or an administrator runs `CREATE EXTENSION vector`); or unset "
            f"{URL_ENV} to use Seams' embedded PostgreSQL, which has both."
        ) from exc
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StorageError(
            f"cannot connect to PostgreSQL at {redact(url)}: {reason}. Check that the server is "
            f"running and the URL is right, or unset {URL_ENV} to use Seams' embedded PostgreSQL."
        ) from exc


def _existing(conn: psycopg.Connection[Any]) -> dict[str, bool]:
    """Whether the schema and pgvector already exist: their CREATE ... IF NOT EXISTS would still
    need privileges a least-privilege data role (docs/reliability.md) does not have."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %s),"
        " EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')",
        (schema.SCHEMA,),
    ).fetchone()
    return {"schema_exists": bool(row[0]), "vector_exists": bool(row[1])}


_PG_TYPE_NAMES = {"timestamptz": "timestamp with time zone"}


def _check_declared_columns(conn: psycopg.Connection[Any], redacted_url: str) -> None:
    """Tables created by an older declaration are reported, not silently written with gaps."""
    rows = conn.execute(
        """SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
           FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = %s AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped""",
        (schema.SCHEMA,),
    ).fetchall()
    actual: dict[str, set[tuple[str, str, bool]]] = {}
    for table, column, pg_type, not_null in rows:
        actual.setdefault(table, set()).add((column, pg_type, not_null))
    for table in schema.TABLES:
        declared = {
            (c.name, _PG_TYPE_NAMES.get(c.pg_type, c.pg_type), not c.nullable)
            for c in table.columns
        }
        found = actual.get(table.name, set())
        if found == declared:
            continue
        missing = sorted(declared - found)
        unexpected = sorted(found - declared)
        raise StorageError(
            f"table {table.qualified_name} at {redacted_url} does not match its declaration in "
            f"seams/storage/schema.py: missing or changed {missing}, unexpected {unexpected}. "
            f"Asset tables hold derived data: `DROP TABLE {table.qualified_name} CASCADE` and "
            "re-materialize (the view is recreated), or migrate the table by hand."
        )


def _ensure_schema_once(url: str) -> None:
    key = (os.getpid(), url)
    if key not in _SCHEMA_READY:
        create_schema(url)
        _SCHEMA_READY.add(key)


def _open_pool(url: str, max_size: int) -> ConnectionPool:
    log.debug("opening a PostgreSQL pool to %s", redact(url))
    pool = ConnectionPool(
        url,
        kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
        # No standing connections: a pool never reconnects in the background to a database that
        # was dropped or stopped; idle connections are kept for max_idle and reused meanwhile.
        min_size=0,
        max_size=max_size,
        open=False,
        configure=_configure_connection,
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


# --- pgvector adapters ------------------------------------------------------------------------
# pgvector's binary format: int16 dimension, int16 unused, then big-endian float4 values. Owning
# these ~40 lines (instead of the `pgvector` package) lets loads return float32 arrays directly.

_HEADER = struct.Struct(">HH")


_BIG_ENDIAN_F4 = np.dtype(">f4")


def _as_float32(obj: Any) -> np.ndarray:
    """Big-endian float4 values; arrays already in that layout pass without a copy."""
    values = np.asarray(obj)
    if values.dtype != _BIG_ENDIAN_F4:
        values = values.astype(_BIG_ENDIAN_F4)
    if values.ndim != 1:
        raise ValueError(f"a vector must be 1-D, got shape {values.shape}")
    return values


class VectorBinaryDumper(Dumper):
    """numpy arrays and float sequences -> pgvector `vector`, binary."""

    format = Format.BINARY

    def dump(self, obj: Any) -> Buffer:
        values = _as_float32(obj)
        return _HEADER.pack(values.shape[0], 0) + values.tobytes()


class VectorTextDumper(Dumper):
    def dump(self, obj: Any) -> Buffer:
        # float32 -> float64 is exact, and repr() of a float round-trips: no digit is lost.
        values = _as_float32(obj).astype(np.float64).tolist()
        return ("[" + ",".join(map(repr, values)) + "]").encode()


class VectorBinaryLoader(Loader):
    """pgvector `vector` -> 1-D float32 numpy array (the exact stored values)."""

    format = Format.BINARY

    def load(self, data: Buffer) -> np.ndarray:
        dim = int.from_bytes(bytes(data[:2]), "big")
        return np.frombuffer(data, dtype=">f4", count=dim, offset=4).astype(np.float32)


class VectorTextLoader(Loader):
    def load(self, data: Buffer) -> np.ndarray:
        text = bytes(data).decode()[1:-1]
        return np.array(text.split(",") if text else [], dtype=np.float32)


def register_vector(context: psycopg.Connection[Any]) -> None:
    """Register `vector` on a connection: COPY via `set_types(["vector"])`, numpy parameters,
    and loads as float32 arrays. Raises `StorageError` when pgvector is not installed."""
    info = TypeInfo.fetch(context, "vector")
    if info is None:
        raise StorageError(
            "the pgvector extension is missing in this database: run `CREATE EXTENSION vector` "
            "(Seams' embedded PostgreSQL ships it)"
        )
    info.register(context)
    adapters = context.adapters
    for base in (VectorTextDumper, VectorBinaryDumper):  # binary last: the default for np arrays
        dumper = type(base.__name__, (base,), {"oid": info.oid})
        adapters.register_dumper(None, dumper)  # by oid, for COPY
        adapters.register_dumper(np.ndarray, dumper)
    adapters.register_loader(info.oid, VectorTextLoader)
    adapters.register_loader(info.oid, VectorBinaryLoader)


def advisory_lock(conn: psycopg.Connection[Any], *parts: str) -> None:
    """Take a transaction-scoped advisory lock named by `parts` (released at commit/rollback).

    The name is hashed server-side; a (rare) collision only serialises two unrelated writers.
    """
    name = "\x1f".join(("seams", *parts))
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (name,))


_LOCK = threading.Lock()
_POOLS: dict[tuple[int, str], ConnectionPool] = {}
_RESOLVED: dict[tuple[int, str, str], str] = {}
_SCHEMA_READY: set[tuple[int, str]] = set()
atexit.register(close_all_pools)
