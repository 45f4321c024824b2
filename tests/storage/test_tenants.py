"""Tenants kept apart by PostgreSQL itself: real login roles, row-level security, crafted SQL.

One database for the module: the Seams schema, the tenancy DDL on top, rows of four collections
written as the owner (the pipeline's role) in every table, and two tenant roles: `a` reads
`alpha` and `alpha2`, `b` reads `beta`; nobody reads `gamma`. Each tenant then connects with
its own URL (`tenant_url`, the embedded server's trust authentication: no password).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
import psycopg.errors
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from seams.errors import StorageError
from seams.orchestration.cli import check
from seams.resources.postgres import PostgresResource, close_pool
from seams.storage import schema, tenant_isolation, tenant_roles, tenants
from seams.storage.search import dense
from tests.support.concurrency import run_together
from tests.support.databases import fresh_database, migrated_postgres
from tests.support.privileges import tenant_names

COLLECTIONS = ("alpha", "alpha2", "beta", "gamma")
SERVING_MODEL = "model-shared"


@dataclass(frozen=True)
class Tenancy:
    owner_url: str
    a: str
    b: str
    urls: dict[str, str]
    reads: dict[str, tuple[str, ...]]


def _value(table: schema.Table, column: schema.Column, collection: str, seq: int) -> Any:
    special = {
        "batch_key": f"batch-{collection}",
        "document_id": f"doc-{collection}",
        "chunk_id": f"chunk-{collection}",
        "collection": collection,
        "generation": 1,
        "state": "published",
        "kind": "batch",
        # The BM25 statistics are one row per configuration: one per collection here.
        "text_search_config": f"{collection}-cfg"
        if table in (schema.LEXICAL_TERMS, schema.LEXICAL_TOTALS)
        else "english",
        "model_id": SERVING_MODEL if table is schema.CHUNK_INDEX else f"model-{collection}",
        "mode": "pooled",
        "seq": seq,
        "published_seq": seq,
        "one": True,
    }
    if column.name in special:
        return special[column.name]
    kind = column.base_type
    if kind == "text":
        return f"{collection}-secret-{column.name}"
    if kind in ("integer", "bigint"):
        return seq
    if kind in ("double precision", "real"):
        return 0.5
    if kind == "boolean":
        return True
    if kind == "jsonb":
        return Jsonb({"secret": collection})
    if kind == "bytea":
        return f"{collection}-secret".encode()
    if kind == "timestamptz":
        return "2026-01-01T00:00:00Z"
    if kind == "vector":
        return "[1,0,0]" if collection.startswith("alpha") else "[0.9,0.1,0]"
    if kind == "tsvector":
        return f"{collection}secret:1"
    if kind == "text[]":
        return [f"{collection}-secret"]
    raise AssertionError(f"no sample for {table.name}.{column.name} ({column.pg_type})")


def _insert(conn: psycopg.Connection[Any], table: schema.Table, collection: str, seq: int) -> None:
    columns = list(table.columns)
    names = [c.name for c in columns]
    values = [_value(table, c, collection, seq) for c in columns]
    casts = [sql.SQL("%s::{}").format(sql.SQL(c.pg_type)) for c in columns]
    if table in tenants.PROTECTED and "collection" not in names:
        names.append("collection")
        values.append(collection)
        casts.append(sql.SQL("%s"))
    conn.execute(
        sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            table.identifier(),
            sql.SQL(", ").join(map(sql.Identifier, names)),
            sql.SQL(", ").join(casts),
        ),
        values,
    )


@pytest.fixture(scope="module")
def tenancy(pg_server_url: str) -> Iterator[Tenancy]:
    a, b = tenant_names()
    reads = {a: ("alpha", "alpha2"), b: ("beta",)}
    with fresh_database(pg_server_url) as url:
        for _ in migrated_postgres(url):
            with psycopg.connect(url, autocommit=True) as conn:
                tenants.apply_ddl(conn)
                tenants.sync_tenants(
                    conn, {"alpha": a, "alpha2": a, "beta": b, "gamma": None, "default": None}
                )
                ordered = (schema.BATCHES, *(t for t in schema.TABLES if t is not schema.BATCHES))
                with conn.transaction():
                    for seq, collection in enumerate(COLLECTIONS, start=1):
                        for table in ordered:
                            if table not in (schema.SCHEMA_VERSION, schema.COLLECTION_TENANTS):
                                _insert(conn, table, collection, seq)
                    for table in schema.TABLES:
                        conn.execute(sql.SQL("ANALYZE {}").format(table.identifier()))
                    conn.execute("CREATE TABLE public.runs (run_id text, body text)")
                    conn.execute("INSERT INTO public.runs VALUES ('r1', 'dagster secret')")
            try:
                yield Tenancy(
                    owner_url=url,
                    a=a,
                    b=b,
                    urls={t: tenants.tenant_url(url, t) for t in (a, b)},
                    reads=reads,
                )
            finally:
                for tenant in (a, b):
                    close_pool(tenants.tenant_url(url, tenant))
                with psycopg.connect(url, autocommit=True) as conn:
                    for tenant in (a, b):
                        tenants.drop_tenant(conn, tenant)
                    conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(tenants.GROUP)))


def _relations() -> list[str]:
    tables = [t.name for t in (*tenants.PROTECTED, tenants.COLLECTION_TENANTS)]
    return [*tables, *tenants.VIEWS]


def _row(relation: str) -> sql.Composable:
    """`t::text`, or the tuple of the columns tenants read of a table some are withheld of."""
    withheld = tenants.WITHHELD.get(relation)
    if not withheld:
        return sql.SQL("t::text")
    table = next(t for t in tenants.PROTECTED if t.name == relation)
    columns = [sql.SQL("t.{}").format(sql.Identifier(c)) for c in table.column_names]
    kept = [c for c, name in zip(columns, table.column_names, strict=True) if name not in withheld]
    return sql.SQL("({})::text").format(sql.SQL(", ").join(kept))


def _owner_filter(relation: str, tenancy: Tenancy, tenant: str) -> tuple[str, tuple]:
    if relation == tenants.COLLECTION_TENANTS.name:
        return "role_name = %s", (tenants.tenant_role(tenant),)
    if relation in (schema.CURRENT_VERSIONS_VIEW, schema.CHUNK_PARENTS_VIEW):
        return "batch_key = ANY(%s)", ([f"batch-{c}" for c in tenancy.reads[tenant]],)
    return "collection = ANY(%s)", (list(tenancy.reads[tenant]),)


@pytest.mark.parametrize("which", ["a", "b"])
def test_every_table_and_view_returns_only_the_tenants_rows(tenancy: Tenancy, which: str) -> None:
    tenant = getattr(tenancy, which)
    others = [c for c in COLLECTIONS if c not in tenancy.reads[tenant]]
    with (
        psycopg.connect(tenancy.urls[tenant]) as mine,
        psycopg.connect(tenancy.owner_url) as owner,
    ):
        assert mine.execute("SELECT current_user").fetchone() == (tenants.tenant_role(tenant),)
        for relation in _relations():
            ident = sql.Identifier(schema.SCHEMA, relation)
            row = _row(relation)
            seen = {
                r[0] for r in mine.execute(sql.SQL("SELECT {} FROM {} AS t").format(row, ident))
            }
            where, params = _owner_filter(relation, tenancy, tenant)
            expected = {
                r[0]
                for r in owner.execute(
                    sql.SQL("SELECT {} FROM {} AS t WHERE " + where).format(row, ident), params
                )
            }
            everything = owner.execute(sql.SQL("SELECT count(*) FROM {}").format(ident)).fetchone()
            assert seen == expected, relation
            assert seen, f"{relation}: the tenant should see its own rows"
            assert everything[0] > len(seen), f"{relation}: other rows exist"
            leaked = [row for row in seen for other in others if f"{other}-" in row]
            assert not leaked, (relation, leaked)
        # The table that holds no document data is readable whole.
        assert mine.execute("SELECT count(*) FROM seams.schema_version").fetchone() == (1,)


def test_shared_cache_statistics_and_dagster_tables_are_closed(tenancy: Tenancy) -> None:
    closed = [t.identifier() for t in (*tenants.PRIVATE, *tenants.LOCKS)]
    closed.append(sql.Identifier("public", "runs"))
    with psycopg.connect(tenancy.urls[tenancy.a], autocommit=True) as conn:
        for relation in closed:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql.SQL("SELECT * FROM {} LIMIT 1").format(relation))
        # Nor through a view or a join with a readable table.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "SELECT c.text FROM seams.chunks c JOIN seams.embedding_cache e"
                " ON e.model_id = c.model_id"
            )


def test_crafted_sql_reaches_nothing_else(tenancy: Tenancy) -> None:
    a, b = tenancy.a, tenancy.b
    with psycopg.connect(tenancy.urls[a], autocommit=True) as conn:
        # Joins and predicates naming the other tenant's keys find nothing.
        rows = conn.execute(
            "SELECT c.text, i.chunk_id FROM seams.chunks c FULL JOIN seams.chunk_index i"
            " USING (batch_key, chunk_id) WHERE c.batch_key = 'batch-beta'"
            " OR i.batch_key = 'batch-beta' OR c.collection = 'gamma'"
        ).fetchall()
        assert rows == []
        # Role changes: to the owner, the group, the other tenant; RESET ROLE is a no-op.
        for target in ("postgres", tenants.GROUP, tenants.tenant_role(b)):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(target)))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SET SESSION AUTHORIZATION postgres")
        conn.execute("RESET ROLE")
        assert conn.execute("SELECT current_user").fetchone() == (tenants.tenant_role(a),)
        # Turning row security off makes a query fail, not see more.
        conn.execute("SET row_security = off")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT count(*) FROM seams.chunks")
        conn.execute("RESET row_security")
        # A leaky function of the tenant's own (in its temporary schema) sees only its rows:
        # the policy's condition runs before any the query adds.
        conn.execute(
            "CREATE FUNCTION pg_temp.peek(t text) RETURNS boolean LANGUAGE plpgsql COST 0.0001"
            " AS $$ BEGIN RAISE NOTICE 'peek %', t; RETURN true; END $$"
        )
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("SELECT count(*) FROM seams.chunks WHERE pg_temp.peek(text)")
        conn.execute("SELECT count(*) FROM seams.current_chunks WHERE pg_temp.peek(text)")
        assert notices and all("alpha" in n for n in notices), notices
        # The schema's functions run with the tenant's rights: the BM25 sync cannot write.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT seams.lexical_sync(ARRAY['doc-beta'], ARRAY['batch-beta'])")
        # Statistics: no column of a table under row security, so no value of another tenant.
        stats = conn.execute(
            "SELECT tablename, attname, coalesce(most_common_vals::text, '')"
            " || coalesce(histogram_bounds::text, '') FROM pg_stats WHERE schemaname = 'seams'"
        ).fetchall()
        assert not [s for s in stats if "beta" in s[2] or "gamma" in s[2]], stats
        assert not {s[0] for s in stats} & {t.name for t in (*tenants.PROTECTED, *tenants.PRIVATE)}


def _estimate(conn: psycopg.Connection[Any], query: str, value: str) -> int:
    plan = conn.execute("EXPLAIN " + query, (value,)).fetchone()[0]
    return int(re.search(r"rows=(\d+)", plan).group(1))


def test_plan_estimates_tell_nothing_of_other_tenants_texts(tenancy: Tenancy) -> None:
    """The planner estimates `text = '...'` (a leakproof operator) from statistics over every
    row: without `statistics_ddl` a frequent text or lexeme of another tenant shows in EXPLAIN."""
    probes = {
        "SELECT * FROM seams.chunks WHERE text = %s": "beta-secret-text",
        "SELECT * FROM seams.lexical_postings WHERE lexeme = %s": "betasecret",
    }
    with psycopg.connect(tenancy.owner_url, autocommit=True) as owner:
        try:
            with owner.transaction():
                for seq in range(100, 160):
                    _insert(owner, schema.CHUNKS, "beta", seq)
                owner.execute(
                    "INSERT INTO seams.lexical_postings (text_search_config, lexeme, impact,"
                    " batch_key, document_id, chunk_id, collection) SELECT 'english',"
                    " 'betasecret', 1, 'batch-beta', 'doc-beta', 'c' || i, 'beta'"
                    " FROM generate_series(1, 300) AS i"
                )
            owner.execute("ANALYZE seams.chunks")
            owner.execute("ANALYZE seams.lexical_postings")
            with psycopg.connect(tenancy.urls[tenancy.a]) as mine:
                for query, secret in probes.items():
                    assert _estimate(mine, query, secret) == _estimate(mine, query, "zz-nothing")
        finally:
            owner.execute("DELETE FROM seams.chunks WHERE chunk_index >= 100")
            owner.execute("DELETE FROM seams.lexical_postings WHERE lexeme = 'betasecret'")


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO seams.chunks (batch_key) VALUES ('batch-alpha')",
        "UPDATE seams.chunks SET text = 'x'",
        "DELETE FROM seams.current_documents",
        "TRUNCATE seams.chunk_index",
        "INSERT INTO seams.collection_tenants VALUES ('beta', 'x', current_user)",
        "CREATE TABLE seams.mine (x int)",
        "CREATE TABLE public.mine (x int)",
        "CREATE SCHEMA mine",
        "CREATE ROLE mine",
        "SELECT nextval('seams.publication_seq')",
        "ALTER TABLE seams.chunks DISABLE ROW LEVEL SECURITY",
        "DROP POLICY seams_tenant_rows ON seams.chunks",
        "ALTER VIEW seams.current_chunks SET (security_invoker = false)",
        "GRANT seams_tenants TO CURRENT_USER WITH SET TRUE",
    ],
)
def test_the_tenant_cannot_write_or_create(tenancy: Tenancy, statement: str) -> None:
    with (
        psycopg.connect(tenancy.urls[tenancy.a], autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute(statement)


def test_the_retrievers_nearest_vectors_through_a_tenant_url(tenancy: Tenancy) -> None:
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)

    def nearest(url: str) -> set[str]:
        # One transaction, as the engine's snapshot: the HNSW settings are transaction-local.
        with PostgresResource(url=url).connection() as conn, conn.transaction():
            target = dense.index_target(conn)
            assert target is not None and target.model_id == SERVING_MODEL
            return {row[2] for row in dense.nearest_vectors(conn, query, target, fetch=40)}

    assert nearest(tenancy.owner_url) == {f"chunk-{c}" for c in COLLECTIONS}
    assert nearest(tenancy.urls[tenancy.a]) == {"chunk-alpha", "chunk-alpha2"}
    assert nearest(tenancy.urls[tenancy.b]) == {"chunk-beta"}


def test_tenant_roles_have_login_and_nothing_more(tenancy: Tenancy) -> None:
    with psycopg.connect(tenancy.owner_url) as conn:
        assert tenant_isolation.isolation_problems(conn) == []
        role = conn.execute(
            "SELECT rolcanlogin, rolinherit, rolsuper, rolcreaterole, rolcreatedb, rolbypassrls,"
            " rolreplication FROM pg_roles WHERE rolname = %s",
            (tenants.tenant_role(tenancy.a),),
        ).fetchone()
        assert role == (True, False, False, False, False, False, False)
        memberships = conn.execute(
            "SELECT g.rolname, a.inherit_option, a.set_option, a.admin_option"
            " FROM pg_auth_members a JOIN pg_roles g ON g.oid = a.roleid"
            " WHERE a.member = to_regrole(%s)",
            (tenants.tenant_role(tenancy.a),),
        ).fetchall()
        assert memberships == [(tenants.GROUP, True, False, False)]


def test_a_view_replaced_without_security_invoker_is_caught_reported_and_repaired(
    tenancy: Tenancy,
) -> None:
    """A view replaced without `security_invoker` (`CREATE OR REPLACE VIEW` without the option,
    by hand or by an older Seams) reads with the owner's rights: the audit names it, `seams
    check` reports it and fails, and the statement the line names repairs it."""
    postgres = PostgresResource(url=tenancy.owner_url)
    try:
        assert check.tenancy_report(postgres) == (
            "Tenants: 2 tenants reading 3 collections; each reads only its collections' rows",
            0,
        )
        with psycopg.connect(tenancy.owner_url, autocommit=True) as conn:
            conn.execute("ALTER VIEW seams.current_chunks RESET (security_invoker)")
            problem = (
                "tenants can read view seams.current_chunks, which runs with its owner's "
                "rights: ALTER VIEW seams.current_chunks SET (security_invoker = true)"
            )
            assert tenant_isolation.isolation_problems(conn) == [problem]
            assert check.tenancy_report(postgres) == (
                f"Tenants: 2 tenants reading 3 collections\nTenants: {problem}",
                check.EXIT_ISOLATION,
            )
            with psycopg.connect(tenancy.urls[tenancy.a]) as mine:
                leaked = mine.execute("SELECT count(*) FROM seams.current_chunks").fetchone()
            assert leaked == (len(COLLECTIONS),)  # what the audit is for
            conn.execute(problem.rpartition(": ")[2])  # the fix the line names
            assert tenant_isolation.isolation_problems(conn) == []
            with psycopg.connect(tenancy.urls[tenancy.a]) as mine:
                rows = mine.execute("SELECT count(*) FROM seams.current_chunks").fetchone()
                assert rows == (2,)
    finally:
        close_pool(tenancy.owner_url)


def test_seams_check_says_nothing_of_tenants_where_none_were_set_up(database_url: str) -> None:
    """Roles are per server: a database on a server whose other database has tenants has
    none of its own, and `seams check` prints no `Tenants:` line for it."""
    for postgres in migrated_postgres(database_url):
        assert check.tenancy_report(postgres) == ("", 0)


def test_rotation_sets_a_scram_verifier_of_the_returned_password(tenancy: Tenancy) -> None:
    with psycopg.connect(tenancy.owner_url, autocommit=True) as conn:
        first = tenants.rotate_tenant(conn, tenancy.b)
        second = tenants.rotate_tenant(conn, tenancy.b)
        (stored,) = conn.execute(
            "SELECT rolpassword FROM pg_authid WHERE rolname = %s",
            (tenants.tenant_role(tenancy.b),),
        ).fetchone()
        with pytest.raises(StorageError, match="has no role seams_tenant_nobody"):
            tenants.rotate_tenant(conn, "nobody")
    assert first != second and len(second) >= 32
    assert second not in stored
    assert _scram_accepts(stored, second)
    assert not _scram_accepts(stored, first)


def _scram_accepts(verifier: str, password: str) -> bool:
    """RFC 5802/7677: does `verifier` (SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>)
    hold `password`?"""
    method, rest = verifier.split("$", 1)
    assert method == "SCRAM-SHA-256"
    params, keys = rest.split("$")
    iterations, salt = params.split(":")
    stored_key = base64.b64decode(keys.split(":")[0])
    salted = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(salt), int(iterations)
    )
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    return hashlib.sha256(client_key).digest() == stored_key


def test_sync_follows_the_settings(tenancy: Tenancy) -> None:
    def assigned(conn: psycopg.Connection[Any]) -> dict[str, str]:
        return dict(conn.execute("SELECT collection, tenant FROM seams.collection_tenants"))

    with psycopg.connect(tenancy.owner_url, autocommit=True) as conn:
        before = assigned(conn)
        try:
            tenants.sync_tenants(conn, {"alpha": tenancy.a, "beta": tenancy.a, "gamma": None})
            # alpha2, no longer declared (renamed, say), keeps its tenant while its documents
            # are current, as the owner still reads them; a declared collection follows.
            assert assigned(conn) == {"alpha": tenancy.a, "alpha2": tenancy.a, "beta": tenancy.a}
            with psycopg.connect(tenancy.urls[tenancy.b]) as b:
                assert b.execute("SELECT count(*) FROM seams.chunks").fetchone() == (0,)
            tenants.sync_tenants(conn, {"alpha": tenancy.a, "alpha2": None, "beta": tenancy.a})
            assert assigned(conn) == {"alpha": tenancy.a, "beta": tenancy.a}
        finally:
            tenants.sync_tenants(conn, before)
        assert assigned(conn) == before


def test_two_writers_syncing_at_once_both_succeed(tenancy: Tenancy) -> None:
    fresh = f"c{uuid.uuid4().hex[:8]}"
    wanted = {"alpha": tenancy.a, "alpha2": tenancy.a, "beta": tenancy.b, "delta": fresh}

    def sync() -> None:
        with psycopg.connect(tenancy.owner_url, autocommit=True) as conn:
            tenants.sync_tenants(conn, wanted)

    try:
        assert run_together(sync, sync, sync) == []
        with psycopg.connect(tenancy.owner_url) as conn:
            rows = dict(conn.execute("SELECT collection, tenant FROM seams.collection_tenants"))
            assert rows == wanted
            assert tenant_isolation.isolation_problems(conn) == []
    finally:
        with psycopg.connect(tenancy.owner_url, autocommit=True) as conn:
            tenants.drop_tenant(conn, fresh)
            tenants.sync_tenants(conn, {"alpha": tenancy.a, "alpha2": tenancy.a, "beta": tenancy.b})


# --- no database ----------------------------------------------------------------------------


def test_every_table_has_a_decision() -> None:
    assert tenant_isolation.tables_without_a_decision() == []
    # One decision each: a table with a `collection` column is read per collection, never
    # closed (the BM25 statistics are per collection, so protected).
    assert not {t.name for t in tenants.PROTECTED} & {t.name for t in tenants.PRIVATE}
    assert not [t.name for t in tenants.PRIVATE if t.has_collection]
    assert {schema.LEXICAL_TERMS, schema.LEXICAL_TOTALS} <= set(tenants.PROTECTED)
    extra = schema.Table("new_table", (schema.Column("x", "text"),), key=("x",), partitioned=False)
    assert tenant_isolation.tables_without_a_decision((*schema.TABLES, extra)) == ["new_table"]


@pytest.mark.parametrize(
    ("base", "password", "expected"),
    [
        (
            "postgresql://postgres:@/seams?host=/tmp/pg%20dir",
            None,
            "postgresql://seams_tenant_acme@/seams?host=%2Ftmp%2Fpg+dir",
        ),
        (
            "postgresql://owner:s3cret@db.example:5433/seams?sslmode=require&password=x&user=y",
            "p@ss/w:rd",
            "postgresql://seams_tenant_acme:p%40ss%2Fw%3Ard@db.example:5433/seams?sslmode=require",
        ),
        (
            "host=db.example port=5432 dbname=seams user=owner password=s3cret",
            "pw",
            "host=db.example port=5432 dbname=seams user=seams_tenant_acme password=pw",
        ),
    ],
)
def test_tenant_url_replaces_user_and_password(
    base: str, password: str | None, expected: str
) -> None:
    url = tenants.tenant_url(base, "acme", password)
    if base.startswith("postgresql://"):
        assert url == expected
    else:  # key=value form: the same parameters, in libpq's order
        assert psycopg.conninfo.conninfo_to_dict(url) == psycopg.conninfo.conninfo_to_dict(expected)
    assert "s3cret" not in url and "owner" not in url
    assert psycopg.conninfo.conninfo_to_dict(url)["user"] == "seams_tenant_acme"


@pytest.mark.parametrize("bad", ["", "Acme", "a-b", "a__b", "x" * 41, "1a"])
def test_tenant_names_are_safe_role_fragments(bad: str) -> None:
    with pytest.raises(StorageError, match="a tenant is 1-40 characters"):
        tenants.tenant_role(bad)


def test_an_owner_that_is_not_a_superuser_runs_it_all(pg_server_url: str) -> None:
    """As on a server given by SEAMS_DATABASE_URL: the pipeline's role owns the database and
    has CREATEROLE, nothing more (a superuser gave it the group's ADMIN option once)."""
    suffix = uuid.uuid4().hex[:8]
    owner, database, tenant = f"owner_{suffix}", f"t_{suffix}", f"x{suffix}"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN CREATEROLE").format(sql.Identifier(owner)))
        admin.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(database), sql.Identifier(owner)
            )
        )
    superuser_url = psycopg.conninfo.make_conninfo(pg_server_url, dbname=database)
    owner_url = psycopg.conninfo.make_conninfo(pg_server_url, dbname=database, user=owner)
    try:
        with psycopg.connect(superuser_url, autocommit=True) as su:
            su.execute("CREATE EXTENSION IF NOT EXISTS vector")
            su.execute(
                "DO $$ BEGIN CREATE ROLE seams_tenants NOLOGIN NOINHERIT;"
                " EXCEPTION WHEN duplicate_object THEN NULL; END $$"
            )
        for _ in migrated_postgres(owner_url):
            with psycopg.connect(owner_url, autocommit=True) as conn:
                assert conn.info.user == owner
                tenants.apply_ddl(conn)
                with pytest.raises(
                    StorageError, match=f"GRANT seams_tenants TO {owner} WITH ADMIN"
                ):
                    tenants.sync_tenants(conn, {"alpha": tenant})
            with psycopg.connect(superuser_url, autocommit=True) as su:
                su.execute(
                    sql.SQL(
                        "GRANT seams_tenants TO {} WITH ADMIN TRUE, INHERIT FALSE, SET FALSE"
                    ).format(sql.Identifier(owner))
                )
            with psycopg.connect(owner_url, autocommit=True) as conn:
                tenants.sync_tenants(conn, {"alpha": tenant, "beta": None})
                with conn.transaction():
                    for seq, collection in enumerate(("alpha", "beta"), start=1):
                        _insert(conn, schema.CHUNKS, collection, seq)
                assert conn.execute("SELECT count(*) FROM seams.chunks").fetchone() == (2,)
                assert tenant_isolation.isolation_problems(conn) == []
                # Only a superuser may take sleep, large objects and advisory locks from
                # tenants: said until one does, and the owner keeps them then.
                said = tenant_roles.problems(conn, tenants.ROLE_PREFIX, tenants.GROUP)
                assert len(said) == 1 and "tenants may call lo_creat" in said[0]
            with psycopg.connect(superuser_url, autocommit=True) as su:
                tenant_roles.restrict_functions(su, tenants.GROUP)
            with psycopg.connect(owner_url, autocommit=True) as conn:
                assert tenant_roles.problems(conn, tenants.ROLE_PREFIX, tenants.GROUP) == []
                assert conn.execute("SELECT pg_try_advisory_lock(7)").fetchone() == (True,)
            with psycopg.connect(tenants.tenant_url(owner_url, tenant)) as mine:
                assert mine.execute("SELECT collection FROM seams.chunks").fetchall() == [
                    ("alpha",)
                ]
            with psycopg.connect(owner_url, autocommit=True) as conn:
                tenants.drop_tenant(conn, tenant)
    finally:
        close_pool(owner_url)
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
            )
            admin.execute(
                sql.SQL("DROP ROLE IF EXISTS {}").format(
                    sql.Identifier(tenants.tenant_role(tenant))
                )
            )
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(owner)))


def test_tenant_changes_say_who_reads_what_and_which_roles_came_and_went() -> None:
    assert tenants.TenantChanges(reads={}).describe() == ""
    assert not tenants.TenantChanges(reads={"acme": ("a",)}).changed
    changes = tenants.TenantChanges(
        reads={"zeta": ("tickets",), "acme": ("contracts", "handbook")},
        created=("zeta",),
        removed=("old",),
    )
    assert changes.changed
    assert changes.describe() == (
        "tenants: acme reads contracts, handbook; zeta reads tickets (created seams_tenant_zeta;"
        " removed seams_tenant_old: no collection names it any more)"
    )
    assert tenants.TenantChanges(reads={}, removed=("old",)).describe() == (
        "tenants: none (removed seams_tenant_old: no collection names it any more)"
    )
    left = tenants.TenantChanges(reads={}, left=("seams_tenant_old is left on the server",))
    assert left.changed
    assert left.describe() == "tenants: none; seams_tenant_old is left on the server"
