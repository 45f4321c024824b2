"""A model's HNSW index over one collection's rows (real PostgreSQL + pgvector).

Beside each model's index over all its vectors, every collection but `default` gets the model's
index over its own rows (`WHERE model_id = ... AND collection = ...`): a search of that one
collection walks its small graph instead of the whole model's filtered afterwards. These tests
check that the index is made per collection, that the catalog tells its model and collection,
that it goes with its model (a model switch retires it), that a one-collection search's plan
walks it, and that the answer is the same with and without it (numpy's exact cosine is the
oracle).

Rows go through `write_table` as the IO manager writes them, in batches registered for their
collection.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from seams.resources.postgres import PostgresResource
from seams.storage import migrations, schema, vector_indexes
from seams.storage.index_publication import write_and_publish
from seams.storage.partition_tables import write_table
from seams.storage.search.dense import (
    IndexTarget,
    configure_scan,
    nearest_statement,
    nearest_vectors,
)
from tests.storage.test_vector_indexes import (
    DIMENSIONS,
    MODE,
    PACKAGED,
    SMALL,
    chunk_rows,
    exact_order,
    index_rows,
    unit_vectors,
)
from tests.support.databases import fresh_database, migrated_postgres

TENANT = "tenant-a"
TENANT_CHUNKS = 150


def publish_in(
    postgres: PostgresResource,
    collection: str,
    key: str,
    model_id: str,
    vectors: np.ndarray,
    *,
    make_indexes: bool = True,
) -> dict[str, Any]:
    """Register batch `key` for `collection`, then write its chunks and their vectors of
    `model_id` as the pipeline does (`make_indexes`: the model's indexes made first, as the
    `chunk_index` asset does, with the batch's collection); what the index write published or
    held."""
    chunks = chunk_rows(key, len(vectors))
    with postgres.connection() as conn, conn.transaction():
        conn.execute(
            "INSERT INTO seams.batches (batch_key, source, document_count, collection)"
            " VALUES (%s, 't', 2, %s)",
            (key, collection),
        )
        for document_id in sorted(set(chunks["document_id"])):
            conn.execute(
                "INSERT INTO seams.batch_documents (batch_key, document_id, source_uri,"
                " source_sha256, size_bytes, collection) VALUES (%s, %s, %s, %s, 0, %s)",
                (key, document_id, f"file:///{document_id}", f"v-{document_id}", collection),
            )
    if make_indexes:
        with postgres.connection() as conn:
            vector_indexes.ensure_model_index(
                conn, model_id, vectors.shape[1], collection=collection
            )
    write_table(postgres, schema.CHUNKS, chunks, [key], run_id="r")
    written = write_and_publish(postgres, index_rows(chunks, model_id, vectors), [key], run_id="r")
    return {"published": written.published, "held": written.held}


def indexes(postgres: PostgresResource) -> set[tuple[str, str | None]]:
    with postgres.connection() as conn:
        return {(i.model_id, i.collection) for i in vector_indexes.model_indexes(conn) if i.valid}


def test_collection_index_names_fit_and_differ_per_model_collection_and_dimension() -> None:
    name = schema.chunk_index_hnsw_name("m" * 200, 384, 2**31 - 1)
    assert name == schema.chunk_index_hnsw_name("m" * 200, 384, 2**31 - 1)
    assert name == schema.chunk_index_hnsw_name("m" * 200, 384) + "_c2147483647"
    assert len(name) <= 63
    others = {
        schema.chunk_index_hnsw_name("m" * 200, 384),
        schema.chunk_index_hnsw_name("m" * 200, 384, 1),
        schema.chunk_index_hnsw_name("n", 384, 2**31 - 1),
        schema.chunk_index_hnsw_name("m" * 200, 96, 2**31 - 1),
    }
    assert name not in others and len(others) == 4


def test_each_collection_gets_its_index_which_goes_with_its_model(
    postgres: PostgresResource,
) -> None:
    """`default` searches the model's index; a tenant gets its own beside it, reported with its
    model and collection (an odd collection name included), made once, and dropped with the
    model: directly, and by the model switch that retires the model."""
    odd = 'it\'s "odd" {x}'
    with postgres.connection() as conn:
        assert vector_indexes.ensure_model_index(
            conn, PACKAGED, 384, collection=schema.DEFAULT_COLLECTION
        )
        assert vector_indexes.ensure_model_index(conn, PACKAGED, 384, collection=odd)
        assert not vector_indexes.ensure_model_index(conn, PACKAGED, 384, collection=odd)
        found = {i.name: i for i in vector_indexes.model_indexes(conn)}
        own = vector_indexes.index_name(conn, PACKAGED, 384, odd)
    assert own is not None and odd not in own
    assert found[own].collection == odd and found[own].model_id == PACKAGED
    assert found[schema.chunk_index_hnsw_name(PACKAGED, 384)].collection is None
    assert len(found) == 2  # no index of `default` beside the model's
    with postgres.connection() as conn:  # no vectors: both go with the model
        assert sorted(vector_indexes.drop_unused_model_indexes(conn)) == sorted(found)
        assert vector_indexes.model_indexes(conn) == []

    # A tenant indexed with the packaged model, then switched to the small one.
    old = unit_vectors(30, DIMENSIONS[PACKAGED], seed=3)
    assert publish_in(postgres, TENANT, "b1", PACKAGED, old)["published"]
    assert publish_in(postgres, schema.DEFAULT_COLLECTION, "b0", PACKAGED, old)["published"]
    assert indexes(postgres) == {(PACKAGED, None), (PACKAGED, TENANT)}
    with postgres.connection() as conn:  # the model has vectors: nothing is dropped
        assert vector_indexes.drop_model_indexes(conn, PACKAGED) == []
    new = unit_vectors(30, DIMENSIONS[SMALL], seed=4)
    for collection, key in ((schema.DEFAULT_COLLECTION, "b0"), (TENANT, "b1")):
        chunks = chunk_rows(key, len(new))
        with postgres.connection() as conn:
            vector_indexes.ensure_model_index(conn, SMALL, 96, collection=collection)
        frame = index_rows(chunks, SMALL, new)
        written = write_and_publish(postgres, frame, [key], run_id="switch")
    assert sorted(written.published) == ["b0", "b1"], written.held  # the switch completed
    assert indexes(postgres) == {(SMALL, None), (SMALL, TENANT)}  # every old index retired


@pytest.fixture(scope="module")
def searched(pg_server_url: str) -> Iterator[tuple[PostgresResource, dict[str, np.ndarray]]]:
    """One database for the module's searches: 3000 default chunks and 150 of the tenant's,
    all of the 96-d model, analysed; the vectors by collection."""
    vectors = {
        schema.DEFAULT_COLLECTION: unit_vectors(3000, 96, seed=21),
        TENANT: unit_vectors(TENANT_CHUNKS, 96, seed=22),
    }
    with fresh_database(pg_server_url) as url:
        for postgres in migrated_postgres(url):
            publish_in(postgres, schema.DEFAULT_COLLECTION, "b0", SMALL, vectors["default"])
            assert publish_in(postgres, TENANT, "b1", SMALL, vectors[TENANT])["published"]
            with postgres.connection() as conn:
                conn.execute("ANALYZE seams.chunk_index")
            yield postgres, vectors


def plan(conn: psycopg.Connection[Any], **restrict: Any) -> str:
    """The generic plan (any parameter values: what a prepared statement settles on) of the
    nearest-vector statement of the 96-d model, restricted as `nearest_statement` is told (a
    collection with its number, as `nearest_vectors` tells it)."""
    if "collection" in restrict:
        restrict["collection_key"] = vector_indexes.collection_key(conn, restrict["collection"])
    text = nearest_statement(SMALL, 96, **restrict).as_string(conn)
    for number, name in enumerate(("q", "mode", "fetch", "collections"), 1):
        text = text.replace(f"%({name})s", f"${number}")
    explain = sql.SQL("EXPLAIN (GENERIC_PLAN, COSTS OFF) {}").format(sql.SQL(text))  # type: ignore[arg-type]
    return "\n".join(r[0] for r in conn.execute(explain))


def test_a_one_collection_search_walks_its_collection_index(
    searched: tuple[PostgresResource, dict[str, np.ndarray]],
) -> None:
    """Naming the one collection by a literal, the generic plan is an ordered scan of the
    collection's index; the `ANY` form of several collections cannot prove it applies."""
    postgres, _ = searched
    with postgres.connection() as conn, conn.transaction():
        own = vector_indexes.index_name(conn, SMALL, 96, TENANT)
        configure_scan(conn, 40)
        text = plan(conn, collection=TENANT)
        shared = plan(conn, among=True)
    scans = [line for line in text.splitlines() if "Index Scan" in line]
    assert own is not None and scans and own in scans[0], text
    assert "Sort" not in text and "Seq Scan" not in text, text
    assert own not in shared and schema.chunk_index_hnsw_name(SMALL, 96) in shared, shared


def test_a_one_collection_search_answers_the_same_with_and_without_its_index(
    searched: tuple[PostgresResource, dict[str, np.ndarray]],
) -> None:
    """`nearest_vectors` of one collection: its rows only, the exact nearest first, the same
    hits and distances whether its index is there or not (dropped in a rolled-back
    transaction: the model's index, filtered, answers): the top 10 of a pool of 40, and every
    row of the collection when the pool is as large as it."""
    postgres, vectors = searched
    values = vectors[TENANT]
    target = IndexTarget(MODE, SMALL)
    with postgres.connection() as conn:
        name = vector_indexes.index_name(conn, SMALL, 96, TENANT)
    assert name is not None
    for seed in range(3):
        query = values[seed * 7] + 0.3 * unit_vectors(1, 96, seed=40 + seed)[0]
        query = (query / np.linalg.norm(query)).astype(np.float32)
        answers: dict[bool, dict[int, list[tuple[Any, ...]]]] = {}
        with postgres.connection() as conn:
            with conn.transaction():
                assert name in plan(conn, collection=TENANT)
                answers[True] = {
                    fetch: ranked(nearest_vectors(conn, query, target, fetch, [TENANT]))
                    for fetch in (40, TENANT_CHUNKS)
                }
            with conn.transaction(force_rollback=True):
                conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(schema.SCHEMA, name)))
                assert name not in plan(conn, collection=TENANT)
                answers[False] = {
                    fetch: ranked(nearest_vectors(conn, query, target, fetch, [TENANT]))
                    for fetch in (40, TENANT_CHUNKS)
                }
        exact = exact_order(values, query)
        for found in answers.values():
            assert {r[0] for r in found[40]} == {"b1"}
            assert [int(r[2][1:]) for r in found[40][:10]] == exact[:10]
            assert [int(r[2][1:]) for r in found[TENANT_CHUNKS]] == exact
        assert answers[True][40][:10] == answers[False][40][:10]
        assert answers[True][TENANT_CHUNKS] == answers[False][TENANT_CHUNKS]


def ranked(found: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Hits nearest first (the iterative scan's order is relaxed), ties by chunk id, as
    `exact_order` ranks them."""
    return sorted(found, key=lambda r: (round(r[3], 6), r[2]))


def test_the_search_of_one_collection_walks_its_index_once_its_statement_is_prepared(
    searched: tuple[PostgresResource, dict[str, np.ndarray]],
) -> None:
    """`nearest_vectors` itself, under a generic plan (what a prepared statement settles on
    after a few runs): the index scans PostgreSQL counts in the transaction are the collection
    index's, none of the model's."""
    postgres, vectors = searched
    with postgres.connection() as conn:
        names = {
            vector_indexes.index_name(conn, SMALL, 96, TENANT): "own",
            schema.chunk_index_hnsw_name(SMALL, 96): "model",
        }

    def counted(conn: psycopg.Connection[Any]) -> dict[str, int]:
        rows = conn.execute(
            "SELECT c.relname, pg_stat_get_xact_numscans(c.oid) FROM pg_class AS c"
            " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = ANY(%s)",
            (schema.SCHEMA, list(names)),
        ).fetchall()
        return {names[name]: int(count) for name, count in rows}

    with postgres.connection() as conn, conn.transaction():  # counts stay pending until it ends
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        configure_scan(conn, 10)
        before = counted(conn)
        for position in (3, 4, 5):
            query = vectors[TENANT][position]
            found = nearest_vectors(conn, query, IndexTarget(MODE, SMALL), 10, [TENANT])
            assert found and found[0][2] == f"c{position:05d}"
        after = counted(conn)
    scans = {key: after[key] - before[key] for key in after}
    assert scans == {"own": 3, "model": 0}, scans


def test_a_search_planned_before_its_collection_had_a_number_finds_its_rows_after(
    postgres: PostgresResource,
) -> None:
    """A session that prepared the search of a collection before it had a number (nor rows):
    once the collection is indexed, the same session's same statement walks its index and
    answers exactly (the number's arrival replans what was planned without it)."""
    values = unit_vectors(40, 96, seed=31)
    query = values[5]
    target = IndexTarget(MODE, SMALL)
    with postgres.connection() as reader:  # one session throughout
        reader.execute("SET plan_cache_mode = force_generic_plan")
        for _ in range(3):
            with reader.transaction():
                assert nearest_vectors(reader, query, target, 40, ["late"]) == []
        assert publish_in(postgres, "late", "b9", SMALL, values)["published"]
        with reader.transaction():
            found = ranked(nearest_vectors(reader, query, target, 40, ["late"]))
            name = vector_indexes.index_name(reader, SMALL, 96, "late")
            assert name is not None and name in plan(reader, collection="late")
        reader.execute("RESET plan_cache_mode")
    assert [int(r[2][1:]) for r in found] == exact_order(values, query)


def test_a_collection_index_that_names_its_collection_is_rebuilt_under_its_number(
    postgres: PostgresResource,
) -> None:
    """An index made before collection numbers (its name a hash of the collection, its
    predicate and comment the name itself) is replaced by the migration: the same rows under
    the collection's number, and no definition or comment names the collection."""
    values = unit_vectors(30, 96, seed=32)
    assert publish_in(postgres, TENANT, "b1", SMALL, values, make_indexes=False)["held"] == {}
    digest = hashlib.sha256(TENANT.encode()).hexdigest()[:12]
    legacy = f"{schema.chunk_index_hnsw_name(SMALL, 96)}_{digest}"
    with postgres.connection() as conn:
        conn.execute(
            sql.SQL(
                "CREATE INDEX {} ON seams.chunk_index USING hnsw"
                " ((embedding::vector(96)) vector_cosine_ops)"
                " WHERE model_id = {} AND collection = {}"
            ).format(sql.Identifier(legacy), sql.Literal(SMALL), sql.Literal(TENANT))
        )
        conn.execute(
            sql.SQL("COMMENT ON INDEX {} IS {}").format(
                sql.Identifier(schema.SCHEMA, legacy),
                sql.Literal(json.dumps({"collection": TENANT, "model_id": SMALL})),
            )
        )
        assert [(i.name, i.collection_key) for i in vector_indexes.model_indexes(conn)] == [
            (legacy, None)
        ]
        conn.execute("UPDATE seams.schema_version SET ddl_sha256 = 'older'")
        assert migrations.migrate(conn).applied
        found = vector_indexes.model_indexes(conn)
        named = conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE indexdef LIKE %s", (f"%{TENANT}%",)
        ).fetchone()
        comments = conn.execute(
            "SELECT count(*) FROM pg_description WHERE description LIKE %s", (f"%{TENANT}%",)
        ).fetchone()
        own = vector_indexes.index_name(conn, SMALL, 96, TENANT)
    assert [(i.name, i.collection, i.model_id) for i in found] == [(own, TENANT, SMALL)]
    assert named == (0,) and comments == (0,)


def test_a_collection_without_a_number_is_searched_all_the_same(
    postgres: PostgresResource,
) -> None:
    """Rows of a collection that never had an index of its own (no number): its search reads
    them through the model's index, exactly."""
    values = unit_vectors(30, 96, seed=33)
    assert publish_in(postgres, "plain", "b8", SMALL, values, make_indexes=False)["held"] == {}
    with postgres.connection() as conn, conn.transaction():
        assert vector_indexes.collection_key(conn, "plain") is None
        found = ranked(nearest_vectors(conn, values[3], IndexTarget(MODE, SMALL), 30, ["plain"]))
    assert [int(r[2][1:]) for r in found] == exact_order(values, values[3])
