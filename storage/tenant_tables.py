"""Which tables and views tenants read and how (the policies' names, the content columns that
keep no planner statistics), and whether a database has it all in place (`missing`, a catalog
read: a sync that finds it there applies nothing). `seams.storage.tenants` applies it.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from seams.storage import schema, tenant_search

GROUP = "seams_tenants"
"""The NOLOGIN group every tenant role belongs to: it holds the SELECT grants, and membership
in it is what makes a role a tenant for the policies."""
ROLE_PREFIX = "seams_tenant_"
COLLECTION = schema.COLLECTION
DEFAULT_COLLECTION = schema.DEFAULT_COLLECTION
POLICY = "seams_tenant_rows"
"""The permissive policy of every protected table: every role sees every row..."""
TENANT_POLICY = "seams_tenant_only"
"""...except a tenant, held by this restrictive one to its own collections' rows."""
COLLECTION_TENANTS = schema.COLLECTION_TENANTS
"""Which tenant reads which collection: what the policies read (declared in the schema)."""

PROTECTED: tuple[schema.Table, ...] = tuple(t for t in schema.TABLES if t.has_collection)
"""Tables tenants read, each row tied to its collection by its own `collection` column (a
batch belongs to one collection, so every row of a batch carries the batch's)."""
PRIVATE: tuple[schema.Table, ...] = (
    schema.SOURCE_FILES,
    schema.EMBEDDING_CACHE,
    schema.DOCUMENT_TOMBSTONES,
    schema.EXTRACTION_ATTEMPTS,
    schema.TARGET_STATES,
    schema.TARGET_RECORDS,
)
"""Tables no tenant reads: shared across collections (the embedding cache, file bytes by
hash) or operational (tombstones, extraction attempts, what each vector-store target holds:
its records' chunk ids span collections). The BM25 statistics are kept per
collection, so they are protected like the postings: a tenant's search scores with its own
collections' document frequencies and lengths."""
LOCKS: tuple[schema.Table, ...] = (schema.WRITER_LOCKS,)
"""Tables no tenant is granted anything on, without a policy: writers hold row locks on them at
any moment, and a policy's DDL (an ACCESS EXCLUSIVE lock) under the tenants' own writer lock
would deadlock with every writer waiting for that lock. Row locks need the UPDATE privilege,
which no role but the owner has, a policy or not (`seams.storage.writer_locks`)."""
SHARED: tuple[schema.Table, ...] = (schema.SCHEMA_VERSION,)
"""Tables every tenant reads whole: they hold no document data (a reader checks the version)."""
VIEWS: tuple[str, ...] = (
    schema.CURRENT_VERSIONS_VIEW,
    schema.CURRENT_CHUNKS_VIEW,
    schema.PUBLISHED_CHUNKS_VIEW,
    schema.CHUNK_PARENTS_VIEW,
)
"""The views tenants read, all `security_invoker`: RLS of their tables applies to the reader."""


COLLECTIONS_FUNCTION = "tenant_collections"

WITHHELD: dict[str, tuple[str, ...]] = {schema.CHUNK_INDEX.name: ("embedding",)}
"""Columns of protected tables no tenant reads, by table: the chunk vectors. Every HNSW index
orders by them and answers the ordering before row-level security checks a row, so a tenant's
own nearest-neighbour query would have `EXPLAIN ANALYZE` count the rows of other collections it
walked past. Tenants search them through `seams.storage.tenant_search`'s functions instead."""


def granted_columns(table: schema.Table) -> list[str] | None:
    """The columns of `table` tenants read, when some are withheld (`WITHHELD`); None when
    they read it whole (a table-level grant)."""
    withheld = WITHHELD.get(table.name)
    if not withheld:
        return None
    return [name for name in table.column_names if name not in withheld]


KEEP_STATISTICS = frozenset(
    {
        "collection",
        "batch_key",
        "document_id",
        "chunk_id",
        "model_id",
        "mode",
        "text_search_config",
        "source_sha256",
        "state",
        "kind",
    }
)
"""Text columns of protected tables whose planner statistics stay: keys the pipeline's joins
and filters estimate with. Every other text-like column (document text, sections, file names,
lexemes, metadata) has none once tenants exist: see `statistics_ddl`."""
_CONTENT_TYPES = frozenset({"text", "tsvector", "jsonb", "text[]"})
CLEAR_STATISTICS_VERSION = 180000
"""PostgreSQL 18: `pg_clear_attribute_stats`, which the table owner may call."""


def content_columns() -> list[tuple[schema.Table, str]]:
    """(table, column) of every protected column that holds content, not keys."""
    return [
        (table, column.name)
        for table in PROTECTED
        for column in table.columns
        if column.base_type in _CONTENT_TYPES and column.name not in KEEP_STATISTICS
    ]


def statistics_ddl(server_version: int) -> list[sql.Composable]:
    """No planner statistics on content columns. Row-level security hides `pg_stats` from a
    tenant, but the planner still estimates a tenant's `WHERE text = '...'` (a leakproof
    operator) from the most common values of every row: `EXPLAIN` would tell a tenant whether
    another tenant's exact text or lexeme is frequent. With statistics target 0 ANALYZE keeps
    none; those already gathered are cleared (PostgreSQL 18+; on older servers they stay until
    a table rewrite: `VACUUM FULL`). Applied once tenants exist (`ensure_group`): projects
    without tenants keep their statistics."""
    statements: list[sql.Composable] = []
    for table, column in content_columns():
        statements.append(
            sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET STATISTICS 0").format(
                table.identifier(), sql.Identifier(column)
            )
        )
        if server_version >= CLEAR_STATISTICS_VERSION:
            statements.append(
                sql.SQL("SELECT pg_clear_attribute_stats({}, {}, {}, false)").format(
                    sql.Literal(schema.SCHEMA), sql.Literal(table.name), sql.Literal(column)
                )
            )
    return statements


_IN_PLACE = """
SELECT
  (SELECT count(*) = %(n_rls)s AND coalesce(bool_and(c.relrowsecurity
     AND EXISTS (SELECT 1 FROM pg_policy AS p WHERE p.polrelid = c.oid
                 AND p.polname = %(permissive)s AND p.polpermissive)
     AND EXISTS (SELECT 1 FROM pg_policy AS p WHERE p.polrelid = c.oid
                 AND p.polname = %(restrictive)s AND NOT p.polpermissive
                 AND to_regrole(%(group)s) = ANY(p.polroles))), false)
   FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
   WHERE n.nspname = %(schema)s AND c.relname = ANY(%(rls)s))
  AND (SELECT count(*) = %(n_views)s FROM pg_class AS c
       JOIN pg_namespace AS n ON n.oid = c.relnamespace
       WHERE n.nspname = %(schema)s AND c.relkind = 'v' AND c.relname = ANY(%(views)s)
         AND EXISTS (SELECT 1 FROM unnest(c.reloptions) AS o(option) WHERE lower(o.option)
                     IN ('security_invoker=true', 'security_invoker=on',
                         'security_invoker=yes', 'security_invoker=1')))
  AND to_regprocedure(%(function)s) IS NOT NULL
  AND (SELECT bool_and(to_regprocedure(f.name) IS NOT NULL)
       FROM unnest(%(functions)s::text[]) AS f(name))
  AND EXISTS (SELECT 1 FROM pg_trigger AS t WHERE t.tgrelid = to_regclass(%(assignments)s)
              AND t.tgname = 'tenant_collections_changed'),
  has_schema_privilege(%(group)s, %(schema)s, 'USAGE')
  AND (SELECT bool_and(has_table_privilege(%(group)s, r.name, 'SELECT'))
       FROM unnest(%(readable)s::text[]) AS r(name))
  AND (SELECT coalesce(bool_and(has_column_privilege(%(group)s, x.relation, x.name, 'SELECT')
                                = x.granted), true)
       FROM unnest(%(column_tables)s::text[], %(column_names)s::text[],
                   %(column_granted)s::bool[]) AS x(relation, name, granted))
  AND (SELECT bool_and(coalesce(has_function_privilege(%(group)s, to_regprocedure(f.name),
                                                       'EXECUTE'), false))
       FROM unnest(%(functions)s::text[]) AS f(name))
  AND NOT (SELECT bool_or(has_table_privilege(%(group)s, r.name,
                  'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER'))
           FROM unnest(%(private)s::text[]) AS r(name)),
  (SELECT coalesce(bool_and(coalesce(a.attstattarget::int, -1) = 0), true)
   FROM unnest(%(relations)s::text[], %(columns)s::text[]) AS x(relation, name)
   JOIN pg_attribute AS a ON a.attrelid = to_regclass(x.relation) AND a.attname = x.name)
"""


def missing(conn: psycopg.Connection[Any]) -> set[str]:
    """What `ensure_group` has to apply, read from the catalogs (no table lock): `group` (the
    role, or its CONNECT on this database), `policies` (row-level security, both policies of
    every table, `security_invoker` views, the function and trigger of `_functions_ddl`),
    `grants` (`_grants`), `statistics` (`statistics_ddl`). A policy's text is the migration's
    to keep current: it is part of the schema's DDL (`migrations.ddl`)."""
    row = conn.execute(
        "SELECT to_regrole(%s) IS NOT NULL"
        " AND has_database_privilege(%s, current_database(), 'CONNECT')",
        (GROUP, GROUP),
    ).fetchone()
    if not (row and row[0]):
        return {"group", "policies", "grants", "statistics"}
    rls = [t.name for t in (*PROTECTED, COLLECTION_TENANTS, *PRIVATE)]
    qualified = [f"{schema.SCHEMA}.{name}" for name in VIEWS]
    tables = (*PROTECTED, COLLECTION_TENANTS, *SHARED)
    readable = [t.qualified_name for t in tables if granted_columns(t) is None]
    by_column = [
        (t.qualified_name, c, c not in WITHHELD[t.name])
        for t in tables
        if t.name in WITHHELD
        for c in t.column_names
    ]
    content = content_columns()
    policies, grants, statistics = conn.execute(
        _IN_PLACE,
        {
            "n_rls": len(rls),
            "rls": rls,
            "permissive": POLICY,
            "restrictive": TENANT_POLICY,
            "group": GROUP,
            "schema": schema.SCHEMA,
            "n_views": len(VIEWS),
            "views": list(VIEWS),
            "function": f"{schema.SCHEMA}.{COLLECTIONS_FUNCTION}()",
            "assignments": COLLECTION_TENANTS.qualified_name,
            "readable": [*readable, *qualified],
            "column_tables": [t for t, _, _ in by_column],
            "column_names": [c for _, c, _ in by_column],
            "column_granted": [g for _, _, g in by_column],
            "functions": tenant_search.signatures(),
            "private": [t.qualified_name for t in (*PRIVATE, *LOCKS)],
            "relations": [t.qualified_name for t, _ in content],
            "columns": [c for _, c in content],
        },
    ).fetchone()
    need = set()
    if not policies:
        need.add("policies")
    if not grants:
        need.add("grants")
    if not statistics:
        need.add("statistics")
    return need
