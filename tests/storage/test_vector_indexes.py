"""Vectors of any dimension in `seams.chunk_index`, one HNSW index per model, and dense search
that reads one model's vectors only (real PostgreSQL + pgvector).

Rows are written through `write_table` exactly as the IO manager writes them (a build of
`chunks`, then its `chunk_index`, which publishes it); the oracle of every ranking is numpy's
exact cosine over the vectors the test wrote.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import psycopg
import pytest
from psycopg import sql

from seams.errors import InputError
from seams.resources.postgres import PostgresResource, close_pool
from seams.storage import publication, schema, vector_indexes
from seams.storage.index_publication import write_and_publish
from seams.storage.migrations import migrate
from seams.storage.partition_tables import write_table
from seams.storage.search.dense import (
    IndexTarget,
    configure_scan,
    index_target,
    nearest_statement,
    nearest_vectors,
)
from tests.support.search_probes import search_vector

MODE = "text"
PACKAGED = "minilm-like"  # a 384-d model, as the packaged one
SMALL = "tiny-96"  # a user's 96-d model
DIMENSIONS = {PACKAGED: schema.EMBEDDING_DIM, SMALL: 96}


def unit_vectors(n: int, dimension: int, seed: int) -> np.ndarray:
    """`n` unit vectors around 24 directions (as embeddings of a corpus are: topics, not noise),
    float32 as stored."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(24, dimension))
    vectors = centres[rng.integers(0, 24, n)] + 0.6 * rng.normal(size=(n, dimension))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32)


def chunk_rows(key: str, n: int) -> pd.DataFrame:
    """`n` chunks of batch `key` (two documents of its own), as `chunks` stores them."""
    rows = []
    for i in range(n):
        document_id = f"{key}-doc-{i % 2}"
        text = f"chunk {i} of {document_id}"
        rows.append({
            "batch_key": key, "chunk_id": f"c{i:05d}", "document_id": document_id,
            "chunk_index": i // 2, "total_chunks": (n + 1 - i % 2) // 2, "text": text,
            "start_char": 0, "end_char": len(text), "overlap_start": 0, "overlap_end": 0,
            "token_count": 4, "sentence_count": 1, "page_start": None, "page_end": None,
            "section": "", "cohesion": None, "boundary_method": "semantic",
            "strategy": "context_aware", "metadata": {}, "run_id": "r", "config_hash": "c",
            "model_id": "m", "source_sha256": f"v-{document_id}", "code_version": "v",
        })  # fmt: skip
    return pd.DataFrame(rows, columns=["batch_key", *(c.name for c in schema.CHUNKS.data_columns)])


def index_rows(chunks: pd.DataFrame, model_id: str, vectors: np.ndarray) -> pd.DataFrame:
    """One `chunk_index` row per chunk: its vector of `model_id` (`vectors`, in chunk order)."""
    rows = []
    for r, vector in zip(chunks.itertuples(index=False), vectors, strict=True):
        rows.append({
            "batch_key": r.batch_key, "chunk_id": r.chunk_id, "document_id": r.document_id,
            "mode": MODE, "model_id": model_id, "embedding": vector,
            "text_search_config": "english",
        })  # fmt: skip
    return pd.DataFrame(
        rows, columns=["batch_key", *(c.name for c in schema.CHUNK_INDEX.data_columns)]
    )


def publish(
    postgres: PostgresResource,
    key: str,
    model_id: str,
    vectors: np.ndarray,
    *,
    beside: bool = False,
) -> None:
    """Register batch `key`, then write its chunks and their vectors of `model_id` as the
    pipeline does (the model's index made first, as the `chunk_index` asset does): one
    published build.

    `beside`: the batch's model is not the serving one, so the write holds the build for a
    model switch (`publication`); it is then published directly (`publication.publish`), two
    models side by side, as a database published before switches were held holds them."""
    chunks = chunk_rows(key, len(vectors))
    with postgres.connection() as conn, conn.transaction():
        conn.execute(
            "INSERT INTO seams.batches (batch_key, source, document_count) VALUES (%s, 't', 2)",
            (key,),
        )
        for document_id in sorted(set(chunks["document_id"])):
            conn.execute(
                "INSERT INTO seams.batch_documents (batch_key, document_id, source_uri,"
                " source_sha256, size_bytes) VALUES (%s, %s, %s, %s, 0)",
                (key, document_id, f"file:///{document_id}", f"v-{document_id}"),
            )
    with postgres.connection() as conn:
        vector_indexes.ensure_model_index(conn, model_id, vectors.shape[1])
    write_table(postgres, schema.CHUNKS, chunks, [key], run_id="r")
    frame = index_rows(chunks, model_id, vectors)
    written = write_and_publish(postgres, frame, [key], run_id="r")
    generation = written.published.get(key)
    if beside:
        assert written.held[key].startswith("held: waiting for batch"), written.held
        generation = written.batches[key].generation
        with postgres.connection() as conn, conn.transaction():
            publication.publish(conn, {key: generation}, run_id="r")
    assert generation is not None, written.held
    with postgres.connection() as conn:  # what hits read their context from
        for document_id, text in chunks.groupby("document_id")["text"].first().items():
            conn.execute(
                "INSERT INTO seams.extracted_text (batch_key, document_id, source_uri,"
                " source_sha256, mime, text, char_count, generation)"
                " VALUES (%s, %s, %s, %s, 'text/plain', %s, %s, %s)",
                (key, document_id, "file:///x", f"v-{document_id}", text, len(text),
                 generation),
            )  # fmt: skip


def exact_order(vectors: np.ndarray, query: np.ndarray) -> list[int]:
    """Positions of `vectors` by exact cosine with `query`, best first (ties: position)."""
    cosines = vectors.astype(np.float64) @ query.astype(np.float64)
    return sorted(range(len(vectors)), key=lambda i: (-round(cosines[i], 6), i))


def plan(conn: psycopg.Connection[Any], model_id: str, dimension: int, query: Any) -> str:
    statement = sql.SQL("EXPLAIN (COSTS OFF) {}").format(nearest_statement(model_id, dimension))
    params = {"q": query, "mode": MODE, "fetch": 10}
    return "\n".join(r[0] for r in conn.execute(statement, params))


# --- names and DDL -----------------------------------------------------------------------------


def test_index_names_are_deterministic_per_model_and_dimension() -> None:
    name = schema.chunk_index_hnsw_name("a" * 64, 384)
    assert name == schema.chunk_index_hnsw_name("a" * 64, 384)
    assert name.startswith("chunk_index_hnsw_384_") and len(name) <= 63
    assert schema.chunk_index_hnsw_name("a" * 64, 96) != name
    assert schema.chunk_index_hnsw_name("b" * 64, 384) != name
    odd = "model'; DROP TABLE seams.chunks; --"
    assert (
        schema.chunk_index_hnsw(odd, 8)
        .as_string(None)
        .endswith("WHERE \"model_id\" = 'model''; DROP TABLE seams.chunks; --'")
    )
    for bad in (0, -1, 16001, 3.0, "384", True):
        with pytest.raises(ValueError, match="vector dimension must be an integer"):
            schema.chunk_index_hnsw_name("m", bad)  # type: ignore[arg-type]


def test_a_fresh_schema_stores_any_dimension_and_holds_no_vector_index(
    postgres: PostgresResource,
) -> None:
    with postgres.connection() as conn:
        column = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = 'seams.chunk_index'::regclass AND attname = 'embedding'"
        ).fetchone()
        assert column == ("vector",)
        assert vector_indexes.model_indexes(conn) == []
        assert conn.execute(
            "SELECT to_regclass(%s)", (f"seams.{schema.LEGACY_CHUNK_INDEX_HNSW}",)
        ).fetchone() == (None,)


# --- one index per model, made before its vectors, dropped after them ---------------------------


def test_ensure_makes_one_index_per_model_once_and_drop_waits_for_the_last_vector(
    postgres: PostgresResource,
) -> None:
    with postgres.connection() as conn:
        assert vector_indexes.ensure_model_index(conn, PACKAGED, 384) is True
        assert vector_indexes.ensure_model_index(conn, PACKAGED, 384) is False  # idempotent
    publish(postgres, "b1", PACKAGED, unit_vectors(40, 384, seed=1))
    publish(postgres, "b2", SMALL, unit_vectors(40, 96, seed=1), beside=True)  # SMALL's index
    with postgres.connection() as conn:
        found = vector_indexes.model_indexes(conn)
        assert sorted((i.model_id, i.dimension, i.valid) for i in found) == [
            (PACKAGED, 384, True),
            (SMALL, 96, True),
        ]
        assert {i.name for i in found} == {
            schema.chunk_index_hnsw_name(m, d) for m, d in DIMENSIONS.items()
        }
        # Vectors of both models are there: nothing is dropped.
        assert vector_indexes.drop_unused_model_indexes(conn) == []
        assert vector_indexes.drop_model_indexes(conn, SMALL) == []
        conn.execute("DELETE FROM seams.chunk_index WHERE model_id = %s", (SMALL,))
        assert vector_indexes.drop_unused_model_indexes(conn, keep=(PACKAGED,)) == [
            schema.chunk_index_hnsw_name(SMALL, 96)
        ]
        assert [i.model_id for i in vector_indexes.model_indexes(conn)] == [PACKAGED]
        # A model with no vector yet keeps its index when it is the one being written.
        vector_indexes.ensure_model_index(conn, "next", 96)
        assert vector_indexes.drop_unused_model_indexes(conn, keep=("next",)) == []
    # Inside a caller's transaction the drop is a plain DROP INDEX, committed with it.
    with psycopg.connect(postgres.url) as conn:
        assert vector_indexes.drop_model_indexes(conn, "next") == [
            schema.chunk_index_hnsw_name("next", 96)
        ]
    with postgres.connection() as conn:
        assert [i.model_id for i in vector_indexes.model_indexes(conn)] == [PACKAGED]


def test_a_model_wider_than_hnsw_indexes_is_stored_and_searched_exactly(
    postgres: PostgresResource,
) -> None:
    wide = unit_vectors(12, schema.MAX_HNSW_DIMENSIONS + 48, seed=2)
    publish(postgres, "b1", "wide", wide)
    with postgres.connection() as conn:
        assert vector_indexes.model_indexes(conn) == []
        found = nearest_vectors(conn, wide[3], IndexTarget(MODE, "wide"), 5)
    assert [int(r[2][1:]) for r in found] == exact_order(wide, wide[3])[:5]


# --- search reads one model ----------------------------------------------------------------------


def test_two_models_of_different_dimensions_each_answer_with_their_own_vectors_in_exact_order(
    postgres: PostgresResource,
) -> None:
    """Two published batches of 60 chunks, one indexed by a 384-d model, one by a 96-d model:
    each model's search answers with its own batch's chunks only, in its vectors' exact cosine
    order, with their distances; a query of the other dimension is refused in one line, never
    answered from the other model's rows."""
    vectors = {m: unit_vectors(60, d, seed=3 + d) for m, d in DIMENSIONS.items()}
    batches = {PACKAGED: "b1", SMALL: "b2"}
    for model_id, values in vectors.items():
        publish(postgres, batches[model_id], model_id, values, beside=model_id == SMALL)
    with postgres.connection() as conn:  # without a model: the newest batch's
        assert index_target(conn) == IndexTarget(MODE, SMALL, "english")
    for model_id, values in vectors.items():
        query = unit_vectors(1, values.shape[1], seed=7)[0]
        with postgres.connection() as conn, conn.transaction():
            found = nearest_vectors(conn, query, IndexTarget(MODE, model_id), 120)
            target = index_target(conn, model_id=model_id)
        assert target == IndexTarget(MODE, model_id, "english")
        assert {r[0] for r in found} == {batches[model_id]}
        expected = exact_order(values, query)
        assert [int(r[2][1:]) for r in found] == expected
        cosines = values.astype(np.float64) @ query.astype(np.float64)
        assert np.allclose([1 - r[3] for r in found], cosines[expected], atol=1e-6)
        hits, fetched = search_vector(
            postgres, query, 5, model_id=model_id, mode=MODE, sentence_weight=0.0
        )
        assert fetched == 40
        assert {h.batch_key for h in hits} == {batches[model_id]}
        assert [int(h.chunk_id[1:]) for h in hits] == expected[:5]
    with postgres.connection() as conn, pytest.raises(InputError, match="96 dimensions"):
        nearest_vectors(conn, unit_vectors(1, 96, 0)[0], IndexTarget(MODE, PACKAGED), 5)
    with postgres.connection() as conn:
        assert index_target(conn, model_id="another") is None


def test_each_models_search_walks_its_own_hnsw_index_at_a_realistic_size(
    postgres: PostgresResource,
) -> None:
    """3000 chunks indexed by each model: each search's plan is one ordered scan of its
    model's index (the literal model id proves the partial index applies, in a generic plan
    too), and its top 10 are the exact top 10."""
    vectors = {m: unit_vectors(3000, d, seed=11 + d) for m, d in DIMENSIONS.items()}
    batches = {PACKAGED: "b1", SMALL: "b2"}
    for model_id, values in vectors.items():
        publish(postgres, batches[model_id], model_id, values, beside=model_id == SMALL)
    with postgres.connection() as conn:
        conn.execute("ANALYZE seams.chunk_index")
    for model_id, values in vectors.items():
        dimension = values.shape[1]
        query = values[17] + 0.2 * unit_vectors(1, dimension, seed=5)[0]
        query = (query / np.linalg.norm(query)).astype(np.float32)
        with postgres.connection() as conn, conn.transaction():
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            configure_scan(conn, 200)
            text = plan(conn, model_id, dimension, query)
            found = nearest_vectors(conn, query, IndexTarget(MODE, model_id), 200)
        scans = [line for line in text.splitlines() if "Index Scan" in line]
        assert scans and schema.chunk_index_hnsw_name(model_id, dimension) in scans[0], text
        assert "Sort" not in text and "Seq Scan" not in text, text
        assert {r[0] for r in found} == {batches[model_id]}
        assert [int(r[2][1:]) for r in found[:10]] == exact_order(values, query)[:10]


# --- the migration of a fixed-dimension index ---------------------------------------------------

#: The nearest-vector statement of the release whose `chunk_index.embedding` was `vector(384)`.
OLD_NEAREST = """
SELECT i.batch_key, i.document_id, i.chunk_id, i.embedding <=> %(q)s AS distance
FROM seams.chunk_index AS i
WHERE i.mode = %(mode)s AND i.model_id = %(model)s AND i.generation <= (
    SELECT d.generation FROM seams.current_documents AS d
    WHERE d.document_id = i.document_id AND d.batch_key = i.batch_key)
ORDER BY i.embedding <=> %(q)s
LIMIT %(fetch)s
"""


def make_fixed_dimension(url: str) -> None:
    """Put `chunk_index` back in the shape of the release before vectors of any dimension: a
    `vector(384)` column and one HNSW index over every row; the schema recorded as older."""
    with psycopg.connect(url, autocommit=True) as conn:
        for index in vector_indexes.model_indexes(conn):
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier("seams", index.name)))
        conn.execute("ALTER TABLE seams.chunk_index ALTER COLUMN embedding TYPE vector(384)")
        conn.execute(
            "CREATE INDEX chunk_index_embedding_hnsw ON seams.chunk_index"
            " USING hnsw (embedding vector_cosine_ops)"
        )
        conn.execute("UPDATE seams.schema_version SET ddl_sha256 = 'older'")
        conn.execute("ANALYZE seams.chunk_index")


def text(vector: np.ndarray) -> str:
    """A vector as pgvector's text, every float32 digit kept."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def contents(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT batch_key, generation, chunk_id, model_id, mode, embedding::text"
            " FROM seams.chunk_index ORDER BY 1, 2, 3, 4"
        ).fetchall()


def test_a_fixed_dimension_index_migrates_without_losing_a_row_and_answers_as_before(
    postgres: PostgresResource, database_url: str
) -> None:
    """An existing database (`vector(384)`, one HNSW index over all rows) is migrated once: the
    column takes any dimension, the old index goes, the model present gets its own index, every
    row keeps its exact values, and search answers exactly as the old statement did."""
    values = unit_vectors(2000, 384, seed=21)
    publish(postgres, "b1", PACKAGED, values)
    close_pool(database_url)
    make_fixed_dimension(database_url)
    before_rows = contents(database_url)
    queries = [values[i] + 0.3 * unit_vectors(1, 384, seed=i)[0] for i in (3, 500, 1999)]
    queries = [(q / np.linalg.norm(q)).astype(np.float32) for q in queries]
    params: dict[str, Any] = {"mode": MODE, "model": PACKAGED, "fetch": 40}
    before = []
    with psycopg.connect(database_url) as conn:
        configure_scan(conn, 40)
        old_plan = "\n".join(
            r[0] for r in conn.execute("EXPLAIN " + OLD_NEAREST, {**params, "q": text(queries[0])})
        )
        assert "Index Scan using chunk_index_embedding_hnsw" in old_plan, old_plan[-600:]
        for q in queries:
            before.append(conn.execute(OLD_NEAREST, {**params, "q": text(q)}).fetchall())

    migration = migrate(database_url)
    assert migration.applied
    assert contents(database_url) == before_rows
    with psycopg.connect(database_url) as conn:
        column = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = 'seams.chunk_index'::regclass AND attname = 'embedding'"
        ).fetchone()
        assert column == ("vector",)
        assert conn.execute(
            "SELECT to_regclass('seams.chunk_index_embedding_hnsw')"
        ).fetchone() == (None,)
        indexes = vector_indexes.model_indexes(conn)
        assert [(i.name, i.model_id, i.dimension) for i in indexes] == [
            (schema.chunk_index_hnsw_name(PACKAGED, 384), PACKAGED, 384)
        ]
        # The migrated index is the one the write path makes: nothing left to build.
        assert vector_indexes.ensure_model_index(conn, PACKAGED, 384) is False
        made = conn.execute(
            "SELECT pg_get_indexdef(%s::regclass)", (f"seams.{indexes[0].name}",)
        ).fetchone()[0]
        assert "hnsw (((embedding)::vector(384)) vector_cosine_ops)" in made
        assert f"WHERE (model_id = '{PACKAGED}'::text)" in made
    assert not migrate(database_url).applied  # once
    after = []
    with PostgresResource(url=database_url).connection() as conn, conn.transaction():
        assert indexes[0].name in plan(conn, PACKAGED, 384, queries[0])
        for q in queries:
            after.append(nearest_vectors(conn, q, IndexTarget(MODE, PACKAGED), 40))
    for q, old, new in zip(queries, before, after, strict=True):
        assert [r[:3] for r in new[:10]] == [r[:3] for r in old[:10]]
        assert np.allclose([r[3] for r in new[:10]], [r[3] for r in old[:10]], atol=1e-6)
        assert [int(r[2][1:]) for r in new[:10]] == exact_order(values, q)[:10]
