"""What a tenant's role may spend and call, and how it goes away (`seams.storage.tenants` owns
what it reads).

- **Limits** (`Limits`, set on the role by every sync): a connection limit, so one tenant's
  connections cannot take every slot of the server; and session defaults for
  `statement_timeout`, `idle_in_transaction_session_timeout`, `idle_session_timeout`,
  `transaction_timeout` (PostgreSQL 17+) and `temp_file_limit`. The connection limit is
  enforced (only a role with CREATEROLE changes it). `temp_file_limit` is a superuser setting:
  a tenant cannot raise it, so it is enforced too, where Seams may set it (a superuser, or a
  role granted `SET` on that parameter). The timeouts are defaults only: a tenant may `SET`
  them for its session, or `ALTER ROLE` itself, until the next sync sets them again.
- **Functions a tenant may not call** (`DENIED`): `pg_sleep*` (an idle session that holds its
  slot), the large-object creators (files of any size, owned by the tenant, kept after it
  logs out) and the advisory locks (a tenant holding the key of Seams' command, publication
  or sync lock makes every writer wait). PostgreSQL grants them to PUBLIC, and only a superuser
  may revoke that; where Seams connects as one (the embedded server) `restrict_functions`
  revokes them from PUBLIC in Seams' database and grants them back to the role that owns the
  `seams` schema. Other non-superuser roles of that database lose them too (functions' rights
  are per database: other databases keep them). Elsewhere `seams check` names what tenants can
  still call (`function_problems`).
- **Removal** (`remove_role`): the role loses its login and its membership of the group at
  once, its sessions end, what it owns in this database (large objects included) is dropped,
  then the role. What keeps a role (objects in another database) is named by every later sync
  and `seams check` (`leftovers`), until a sync can drop it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
import psycopg.errors
from psycopg import sql

from seams.storage import schema

SLEEP = ("pg_sleep", "pg_sleep_for", "pg_sleep_until")
LARGE_OBJECTS = ("lo_from_bytea", "lo_create", "lo_creat", "lo_import")
ADVISORY_LOCKS = tuple(
    f"pg_{attempt}advisory_{scope}lock{shared}"
    for attempt in ("", "try_")
    for scope in ("", "xact_")
    for shared in ("", "_shared")
)
"""Every function that takes an advisory lock (releasing one a session holds is harmless)."""
DENIED = (*SLEEP, *LARGE_OBJECTS, *ADVISORY_LOCKS)
TRANSACTION_TIMEOUT_VERSION = 170000
"""PostgreSQL 17: `transaction_timeout`."""


@dataclass(frozen=True)
class Limits:
    """What one tenant's role may spend (PostgreSQL units in the strings)."""

    connections: int = 20
    """Sessions at once: the embedded server allows 100, and Seams' own pools need a few."""
    statement_timeout: str = "60s"
    idle_in_transaction_session_timeout: str = "60s"
    idle_session_timeout: str = "15min"
    transaction_timeout: str = "5min"
    temp_file_limit: str = "1GB"
    """Per session: a sort or hash that would spill more fails."""

    def settings(self, server_version: int) -> dict[str, str]:
        """Parameter -> value, for the server's version."""
        values = {
            "statement_timeout": self.statement_timeout,
            "idle_in_transaction_session_timeout": self.idle_in_transaction_session_timeout,
            "idle_session_timeout": self.idle_session_timeout,
            "temp_file_limit": self.temp_file_limit,
        }
        if server_version >= TRANSACTION_TIMEOUT_VERSION:
            values["transaction_timeout"] = self.transaction_timeout
        return values


LIMITS = Limits()


def apply_limits(conn: psycopg.Connection[Any], role: str, limits: Limits = LIMITS) -> None:
    """Set `limits` on `role` (idempotent). `temp_file_limit` only where this connection's role
    may set it (a superuser, or one granted SET on it): `function_problems` says when not."""
    name = sql.Identifier(role)
    conn.execute(
        sql.SQL("ALTER ROLE {} CONNECTION LIMIT {}").format(name, sql.Literal(limits.connections))
    )
    for parameter, value in limits.settings(conn.info.server_version).items():
        allowed = conn.execute(
            "SELECT has_parameter_privilege(current_user, %s, 'SET')"
            " OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)"
            " OR (SELECT context FROM pg_settings WHERE name = %s) = 'user'",
            (parameter, parameter),
        ).fetchone()
        if allowed and allowed[0]:
            conn.execute(
                sql.SQL("ALTER ROLE {} SET {} = {}").format(
                    name, sql.Identifier(parameter), sql.Literal(value)
                )
            )


def _denied_oids(conn: psycopg.Connection[Any], group: str) -> list[tuple[int, str]]:
    """(oid, signature) of every `DENIED` function the group may still execute."""
    rows = conn.execute(
        "SELECT p.oid, p.oid::regprocedure::text FROM pg_proc AS p"
        " WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname = ANY(%s)"
        " AND has_function_privilege(%s, p.oid, 'EXECUTE') ORDER BY 2",
        (list(DENIED), group),
    ).fetchall()
    return [(int(oid), str(signature)) for oid, signature in rows]


def restrict_functions(conn: psycopg.Connection[Any], group: str) -> None:
    """Revoke `DENIED` from PUBLIC in this database and grant them to the owner of the `seams`
    schema, when this connection's role is a superuser (nobody else may); else nothing."""
    row = conn.execute(
        "SELECT r.rolsuper, n.nspowner::regrole::text FROM pg_roles AS r"
        " LEFT JOIN pg_namespace AS n ON n.nspname = %s WHERE r.rolname = current_user",
        (schema.SCHEMA,),
    ).fetchone()
    if not row or not row[0]:
        return
    denied = _denied_oids(conn, group)
    if not denied:
        return
    functions = sql.SQL(", ").join(sql.SQL(signature) for _, signature in denied)
    conn.execute(sql.SQL("REVOKE EXECUTE ON FUNCTION {} FROM PUBLIC").format(functions))
    if row[1] is not None:
        owner = sql.SQL(row[1])  # regrole's text: an identifier, quoted where it needs it
        conn.execute(sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(functions, owner))


def function_problems(conn: psycopg.Connection[Any], group: str) -> list[str]:
    """One line when tenants may call a `DENIED` function here ([] when none may)."""
    denied = _denied_oids(conn, group)
    if not denied:
        return []
    names = sorted({signature.split("(", 1)[0] for _, signature in denied})
    return [
        f"tenants may call {', '.join(names)} (sleep, large objects, advisory locks: a tenant "
        "can hold connections, fill the disk or make Seams' writers wait): Seams' role is not a "
        "superuser here; run `seams db upgrade` once as a superuser, or revoke EXECUTE on them "
        "from PUBLIC yourself"
    ]


# --- removal -------------------------------------------------------------------------------------


def disable(conn: psycopg.Connection[Any], role: str, group: str) -> None:
    """Take `role` out of `group` and its login away (in the caller's transaction)."""
    name = sql.Identifier(role)
    member = conn.execute("SELECT pg_has_role(%s, %s, 'MEMBER')", (role, group)).fetchone()
    if member and member[0]:
        conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(group), name))
    conn.execute(sql.SQL("ALTER ROLE {} NOLOGIN CONNECTION LIMIT 0").format(name))


def remove_role(conn: psycopg.Connection[Any], role: str) -> str | None:
    """End `role`'s sessions, drop what it owns in this database, drop it: None when it is gone,
    else why it stays (one line). Call it after `disable` was committed, outside a transaction
    or in one the caller can lose (a failed drop rolls back to a savepoint)."""
    exists = conn.execute("SELECT to_regrole(%s) IS NOT NULL", (role,)).fetchone()
    if not (exists and exists[0]):
        return None
    for (pid,) in conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE usename = %s", (role,)
    ).fetchall():
        try:
            with conn.transaction():
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        except psycopg.errors.InsufficientPrivilege:
            pass  # its login is gone; the session ends when it disconnects
    name = sql.Identifier(role)
    try:
        with conn.transaction():
            owns = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_shdepend AS s WHERE s.refobjid = to_regrole(%s)"
                " AND s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database()))",
                (role,),
            ).fetchone()
            if owns and owns[0]:
                conn.execute(sql.SQL("DROP OWNED BY {}").format(name))
            conn.execute(sql.SQL("DROP ROLE {}").format(name))
    except psycopg.errors.UndefinedObject:
        return None  # another sync dropped it meanwhile
    except (
        psycopg.errors.DependentObjectsStillExist,
        psycopg.errors.InsufficientPrivilege,
    ) as exc:
        return _why_left(conn, role, exc)
    return None


def _why_left(conn: psycopg.Connection[Any], role: str, exc: psycopg.Error) -> str:
    databases = [
        str(d)
        for (d,) in conn.execute(
            "SELECT DISTINCT d.datname FROM pg_shdepend AS s JOIN pg_database AS d"
            " ON d.oid = s.dbid WHERE s.refobjid = to_regrole(%s) AND d.datname <>"
            " current_database() ORDER BY 1",
            (role,),
        )
    ]
    if databases:
        where = f"it owns or was granted objects in database(s) {', '.join(databases)}"
        fix = f"`DROP OWNED BY {role}` there"
    else:
        where = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        fix = f"`DROP OWNED BY {role}; DROP ROLE {role}` as a superuser"
    return f"{role} is left on the server, without login ({where}): {fix}, or rerun once done"


def leftovers(conn: psycopg.Connection[Any], prefix: str, group: str) -> list[str]:
    """Tenant roles (named `prefix...`) that left `group`: removed tenants whose role stays."""
    rows = conn.execute(
        "SELECT r.rolname FROM pg_roles AS r WHERE r.rolname LIKE %s"
        " AND (to_regrole(%s) IS NULL OR NOT pg_has_role(r.oid, to_regrole(%s), 'MEMBER'))"
        " ORDER BY 1",
        (prefix.replace("_", r"\_") + "%", group, group),
    ).fetchall()
    return [str(r) for (r,) in rows]


def problems(conn: psycopg.Connection[Any], prefix: str, group: str) -> list[str]:
    """What `seams check` says of limits, one line each: functions tenants may still call, a
    tenant role without a connection limit, a removed tenant's role left on the server."""
    lines = function_problems(conn, group)
    unlimited = [
        str(r)
        for (r,) in conn.execute(
            "SELECT r.rolname FROM pg_roles AS r WHERE r.rolname LIKE %s AND r.rolconnlimit < 0"
            " AND pg_has_role(r.oid, to_regrole(%s), 'MEMBER') ORDER BY 1",
            (prefix.replace("_", r"\_") + "%", group),
        )
    ]
    if unlimited:
        lines.append(
            f"tenant role(s) {', '.join(unlimited)} without a connection limit: "
            "`seams db upgrade` sets it"
        )
    for role in leftovers(conn, prefix, group):
        login = conn.execute(
            "SELECT rolcanlogin FROM pg_roles WHERE rolname = %s", (role,)
        ).fetchone()
        state = "and can still log in" if login and login[0] else "without login"
        lines.append(
            f"{role} is no tenant any more {state} but is still on the server: "
            "`seams db upgrade` drops it, or says what keeps it"
        )
    return lines
