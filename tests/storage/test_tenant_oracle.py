"""No query plan tells a tenant anything of another tenant's rows.

`EXPLAIN ANALYZE` counts the rows each plan node returned and removed. Were a tenant's
row-level security condition checked after an index scan over every collection, the counts
would say whether another tenant holds a lexeme, document id or chunk id, and narrowing ranges
would spell them out. Every index of a protected table covers `collection`, and the tenant's
condition is an index condition: these tests probe every indexed column of every protected
table that way, as a tenant, and recover nothing of the other collections, while the same
probes recover the tenant's own values (so the probe itself works).

Uses `test_tenants`' database: one row per collection in every table, with planted values
(`doc-beta`, `beta-secret-lexeme`, ...).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from seams.storage import schema, tenants, vector_indexes
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


def _nearest_plan(conn: psycopg.Connection[Any], where: str, *params: Any) -> dict[str, Any]:
    """The HNSW scan node of a tenant's nearest-neighbour query over `seams.chunk_index`."""
    (raw,) = conn.execute(
        "EXPLAIN (ANALYZE, FORMAT JSON, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT 1 FROM"
        f" seams.chunk_index WHERE model_id = %s AND {where}"
        " ORDER BY embedding::vector(3) <=> '[1,0,0]'::vector(3) LIMIT 5",
        (SERVING_MODEL, *params),
    ).fetchone()
    plan = (raw if isinstance(raw, list) else json.loads(raw))[0]["Plan"]
    while plan.get("Node Type") != "Index Scan":
        plan = plan["Plans"][0]
    return plan


def test_another_collections_index_tells_a_tenant_how_many_vectors_it_holds(
    tenancy: Tenancy,
) -> None:
    """The known limit docs/collections.md states: a query stating another collection's number
    walks that collection's HNSW index, whose rows the tenant's condition all removes, and
    `EXPLAIN ANALYZE` counts them; a search of the tenant's own collection walks its own index
    and removes none."""
    columns = [c.name for c in schema.CHUNK_INDEX.columns]
    copied = ", ".join(
        "c.chunk_id || '-copy' || g" if name == "chunk_id" else f"c.{name}" for name in columns
    )
    with psycopg.connect(tenancy.owner_url, autocommit=True) as owner:
        for collection in COLLECTIONS:
            vector_indexes.ensure_model_index(owner, SERVING_MODEL, 3, collection=collection)
        owner.execute(
            f"INSERT INTO seams.chunk_index ({', '.join(columns)}) SELECT {copied}"
            " FROM seams.chunk_index AS c, generate_series(1, 6) AS g"
            " WHERE c.collection = 'beta'"
        )
        keys = dict(owner.execute("SELECT collection, key FROM seams.collection_keys"))
        try:
            with psycopg.connect(tenancy.urls[tenancy.a]) as mine:
                mine.execute("SET enable_seqscan = off")
                foreign = _nearest_plan(mine, "seams.collection_key(collection) = %s", keys["beta"])
                assert foreign["Index Name"].endswith(f"_c{keys['beta']}")
                assert foreign["Actual Rows"] == 0
                assert foreign["Rows Removed by Filter"] == 7  # beta's 1 + 6 vectors
                own = _nearest_plan(
                    mine,
                    "collection = 'alpha' AND seams.collection_key(collection) = %s",
                    keys["alpha"],
                )
                assert own["Index Name"].endswith(f"_c{keys['alpha']}")
                assert own["Actual Rows"] == 1 and own.get("Rows Removed by Filter", 0) == 0
        finally:
            owner.execute("DELETE FROM seams.chunk_index WHERE chunk_id LIKE '%-copy%'")
