"""No query plan tells a tenant anything of another tenant's rows.

`EXPLAIN ANALYZE` counts the rows each plan node returned and removed. Were a tenant's
row-level security condition checked after an index scan over every collection, the counts
would say whether another tenant holds a lexeme, document id or chunk id, and narrowing ranges
would spell them out. Every index of a protected table covers `collection`, and the tenant's
condition is an index condition: these tests probe every indexed column of every protected
table that way, as a tenant, and recover nothing of the other collections, while the same
probes recover the tenant's own values (so the probe itself works). HNSW indexes answer only
the ordering, so tenants cannot read or order by a chunk vector at all, and search through
`seams.storage.tenant_search`'s functions, whose plans show nothing of other collections.

Uses `test_tenants`' database: one row per collection in every table, with planted values
(`doc-beta`, `beta-secret-lexeme`, ...).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import psycopg
import psycopg.errors
import pytest
from psycopg import sql

from seams.resources.postgres import PostgresResource
from seams.storage import (
    migrations,
    schema,
    tenant_isolation,
    tenant_search,
    tenants,
    vector_indexes,
)
from seams.storage.search import dense
from tests.storage.test_tenants import COLLECTIONS, SERVING_MODEL, Tenancy
from tests.storage.test_tenants import tenancy as tenancy  # the fixture, shared

COUNTERS = (
    "Actual Rows",
    "Rows Removed by Filter",
    "Rows Removed by Index Recheck",
    "Heap Fetches",
)


def _counts(plan: dict[str, Any]) -> float:
    """The rows the plan's nodes returned or removed; a sequential scan's removed rows are left
    out: it reads every row of the table, so it removes all but those it returns, whatever the
    probe."""
    keys = ("Actual Rows",) if plan.get("Node Type") == "Seq Scan" else COUNTERS
    own = sum(float(plan.get(key, 0) or 0) for key in keys)
    return own + sum(_counts(child) for child in plan.get("Plans", []))


def signal(
    conn: psycopg.Connection[Any], table: str, column: str, where: str, *params: Any
) -> bool:
    """Whether `EXPLAIN ANALYZE` of a probe of `table` shows any row passing through a node."""
    query = sql.SQL(
        "EXPLAIN (ANALYZE, FORMAT JSON, COSTS OFF, TIMING OFF, SUMMARY OFF)"
        " SELECT 1 FROM {table} WHERE " + where
    ).format(table=sql.Identifier(schema.SCHEMA, table), c=sql.Identifier(column))
    (raw,) = conn.execute(query, params).fetchone()
    plan = (raw if isinstance(raw, list) else json.loads(raw))[0]["Plan"]
    return _counts(plan) > 0


def extract(probe: Callable[[str, str], bool], prefix: str = "") -> list[str]:
    """Every value the oracle `probe(lo, hi)` (is there a value in [lo, hi)?) reveals, by
    narrowing ranges of printable ASCII, as an attacker would."""
    found: list[str] = []
    if not probe(prefix, prefix + "\x7f"):
        return found
    if prefix and probe(prefix, prefix + "\x01"):  # exactly `prefix`
        found.append(prefix)

    def children(low: int, high: int) -> None:
        if not probe(prefix + chr(low), prefix + chr(high)):
            return
        if high - low == 1:
            found.extend(extract(probe, prefix + chr(low)))
            return
        middle = (low + high) // 2
        children(low, middle)
        children(middle, high)

    children(0x20, 0x7F)
    return found


def indexed_columns(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    """(table, column) of every text column of a protected table that some index covers."""
    rows = conn.execute(
        """SELECT DISTINCT c.relname, a.attname
           FROM pg_index AS i
           JOIN pg_class AS c ON c.oid = i.indrelid
           JOIN pg_namespace AS n ON n.oid = c.relnamespace
           JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey)
           WHERE n.nspname = %s AND c.relname = ANY(%s) AND a.attname <> 'collection'
             AND a.atttypid = 'text'::regtype
           ORDER BY 1, 2""",
        (schema.SCHEMA, [t.name for t in tenants.PROTECTED]),
    ).fetchall()
    return [(str(t), str(c)) for t, c in rows]


def test_every_index_of_a_protected_table_covers_the_collection(tenancy: Tenancy) -> None:
    with psycopg.connect(tenancy.owner_url) as owner:
        missing = owner.execute(
            """SELECT c.relname, x.relname FROM pg_index AS i
               JOIN pg_class AS c ON c.oid = i.indrelid
               JOIN pg_class AS x ON x.oid = i.indexrelid
               JOIN pg_namespace AS n ON n.oid = c.relnamespace
               JOIN pg_am AS m ON m.oid = x.relam
               WHERE n.nspname = %s AND c.relname = ANY(%s) AND m.amname = 'btree'
                 AND NOT EXISTS (SELECT 1 FROM pg_attribute AS a WHERE a.attrelid = c.oid
                                 AND a.attname = 'collection' AND a.attnum = ANY(i.indkey))""",
            (schema.SCHEMA, [t.name for t in tenants.PROTECTED]),
        ).fetchall()
        assert missing == []
        assert tenancy.a and indexed_columns(owner)


def test_the_explain_oracle_answers_the_same_for_a_word_another_tenant_holds(
    tenancy: Tenancy,
) -> None:
    probe = (
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT 1 FROM seams.lexical_terms"
        " WHERE collection = 'beta' AND text_search_config = 'beta-cfg' AND lexeme = %s"
    )
    with psycopg.connect(tenancy.owner_url) as owner:
        held = owner.execute(
            "SELECT lexeme FROM seams.lexical_terms WHERE collection = 'beta'"
        ).fetchone()
        assert held == ("beta-secret-lexeme",)
    with psycopg.connect(tenancy.urls[tenancy.a]) as mine:
        for forced in ("on", "off"):
            mine.execute(sql.SQL("SET enable_seqscan = {}").format(sql.Literal(forced)))
            for _ in range(2):  # the second time with the catalog caches warm
                for_held = [r[0].replace(held[0], "W") for r in mine.execute(probe, held)]
                absent = [
                    r[0].replace("zephyrquokka", "W")
                    for r in mine.execute(probe, ("zephyrquokka",))
                ]
            assert for_held == absent


def test_range_probes_of_every_indexed_column_reveal_only_the_tenants_own_values(
    tenancy: Tenancy,
) -> None:
    mine_reads = list(tenancy.reads[tenancy.a])
    others = [c for c in COLLECTIONS if c not in mine_reads]
    with (
        psycopg.connect(tenancy.owner_url) as owner,
        psycopg.connect(tenancy.urls[tenancy.a]) as mine,
    ):
        columns = indexed_columns(owner)
        assert {"lexeme", "document_id", "chunk_id", "source_sha256", "batch_key"} <= {
            c for _, c in columns
        }
        for forced in ("on", "off"):  # the planner's choice, and index scans forced
            mine.execute(sql.SQL("SET enable_seqscan = {}").format(sql.Literal(forced)))
            mine.execute(sql.SQL("SET enable_bitmapscan = {}").format(sql.Literal(forced)))
            for table, column in columns:
                where = "{c} >= %s AND {c} < %s AND collection = ANY(%s)"
                for other in others:
                    assert not signal(mine, table, column, where, "", "\x7f", [other]), (
                        table,
                        column,
                        other,
                    )
                # The same probe over the tenant's own collections sees its rows.
                assert signal(mine, table, column, where, "", "\x7f", mine_reads), (table, column)
        # Narrowing ranges, as an attacker would: nothing of the others, all of its own.
        for table, column in (("lexical_terms", "lexeme"), ("current_documents", "document_id")):

            def probe(
                lo: str, hi: str, collections: list[str], table: str = table, column: str = column
            ) -> bool:
                return signal(
                    mine,
                    table,
                    column,
                    "{c} >= %s AND {c} < %s AND collection = ANY(%s)",
                    lo,
                    hi,
                    collections,
                )

            assert extract(lambda lo, hi: probe(lo, hi, others)) == []
            own = extract(lambda lo, hi: probe(lo, hi, mine_reads))
            expected = owner.execute(
                sql.SQL("SELECT DISTINCT {} FROM {} WHERE collection = ANY(%s) ORDER BY 1").format(
                    sql.Identifier(column), sql.Identifier(schema.SCHEMA, table)
                ),
                (mine_reads,),
            ).fetchall()
            assert sorted(own) == [e[0] for e in expected] and own, (table, own)


def test_a_plan_cached_before_a_collection_is_taken_away_no_longer_reads_it(
    tenancy: Tenancy,
) -> None:
    """The tenant's collections are folded into the plan: a change of the assignments replans
    every cached plan (here a generic prepared plan in a session that stays open)."""
    query = "EXECUTE counted"
    with (
        psycopg.connect(tenancy.owner_url, autocommit=True) as owner,
        psycopg.connect(tenancy.urls[tenancy.a], autocommit=True) as mine,
    ):
        before = dict(owner.execute("SELECT collection, tenant FROM seams.collection_tenants"))
        mine.execute("SET plan_cache_mode = force_generic_plan")
        mine.execute("PREPARE counted AS SELECT count(*) FROM seams.chunks")
        assert mine.execute(query).fetchone() == (2,)  # alpha and alpha2
        try:
            tenants.sync_tenants(owner, {**before, "alpha2": None})
            assert mine.execute(query).fetchone() == (1,)
        finally:
            tenants.sync_tenants(owner, {**before, "gamma": None, "default": None})
        assert mine.execute(query).fetchone() == (2,)


PROBE = np.array([1.0, 0.0, 0.0], dtype=np.float32)
CRAFTED = (
    "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT 1 FROM seams.chunk_index"
    " WHERE model_id = %s AND {where}"
    " ORDER BY embedding::vector(3) <=> '[1,0,0]'::vector(3) LIMIT 5"
)
"""A tenant's own nearest-neighbour query, walking whichever HNSW index its condition names."""
SEARCHED = (
    "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, BUFFERS OFF)"
    " SELECT * FROM seams.tenant_nearest(%s, 3, 'pooled', %s, '[1,0,0]'::vector, 40)"
)
"""The same asked of the tenants' search function."""
SCAN_SETTINGS = (
    "SET enable_seqscan = off",
    "SET hnsw.iterative_scan = relaxed_order",
    "SET hnsw.max_scan_tuples = 1000000",
    "SET hnsw.ef_search = 1000",
)
"""What a tenant may set itself to make an index walk as far as it can."""


@contextlib.contextmanager
def beta_holding(owner: psycopg.Connection[Any], vectors: int) -> Iterator[None]:
    """`beta` holds `vectors` vectors of the serving model meanwhile (0: its one row is of
    another model), each collection with the model's index over its own rows."""
    columns = [c.name for c in schema.CHUNK_INDEX.columns]
    copied = ", ".join(
        "c.chunk_id || '-copy' || g" if name == "chunk_id" else f"c.{name}" for name in columns
    )
    for collection in COLLECTIONS:
        vector_indexes.ensure_model_index(owner, SERVING_MODEL, 3, collection=collection)
    owner.execute(
        f"INSERT INTO seams.chunk_index ({', '.join(columns)}) SELECT {copied}"
        " FROM seams.chunk_index AS c, generate_series(1, %s) AS g"
        " WHERE c.collection = 'beta' AND c.chunk_id NOT LIKE '%%-copy%%'",
        (max(0, vectors - 1),),
    )
    if vectors == 0:
        owner.execute(
            "UPDATE seams.chunk_index SET model_id = 'parked' WHERE collection = 'beta'"
            " AND model_id = %s",
            (SERVING_MODEL,),
        )
    try:
        yield
    finally:
        owner.execute("DELETE FROM seams.chunk_index WHERE chunk_id LIKE '%-copy%'")
        owner.execute(
            "UPDATE seams.chunk_index SET model_id = %s WHERE model_id = 'parked'",
            (SERVING_MODEL,),
        )


def test_a_tenant_can_neither_read_nor_order_by_vectors(tenancy: Tenancy) -> None:
    """The query that walked another collection's HNSW index (its number stated) and had
    `EXPLAIN ANALYZE` count its vectors is refused, as is any read of a vector, whatever scan
    settings the tenant chose; every other column of the table still reads."""
    with psycopg.connect(tenancy.owner_url, autocommit=True) as owner:
        keys = dict(owner.execute("SELECT collection, key FROM seams.collection_keys"))
        with beta_holding(owner, 7), psycopg.connect(tenancy.urls[tenancy.a]) as mine:
            for setting in SCAN_SETTINGS:
                mine.execute(setting)
            crafted = [
                (CRAFTED.format(where="seams.collection_key(collection) = %s"), keys["beta"]),
                (CRAFTED.format(where="collection = 'alpha'"),),
                ("SELECT embedding FROM seams.chunk_index WHERE model_id = %s",),
                ("SELECT t::text FROM seams.chunk_index AS t WHERE model_id = %s",),
                (
                    "SELECT count(*) FROM seams.chunk_index WHERE model_id = %s"
                    " AND embedding <=> '[1,0,0]' < 0.5",
                ),
            ]
            for statement, *params in crafted:
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="chunk_index"):
                    mine.execute(statement, (SERVING_MODEL, *params))
                mine.rollback()
            for setting in SCAN_SETTINGS:
                mine.execute(setting)
            assert mine.execute(
                "SELECT chunk_id, collection FROM seams.chunk_index ORDER BY 1"
            ).fetchall() == [("chunk-alpha", "alpha"), ("chunk-alpha2", "alpha2")]


def test_the_search_function_shows_the_same_whether_another_collection_holds_0_1_or_7(
    tenancy: Tenancy,
) -> None:
    """The tenants' search function asked for another collection, for its own, or for both,
    with the tenant's own scan settings: the same plan, the same counts and the same rows
    whether `beta` holds no vector, 1 or 7; another collection's rows never come back."""
    asked = (["beta"], ["alpha"], ["alpha", "beta"], None)

    def explained(mine: psycopg.Connection[Any]) -> list[list[str]]:
        for setting in SCAN_SETTINGS:
            mine.execute(setting)
        plans = []
        for _ in range(2):  # the second time with the catalog caches warm
            plans = [
                [r[0] for r in mine.execute(SEARCHED, (SERVING_MODEL, collections))]
                for collections in asked
            ]
        return plans

    with psycopg.connect(tenancy.owner_url, autocommit=True) as owner:
        seen, beta_sees = [], []
        for held in (0, 1, 7):
            with beta_holding(owner, held), psycopg.connect(tenancy.urls[tenancy.b]) as theirs:
                beta_sees.append(
                    len(
                        theirs.execute(
                            "SELECT * FROM seams.tenant_nearest(%s, 3, 'pooled', NULL,"
                            " '[1,0,0]'::vector, 40)",
                            (SERVING_MODEL,),
                        ).fetchall()
                    )
                )
            with beta_holding(owner, held), psycopg.connect(tenancy.urls[tenancy.a]) as mine:
                rows = [
                    mine.execute(
                        "SELECT chunk_id FROM seams.tenant_nearest(%s, 3, 'pooled', %s,"
                        " '[1,0,0]'::vector, 40)",
                        (SERVING_MODEL, collections),
                    ).fetchall()
                    for collections in asked
                ]
                seen.append((explained(mine), rows))
        assert seen[0] == seen[1] == seen[2]
        assert beta_sees == [0, 1, 7]  # what beta's tenant finds meanwhile: the rows are there
        plans, rows = seen[0]
        assert rows == [
            [],
            [("chunk-alpha",)],
            [("chunk-alpha",)],
            [("chunk-alpha",), ("chunk-alpha2",)],
        ]
        assert "Function Scan" in plans[0][0] and "rows=0" in plans[0][0]


def test_a_tenant_asking_for_another_tenants_collection_gets_nothing(tenancy: Tenancy) -> None:
    """Tenant B names A's collections, through the search and the distances functions."""
    keys = [("batch-alpha", "doc-alpha", "chunk-alpha"), ("batch-beta", "doc-beta", "chunk-beta")]
    with PostgresResource(url=tenancy.urls[tenancy.b]).connection() as mine:
        target = dense.IndexTarget("pooled", SERVING_MODEL)
        assert dense.nearest_vectors(mine, PROBE, target, 40, ["alpha", "alpha2"]) == []
        found = dense.chunk_distances(mine, PROBE, target, keys, direct=False)
        assert found[0] == (*keys[0], 1.0)  # as a chunk without a visible vector
        assert found[1][:3] == keys[1] and found[1][3] < 0.01
        direct = mine.execute(
            "SELECT * FROM seams.tenant_distances(%s, 'pooled', %s, %s, %s, %s)",
            (SERVING_MODEL, PROBE, *([k[i] for k in keys] for i in range(3))),
        ).fetchall()
        assert [r[2] for r in direct] == ["chunk-beta"]


@pytest.mark.parametrize("through", ["url", "set role"])
def test_a_tenants_dense_search_is_the_owners_restricted_to_its_collections(
    tenancy: Tenancy, through: str
) -> None:
    """Same chunks, same distances, for each of its collections and for all of them; the
    caller is the tenant whether it logs in itself or a server's login `SET ROLE`s to it (as
    `seams serve`'s tenant pools do)."""
    queries = [PROBE, np.array([0.2, 0.9, 0.1], dtype=np.float32)]
    keys = [(f"batch-{c}", f"doc-{c}", f"chunk-{c}") for c in COLLECTIONS]
    reads = list(tenancy.reads[tenancy.a])
    url = tenancy.urls[tenancy.a] if through == "url" else tenancy.owner_url
    with (
        psycopg.connect(tenancy.owner_url, autocommit=True) as owner_setup,
        beta_holding(owner_setup, 7),
        PostgresResource(url=tenancy.owner_url).connection() as owner,
        PostgresResource(url=url).connection() as mine,
    ):
        if through == "set role":
            mine.execute(
                sql.SQL("SET ROLE {}").format(sql.Identifier(tenants.tenant_role(tenancy.a)))
            )
        target = dense.index_target(mine)
        assert target == dense.index_target(owner, collections=reads)
        assert target is not None
        assert dense.configure_scan(owner, 40) and not dense.configure_scan(mine, 40)
        for query in queries:
            for among in ([reads[0]], [reads[1]], reads):
                theirs = sorted(dense.nearest_vectors(owner, query, target, 40, among))
                assert sorted(dense.nearest_vectors(mine, query, target, 40, among)) == theirs
            everything = sorted(dense.nearest_vectors(mine, query, target, 40))
            assert everything == sorted(dense.nearest_vectors(owner, query, target, 40, reads))
            assert {r[2] for r in everything} == {"chunk-alpha", "chunk-alpha2"}
            expected = [
                (*k, d if k[0].removeprefix("batch-") in reads else 1.0)
                for *k, d in dense.chunk_distances(owner, query, target, keys)
            ]
            assert dense.chunk_distances(mine, query, target, keys, direct=False) == expected


def test_an_upgrade_takes_the_vectors_from_tenants_and_the_audit_accepts_only_its_functions(
    tenancy: Tenancy,
) -> None:
    """A database of the earlier shape (tenants read `chunk_index` whole, no search functions):
    the audit names the readable vectors and the old oracle works there; the migration and the
    tenants' sync that `seams db upgrade` runs bring it to the new grants and functions. The
    audit accepts exactly these functions: another SECURITY DEFINER one tenants may execute,
    or one of these changed, is named."""
    signatures = tenant_search.signatures()
    group = sql.Identifier(tenants.GROUP)
    with psycopg.connect(tenancy.owner_url, autocommit=True) as owner:
        assignments = tenants.assignments(owner)
        for signature in signatures:
            owner.execute(sql.SQL("DROP FUNCTION {}").format(sql.SQL(signature)))
        owner.execute(sql.SQL("GRANT SELECT ON seams.chunk_index TO {}").format(group))
        owner.execute("UPDATE seams.schema_version SET ddl_sha256 = 'an earlier release'")
        assert tenants.missing(owner) == {"policies", "grants"}
        assert tenant_isolation.isolation_problems(owner) == [
            "tenants can read seams.chunk_index.embedding (their own nearest-neighbour queries"
            " would count other collections' rows): run `seams db upgrade`"
        ]
        keys = dict(owner.execute("SELECT collection, key FROM seams.collection_keys"))
        with beta_holding(owner, 7), psycopg.connect(tenancy.urls[tenancy.a]) as mine:
            mine.execute("SET enable_seqscan = off")
            plan = "\n".join(
                r[0]
                for r in mine.execute(
                    CRAFTED.format(where="seams.collection_key(collection) = %s"),
                    (SERVING_MODEL, keys["beta"]),
                )
            )
            assert "Rows Removed by Filter: 7" in plan  # what the new grants close

        assert migrations.migrate(tenancy.owner_url).applied
        tenants.sync_tenants(owner, {**assignments, "gamma": None, "default": None})
        assert tenants.missing(owner) == set()
        assert tenant_isolation.isolation_problems(owner) == []
        with psycopg.connect(tenancy.urls[tenancy.a]) as mine:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                mine.execute("SELECT embedding FROM seams.chunk_index")
            mine.rollback()
            found = mine.execute(
                "SELECT chunk_id FROM seams.tenant_nearest(%s, 3, 'pooled', NULL,"
                " '[1,0,0]'::vector, 40) ORDER BY 1",
                (SERVING_MODEL,),
            ).fetchall()
            assert found == [("chunk-alpha",), ("chunk-alpha2",)]

        owner.execute(
            "CREATE FUNCTION seams.peek() RETURNS bigint LANGUAGE sql SECURITY DEFINER"
            " AS 'SELECT count(*) FROM seams.chunk_index'"
        )
        owner.execute(sql.SQL("GRANT EXECUTE ON FUNCTION seams.peek() TO {}").format(group))
        try:
            assert tenant_isolation.isolation_problems(owner) == [
                "tenants can execute SECURITY DEFINER function seams.peek"
            ]
        finally:
            owner.execute("DROP FUNCTION seams.peek()")
        nearest = signatures[0]
        owner.execute(
            sql.SQL("ALTER FUNCTION {} SET search_path = public").format(sql.SQL(nearest))
        )
        try:
            assert tenant_isolation.isolation_problems(owner) == [
                f"tenants can execute SECURITY DEFINER function seams.{tenant_search.NEAREST}"
            ]
        finally:
            owner.execute(
                sql.SQL("ALTER FUNCTION {} SET search_path = {}").format(
                    sql.SQL(nearest), sql.SQL(tenant_search.SEARCH_PATH)
                )
            )
        assert tenant_isolation.isolation_problems(owner) == []
