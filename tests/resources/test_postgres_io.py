"""PostgresIOManager against a real PostgreSQL: round trips with the metadata Dagster shows,
reruns and ranges of partitions, the schema contract and the `current_chunks` view.

Every test gets a fresh database (`database_url`); writes go through Dagster's own contexts
(`build_output_context` / `build_input_context`) or a real `dagster.materialize`. What the
storing itself guarantees (coercions, atomicity under failures, concurrent writers, hostile
names) is tested on `write_table` / `read_table` in `tests/storage/test_partition_tables.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dagster as dg
import numpy as np
import pandas as pd
import psycopg
import pytest

from seams.errors import StorageError
from seams.orchestration.dagster_internals import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)
from seams.resources.io_manager import PostgresIOManager
from seams.resources.postgres import PostgresResource, close_pool
from seams.storage import schema
from seams.storage.index_publication import write_and_publish
from seams.storage.partition_tables import read_table, write_table
from tests.storage.table_samples import assert_same, count, sample_frame

BATCHES = dg.DynamicPartitionsDefinition(name="document_batches")


@pytest.fixture
def postgres(database_url: str) -> Iterator[PostgresResource]:
    resource = PostgresResource(url=database_url)
    yield resource
    close_pool(database_url)


@pytest.fixture
def io(postgres: PostgresResource) -> PostgresIOManager:
    return PostgresIOManager(postgres=postgres)


# --- helpers ---------------------------------------------------------------------------------


def store(
    io: PostgresIOManager,
    asset: str,
    frame: pd.DataFrame,
    partition: str | None = "b1",
    partitions: list[str] | None = None,
) -> dict[str, Any]:
    """handle_output through a Dagster output context; returns the output metadata."""
    kwargs: dict[str, Any] = {"asset_key": asset}
    if partitions:
        kwargs["asset_partitions_def"] = dg.StaticPartitionsDefinition(sorted(partitions))
        kwargs["asset_partition_key_range"] = dg.PartitionKeyRange(min(partitions), max(partitions))
    elif partition is not None:
        kwargs["partition_key"] = partition
    context = dg.build_output_context(**kwargs)
    io.handle_output(context, frame)
    return {k: v for k, v in context.get_logged_metadata().items()}


def load(io: PostgresIOManager, asset: str, *partitions: str) -> pd.DataFrame:
    kwargs: dict[str, Any] = {"asset_key": dg.AssetKey(asset)}
    if len(partitions) == 1:
        kwargs["partition_key"] = partitions[0]
    elif partitions:
        kwargs["asset_partitions_def"] = dg.StaticPartitionsDefinition(sorted(partitions))
        kwargs["asset_partition_key_range"] = dg.PartitionKeyRange(min(partitions), max(partitions))
    return io.load_input(dg.build_input_context(**kwargs))


# --- round trips -----------------------------------------------------------------------------


@pytest.mark.parametrize("table", list(schema.ASSET_TABLES.values()), ids=lambda t: t.name)
def test_every_column_type_round_trips_exactly(io: PostgresIOManager, table: schema.Table) -> None:
    written = sample_frame(table, 9)
    meta = store(io, table.name, written)
    loaded = load(io, table.name, "b1")
    assert_same(loaded, written, table)
    assert (loaded[schema.BATCH_KEY] == "b1").all()
    assert meta["rows_written"].value == 9
    assert meta["dagster/row_count"].value == 9
    assert meta["dagster/table_name"].value == f"seams.{table.name}"
    assert meta["bytes_written"].value > 0
    schema_columns = meta["dagster/column_schema"].schema.columns
    assert [c.name for c in schema_columns] == table.column_names


# --- the schema contract -------------------------------------------------------------------------


def test_an_asset_without_a_declared_table_is_refused(io: PostgresIOManager) -> None:
    with pytest.raises(StorageError, match="asset mystery has no table declared"):
        store(io, "mystery", pd.DataFrame({"x": [1]}))


def test_a_table_that_drifted_from_its_declaration_is_reported(
    database_url: str, postgres: PostgresResource
) -> None:
    postgres.ensure_schema()
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE seams.semantic_boundaries DROP COLUMN reason")
    close_pool(database_url)
    with pytest.raises(StorageError, match=r"seams\.semantic_boundaries .*\('reason', 'text'"):
        PostgresResource(url=database_url).ensure_schema()


def test_ensure_schema_is_idempotent_and_creates_the_view(
    database_url: str, postgres: PostgresResource
) -> None:
    postgres.ensure_schema()
    postgres.ensure_schema()
    with psycopg.connect(database_url) as conn:
        names = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'seams'"
            )
        }
    views = {
        schema.CURRENT_CHUNKS_VIEW,
        schema.CURRENT_VERSIONS_VIEW,
        schema.CHUNK_PARENTS_VIEW,
        schema.PUBLISHED_CHUNKS_VIEW,
    }
    assert names == {t.name for t in schema.TABLES} | views


# --- replace, never duplicate -------------------------------------------------------------------


def test_rerun_replaces_the_partition_and_leaves_others_alone(
    io: PostgresIOManager, database_url: str
) -> None:
    store(io, "sentence_candidates", sample_frame(schema.SENTENCE_CANDIDATES, 12), "b1")
    store(io, "sentence_candidates", sample_frame(schema.SENTENCE_CANDIDATES, 7), "b2")
    rerun = sample_frame(schema.SENTENCE_CANDIDATES, 5, seed=1)
    meta = store(io, "sentence_candidates", rerun, "b1")
    assert meta["rows_deleted"].value == 12 and meta["rows_written"].value == 5
    assert_same(load(io, "sentence_candidates", "b1"), rerun, schema.SENTENCE_CANDIDATES)
    assert count(database_url, "sentence_candidates", "batch_key = 'b2'") == 7
    store(io, "sentence_candidates", rerun, "b1")
    assert count(database_url, "sentence_candidates") == 12


def test_one_run_writes_a_range_of_partitions_from_a_batch_key_column(
    io: PostgresIOManager, database_url: str
) -> None:
    table = schema.SEMANTIC_BOUNDARIES
    for key in ("a", "b", "c"):
        store(io, table.name, sample_frame(table, 4), key)
    backfill = pd.concat(
        [sample_frame(table, 3, tag="new").assign(batch_key=k) for k in ("a", "b")],
        ignore_index=True,
    )
    meta = store(io, table.name, backfill, partitions=["a", "b", "c"])
    # Output metadata lands on every partition's page: only the run's share, named as the run's.
    assert meta["run_partitions_written"].value == 3
    assert not {"rows_deleted", "rows_written", "dagster/row_count"} & set(meta)
    loaded = load(io, table.name, "a", "b", "c")
    assert loaded["batch_key"].tolist() == ["a"] * 3 + ["b"] * 3  # c's rows were replaced by none
    assert loaded["reason"].str.endswith("new").all()

    with pytest.raises(StorageError, match="must carry a batch_key column"):
        store(io, table.name, sample_frame(table, 2), partitions=["a", "b"])
    with pytest.raises(StorageError, match=r"holds \['z'\]"):
        store(io, table.name, backfill.assign(batch_key="z"), partitions=["a", "b"])
    assert count(database_url, table.name) == 6


def test_an_unreachable_server_is_a_clear_redacted_error(tmp_path: Any) -> None:
    url = f"postgresql://seams:hunter2@/seams?host={tmp_path}&connect_timeout=2"
    with pytest.raises(StorageError) as info:
        load(PostgresIOManager(postgres=PostgresResource(url=url)), "chunks", "b1")
    message = str(info.value)
    assert message.startswith("cannot connect to PostgreSQL at postgresql://seams:***@/seams")
    assert "hunter2" not in message


# --- the current_chunks view ----------------------------------------------------------------


def _register(url: str, batch: str, docs: list[tuple[str, str]], at: str) -> None:
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO seams.batches (batch_key, created_at, source, document_count) "
            "VALUES (%s, %s, 'test', %s)",
            (batch, at, len(docs)),
        )
        for doc, sha in docs:
            conn.execute(
                "INSERT INTO seams.batch_documents (batch_key, document_id, source_uri, "
                "source_sha256, size_bytes, registered_at) VALUES (%s, %s, %s, %s, 10, %s)",
                (batch, doc, f"file:///{doc}", sha, at),
            )


def _chunks(doc_versions: list[tuple[str, str, int]]) -> pd.DataFrame:
    frames = []
    for doc, sha, n in doc_versions:
        frame = sample_frame(schema.CHUNKS, n)
        frames.append(
            frame.assign(
                document_id=doc,
                source_sha256=sha,
                chunk_index=range(n),
                chunk_id=[f"{doc}-{sha}-{i}" for i in range(n)],
                text=[f"{doc} version {sha} chunk {i}" for i in range(n)],
            )
        )
    return pd.concat(frames, ignore_index=True)


def _published(io: PostgresIOManager, chunks: pd.DataFrame, key: str) -> None:
    """Store a batch's chunks through the IO manager, then its index (one unit vector per
    chunk) as its asset writes it: the write that completes the batch's build and publishes
    it."""
    store(io, "chunks", chunks, key)
    vector = np.zeros(schema.EMBEDDING_DIM, dtype=np.float32)
    vector[0] = 1.0
    index = pd.DataFrame(
        {
            "chunk_id": chunks["chunk_id"],
            "document_id": chunks["document_id"],
            "mode": "text",
            "model_id": "m",
            "embedding": [vector] * len(chunks),
            "text_search_config": "english",
        }
    )
    write_and_publish(io.postgres, index, [key])  # as the `chunk_index` asset writes it


def test_current_chunks_shows_only_each_documents_newest_published_version(
    io: PostgresIOManager, postgres: PostgresResource, database_url: str
) -> None:
    postgres.ensure_schema()
    _register(database_url, "b1", [("guide", "v1"), ("faq", "f1")], "2026-01-01T00:00:00Z")
    _register(database_url, "b2", [("guide", "v2")], "2026-01-02T00:00:00Z")
    _published(io, _chunks([("guide", "v1", 3), ("faq", "f1", 2)]), "b1")

    def current() -> list[tuple[str, str]]:
        with psycopg.connect(database_url) as conn:
            return conn.execute(
                "SELECT document_id, source_sha256 FROM seams.current_chunks "
                "ORDER BY document_id, chunk_index"
            ).fetchall()

    # guide v2 is registered but not published yet: readers keep v1, complete
    assert current() == [("faq", "f1")] * 2 + [("guide", "v1")] * 3
    store(io, "chunks", _chunks([("guide", "v2", 4)]), "b2")  # chunked, not yet indexed
    assert current() == [("faq", "f1")] * 2 + [("guide", "v1")] * 3
    _published(io, _chunks([("guide", "v2", 4)]), "b2")
    assert current() == [("faq", "f1")] * 2 + [("guide", "v2")] * 4
    _published(io, _chunks([("guide", "v1", 3), ("faq", "f1", 2)]), "b1")  # old batch rerun
    assert current() == [("faq", "f1")] * 2 + [("guide", "v2")] * 4

    # guide reverted to v1 in a later batch: only that batch's v1 chunks are current, not b1's
    _register(database_url, "b3", [("guide", "v1")], "2026-01-03T00:00:00Z")
    _published(io, _chunks([("guide", "v1", 3)]), "b3")
    assert current() == [("faq", "f1")] * 2 + [("guide", "v1")] * 3
    with psycopg.connect(database_url) as conn:
        batches = conn.execute(
            "SELECT DISTINCT batch_key FROM seams.current_chunks WHERE document_id = 'guide'"
        ).fetchall()
    assert batches == [("b3",)]


# --- through Dagster ---------------------------------------------------------------------------


def test_materialize_stores_loads_and_reports_metadata(database_url: str) -> None:
    @dg.asset(partitions_def=BATCHES)
    def sentence_candidates(context) -> pd.DataFrame:  # type: ignore[no-untyped-def]
        return sample_frame(schema.SENTENCE_CANDIDATES, 4, tag=context.partition_key)

    @dg.asset(partitions_def=BATCHES)
    def semantic_boundaries(sentence_candidates: pd.DataFrame) -> pd.DataFrame:
        frame = sample_frame(schema.SEMANTIC_BOUNDARIES, len(sentence_candidates))
        return frame.assign(
            document_id=sentence_candidates["document_id"].to_numpy(),
            candidate_index=sentence_candidates["candidate_index"].to_numpy(),
            reason=sentence_candidates["batch_key"].to_numpy(),
        )

    instance = dg.DagsterInstance.ephemeral()
    key = "batch-2026-01-01'; --"
    instance.add_dynamic_partitions("document_batches", [key])
    postgres = PostgresResource(url=database_url)
    resources = {"io_manager": PostgresIOManager(postgres=postgres)}
    try:
        for _ in range(2):
            result = dg.materialize(
                [sentence_candidates, semantic_boundaries],
                instance=instance,
                partition_key=key,
                resources=resources,
            )
            assert result.success
        meta = result.asset_materializations_for_node("semantic_boundaries")[0].metadata
        assert meta["dagster/row_count"].value == 4
        # The rerun's sentence_candidates dropped the open build's later parts, so this write
        # replaced nothing (nothing is published without a chunk_index)
        assert meta["rows_deleted"].value == 0
        assert meta["dagster/table_name"].value == "seams.semantic_boundaries"
        loaded = read_table(postgres, schema.SEMANTIC_BOUNDARIES, [key])
        assert loaded["reason"].tolist() == [key] * 4
    finally:
        close_pool(database_url)


def test_each_partition_of_a_ranged_run_shows_its_own_write(database_url: str) -> None:
    """One run over three batches of different sizes: each batch's materialization reports its
    own rows, deletes, bytes and time; nothing on it is the run's total unless named `run_*`."""
    table = schema.SEMANTIC_BOUNDARIES
    sizes = {"a": 2, "b": 5, "c": 0}

    @dg.asset(partitions_def=BATCHES, backfill_policy=dg.BackfillPolicy.single_run())
    def semantic_boundaries() -> pd.DataFrame:
        return pd.concat(
            [sample_frame(table, sizes[k], tag=k).assign(batch_key=k) for k in "ab"],
            ignore_index=True,
        )

    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(BATCHES.name, list(sizes))
    postgres = PostgresResource(url=database_url)
    try:
        write_table(postgres, table, sample_frame(table, 3), ["b"])
        result = dg.materialize(
            [semantic_boundaries],
            instance=instance,
            resources={"io_manager": PostgresIOManager(postgres=postgres)},
            tags={ASSET_PARTITION_RANGE_START_TAG: "a", ASSET_PARTITION_RANGE_END_TAG: "c"},
        )
        assert result.success
        pages = {
            m.partition: {k: v.value for k, v in m.metadata.items()}
            for m in result.asset_materializations_for_node("semantic_boundaries")
        }
    finally:
        close_pool(database_url)
    assert set(pages) == set(sizes)
    for key, rows in sizes.items():
        page = pages[key]
        assert page["dagster/row_count"] == page["dagster/partition_row_count"] == rows, key
        assert page["rows_written"] == rows and page["rows_deleted"] == (3 if key == "b" else 0)
        assert page["run_partitions_written"] == 3
        assert page["write_seconds"] == round(page["write_seconds"], 3)
    assert pages["b"]["bytes_written"] > pages["a"]["bytes_written"] > pages["c"]["bytes_written"]


def test_unpartitioned_tables_are_replaced_atomically(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = schema.Table(
        "corpus_stats",
        (schema.Column("name", "text"), schema.Column("value", "double precision", True)),
        key=("name",),
        partitioned=False,
    )
    monkeypatch.setattr(schema, "ASSET_TABLES", {**schema.ASSET_TABLES, table.name: table})
    monkeypatch.setattr(schema, "TABLES", (*schema.TABLES, table))
    postgres = PostgresResource(url=database_url)
    io = PostgresIOManager(postgres=postgres)
    try:
        store(io, table.name, pd.DataFrame({"name": ["a", "b"], "value": [1.0, None]}), None)
        meta = store(io, table.name, pd.DataFrame({"name": ["c"], "value": [3.0]}), None)
        assert meta["rows_deleted"].value == 2
        loaded = load(io, table.name)
        assert loaded.to_dict("records") == [{"name": "c", "value": 3.0}]
        with pytest.raises(StorageError, match="declared without batch_key"):
            store(io, table.name, loaded, "b1")
        with pytest.raises(StorageError, match=r"not partitioned but seams.chunks"):
            write_table(postgres, schema.CHUNKS, sample_frame(schema.CHUNKS, 1), None)
    finally:
        close_pool(database_url)
