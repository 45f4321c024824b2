"""Sample frames for the declared tables, and the checks that a loaded frame is what was written:
shared by the partition-table tests (`tests/storage`) and the IO manager's (`tests/resources`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import psycopg

from seams.storage import schema


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
