"""Tenants: PostgreSQL login roles that read only the rows of their collections, enforced by
row-level security in the database itself, not by Seams' queries.

A tenant reads its collections' rows of every table holding document text, vectors, file names
or index entries (`PROTECTED`, one policy each), through `security_invoker` views only, and
nothing else (`PRIVATE` tables deny it every row); it writes nothing and cannot `SET ROLE`.
It reads no chunk vector (`WITHHELD`): its dense search calls `tenant_search`'s functions.
The pipeline writes as the tables' owner, whom the policies do not filter. Passwords are never
stored or logged: the server gets a SCRAM verifier computed here, and `rotate_tenant` returns
the one copy. Content columns keep no planner statistics once tenants exist
(`statistics_ddl`). Why each rule, and what a tenant still sees by design of PostgreSQL:
docs/architecture.md, "Tenants"; what a tenant may spend and call: `tenant_roles`; what would
let one read past its collections: `tenant_isolation`.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg.conninfo
from psycopg import sql
from psycopg.pq import TransactionStatus

from seams.errors import StorageError
from seams.storage import lock_waits, schema, tenant_roles, tenant_search, writer_locks
from seams.storage.connections import describe_connection, retrying
from seams.storage.tenant_tables import (
    COLLECTION,
    COLLECTION_TENANTS,
    COLLECTIONS_FUNCTION,
    GROUP,
    LOCKS,
    POLICY,
    PRIVATE,
    PROTECTED,
    ROLE_PREFIX,
    SHARED,
    TENANT_POLICY,
    VIEWS,
    WITHHELD,
    granted_columns,
    missing,
    statistics_ddl,
)

MIN_SERVER_VERSION = 160000
"""PostgreSQL 16: `GRANT ... WITH INHERIT TRUE, SET FALSE` (a member that cannot SET ROLE)."""
_TENANT = re.compile(r"[a-z][a-z0-9_]{0,39}")


def tenant_role(tenant: str) -> str:
    """The login role of `tenant` (`seams_tenant_<tenant>`), or a `StorageError` for a name
    that is not 1-40 characters of a-z, 0-9 and _ starting with a letter."""
    if not isinstance(tenant, str) or not _TENANT.fullmatch(tenant) or "__" in tenant:
        raise StorageError(
            f"tenant {tenant!r}: a tenant is 1-40 characters of a-z, 0-9 and _, starting with "
            "a letter, without '__'"
        )
    return ROLE_PREFIX + tenant


# --- DDL (the owner's rights suffice: no role is created here) -------------------------------


def is_tenant_sql() -> sql.Composable:
    """True when the current role has the privileges of `seams_tenants` (evaluated once per
    query: an InitPlan). A missing group makes nobody a tenant, never an error."""
    return sql.SQL(
        "(SELECT coalesce(pg_has_role(current_user, to_regrole({group})::oid, 'USAGE'), false))"
    ).format(group=sql.Literal(GROUP))


def tenant_collections_sql() -> sql.Composable:
    """`collection = ANY(seams.tenant_collections())`: the current tenant's collections, folded
    into a constant array when the query is planned (the function is declared IMMUTABLE for
    that), so the condition is an index condition of any index over `collection` (every index
    of a protected table covers it: `schema.Table.indexed`) and, in a sequential scan, a filter
    with no subquery whose running `EXPLAIN ANALYZE` could tell apart. Plans cached with it are
    replanned whenever `seams.collection_tenants` changes (`_functions_ddl`)."""
    return sql.SQL("{} = ANY ({}())").format(
        sql.Identifier(COLLECTION), sql.Identifier(schema.SCHEMA, COLLECTIONS_FUNCTION)
    )


def _functions_ddl() -> list[sql.Composable]:
    """`seams.tenant_collections()`, and a trigger that touches its catalog row after every
    change of `seams.collection_tenants`: PostgreSQL then replans every cached plan that
    folded it in, in every session, at its next transaction."""
    function = sql.Identifier(schema.SCHEMA, COLLECTIONS_FUNCTION)
    touch = sql.Identifier(schema.SCHEMA, "tenant_collections_changed")
    table = COLLECTION_TENANTS.identifier()
    return [
        sql.SQL(
            """CREATE OR REPLACE FUNCTION {function}() RETURNS text[]
            LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
            AS $$ SELECT coalesce(array_agg(t.collection ORDER BY t.collection), '{{}}')
                  FROM {table} AS t WHERE t.role_name = current_user $$"""
        ).format(function=function, table=table),
        sql.SQL(
            """CREATE OR REPLACE FUNCTION {touch}() RETURNS trigger
            LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
            AS $$ BEGIN ALTER FUNCTION {function}() IMMUTABLE; RETURN NULL; END $$"""
        ).format(touch=touch, function=function),
        sql.SQL("REVOKE ALL ON FUNCTION {}() FROM PUBLIC").format(touch),
        sql.SQL("DROP TRIGGER IF EXISTS tenant_collections_changed ON {}").format(table),
        sql.SQL(
            "CREATE TRIGGER tenant_collections_changed AFTER INSERT OR UPDATE OR DELETE OR"
            " TRUNCATE ON {} FOR EACH STATEMENT EXECUTE FUNCTION {}()"
        ).format(table, touch),
    ]


def _policy(table: sql.Composable, tenants_see: sql.Composable) -> list[sql.Composable]:
    """Every role sees every row (a permissive policy for all), except that a tenant sees only
    the rows `tenants_see` passes (a restrictive policy for the group). Two policies rather
    than one `NOT tenant OR ...`: an OR is no index condition, and a filter applied after an
    index scan is what `EXPLAIN ANALYZE` counts (`Rows Removed by Filter`)."""
    return [
        sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(table),
        sql.SQL("DROP POLICY IF EXISTS {} ON {}").format(sql.Identifier(POLICY), table),
        sql.SQL("CREATE POLICY {} ON {} AS PERMISSIVE FOR ALL TO PUBLIC USING (true)").format(
            sql.Identifier(POLICY), table
        ),
        # The group exists once tenants were set up (`ensure_group` runs this again then).
        sql.SQL(
            """DO $$ BEGIN
            DROP POLICY IF EXISTS {policy} ON {table};
            IF to_regrole({name}) IS NOT NULL THEN
                CREATE POLICY {policy} ON {table} AS RESTRICTIVE FOR ALL TO {group}
                    USING ({using});
            END IF;
            END $$"""
        ).format(
            policy=sql.Identifier(TENANT_POLICY),
            table=table,
            name=sql.Literal(GROUP),
            group=sql.Identifier(GROUP),
            using=tenants_see,
        ),
    ]


def ddl() -> list[sql.Composable]:
    """Idempotent statements, the last of `migrations.ddl()`'s (which declares `collection` on every
    protected table and the views `security_invoker`): the views made `security_invoker` again
    (whatever replaced one before), and row-level security on every table. The owner (the
    pipeline) is not subject to it, and no other role is filtered while it is not a tenant: a
    project without tenants reads as before."""
    statements: list[sql.Composable] = [*_functions_ddl(), *tenant_search.ddl()]
    for view in VIEWS:
        statements.append(
            sql.SQL("ALTER VIEW {} SET (security_invoker = true)").format(
                sql.Identifier(schema.SCHEMA, view)
            )
        )
    for table in PROTECTED:
        statements.extend(_policy(table.identifier(), tenant_collections_sql()))
    own_rows = sql.SQL("{} = current_user").format(sql.Identifier("role_name"))
    statements.extend(_policy(COLLECTION_TENANTS.identifier(), own_rows))
    for table in PRIVATE:
        statements.extend(_policy(table.identifier(), sql.SQL("false")))
    return statements


def _create_group() -> sql.Composable:
    return sql.SQL(
        """DO $$ BEGIN
        IF to_regrole({name}) IS NULL THEN
            CREATE ROLE {group} NOLOGIN NOINHERIT;
        END IF;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
        END $$"""
    ).format(name=sql.Literal(GROUP), group=sql.Identifier(GROUP))


def apply_ddl(conn: psycopg.Connection[Any]) -> None:
    """Run `ddl()` in the caller's transaction (or one of its own on an autocommit connection)."""
    with conn.transaction():
        for statement in ddl():
            conn.execute(statement)


# --- roles (need CREATEROLE, or a superuser) ---------------------------------------------------


def _check_server(conn: psycopg.Connection[Any]) -> None:
    version = conn.info.server_version
    if version < MIN_SERVER_VERSION:
        raise StorageError(
            f"tenants need PostgreSQL 16 or newer (a role that cannot SET ROLE); this server "
            f"is {version // 10000}: upgrade it, or leave `tenant` out of seams.yaml"
        )


def _grants() -> list[sql.Composable]:
    group = sql.Identifier(GROUP)
    tables = (*PROTECTED, COLLECTION_TENANTS, *SHARED)
    readable = [t.identifier() for t in tables if granted_columns(t) is None]
    readable += [sql.Identifier(schema.SCHEMA, view) for view in VIEWS]
    private = [t.identifier() for t in (*PRIVATE, *LOCKS)]
    statements = [
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(schema.SCHEMA), group),
        sql.SQL("GRANT SELECT ON {} TO {}").format(sql.SQL(", ").join(readable), group),
    ]
    for table in tables:  # read but for the withheld columns: a grant of each other one
        columns = granted_columns(table)
        if columns is None:
            continue
        names = sql.SQL(", ").join(map(sql.Identifier, columns))
        withheld = sql.SQL(", ").join(map(sql.Identifier, WITHHELD[table.name]))
        statements += [
            sql.SQL("REVOKE SELECT ON {} FROM {}").format(table.identifier(), group),
            sql.SQL("REVOKE SELECT ({}) ON {} FROM {}").format(withheld, table.identifier(), group),
            sql.SQL("GRANT SELECT ({}) ON {} TO {}").format(names, table.identifier(), group),
        ]
    statements += tenant_search.grants(GROUP)
    if private:
        statements.append(
            sql.SQL("REVOKE ALL ON {} FROM {}").format(sql.SQL(", ").join(private), group)
        )
    return statements


LOCK = "seams:tenants"
"""The writer lock of every change to tenant roles, grants and assignments: two processes
syncing at once (two writers' first runs) take turns instead of failing on each other's rows."""


def _lock(conn: psycopg.Connection[Any]) -> None:
    writer_locks.lock(conn, LOCK)


def ensure_group(conn: psycopg.Connection[Any]) -> None:
    """The group `seams_tenants`, its grants in this database, the tenants' policies, and no
    planner statistics on content columns (`statistics_ddl`); idempotent. What is in place
    already (`missing`, read from the catalogs) is not applied again: a sync that changes
    nothing takes no lock a tenant's reads could conflict with. What is applied runs under
    `lock_waits.clearing_tenants` (a tenant's open transaction is ended, never waited for).
    Outside a transaction, rerun whole when PostgreSQL aborts it: the statistics statements lock
    each table and its catalog rows, which autovacuum's ANALYZE of the same table can deadlock
    with."""
    _check_server(conn)
    if not missing(conn):
        tenant_roles.restrict_functions(conn, GROUP)
        return
    where = describe_connection(conn)
    doing = "setting up tenant grants"
    with lock_waits.clearing_tenants(conn, where, doing):
        if conn.info.transaction_status == TransactionStatus.IDLE:
            retrying(where, doing, lambda: _group(conn))
        else:
            _group(conn)


def _group(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        _lock(conn)
        conn.execute(_create_group())
        connect = conn.execute(
            "SELECT has_database_privilege(%s, current_database(), 'CONNECT')", (GROUP,)
        ).fetchone()
        if connect is not None and not connect[0]:
            database = conn.execute("SELECT current_database()").fetchone()
            assert database is not None
            conn.execute(
                sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                    sql.Identifier(database[0]), sql.Identifier(GROUP)
                )
            )
        need = missing(conn)  # again, under the lock: another writer may have done it
        statements = [*ddl()] if "policies" in need else []
        if "grants" in need:
            statements += _grants()
        if "statistics" in need:
            statements += statistics_ddl(conn.info.server_version)
        for statement in statements:
            conn.execute(statement)
        tenant_roles.restrict_functions(conn, GROUP)


def ensure_tenant(conn: psycopg.Connection[Any], tenant: str) -> bool:
    """The login role of `tenant`, a member of `seams_tenants` that cannot SET ROLE, with no
    attribute beyond LOGIN and the limits of `tenant_roles.LIMITS`; True when it was created now
    (it has no password until `rotate_tenant`). Its attributes are reasserted when it exists."""
    role = sql.Identifier(tenant_role(tenant))
    ensure_group(conn)
    attributes = sql.SQL(
        "LOGIN NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
    )
    with conn.transaction():
        _lock(conn)
        exists = conn.execute(
            "SELECT to_regrole(%s) IS NOT NULL", (tenant_role(tenant),)
        ).fetchone()
        created = not (exists and exists[0])
        try:
            if created:
                try:
                    with conn.transaction():  # another database's Seams may create it too
                        conn.execute(sql.SQL("CREATE ROLE {} {}").format(role, attributes))
                except psycopg.errors.DuplicateObject:
                    created = False
            if not created:
                conn.execute(sql.SQL("ALTER ROLE {} {}").format(role, attributes))
            conn.execute(
                sql.SQL("GRANT {} TO {} WITH INHERIT TRUE, SET FALSE, ADMIN FALSE").format(
                    sql.Identifier(GROUP), role
                )
            )
            tenant_roles.apply_limits(conn, tenant_role(tenant))
        except psycopg.errors.InsufficientPrivilege:
            raise StorageError(
                f"cannot {'create' if created else 'update'} tenant role {tenant_role(tenant)} "
                f"as {conn.info.user}: the role Seams connects as needs CREATEROLE and the ADMIN "
                f"option on {GROUP} and on existing tenant roles (as a superuser: `GRANT {GROUP} "
                f"TO {conn.info.user} WITH ADMIN TRUE, INHERIT FALSE, SET FALSE`)"
            ) from None
    return created


def rotate_tenant(conn: psycopg.Connection[Any], tenant: str) -> str:
    """A new random password for `tenant`'s role, returned (its only copy: the server gets a
    SCRAM-SHA-256 verifier computed here). Earlier passwords stop working at once."""
    name = tenant_role(tenant)
    exists = conn.execute("SELECT to_regrole(%s) IS NOT NULL", (name,)).fetchone()
    if not (exists and exists[0]):
        raise StorageError(
            f"tenant {tenant!r} has no role {name} in this server: give a collection "
            f"`tenant: {tenant}` in seams.yaml and run `seams db upgrade`"
        )
    password = secrets.token_urlsafe(24)
    verifier = conn.pgconn.encrypt_password(
        password.encode(), name.encode(), b"scram-sha-256"
    ).decode()
    conn.execute(
        sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(name), sql.Literal(verifier))
    )
    return password


def drop_tenant(conn: psycopg.Connection[Any], tenant: str) -> str | None:
    """Remove `tenant`: its collections unassigned, its role out of the group and without login
    (committed first: its URL stops connecting whatever follows), its sessions ended, what it
    owns here dropped (large objects included), then the role. None when the role is gone, else
    the one line saying why it stays (`tenant_roles.remove_role`)."""
    name = tenant_role(tenant)
    with conn.transaction():
        _lock(conn)
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE tenant = %s").format(COLLECTION_TENANTS.identifier()),
            (tenant,),
        )
        exists = conn.execute("SELECT to_regrole(%s) IS NOT NULL", (name,)).fetchone()
        if not (exists and exists[0]):
            return None
        tenant_roles.disable(conn, name, GROUP)
    return tenant_roles.remove_role(conn, name)


def sync_tenants(conn: psycopg.Connection[Any], assignments: Mapping[str, str | None]) -> list[str]:
    """Make `seams.collection_tenants` say `assignments` (collection -> tenant, None: no
    tenant; every collection the settings declare), creating missing tenant roles. A
    collection the settings no longer declare keeps its tenant while documents of it are still
    current: a renamed or moved collection's old rows stay readable by its tenant, as by the
    owner, until the batch under its new name is published (the next sync after that drops
    it). The tenants whose roles were created now, sorted."""
    created = [
        tenant
        for tenant in sorted({t for t in assignments.values() if t is not None})
        if ensure_tenant(conn, tenant)
    ]
    rows = [(c, t, tenant_role(t)) for c, t in sorted(assignments.items()) if t is not None]
    table = COLLECTION_TENANTS.identifier()
    with conn.transaction():
        _lock(conn)
        conn.execute(
            sql.SQL(
                "DELETE FROM {table} AS t WHERE t.collection = ANY(%s) OR NOT EXISTS"
                " (SELECT 1 FROM {current} AS d WHERE d.collection = t.collection)"
            ).format(table=table, current=schema.CURRENT_DOCUMENTS.identifier()),
            (list(assignments),),
        )
        with conn.cursor() as cursor:
            cursor.executemany(
                sql.SQL(
                    "INSERT INTO {} (collection, tenant, role_name) VALUES (%s, %s, %s)"
                ).format(table),
                rows,
            )
    return created


@dataclass(frozen=True)
class TenantChanges:
    """What `sync_project` found and did: who reads what now, whose roles it made or removed."""

    reads: Mapping[str, tuple[str, ...]]
    """Tenant -> its collections, sorted, as the database now says."""
    created: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    left: tuple[str, ...] = ()
    """Why each removed tenant's role that could not be dropped stays (`tenant_roles`)."""

    @property
    def changed(self) -> bool:
        """Whether a role was created or removed, or one is left over (what a run reports;
        `describe` says all)."""
        return bool(self.created or self.removed or self.left)

    def describe(self) -> str:
        """`tenants: acme reads contracts, handbook; beta reads tickets (created
        seams_tenant_beta; removed seams_tenant_old: no collection names it any more)`, or ""
        for a project that has no tenants and had none."""
        if not self.reads and not self.removed and not self.left:
            return ""
        reads = "; ".join(
            f"{tenant} reads {', '.join(collections)}"
            for tenant, collections in sorted(self.reads.items())
        )
        done = []
        if self.created:
            done.append(f"created {', '.join(tenant_role(t) for t in self.created)}")
        if self.removed:
            roles = ", ".join(tenant_role(t) for t in self.removed)
            done.append(f"removed {roles}: no collection names it any more")
        line = "tenants: " + (reads or "none") + (f" ({'; '.join(done)})" if done else "")
        return "; ".join([line, *self.left])


def sync_project(conn: psycopg.Connection[Any], wanted: Mapping[str, str | None]) -> TenantChanges:
    """Make this database's tenants what the project's settings say (`wanted`: collection ->
    tenant or None, every collection the settings declare): `sync_tenants`, then the roles of
    the tenants this database assigned before and no collection names any more are dropped, so
    a tenant taken out of seams.yaml can no longer log in.

    Roles are per server: a dropped tenant also stops reading another Seams database on the
    same server that still names it, until a sync there creates its role again (without the
    password it had). A role that cannot be dropped loses its login and is tried again, and
    named, by every later sync until it is gone. Costs two reads when the project has no
    tenants and had none."""
    before = assignments(conn)
    if not before and not any(wanted.values()):
        return TenantChanges(reads={}, left=tuple(_drop_leftovers(conn)))
    created = sync_tenants(conn, wanted)
    named = {t for t in wanted.values() if t is not None}
    removed = sorted(set(before.values()) - named)
    for tenant in removed:
        drop_tenant(conn, tenant)
    reads: dict[str, list[str]] = {}
    for collection, tenant in sorted(wanted.items()):
        if tenant is not None:
            reads.setdefault(tenant, []).append(collection)
    return TenantChanges(
        reads={t: tuple(c) for t, c in reads.items()},
        created=tuple(created),
        removed=tuple(removed),
        left=tuple(_drop_leftovers(conn)),
    )


def _drop_leftovers(conn: psycopg.Connection[Any]) -> list[str]:
    """Drop every removed tenant's role still on the server; why each that stays does."""
    lines = []
    for role in tenant_roles.leftovers(conn, ROLE_PREFIX, GROUP):
        line = tenant_roles.remove_role(conn, role)
        if line is not None:
            lines.append(line)
    return lines


# --- the tenant's URL --------------------------------------------------------------------------


def tenant_url(base_url: str, tenant: str, password: str | None = None) -> str:
    """`base_url` (the data database's, URL or `key=value` form) with `tenant`'s role as the
    user and `password` (None: none, as the embedded server's trust authentication needs none).
    Whatever user or password `base_url` carried is dropped."""
    role = tenant_role(tenant)
    if re.match(r"^postgres(ql)?(\+\w+)?://", base_url):
        parts = urlsplit(base_url)
        host = parts.netloc.rpartition("@")[2]
        user = quote(role, safe="")
        if password is not None:
            user += ":" + quote(password, safe="")
        query = [
            (k, v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if k not in ("user", "password")
        ]
        return urlunsplit(parts._replace(netloc=f"{user}@{host}", query=urlencode(query)))
    try:
        params = psycopg.conninfo.conninfo_to_dict(base_url)
    except psycopg.ProgrammingError:
        raise StorageError(
            "the database URL is not a PostgreSQL URL or key=value connection string"
        ) from None
    params.pop("password", None)
    params["user"] = role
    if password is not None:
        params["password"] = password
    return psycopg.conninfo.make_conninfo(**params)


# --- audit ---------------------------------------------------------------------------------------


def set_up_here(conn: psycopg.Connection[Any]) -> bool:
    """Whether tenants were set up in this database: the group exists (roles are per server)
    and may use its `seams` schema (`ensure_group` grants that per database)."""
    row = conn.execute(
        "SELECT CASE WHEN to_regrole(%s) IS NULL OR to_regnamespace(%s) IS NULL THEN false"
        " ELSE has_schema_privilege(%s, %s, 'USAGE') END",
        (GROUP, schema.SCHEMA, GROUP, schema.SCHEMA),
    ).fetchone()
    return bool(row and row[0])


def assignments(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """Collection -> tenant, as `seams.collection_tenants` says (what the policies read)."""
    rows = conn.execute(
        sql.SQL("SELECT collection, tenant FROM {} ORDER BY collection").format(
            COLLECTION_TENANTS.identifier()
        )
    ).fetchall()
    return {str(c): str(t) for c, t in rows}
