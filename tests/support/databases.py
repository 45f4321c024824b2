"""Fresh databases on the test server, the Seams schema in one, and reading rows back."""

from __future__ import annotations

import contextlib
import time
import uuid
import warnings
from collections.abc import Iterator

import psycopg
import psycopg.conninfo
from psycopg import sql

from seams.resources.database import database_url_for
from seams.resources.postgres import PostgresResource, close_pool


@contextlib.contextmanager
def fresh_database(pg_server_url: str, *, template: str | None = None) -> Iterator[str]:
    """A new database (with pgvector) on the test server; dropped on exit. Empty, or a copy of
    the database named `template` (which nobody may be connected to)."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        create += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        if template is not None:
            _end_sessions_on(conn, template)
        conn.execute(create)
    url = database_url_for(pg_server_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    try:
        yield url
    finally:
        close_pool(url)
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _end_sessions_on(conn: psycopg.Connection, template: str) -> None:
    """A template is copied only while nobody is connected to it: end a session some test left
    there (a role's login, a pool not closed), and name it in a warning so it can be found."""
    ended = conn.execute(
        "SELECT usename, application_name, pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = %s AND pid <> pg_backend_pid()",
        (template,),
    ).fetchall()
    if ended:
        warnings.warn(f"sessions left on the template {template}: {ended}", stacklevel=3)
        for _ in range(50):
            still = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (template,)
            ).fetchone()
            if not still or not still[0]:
                return
            time.sleep(0.1)


def database_name(url: str) -> str:
    """The database a connection URL names."""
    return str(psycopg.conninfo.conninfo_to_dict(url)["dbname"])


def migrated_postgres(url: str) -> Iterator[PostgresResource]:
    """The resource over `url` with the Seams schema in place, for a fixture to `yield from`;
    its connection pool is closed afterwards."""
    resource = PostgresResource(url=url)
    resource.ensure_schema()
    yield resource
    close_pool(url)


def rows(url: str, query: str, *params: object) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(query, params).fetchall()


def extracted_documents(url: str) -> list[tuple[str, str]]:
    """`(document_id, text)` of every document extracted without error: what was chunked."""
    return rows(url, "SELECT document_id, text FROM seams.extracted_text WHERE error IS NULL")


def held_locks(url: str) -> list[tuple]:
    """Locks between writers held or awaited in `url`'s database, by anyone: advisory locks,
    and session locks (`seams.storage.writer_locks`) whose holding session is alive."""
    advisory = rows(
        url,
        "SELECT l.pid, l.granted, l.objid::text FROM pg_locks l JOIN pg_database d"
        " ON d.oid = l.database WHERE l.locktype = 'advisory' AND d.datname = current_database()",
    )
    if rows(url, "SELECT to_regclass('seams.writer_locks') IS NULL") == [(True,)]:
        return advisory
    leases = rows(
        url,
        "SELECT l.pid, true, l.name FROM seams.writer_locks AS l WHERE EXISTS (SELECT 1"
        " FROM pg_stat_activity AS a WHERE a.pid = l.pid AND a.backend_start = l.backend_start)",
    )
    return advisory + leases
