"""One connection pool per tenant, whose connections run as the tenant's role.

A keyed request reads through its tenant's pool: each connection is opened with the server's
own login (the data database's URL) and switched to the tenant's role once, when the pool opens
it (`SET ROLE seams_tenant_<name>`), before any query. From then on PostgreSQL evaluates every
statement as that role: the row-level security policies, the grants and the `security_invoker`
views of `seams.storage.tenants` decide what it reads, never Seams' queries. A pool serves one
tenant only, so no connection ever changes hands between tenants, and the server runs no SQL of
a client's.

The login needs the right to `SET ROLE` to each tenant: a superuser has it (the embedded
server's login is one); a role that created the tenant roles (CREATEROLE, PostgreSQL 16+) holds
ADMIN OPTION on them and grants itself SET (not INHERIT: it gains no privilege), once
(`allow_set_role`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from seams.errors import ConfigError, StorageError
from seams.resources.database import CONNECT_TIMEOUT_S, redact
from seams.storage.tenants import tenant_role
from seams.storage.vector_type import register_vector

POOL_TIMEOUT_S = 10.0


def allow_set_role(conn: psycopg.Connection[Any], tenant: str) -> None:
    """Make sure this connection's login may `SET ROLE` to `tenant`'s role, or a one-line
    `ConfigError` saying what is missing (no role: the settings name no such tenant)."""
    role = tenant_role(tenant)
    row = conn.execute(
        "SELECT to_regrole(%s) IS NOT NULL, coalesce(pg_has_role(current_user, to_regrole(%s),"
        " 'SET'), false)",
        (role, role),
    ).fetchone()
    exists, can_set = bool(row and row[0]), bool(row and row[1])
    if not exists:
        raise ConfigError(
            f"tenant {tenant!r} has an API key but no role {role}: name it as a collection's "
            "`tenant:` in seams.yaml and run `seams db upgrade`"
        )
    if can_set:
        return
    try:
        conn.execute(
            sql.SQL("GRANT {} TO CURRENT_USER WITH INHERIT FALSE, SET TRUE").format(
                sql.Identifier(role)
            )
        )
    except psycopg.Error as exc:
        raise ConfigError(
            f"the server's login may not act as {role} ({str(exc).strip().splitlines()[0]}): "
            f"connect as the role that ran `seams db upgrade`, or `GRANT {role} TO <login> "
            "WITH INHERIT FALSE, SET TRUE` as a superuser"
        ) from None


class TenantPool:
    """A `ConnectionSource` (what search reads through) whose connections are `tenant`'s."""

    def __init__(self, url: str, tenant: str, max_size: int) -> None:
        self.tenant = tenant
        self.role = tenant_role(tenant)
        self._redacted = redact(url)
        self._pool = ConnectionPool(
            url,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
            min_size=0,
            max_size=max_size,
            open=False,
            configure=self._configure,
            check=ConnectionPool.check_connection,
            timeout=POOL_TIMEOUT_S,
            num_workers=1,
            name=f"seams-tenant-{tenant}",
        )
        self._pool.open(wait=False)

    @property
    def redacted_url(self) -> str:
        return f"{self._redacted} as {self.role}"

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(self.role)))
        register_vector(conn)

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection running as the tenant's role, back to this pool afterwards."""
        try:
            conn = self._pool.getconn()
        except PoolTimeout as exc:
            raise StorageError(
                f"no connection to PostgreSQL at {self._redacted} within {POOL_TIMEOUT_S:.0f} s"
            ) from exc
        try:
            yield conn
        finally:
            self._pool.putconn(conn)

    def close(self) -> None:
        self._pool.close()
