"""Tenants kept apart by PostgreSQL, end to end: a project whose seams.yaml declares two tenants
and a collection without one, rows made by the real pipeline, and each tenant connected with
the URL `seams db url --tenant` prints.

One database for the module, a copy of the session's Dagster template (so Dagster's own tables
sit beside Seams', as with `SEAMS_DATABASE_URL`). Three collections, one small document each,
registered with `register_batch(collection=...)` and materialized by the pipeline: `alpha`
(read by tenant A), `beta` (tenant B), `gamma` (nobody). The URLs come from the command itself,
run in-process against the module's database as an external server (`SEAMS_DATABASE_URL`):
roles with passwords, created and synced by the command. Relations are found in the catalog,
never listed by hand, so a table or view added to the schema is covered at once.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg
import psycopg.errors
import pytest
from psycopg import sql

from seams.orchestration import cli
from seams.resources import database
from seams.resources.postgres import PostgresResource, close_pool
from seams.storage import schema, tenant_search, tenants
from seams.storage.batches import register_batch, scan_inbox
from tests.storage.test_tenants import _scram_accepts
from tests.support.databases import fresh_database
from tests.support.instances import keep_environment
from tests.support.privileges import tenant_names
from tests.support.search_index import GARDEN, HARBOUR_V1, materialize_batch, pipeline_resources

KITCHEN = """# Kitchen Science

Bread rises because yeast ferments the sugars in the dough and releases carbon dioxide, which
the gluten network traps in small bubbles. A longer, cooler proof gives the yeast time to make
the acids that flavour a sourdough loaf. Baking sets the crumb: the starch gelatinises and the
proteins firm up while the crust browns.
"""

DOCUMENTS = {"alpha": GARDEN, "beta": HARBOUR_V1, "gamma": KITCHEN}
MARKERS = {"alpha": "compost", "beta": "lighthouse", "gamma": "sourdough"}
"""A word only that collection's document holds: found in another tenant's rows, a leak."""
QUERIES = {
    "alpha": "how to fix a compost heap that smells",
    "beta": "who lit the lighthouse lamp and sounded the fog horn",
    "gamma": "why bread dough rises with yeast",
}


@dataclass(frozen=True)
class Project:
    url: str
    """The owner's URL of the data database (the pipeline's role)."""
    settings_file: Path
    reads: dict[str, tuple[str, ...]]
    """Tenant -> its collections."""
    urls: dict[str, str]
    """Tenant -> the URL `seams db url --tenant` printed."""
    resources: dict[str, Any]


def seams_db_url(tenant: str, *, database_url: str | None, settings_file: Path) -> str:
    """`seams db url --tenant TENANT` run in-process as a user runs it; the URL it printed.
    `database_url`: the external server (`SEAMS_DATABASE_URL`), None for the embedded one."""
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as monkeypatch:
        keep_environment(monkeypatch)
        monkeypatch.setenv("SEAMS_CONFIG", str(settings_file))
        if database_url is None:
            monkeypatch.delenv(database.URL_ENV, raising=False)
        else:
            monkeypatch.setenv(database.URL_ENV, database_url)
        with contextlib.redirect_stdout(out):
            status = cli.main(["db", "url", "--tenant", tenant])
    assert status == 0, out.getvalue()
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def write_settings(folder: Path, a: str, b: str) -> Path:
    """seams.yaml with three collections, sources beside it: alpha read by `a`, beta by `b`,
    gamma by nobody."""
    for collection, text in DOCUMENTS.items():
        (folder / collection).mkdir()
        (folder / collection / f"{collection}.md").write_text(text, encoding="utf-8")
    settings = folder / "seams.yaml"
    settings.write_text(
        "collections:\n"
        f"  alpha: {{source: alpha, tenant: {a}}}\n"
        f"  beta: {{source: beta, tenant: {b}}}\n"
        "  gamma: {source: gamma}\n",
        encoding="utf-8",
    )
    return settings


@pytest.fixture(scope="module")
def project(
    pg_server_url: str,
    dagster_template: str,
    exported_model: object,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Project]:
    a, b = tenant_names()
    folder = tmp_path_factory.mktemp("tenants")
    settings_file = write_settings(folder, a, b)
    with fresh_database(pg_server_url, template=dagster_template) as url:
        resources = pipeline_resources(url)
        postgres: PostgresResource = resources["seams_postgres"]
        postgres.ensure_schema()
        instance = dg.DagsterInstance.ephemeral()
        urls: dict[str, str] = {}
        try:
            for collection in DOCUMENTS:
                files, _ = scan_inbox(folder / collection)
                with postgres.connection() as conn:
                    key = register_batch(conn, files, source="test", collection=collection)
                assert key
                materialize_batch(instance, resources, key)
            for tenant in (a, b):
                urls[tenant] = seams_db_url(tenant, database_url=url, settings_file=settings_file)
            yield Project(
                url=url,
                settings_file=settings_file,
                reads={a: ("alpha",), b: ("beta",)},
                urls=urls,
                resources=resources,
            )
        finally:
            instance.dispose()
            for tenant_url in urls.values():
                close_pool(tenant_url)
            with psycopg.connect(url, autocommit=True) as conn:
                for tenant in (a, b):
                    tenants.drop_tenant(conn, tenant)
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(tenants.GROUP)))


def relations(conn: psycopg.Connection[Any]) -> list[tuple[str, str, bool]]:
    """(name, kind, has a `collection` column) of every table, view and materialized view of
    schema seams, from the catalog."""
    return conn.execute(
        """SELECT c.relname, c.relkind::text, EXISTS (
                  SELECT 1 FROM pg_attribute AS a WHERE a.attrelid = c.oid
                  AND a.attname = 'collection' AND NOT a.attisdropped)
           FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
           WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm') ORDER BY c.relname""",
        (schema.SCHEMA,),
    ).fetchall()


def rows_of(conn: psycopg.Connection[Any], relation: str, where: str = "", *params: Any) -> set:
    """Each row as text: every column tenants may read (all but `tenants.WITHHELD`)."""
    withheld = tenants.WITHHELD.get(relation)
    row: sql.Composable = sql.SQL("t::text")
    if withheld:
        names = next(t for t in schema.TABLES if t.name == relation).column_names
        row = sql.SQL("({})::text").format(
            sql.SQL(", ").join(
                sql.SQL("t.{}").format(sql.Identifier(n)) for n in names if n not in withheld
            )
        )
    query = sql.SQL("SELECT {} FROM {} AS t " + where).format(
        row, sql.Identifier(schema.SCHEMA, relation)
    )
    return {r[0] for r in conn.execute(query, params)}


def tenant_pairs(project: Project) -> list[tuple[str, tuple[str, ...], list[str]]]:
    """(tenant, its collections, every other collection) for both tenants."""
    return [
        (tenant, reads, [c for c in DOCUMENTS if c not in reads])
        for tenant, reads in project.reads.items()
    ]


# --- the command --------------------------------------------------------------------------


def test_the_printed_url_is_the_tenants_role_with_a_fresh_password(project: Project) -> None:
    tenant = next(iter(project.reads))
    role = tenants.tenant_role(tenant)
    printed = project.urls[tenant]
    params = psycopg.conninfo.conninfo_to_dict(printed)
    assert params["user"] == role and params["password"]
    owner = psycopg.conninfo.conninfo_to_dict(project.url)
    assert (params.get("dbname"), params.get("host")) == (owner.get("dbname"), owner.get("host"))
    with psycopg.connect(project.url) as conn:
        (verifier,) = conn.execute(
            "SELECT rolpassword FROM pg_authid WHERE rolname = %s", (role,)
        ).fetchone()
    assert params["password"] not in verifier
    assert _scram_accepts(verifier, params["password"])
    with psycopg.connect(printed) as mine:
        assert mine.execute("SELECT current_user, session_user").fetchone() == (role, role)


def test_every_relation_of_the_schema_returns_only_the_tenants_rows(project: Project) -> None:
    with psycopg.connect(project.url) as owner:
        found = relations(owner)
    assert {t.name for t in tenants.PROTECTED} <= {name for name, _, _ in found}
    for tenant, reads, others in tenant_pairs(project):
        with (
            psycopg.connect(project.urls[tenant], autocommit=True) as mine,
            psycopg.connect(project.url) as owner,
        ):
            shown = []  # relations where the tenant sees its rows and others exist
            for name, kind, has_collection in found:
                readable = mine.execute(
                    "SELECT has_any_column_privilege(%s, 'SELECT')", (f"seams.{name}",)
                ).fetchone()[0]
                if not readable:
                    assert name in {t.name for t in (*tenants.PRIVATE, *tenants.LOCKS)}, name
                    with pytest.raises(psycopg.errors.InsufficientPrivilege):
                        rows_of(mine, name)
                    continue
                seen = rows_of(mine, name)
                if has_collection:
                    expected = rows_of(owner, name, "WHERE collection = ANY(%s)", list(reads))
                    assert seen == expected, name
                    if seen and rows_of(owner, name) - expected:
                        shown.append(name)
                elif name == tenants.COLLECTION_TENANTS.name:
                    role = tenants.tenant_role(tenant)
                    expected = rows_of(owner, name, "WHERE role_name = %s", role)
                    assert seen == expected and len(seen) == len(reads), seen
                else:  # no document data: readable whole
                    assert name in {t.name for t in tenants.SHARED}, (name, kind)
                    assert seen == rows_of(owner, name)
                leaked = [
                    (row[:80], marker)
                    for row in seen
                    for marker in (MARKERS[c] for c in others)
                    if marker in row.lower()
                ]
                assert not leaked, (tenant, name, leaked)
            # Every asset table, the batch tables, the views and the BM25 index hold rows of
            # every collection: the tenant saw its own share of each.
            print("SHOWN", len(shown), shown)
            assert len(shown) >= 15, shown


def test_joins_and_predicates_naming_other_collections_find_nothing(project: Project) -> None:
    for tenant, _, others in tenant_pairs(project):
        with psycopg.connect(project.urls[tenant]) as mine:
            rows = mine.execute(
                """SELECT c.text, e.text, b.source, i.chunk_id
                   FROM seams.chunks AS c
                   FULL JOIN seams.extracted_text AS e USING (batch_key, document_id)
                   FULL JOIN seams.batches AS b USING (batch_key)
                   FULL JOIN seams.chunk_index AS i ON i.chunk_id = c.chunk_id
                   WHERE c.collection = ANY(%(o)s) OR e.collection = ANY(%(o)s)
                      OR b.collection = ANY(%(o)s) OR i.collection = ANY(%(o)s)
                      OR c.text ILIKE ANY(%(m)s) OR e.text ILIKE ANY(%(m)s)""",
                {"o": others, "m": [f"%{MARKERS[c]}%" for c in others]},
            ).fetchall()
            assert rows == []
            # Counting through a subquery or an aggregate sees the same rows.
            (count,) = mine.execute(
                "SELECT count(*) FROM (SELECT collection FROM seams.current_chunks"
                " UNION ALL SELECT collection FROM seams.lexical_postings) AS t"
                " WHERE collection <> ALL(%s)",
                (list(project.reads[tenant]),),
            ).fetchone()
            assert count == 0


def test_no_role_change_and_no_function_reaches_other_rows(project: Project) -> None:
    a, b = list(project.reads)
    owner_role = psycopg.conninfo.conninfo_to_dict(project.url).get("user") or "postgres"
    with psycopg.connect(project.urls[a], autocommit=True) as conn:
        for target in (owner_role, "postgres", tenants.GROUP, tenants.tenant_role(b)):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(target)))
        for target in (owner_role, tenants.tenant_role(b)):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql.SQL("SET SESSION AUTHORIZATION {}").format(sql.Identifier(target)))
        assert conn.execute("SELECT current_user").fetchone() == (tenants.tenant_role(a),)
        # No function of its own in any schema it could share, nor a SECURITY DEFINER one.
        for where in ("seams", "public"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(
                    f"CREATE FUNCTION {where}.peek() RETURNS bigint"
                    " LANGUAGE sql SECURITY DEFINER AS 'SELECT count(*) FROM seams.chunks'"
                )
        # A leaky function in its own temporary schema, cheaper than the policy: the policy's
        # condition still runs first, so it is only ever shown the tenant's own rows.
        conn.execute(
            "CREATE FUNCTION pg_temp.peek(t text) RETURNS boolean LANGUAGE plpgsql COST 0.0001"
            " AS $$ BEGIN RAISE NOTICE 'peek %', t; RETURN true; END $$"
        )
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append((d.message_primary or "").lower()))
        for relation in ("chunks", "extracted_text", "current_chunks", "sentence_candidates"):
            conn.execute(f"SELECT count(*) FROM seams.{relation} WHERE pg_temp.peek(text)")
        assert notices and any(MARKERS["alpha"] in n for n in notices)
        assert not [n for n in notices for c in ("beta", "gamma") if MARKERS[c] in n]
        # Every function of the schema runs with the caller's rights but tenant search's two
        # (SECURITY DEFINER, reading the caller's collections only), so none reads or writes
        # past the tenant's rows.
        definers = conn.execute(
            "SELECT p.proname FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'seams' AND p.prosecdef ORDER BY 1"
        ).fetchall()
        assert definers == [(tenant_search.DISTANCES,), (tenant_search.NEAREST,)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT seams.lexical_sync(ARRAY['x'], ARRAY['y'])")


def test_the_cache_dagster_and_statistics_are_closed(
    project: Project, pg_server_url: str, dagster_template: str
) -> None:
    """Dagster's tables beside Seams' (one database, as with `SEAMS_DATABASE_URL`) or in a
    database of their own (the embedded server's `dagster`): not one is readable."""
    a = next(iter(project.reads))
    with (
        fresh_database(pg_server_url, template=dagster_template) as dagster_url,
        psycopg.connect(
            psycopg.conninfo.make_conninfo(
                project.urls[a], dbname=psycopg.conninfo.conninfo_to_dict(dagster_url)["dbname"]
            ),
            autocommit=True,
        ) as elsewhere,
    ):
        names = elsewhere.execute(
            "SELECT c.oid::regclass::text FROM pg_class AS c JOIN pg_namespace AS n"
            " ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'"
        ).fetchall()
        assert len(names) > 10
        for (table,) in names:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                elsewhere.execute(f"SELECT 1 FROM {table} LIMIT 1")
    with psycopg.connect(project.url) as owner:
        dagster_tables = [
            r[0]
            for r in owner.execute(
                "SELECT c.oid::regclass::text FROM pg_class AS c JOIN pg_namespace AS n"
                " ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'"
            )
        ]
        (cached,) = owner.execute("SELECT count(*) FROM seams.embedding_cache").fetchone()
    assert len(dagster_tables) > 10 and cached > 0  # Dagster's tables, and a filled cache
    with psycopg.connect(project.urls[a], autocommit=True) as conn:
        for table in ["seams.embedding_cache", *dagster_tables]:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"SELECT 1 FROM {table} LIMIT 1")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "SELECT c.chunk_id FROM seams.chunks AS c"
                " JOIN seams.embedding_cache AS e ON e.model_id = c.model_id"
            )
        stats = conn.execute(
            "SELECT tablename, coalesce(most_common_vals::text, '')"
            " || coalesce(histogram_bounds::text, '') FROM pg_stats"
            " WHERE schemaname IN ('seams', 'public')"
        ).fetchall()
        assert not [s for s in stats if any(MARKERS[c] in s[1].lower() for c in ("beta", "gamma"))]
        assert not {s[0] for s in stats} & {t.name for t in (*tenants.PROTECTED, *tenants.PRIVATE)}


def test_the_tenant_writes_nothing(project: Project) -> None:
    a = next(iter(project.reads))
    with psycopg.connect(project.url) as owner:
        tables = owner.execute(
            """SELECT c.relname, a.attname FROM pg_class AS c
               JOIN pg_namespace AS n ON n.oid = c.relnamespace
               JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum = 1
               WHERE n.nspname = %s AND c.relkind IN ('r', 'p') ORDER BY 1""",
            (schema.SCHEMA,),
        ).fetchall()
    with psycopg.connect(project.urls[a], autocommit=True) as conn:
        for name, first in tables:
            table, column = sql.Identifier(schema.SCHEMA, name), sql.Identifier(first)
            for statement in (
                sql.SQL("INSERT INTO {} DEFAULT VALUES").format(table),
                sql.SQL("UPDATE {} SET {} = {}").format(table, column, column),
                sql.SQL("DELETE FROM {}").format(table),
                sql.SQL("TRUNCATE {}").format(table),
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                    conn.execute(statement)
        sequences = conn.execute(
            "SELECT c.oid::regclass::text FROM pg_class AS c JOIN pg_namespace AS n"
            " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'S'",
            (schema.SCHEMA,),
        ).fetchall()
        assert sequences
        for (sequence,) in sequences:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT nextval(%s)", (sequence,))


# --- search through the retrievers ------------------------------------------------------------


def test_the_retrievers_on_a_tenant_url_return_only_its_chunks(project: Project) -> None:
    from seams.integrations.langchain_retriever import SeamsRetriever
    from seams.integrations.llama_index_retriever import SeamsLlamaIndexRetriever
    from seams.settings import load_settings

    settings = load_settings(project.settings_file)
    embedder = project.resources["seams_embedder"]

    def collections_found(url: str, query: str, collections: list[str] | None = None) -> set[str]:
        postgres = PostgresResource(url=url)
        found = []
        for retriever in (SeamsRetriever, SeamsLlamaIndexRetriever):
            search = retriever(
                k=10,
                settings=settings,
                postgres=postgres,
                embedder=embedder,
                collections=collections,
            )
            if retriever is SeamsRetriever:
                metadata = [d.metadata for d in search.invoke(query)]
            else:
                metadata = [n.node.metadata for n in search.retrieve(query)]
            # Each hit's collection, checked against its file (each collection has one).
            assert all(m["file_name"] == f"{m['collection']}.md" for m in metadata), metadata
            found.append({m["collection"] for m in metadata})
        assert found[0] == found[1], found
        return found[0]

    for collection, query in QUERIES.items():  # the owner finds each document
        assert collection in collections_found(project.url, query)
    for tenant, reads, others in tenant_pairs(project):
        for query in QUERIES.values():
            assert collections_found(project.urls[tenant], query) == set(reads), (tenant, query)
            # Asking for another collection by name finds nothing, not an error that tells.
            assert collections_found(project.urls[tenant], query, others) == set(), tenant
