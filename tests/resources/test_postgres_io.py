"""PostgresIOManager against a real PostgreSQL: round trips, atomic partition writes, concurrency,
hostile names, the schema contract and the `current_chunks` view.

Every test gets a fresh database (`database_url`); writes go through Dagster's own contexts
(`build_output_context` / `build_input_context`) or a real `dagster.materialize`.
"""

from __future__ import annotations

import threading
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
from seams.resources import io_manager as io_module
from seams.resources.io_manager import PostgresIOManager, embedding_matrix, read_table, write_table
from seams.resources.postgres import PostgresResource, close_pool
from seams.storage import schema

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


def sample_frame(table: schema.Table, n: int, *, seed: int = 0, tag: str = "") -> pd.DataFrame:
    """`n` rows for `table` exercising every column type, NULLs where allowed, odd text."""
    rng = np.random.default_rng(seed)
    data: dict[str, Any] = {}
    for col in table.data_columns:
        nulls = col.nullable and n > 1
        if col.name == "document_id":
            per_doc = 3 if {"candidate_index", "chunk_index"} & set(table.key) else 1
            values: Any = [f"doc {i // per_doc} «é»\n'\"{tag}" for i in range(n)]
        elif col.name == "chunk_id":
            values = [f"chunk-{i}{tag}" for i in range(n)]
        elif col.name in ("candidate_index", "chunk_index"):
            values = [i % 3 for i in range(n)]
        elif col.base_type == "integer":
            values = pd.array(rng.integers(-(2**31), 2**31 - 1, n), dtype="Int64")
            if nulls:
                values[1] = pd.NA
            else:
                values = values.to_numpy(dtype=np.int64)
        elif col.base_type == "double precision":
            values = rng.normal(size=n)
            values[0] = 1e-300
            if nulls:
                values[1] = np.nan
        elif col.base_type == "boolean":
            values = rng.random(n) > 0.5
        elif col.base_type == "jsonb":
            values = [{"i": i, "pages": [[0, 10], [10, 25]], "s": "ü'\";"} for i in range(n)]
            if nulls:
                values[1] = None
        elif col.base_type == "vector":
            dim = col.dimension or 7
            values = list(rng.normal(size=(n, dim)).astype(np.float32))
            if nulls:
                values[1] = None
        else:
            values = [f"{col.name} {i} \\ tab\t ☃ {tag}" for i in range(n)]
            if nulls:
                values[1] = None
        data[col.name] = values
    return pd.DataFrame(data)


def assert_same(loaded: pd.DataFrame, written: pd.DataFrame, table: schema.Table) -> None:
    """Loaded rows equal the written ones, in key order, with the declared dtypes."""
    assert list(loaded.columns) == table.column_names
    for col in table.columns:
        assert str(loaded[col.name].dtype) == col.dtype, col.name
    expected = written.sort_values(list(table.key), kind="stable").reset_index(drop=True)
    got = loaded.drop(columns=[schema.BATCH_KEY]).reset_index(drop=True)
    assert len(got) == len(expected)
    for col in table.data_columns:
        if col.base_type == "vector":
            for a, b in zip(got[col.name], expected[col.name], strict=True):
                if b is None:
                    assert a is None
                else:
                    assert a.dtype == np.float32
                    np.testing.assert_array_equal(a, b)
        elif col.base_type == "jsonb":
            assert got[col.name].tolist() == expected[col.name].tolist()
        else:
            pd.testing.assert_series_equal(
                got[col.name], expected[col.name].astype(col.dtype), check_names=False
            )


def count(url: str, table: str, where: str = "TRUE") -> int:
    with psycopg.connect(url) as conn:
        return conn.execute(f"SELECT count(*) FROM seams.{table} WHERE {where}").fetchone()[0]


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


def test_embeddings_load_as_float32_arrays_and_stack(io: PostgresIOManager) -> None:
    frame = sample_frame(schema.CANDIDATE_EMBEDDINGS, 6)
    frame["embedding"] = list(np.eye(6, 5, dtype=np.float64))  # float64 in: stored as float32
    store(io, "candidate_embeddings", frame)
    loaded = load(io, "candidate_embeddings", "b1")
    matrix = embedding_matrix(loaded["embedding"])
    assert matrix.dtype == np.float32 and matrix.shape == (6, 5)
    order = frame.sort_values(["document_id", "candidate_index"], kind="stable").index
    np.testing.assert_array_equal(matrix, np.eye(6, 5, dtype=np.float32)[order])


def test_loading_a_partition_never_written_gives_an_empty_typed_frame(
    io: PostgresIOManager,
) -> None:
    loaded = load(io, "sentence_candidates", "nothing-here")
    assert loaded.empty
    assert list(loaded.columns) == schema.SENTENCE_CANDIDATES.column_names
    assert str(loaded["candidate_index"].dtype) == "int64"
    assert str(loaded["page"].dtype) == "Int64"


def test_safe_coercions_are_applied_and_lossy_ones_refused(io: PostgresIOManager) -> None:
    frame = sample_frame(schema.SENTENCE_CANDIDATES, 4)
    frame["start_char"] = frame["start_char"].astype("float64").round()  # 3.0 -> 3: fine
    store(io, "sentence_candidates", frame)
    assert load(io, "sentence_candidates", "b1")["start_char"].dtype == np.int64

    bad = frame.assign(start_char=[0.0, 1.5, 2.0, 3.0])
    with pytest.raises(StorageError, match=r"sentence_candidates: column start_char \(integer\)"):
        store(io, "sentence_candidates", bad)
    with pytest.raises(StorageError, match=r"column token_count .*expected integers"):
        store(io, "sentence_candidates", frame.assign(token_count=["1", "2", "3", "4"]))
    with pytest.raises(StorageError, match=r"column kind .*NOT NULL but has 1 nulls"):
        store(io, "sentence_candidates", frame.assign(kind=["a", None, "b", "c"]))
    with pytest.raises(StorageError, match=r"column start_char .*outside"):
        store(io, "sentence_candidates", frame.assign(start_char=[0, 1, 2, 2**40]))


# --- the schema contract -------------------------------------------------------------------------


def test_missing_and_extra_columns_name_the_asset_and_the_columns(io: PostgresIOManager) -> None:
    frame = sample_frame(schema.CHUNKS, 3).drop(columns=["config_hash"]).assign(score=1.0)
    with pytest.raises(StorageError) as info:
        store(io, "chunks", frame)
    message = str(info.value)
    assert "asset chunks" in message and "seams.chunks" in message
    assert "missing ['config_hash']" in message and "unexpected ['score']" in message


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
    views = {schema.CURRENT_CHUNKS_VIEW, schema.CURRENT_VERSIONS_VIEW, schema.CHUNK_PARENTS_VIEW}
    assert names == {t.name for t in schema.TABLES} | views


# --- replace, never duplicate; failures leave the previous rows ------------------------------


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


def _first_rows_then(after: int, action: Any) -> Any:
    """An `iter_rows` replacement that runs `action` once `after` rows were sent to COPY."""
    original = io_module.iter_rows

    def rows(columns: list[list[Any]]) -> Iterator[tuple[Any, ...]]:
        for i, row in enumerate(original(columns)):
            if i == after:
                action()
            yield row

    return rows


def test_an_exception_in_the_middle_of_a_write_keeps_the_previous_rows(
    io: PostgresIOManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = schema.SENTENCE_CANDIDATES
    before = sample_frame(table, 300)
    store(io, table.name, before)

    def boom() -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(io_module, "iter_rows", _first_rows_then(500, boom))
    with pytest.raises(RuntimeError, match="disk on fire"):
        store(io, table.name, sample_frame(table, 1000, seed=3))
    assert_same(load(io, table.name, "b1"), before, table)


def test_a_value_postgres_rejects_at_row_500_keeps_the_previous_rows(
    io: PostgresIOManager,
) -> None:
    table = schema.SENTENCE_CANDIDATES
    before = sample_frame(table, 300)
    store(io, table.name, before)
    duplicate = sample_frame(table, 1000, seed=4)
    duplicate.loc[500, ["document_id", "candidate_index"]] = duplicate.loc[
        499, ["document_id", "candidate_index"]
    ].to_numpy()  # rejected by the unique key while COPY is under way
    with pytest.raises(StorageError, match="two rows share a key"):
        store(io, table.name, duplicate)
    nul = sample_frame(table, 1000, seed=5)
    nul.loc[500, "kind"] = "sentence\x00"
    with pytest.raises(StorageError, match=r"column kind .*row 500 contains a NUL"):
        store(io, table.name, nul)
    assert_same(load(io, table.name, "b1"), before, table)


def test_a_server_that_goes_away_mid_write_keeps_rows_and_says_so_redacted(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # trust auth ignores the password, which must still never appear in a message
    url = database_url.replace("postgres:@", "postgres:s3cret@", 1)
    assert "s3cret" in url
    postgres = PostgresResource(url=url)
    io = PostgresIOManager(postgres=postgres)
    table = schema.SENTENCE_CANDIDATES
    before = sample_frame(table, 200)
    try:
        store(io, table.name, before)

        def kill_writers() -> None:
            with psycopg.connect(database_url, autocommit=True) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )

        monkeypatch.setattr(io_module, "iter_rows", _first_rows_then(500, kill_writers))
        with pytest.raises(StorageError) as info:
            store(io, table.name, sample_frame(table, 200_000, seed=6))
        message = str(info.value)
        assert "lost the connection" in message and "sentence_candidates" in message
        assert "s3cret" not in message and "***" in message
        monkeypatch.undo()
        assert_same(load(io, table.name, "b1"), before, table)  # the pool reconnected
    finally:
        close_pool(url)


def test_an_unreachable_server_is_a_clear_redacted_error(tmp_path: Any) -> None:
    url = f"postgresql://seams:hunter2@/seams?host={tmp_path}&connect_timeout=2"
    with pytest.raises(StorageError) as info:
        load(PostgresIOManager(postgres=PostgresResource(url=url)), "chunks", "b1")
    message = str(info.value)
    assert message.startswith("cannot connect to PostgreSQL at postgresql://seams:***@/seams")
    assert "hunter2" not in message


# --- concurrency -----------------------------------------------------------------------------


def _run_together(*jobs: Any) -> list[BaseException]:
    barrier = threading.Barrier(len(jobs))
    errors: list[BaseException] = []

    def run(job: Any) -> None:
        barrier.wait()
        try:
            job()
        except BaseException as exc:  # collected and asserted by the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return errors


def test_concurrent_writers_of_different_partitions_both_succeed(
    database_url: str, io: PostgresIOManager
) -> None:
    table = schema.SENTENCE_CANDIDATES
    frames = {k: sample_frame(table, 20_000, seed=i) for i, k in enumerate(("x", "y", "z"))}
    errors = _run_together(*(lambda k=k: store(io, table.name, frames[k], k) for k in frames))
    assert errors == []
    for key, frame in frames.items():
        assert count(database_url, table.name, f"batch_key = '{key}'") == len(frame)


def test_concurrent_writers_of_one_partition_leave_exactly_one_writers_rows(
    database_url: str, postgres: PostgresResource
) -> None:
    table = schema.CANDIDATE_EMBEDDINGS
    # separate resources (and pools) per writer, as separate runs would have
    urls = [f"{database_url}&application_name=writer{i}" for i in range(4)]
    writers = [PostgresIOManager(postgres=PostgresResource(url=u)) for u in urls]
    frames = [sample_frame(table, 5_000 + 100 * i).assign(model_id=f"w{i}") for i in range(4)]
    try:
        for _ in range(3):
            pairs = zip(writers, frames, strict=True)
            jobs = [lambda w=w, f=f: store(w, table.name, f, "same") for w, f in pairs]
            assert _run_together(*jobs) == []
            with psycopg.connect(database_url) as conn:
                rows = conn.execute(
                    "SELECT model_id, count(*) FROM seams.candidate_embeddings GROUP BY model_id"
                ).fetchall()
            assert len(rows) == 1  # never a mix
            winner, n = rows[0]
            assert n == len(frames[int(winner[1:])])  # never duplicates
    finally:
        for u in urls:
            close_pool(u)


# --- hostile names -----------------------------------------------------------------------------

HOSTILE = [
    "'); DROP TABLE seams.chunks; --",
    "quote \" and ' and ;",
    "ünïcødé 文字 🙂",
    "line\nbreak\r\ttab \\N \\.",
    "%s %(x)s {} $1",
]


@pytest.mark.parametrize("key", HOSTILE)
def test_hostile_partition_keys_and_document_ids_are_stored_verbatim(
    io: PostgresIOManager, database_url: str, key: str
) -> None:
    table = schema.CHUNKS
    frame = sample_frame(table, 3).assign(document_id=[key, key + "2", "plain"])
    store(io, table.name, frame, key)
    store(io, table.name, frame, "other")
    loaded = load(io, table.name, key)
    assert loaded["batch_key"].tolist() == [key] * 3
    assert sorted(loaded["document_id"]) == sorted([key, key + "2", "plain"])
    store(io, table.name, frame.head(1), key)  # the DELETE matched exactly this key
    assert len(load(io, table.name, key)) == 1
    assert count(database_url, "chunks", "batch_key = 'other'") == 3


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


def test_current_chunks_shows_only_each_documents_newest_version(
    io: PostgresIOManager, postgres: PostgresResource, database_url: str
) -> None:
    postgres.ensure_schema()
    _register(database_url, "b1", [("guide", "v1"), ("faq", "f1")], "2026-01-01T00:00:00Z")
    _register(database_url, "b2", [("guide", "v2")], "2026-01-02T00:00:00Z")
    store(io, "chunks", _chunks([("guide", "v1", 3), ("faq", "f1", 2)]), "b1")

    def current() -> list[tuple[str, str]]:
        with psycopg.connect(database_url) as conn:
            return conn.execute(
                "SELECT document_id, source_sha256 FROM seams.current_chunks "
                "ORDER BY document_id, chunk_index"
            ).fetchall()

    # guide v2 is registered but not chunked yet: its stale v1 chunks are not served
    assert current() == [("faq", "f1")] * 2
    store(io, "chunks", _chunks([("guide", "v2", 4)]), "b2")
    assert current() == [("faq", "f1")] * 2 + [("guide", "v2")] * 4
    store(io, "chunks", _chunks([("guide", "v1", 3), ("faq", "f1", 2)]), "b1")  # old batch rerun
    assert current() == [("faq", "f1")] * 2 + [("guide", "v2")] * 4

    # guide reverted to v1 in a later batch: only that batch's v1 chunks are current, not b1's
    _register(database_url, "b3", [("guide", "v1")], "2026-01-03T00:00:00Z")
    store(io, "chunks", _chunks([("guide", "v1", 3)]), "b3")
    assert current() == [("faq", "f1")] * 2 + [("guide", "v1")] * 3


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
        assert meta["rows_deleted"].value == 4
        assert meta["dagster/table_name"].value == "seams.semantic_boundaries"
        loaded = read_table(postgres, schema.SEMANTIC_BOUNDARIES, [key])
        assert loaded["reason"].tolist() == [key] * 4
    finally:
        close_pool(database_url)


def test_write_table_counts_each_partition_of_a_range(postgres: PostgresResource) -> None:
    table = schema.SEMANTIC_BOUNDARIES
    for key, n in (("a", 4), ("b", 6)):
        write_table(postgres, table, sample_frame(table, n), [key])
    frame = pd.concat(
        [sample_frame(table, n, tag=k).assign(batch_key=k) for k, n in (("b", 2), ("a", 5))],
        ignore_index=True,
    )
    result = write_table(postgres, table, frame, ["a", "b", "c"])
    written = {k: (b.rows_written, b.rows_deleted) for k, b in result.batches.items()}
    assert written == {"a": (5, 4), "b": (2, 6), "c": (0, 0)}
    assert result.batches["a"].bytes_written > result.batches["b"].bytes_written > 0
    assert result.batches["c"].bytes_written == 0  # no rows: no COPY at all
    assert (result.rows_written, result.rows_deleted) == (7, 10)
    assert result.bytes_written == sum(b.bytes_written for b in result.batches.values())
    loaded = read_table(postgres, table, ["a", "b"])
    assert loaded["batch_key"].tolist() == ["a"] * 5 + ["b"] * 2


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
