"""A tenant reads no other collection's name in the catalogs every role may read: index names
and definitions, comments, policies, functions, triggers, constraints, views, statistics, roles
and their settings, databases, and the sessions of `pg_stat_activity` (the objects PostgreSQL
itself ships, such as the function `gamma`, left out). Uses `test_tenants`' database, with the
vector indexes of each collection made as the `chunk_index` asset makes them, while commands
naming collections hold the data."""

from __future__ import annotations

import psycopg

from seams.orchestration.command_lock import command_lock
from seams.storage import vector_indexes
from tests.storage.test_tenants import COLLECTIONS, SERVING_MODEL, Tenancy
from tests.storage.test_tenants import tenancy as tenancy  # the fixture, shared

CATALOG_TEXT = """
SELECT 'index ' || indexname || ': ' || indexdef FROM pg_indexes
UNION ALL SELECT 'relation ' || relname FROM pg_class
UNION ALL SELECT 'comment ' || description FROM pg_description WHERE objoid >= 16384
UNION ALL SELECT 'policy ' || policyname || ': ' || coalesce(qual, '') || coalesce(with_check, '')
  FROM pg_policies
UNION ALL SELECT 'function ' || proname || ': ' || coalesce(prosrc, '') FROM pg_proc
  WHERE oid >= 16384
UNION ALL SELECT 'trigger ' || tgname FROM pg_trigger
UNION ALL SELECT 'constraint ' || conname || ': ' || pg_get_constraintdef(oid) FROM pg_constraint
UNION ALL SELECT 'view ' || viewname || ': ' || definition FROM pg_views
UNION ALL SELECT 'statistics ' || attname || ': ' || coalesce(most_common_vals::text, '')
  FROM pg_stats
UNION ALL SELECT 'session ' || concat_ws(' ', usename, application_name, query, backend_type)
  FROM pg_stat_activity WHERE pid <> pg_backend_pid()
UNION ALL SELECT 'role ' || rolname FROM pg_roles
UNION ALL SELECT 'role setting ' || coalesce(setconfig::text, '') FROM pg_db_role_setting
UNION ALL SELECT 'database ' || datname FROM pg_database
UNION ALL SELECT 'shared comment ' || description FROM pg_shdescription
UNION ALL SELECT 'table ' || relname FROM pg_stat_user_tables
UNION ALL SELECT 'default ' || pg_get_expr(adbin, adrelid) FROM pg_attrdef
"""


def test_a_tenant_reads_no_other_collections_name_in_the_catalogs(tenancy: Tenancy) -> None:
    with psycopg.connect(tenancy.owner_url, autocommit=True) as owner:
        for collection in COLLECTIONS:
            vector_indexes.ensure_model_index(owner, SERVING_MODEL, 3, collection=collection)
        built = [i for i in vector_indexes.model_indexes(owner) if i.collection is not None]
    assert {i.collection for i in built} == set(COLLECTIONS) - {"default"}
    for tenant, own in tenancy.reads.items():
        others = sorted(set(COLLECTIONS) - set(own) - {"default"})
        command = f"seams backfill --collection {others[0]}"  # a command at work on another
        with (
            command_lock(tenancy.owner_url, command, print),
            psycopg.connect(tenancy.urls[tenant]) as conn,
        ):
            text = [str(line) for (line,) in conn.execute(CATALOG_TEXT) if line]
            # The indexes are there, and their definitions are readable, by number.
            assert sum(f"{SERVING_MODEL}'::text) AND (seams.collection_key(" in t for t in text)
            for other in others:
                assert not [t for t in text if other in t], (tenant, other)
