"""What would let a tenant read past its collections: the audit `seams check` runs over a
database with tenants, and the rule that every declared table says what tenants see of it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg

from seams.storage import schema, tenant_search
from seams.storage.tenants import (
    COLLECTION_TENANTS,
    GROUP,
    LOCKS,
    PRIVATE,
    PROTECTED,
    ROLE_PREFIX,
    SHARED,
    WITHHELD,
)


def isolation_problems(conn: psycopg.Connection[Any]) -> list[str]:
    """What would let a tenant read past its collections, as one line each ([] when none): a
    table tenants can read without row-level security, a readable view that is not
    `security_invoker`, a vector column they may read (`WITHHELD`), a SECURITY DEFINER
    function in the schema they may execute other than tenant search's own (`tenant_search`,
    its body and pinned search path unchanged), a tenant
    role with more than LOGIN, or a membership it could SET ROLE through."""
    if conn.execute("SELECT to_regrole(%s) IS NULL", (GROUP,)).fetchone()[0]:  # type: ignore[index]
        return []
    problems: list[str] = []
    for name, kind, rls, options in conn.execute(
        """SELECT c.relname, c.relkind, c.relrowsecurity, coalesce(c.reloptions, '{}')
           FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
           WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm')
             AND has_any_column_privilege(%s, c.oid, 'SELECT')
           ORDER BY c.relname""",
        (schema.SCHEMA, GROUP),
    ):
        if kind in ("r", "p") and not rls and name not in {t.name for t in SHARED}:
            problems.append(f"tenants can read seams.{name}, which has no row-level security")
        if kind == "m":
            problems.append(f"tenants can read materialized view seams.{name} (no RLS there)")
        invoker = {o.split("=", 1)[0]: o.split("=", 1)[-1] for o in options}.get(
            "security_invoker", "false"
        )
        if kind == "v" and invoker.lower() not in ("true", "on", "1", "yes"):
            problems.append(
                f"tenants can read view seams.{name}, which runs with its owner's rights: "
                f"ALTER VIEW seams.{name} SET (security_invoker = true)"
            )
    for table, columns in WITHHELD.items():
        for column in columns:
            readable = conn.execute(
                "SELECT has_column_privilege(%s, %s, %s, 'SELECT')",
                (GROUP, f"{schema.SCHEMA}.{table}", column),
            ).fetchone()
            if readable and readable[0]:
                problems.append(
                    f"tenants can read seams.{table}.{column} (their own nearest-neighbour "
                    "queries would count other collections' rows): run `seams db upgrade`"
                )
    ours = tenant_search.bodies(tenant_search.vector_schema(conn) or "")
    pinned = [f"search_path={tenant_search.SEARCH_PATH}"]
    for name, body, config in conn.execute(
        """SELECT p.proname, p.prosrc, p.proconfig
           FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
           WHERE n.nspname = %s AND p.prosecdef
             AND has_function_privilege(%s, p.oid, 'EXECUTE')
           ORDER BY p.proname""",
        (schema.SCHEMA, GROUP),
    ):
        if ours.get(name) != body or config != pinned:  # only tenant search's own, unchanged
            problems.append(f"tenants can execute SECURITY DEFINER function seams.{name}")
    for name, extra in conn.execute(
        """SELECT r.rolname,
                  concat_ws(', ', CASE WHEN r.rolsuper THEN 'SUPERUSER' END,
                            CASE WHEN r.rolbypassrls THEN 'BYPASSRLS' END,
                            CASE WHEN r.rolcreaterole THEN 'CREATEROLE' END,
                            CASE WHEN r.rolcreatedb THEN 'CREATEDB' END,
                            CASE WHEN r.rolinherit THEN 'INHERIT' END)
           FROM pg_roles AS r
           WHERE r.rolname LIKE %s ORDER BY r.rolname""",
        (ROLE_PREFIX.replace("_", r"\_") + "%",),
    ):
        if extra:
            problems.append(f"tenant role {name} has {extra}: recreate it")
    for member, role in conn.execute(
        """SELECT m.rolname, g.rolname FROM pg_auth_members AS a
           JOIN pg_roles AS m ON m.oid = a.member JOIN pg_roles AS g ON g.oid = a.roleid
           WHERE m.rolname LIKE %s AND (a.set_option OR g.rolname <> %s)
           ORDER BY 1, 2""",
        (ROLE_PREFIX.replace("_", r"\_") + "%", GROUP),
    ):
        problems.append(f"tenant role {member} may SET ROLE {role} or use its rights: revoke it")
    return problems


def tables_without_a_decision(tables: Iterable[schema.Table] = schema.TABLES) -> list[str]:
    """Declared tables that are neither protected, private nor shared: a new table must say
    what tenants see of it before they see anything."""
    decided = {t.name for t in (*PROTECTED, *PRIVATE, *LOCKS, *SHARED, COLLECTION_TENANTS)}
    return sorted(t.name for t in tables if t.name not in decided)
