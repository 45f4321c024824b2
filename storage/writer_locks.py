"""Locks between Seams' writers that no tenant can take.

PostgreSQL's advisory locks are open to every role that may execute `pg_advisory_lock`, which
PostgreSQL grants to PUBLIC and only a superuser may revoke: on a managed server a tenant could
hold the key of Seams' command, publication or partition lock (their names are no secret) and
make every writer wait. So writers lock rows of `seams.writer_locks` instead, a table tenants
have no right on: locking a row (`FOR NO KEY UPDATE`) needs the UPDATE privilege, and a table a
role may not read cannot be locked by it in any mode that stops these.

- **Transaction locks** (`lock`): the row of a name, locked until the caller's transaction ends;
  reentrant, and waited for like any row lock (deadlocks detected, `lock_timeout` applies).
- **Session locks** (`try_hold`, `release`): a lease held for as long as a session lives,
  without an open transaction (one held for hours would keep VACUUM from every row retired
  meanwhile). The row names the holding backend (pid and start time) and what it is; a lease
  whose backend is gone is free, so a crash, `kill -9` or a lost client never leaves the data
  locked, as with a session advisory lock.
- **Bootstrap** (`ddl_lock`): the creators of the schema itself lock the `seams:ddl` row once
  the table exists, and an advisory lock before (a database without the table has no tenant
  that was ever granted anything in it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql

from seams.storage import schema

TABLE = schema.WRITER_LOCKS
DDL = "seams:ddl"
"""The lock of every creator of schema-level objects (extension, schema, tables)."""


@dataclass(frozen=True)
class Lease:
    """Who holds a session lock: what it said it is, and since when."""

    holder: str
    since: datetime | None


def lock(conn: psycopg.Connection[Any], name: str) -> None:
    """Lock `name` until the caller's transaction ends (call it inside one)."""
    statement = sql.SQL("SELECT 1 FROM {} WHERE name = %s FOR NO KEY UPDATE").format(
        TABLE.identifier()
    )
    if conn.execute(statement, (name,)).fetchone() is None:
        _create(conn, name)
        conn.execute(statement, (name,))


def lock_sql(name: sql.Composable) -> sql.Composable:
    """`lock` as PL/pgSQL statements, for a function's body (`name`: an SQL text expression)."""
    return sql.SQL(
        "INSERT INTO {table} (name) VALUES ({name}) ON CONFLICT (name) DO NOTHING;"
        " PERFORM 1 FROM {table} WHERE name = {name} FOR NO KEY UPDATE;"
    ).format(table=TABLE.identifier(), name=name)


def ddl_lock(conn: psycopg.Connection[Any]) -> None:
    """The schema creators' lock (in the caller's transaction): the `DDL` row where the table
    exists, else an advisory lock, then the row too if the table appeared meanwhile (whoever
    created it held the advisory lock until its commit, so every later creator takes the row)."""
    if table_exists(conn):
        lock(conn, DDL)
        return
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (DDL,))
    if table_exists(conn):
        lock(conn, DDL)


def try_hold(conn: psycopg.Connection[Any], name: str, holder: str) -> Lease | None:
    """Take the session lock `name` for `conn`'s session, saying `holder` holds it: None once
    it is ours (or was already), else the lease of the live session that holds it. `conn`
    must be outside a transaction (autocommit): the lease is committed at once."""
    with conn.transaction():
        lock(conn, name)  # takers of one name queue here for a moment, never longer
        row = conn.execute(
            sql.SQL(
                "SELECT l.holder, l.since, l.pid = pg_backend_pid() OR NOT EXISTS ("
                "  SELECT 1 FROM pg_stat_activity AS a WHERE a.pid = l.pid"
                # backend_start is NULL for a session of another role: its pid must do.
                "  AND (a.backend_start = l.backend_start OR a.backend_start IS NULL))"
                " FROM {} AS l WHERE l.name = %s"
            ).format(TABLE.identifier()),
            (name,),
        ).fetchone()
        if row is not None and row[2] is False:
            return Lease(str(row[0] or ""), row[1])
        conn.execute(
            sql.SQL(
                "UPDATE {} SET pid = pg_backend_pid(), backend_start = (SELECT backend_start"
                " FROM pg_stat_activity WHERE pid = pg_backend_pid()), holder = %s,"
                " since = clock_timestamp() WHERE name = %s"
            ).format(TABLE.identifier()),
            (holder, name),
        )
    return None


def hold(conn: psycopg.Connection[Any], name: str, holder: str, *, poll_s: float = 0.2) -> None:
    """`try_hold` until the session lock `name` is ours."""
    while try_hold(conn, name, holder) is not None:
        time.sleep(poll_s)


def release(conn: psycopg.Connection[Any], name: str) -> None:
    """Give the session lock `name` back if `conn`'s session holds it (closing the session
    frees it too: the next taker finds its backend gone)."""
    conn.execute(
        sql.SQL(
            "UPDATE {} SET pid = NULL, backend_start = NULL, holder = NULL, since = NULL"
            " WHERE name = %s AND pid = pg_backend_pid()"
        ).format(TABLE.identifier()),
        (name,),
    )


def holder(conn: psycopg.Connection[Any], name: str) -> Lease | None:
    """The live lease of the session lock `name` (None: free, or no table yet)."""
    if not table_exists(conn):
        return None
    row = conn.execute(
        sql.SQL(
            "SELECT l.holder, l.since FROM {} AS l WHERE l.name = %s AND EXISTS ("
            "  SELECT 1 FROM pg_stat_activity AS a WHERE a.pid = l.pid"
            "  AND (a.backend_start = l.backend_start OR a.backend_start IS NULL))"
        ).format(TABLE.identifier()),
        (name,),
    ).fetchone()
    return None if row is None else Lease(str(row[0] or ""), row[1])


def _create(conn: psycopg.Connection[Any], name: str) -> None:
    conn.execute(
        sql.SQL("INSERT INTO {} (name) VALUES (%s) ON CONFLICT (name) DO NOTHING").format(
            TABLE.identifier()
        ),
        (name,),
    )


def table_exists(conn: psycopg.Connection[Any]) -> bool:
    """Whether this database has the locks' table (a database Seams of this version wrote)."""
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{schema.SCHEMA}.{TABLE.name}",)
    ).fetchone()
    return bool(row and row[0])
