"""A tenant reads no other collection's name in the catalogs every role may read: index names
and definitions, comments, policies, functions, triggers, constraints, views, statistics (the
objects PostgreSQL itself ships, such as the function `gamma`, left out). Uses `test_tenants`'
database, with the vector indexes of each collection made as the `chunk_index` asset makes
them."""

from __future__ import annotations

import psycopg

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
"""


def test_a_tenant_reads_no_other_collections_name_in_the_catalogs(tenancy: Tenancy) -> None:
    with psycopg.connect(tenancy.owner_url, autocommit=True) as owner:
        for collection in COLLECTIONS:
            vector_indexes.ensure_model_index(owner, SERVING_MODEL, 3, collection=collection)
        built = [i for i in vector_indexes.model_indexes(owner) if i.collection is not None]
    assert {i.collection for i in built} == set(COLLECTIONS) - {"default"}
    for tenant, own in tenancy.reads.items():
        with psycopg.connect(tenancy.urls[tenant]) as conn:
            text = [str(line) for (line,) in conn.execute(CATALOG_TEXT) if line]
            # The indexes are there, and their definitions are readable, by number.
            assert sum(f"{SERVING_MODEL}'::text) AND (seams.collection_key(" in t for t in text)
            for other in set(COLLECTIONS) - set(own) - {"default"}:
                assert not [t for t in text if other in t], (tenant, other)
