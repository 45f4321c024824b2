"""`write_table` / `read_table` against a real PostgreSQL: exact dtypes, safe coercions, the
column contract, atomic partition writes under failures, concurrent writers and hostile names.

Every test gets a fresh database (`database_url`); the IO manager's side (Dagster contexts and
metadata) is tested in `tests/resources/test_postgres_io.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import psycopg
import pytest

from seams.errors import StorageError
from seams.resources.postgres import PostgresResource, close_pool
from seams.storage import partition_tables as io_module
from seams.storage import schema
from seams.storage.frame_codec import stack_vectors
from seams.storage.partition_tables import WriteResult, read_table, write_table
from tests.storage.table_samples import assert_same, count, sample_frame
from tests.support.concurrency import run_together


@pytest.fixture
def postgres(database_url: str) -> Iterator[PostgresResource]:
    resource = PostgresResource(url=database_url)
    yield resource
    close_pool(database_url)


def store(
    postgres: PostgresResource,
    asset: str,
    frame: pd.DataFrame,
    partition: str | None = "b1",
    partitions: list[str] | None = None,
) -> WriteResult:
    """`write_table` of `asset`'s declared table: one partition, or several at once."""
    keys = sorted(partitions) if partitions else [partition] if partition is not None else None
    return write_table(postgres, schema.ASSET_TABLES[asset], frame, keys)


def load(postgres: PostgresResource, asset: str, *partitions: str) -> pd.DataFrame:
    return read_table(postgres, schema.ASSET_TABLES[asset], list(partitions) or None)


# --- round trips -----------------------------------------------------------------------------


def test_embeddings_load_as_float32_arrays_and_stack(postgres: PostgresResource) -> None:
    frame = sample_frame(schema.CANDIDATE_EMBEDDINGS, 6)
    frame["embedding"] = list(np.eye(6, 5, dtype=np.float64))  # float64 in: stored as float32
    store(postgres, "candidate_embeddings", frame)
    loaded = load(postgres, "candidate_embeddings", "b1")
    matrix = stack_vectors(loaded["embedding"])
    assert matrix.dtype == np.float32 and matrix.shape == (6, 5)
    order = frame.sort_values(["document_id", "candidate_index"], kind="stable").index
    np.testing.assert_array_equal(matrix, np.eye(6, 5, dtype=np.float32)[order])


def test_loading_a_partition_never_written_gives_an_empty_typed_frame(
    postgres: PostgresResource,
) -> None:
    loaded = load(postgres, "sentence_candidates", "nothing-here")
    assert loaded.empty
    assert list(loaded.columns) == schema.SENTENCE_CANDIDATES.column_names
    assert str(loaded["candidate_index"].dtype) == "int64"
    assert str(loaded["page"].dtype) == "Int64"


def test_safe_coercions_are_applied_and_lossy_ones_refused(postgres: PostgresResource) -> None:
    frame = sample_frame(schema.SENTENCE_CANDIDATES, 4)
    frame["start_char"] = frame["start_char"].astype("float64").round()  # 3.0 -> 3: fine
    store(postgres, "sentence_candidates", frame)
    assert load(postgres, "sentence_candidates", "b1")["start_char"].dtype == np.int64

    bad = frame.assign(start_char=[0.0, 1.5, 2.0, 3.0])
    with pytest.raises(StorageError, match=r"sentence_candidates: column start_char \(integer\)"):
        store(postgres, "sentence_candidates", bad)
    with pytest.raises(StorageError, match=r"column token_count .*expected integers"):
        store(postgres, "sentence_candidates", frame.assign(token_count=["1", "2", "3", "4"]))
    with pytest.raises(StorageError, match=r"column kind .*NOT NULL but has 1 nulls"):
        store(postgres, "sentence_candidates", frame.assign(kind=["a", None, "b", "c"]))
    with pytest.raises(StorageError, match=r"column start_char .*outside"):
        store(postgres, "sentence_candidates", frame.assign(start_char=[0, 1, 2, 2**40]))


# --- the schema contract ---------------------------------------------------------------------


def test_missing_and_extra_columns_name_the_asset_and_the_columns(
    postgres: PostgresResource,
) -> None:
    frame = sample_frame(schema.CHUNKS, 3).drop(columns=["config_hash"]).assign(score=1.0)
    with pytest.raises(StorageError) as info:
        store(postgres, "chunks", frame)
    message = str(info.value)
    assert "asset chunks" in message and "seams.chunks" in message
    assert "missing ['config_hash']" in message and "unexpected ['score']" in message


# --- failures leave the previous rows --------------------------------------------------------


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
    postgres: PostgresResource, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = schema.SENTENCE_CANDIDATES
    before = sample_frame(table, 300)
    store(postgres, table.name, before)

    def boom() -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(io_module, "iter_rows", _first_rows_then(500, boom))
    with pytest.raises(RuntimeError, match="disk on fire"):
        store(postgres, table.name, sample_frame(table, 1000, seed=3))
    assert_same(load(postgres, table.name, "b1"), before, table)


def test_a_value_postgres_rejects_at_row_500_keeps_the_previous_rows(
    postgres: PostgresResource,
) -> None:
    table = schema.SENTENCE_CANDIDATES
    before = sample_frame(table, 300)
    store(postgres, table.name, before)
    duplicate = sample_frame(table, 1000, seed=4)
    duplicate.loc[500, ["document_id", "candidate_index"]] = duplicate.loc[
        499, ["document_id", "candidate_index"]
    ].to_numpy()  # rejected by the unique key while COPY is under way
    with pytest.raises(StorageError, match="two rows share a key"):
        store(postgres, table.name, duplicate)
    nul = sample_frame(table, 1000, seed=5)
    nul.loc[500, "kind"] = "sentence\x00"
    with pytest.raises(StorageError, match=r"column kind .*row 500 contains a NUL"):
        store(postgres, table.name, nul)
    assert_same(load(postgres, table.name, "b1"), before, table)


def test_a_server_that_goes_away_mid_write_keeps_rows_and_says_so_redacted(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # trust auth ignores the password, which must still never appear in a message
    url = database_url.replace("postgres:@", "postgres:s3cret@", 1)
    assert "s3cret" in url
    postgres = PostgresResource(url=url)
    table = schema.SENTENCE_CANDIDATES
    before = sample_frame(table, 200)
    try:
        store(postgres, table.name, before)

        def kill_writers() -> None:
            with psycopg.connect(database_url, autocommit=True) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )

        monkeypatch.setattr(io_module, "iter_rows", _first_rows_then(500, kill_writers))
        with pytest.raises(StorageError) as info:
            store(postgres, table.name, sample_frame(table, 200_000, seed=6))
        message = str(info.value)
        assert "lost the connection" in message and "sentence_candidates" in message
        assert "s3cret" not in message and "***" in message
        monkeypatch.undo()
        assert_same(load(postgres, table.name, "b1"), before, table)  # the pool reconnected
    finally:
        close_pool(url)


# --- concurrency -----------------------------------------------------------------------------


def test_concurrent_writers_of_different_partitions_both_succeed(
    database_url: str, postgres: PostgresResource
) -> None:
    table = schema.SENTENCE_CANDIDATES
    frames = {k: sample_frame(table, 20_000, seed=i) for i, k in enumerate(("x", "y", "z"))}
    errors = run_together(*(lambda k=k: store(postgres, table.name, frames[k], k) for k in frames))
    assert errors == []
    for key, frame in frames.items():
        assert count(database_url, table.name, f"batch_key = '{key}'") == len(frame)


def test_concurrent_writers_of_one_partition_leave_exactly_one_writers_rows(
    database_url: str, postgres: PostgresResource
) -> None:
    table = schema.CANDIDATE_EMBEDDINGS
    # separate resources (and pools) per writer, as separate runs would have
    urls = [f"{database_url}&application_name=writer{i}" for i in range(4)]
    writers = [PostgresResource(url=u) for u in urls]
    frames = [sample_frame(table, 5_000 + 100 * i).assign(model_id=f"w{i}") for i in range(4)]
    try:
        for _ in range(3):
            pairs = zip(writers, frames, strict=True)
            jobs = [lambda w=w, f=f: store(w, table.name, f, "same") for w, f in pairs]
            assert run_together(*jobs) == []
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


# --- hostile names ---------------------------------------------------------------------------


HOSTILE = [
    "'); DROP TABLE seams.chunks; --",
    "quote \" and ' and ;",
    "ünïcødé 文字 🙂",
    "line\nbreak\r\ttab \\N \\.",
    "%s %(x)s {} $1",
]


@pytest.mark.parametrize("key", HOSTILE)
def test_hostile_partition_keys_and_document_ids_are_stored_verbatim(
    postgres: PostgresResource, database_url: str, key: str
) -> None:
    table = schema.CHUNKS
    frame = sample_frame(table, 3).assign(document_id=[key, key + "2", "plain"])
    store(postgres, table.name, frame, key)
    store(postgres, table.name, frame, "other")
    loaded = load(postgres, table.name, key)
    assert loaded["batch_key"].tolist() == [key] * 3
    assert sorted(loaded["document_id"]) == sorted([key, key + "2", "plain"])
    store(postgres, table.name, frame.head(1), key)  # the DELETE matched exactly this key
    assert len(load(postgres, table.name, key)) == 1
    assert count(database_url, "chunks", "batch_key = 'other'") == 3


# --- a range of partitions in one write ------------------------------------------------------


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
