"""A partition's DataFrame to COPY-ready column values and fetched rows back to a DataFrame.

The codec behind `seams.storage.partition_tables`, apart from its SQL so each can be read alone:

- `coerce_frame` checks a frame carries exactly the table's declared columns and converts each
  column to values COPY can send, coercing only where nothing can be lost (1.0 -> 1 is fine,
  1.5 -> int is an error, as is a string in a number column); a bad value is one `StorageError`
  naming the asset, the column and the row.
- `frame_from_rows` builds a frame with the declared dtypes from fetched rows: ints `int64`
  (`Int64` when nullable), floats `float64`, booleans `bool`, text `str`, jsonb Python objects,
  vectors 1-D float32 arrays, which `stack_vectors` stacks into one matrix.

No database here: pandas and numpy in, plain values out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from pandas.api import types as pdt
from psycopg.types.json import Jsonb

from seams.errors import StorageError
from seams.storage import schema

_INT_RANGES = {"integer": (-(2**31), 2**31 - 1), "bigint": (-(2**63), 2**63 - 1)}


def stack_vectors(values: pd.Series | Sequence[np.ndarray]) -> np.ndarray:
    """Stack a column of 1-D float32 vectors into one (n, d) float32 matrix."""
    arrays = list(values)
    if not arrays:
        return np.zeros((0, 0), dtype=np.float32)
    try:
        return np.stack(arrays).astype(np.float32, copy=False)
    except ValueError as exc:
        dims = sorted({np.shape(a)[0] for a in arrays})
        raise StorageError(
            f"embeddings of different dimensions {dims} cannot form one matrix: "
            "select one model_id first"
        ) from exc


def coerce_frame(
    table: schema.Table,
    frame: pd.DataFrame,
    partition_keys: Sequence[str] | None,
    *,
    asset: str,
) -> list[list[Any]]:
    """Validate `frame` against `table` and return one list of COPY-ready values per column.

    Column order is the table's; `batch_key` is filled from the single partition key, or checked
    against the requested keys when the frame carries it (single-run backfills must).
    """
    _check_columns(table, frame, asset)
    columns: list[list[Any]] = []
    for column in table.columns:
        if column.name == schema.BATCH_KEY and table.partitioned:
            columns.append(_batch_keys(frame, partition_keys or [], asset, table))
        elif column.name == schema.GENERATION and table.partitioned:
            columns.append([None] * len(frame))  # the build's, filled in by the write
        else:
            columns.append(_coerce_column(frame[column.name], column, asset, table))
    return columns


def _check_columns(table: schema.Table, frame: pd.DataFrame, asset: str) -> None:
    names = [str(c) for c in frame.columns]
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise StorageError(f"asset {asset}: the DataFrame repeats columns {dupes}")
    expected = {c.name for c in table.data_columns}
    allowed = set(table.column_names)
    missing = [c.name for c in table.data_columns if c.name not in names]
    extra = [n for n in names if n not in allowed]
    if missing or extra:
        raise StorageError(
            f"asset {asset}: the DataFrame does not match the declared columns of "
            f"{table.qualified_name}: missing {missing}, unexpected {extra}. Return exactly "
            f"{sorted(expected)} (declared in seams/storage/schema.py)."
        )


def _batch_keys(
    frame: pd.DataFrame, partition_keys: Sequence[str], asset: str, table: schema.Table
) -> list[Any]:
    if schema.BATCH_KEY not in frame.columns:
        if len(partition_keys) != 1:
            raise StorageError(
                f"asset {asset} materializes {len(partition_keys)} partitions at once, so its "
                f"DataFrame must carry a {schema.BATCH_KEY} column saying which batch each row is"
            )
        return [partition_keys[0]] * len(frame)
    values = _coerce_column(frame[schema.BATCH_KEY], table.column(schema.BATCH_KEY), asset, table)
    unexpected = set(values) - set(partition_keys)
    if unexpected:
        raise StorageError(
            f"asset {asset}: column {schema.BATCH_KEY} holds {sorted(unexpected)[:5]}, which are "
            f"not among the partitions being materialized {list(partition_keys)[:5]}"
        )
    return values


def _coerce_column(
    series: pd.Series, column: schema.Column, asset: str, table: schema.Table
) -> list[Any]:
    where = f"asset {asset}: column {column.name} ({column.pg_type}) of {table.qualified_name}"
    if isinstance(series.dtype, pd.CategoricalDtype):
        series = series.astype(object)
    missing = np.asarray(series.isna()) if column.base_type not in ("jsonb", "vector") else None
    if missing is not None and not column.nullable and missing.any():
        row = int(np.flatnonzero(missing)[0])
        raise StorageError(f"{where} is NOT NULL but has {int(missing.sum())} nulls (row {row})")
    converter = _CONVERTERS.get(column.base_type, _objects)
    try:
        return converter(series, column, missing)
    except (TypeError, ValueError, OverflowError) as exc:
        raise StorageError(f"{where}: {exc}") from exc


def _with_nulls(values: np.ndarray, missing: np.ndarray | None) -> list[Any]:
    if missing is None or not missing.any():
        return values.tolist()
    out = values.astype(object)
    out[missing] = None
    return out.tolist()


def _ints(series: pd.Series, column: schema.Column, missing: np.ndarray | None) -> list[Any]:
    if pdt.is_bool_dtype(series.dtype) or not (
        pdt.is_numeric_dtype(series.dtype)
        or pd.api.types.infer_dtype(series, skipna=True) in ("integer", "floating", "empty")
    ):
        raise TypeError(f"expected integers, got dtype {series.dtype}")
    ints = series.astype("Int64")  # raises on 1.5, keeps 1.0 -> 1
    low, high = _INT_RANGES[column.base_type]
    present = ints.dropna()
    if len(present) and (present.min() < low or present.max() > high):
        raise OverflowError(f"values outside [{low}, {high}]")
    return _with_nulls(ints.to_numpy(dtype=np.int64, na_value=0), missing)


def _floats(series: pd.Series, column: schema.Column, missing: np.ndarray | None) -> list[Any]:
    if pdt.is_bool_dtype(series.dtype) or not (
        pdt.is_numeric_dtype(series.dtype)
        or pd.api.types.infer_dtype(series, skipna=True) in ("integer", "floating", "empty")
    ):
        raise TypeError(f"expected numbers, got dtype {series.dtype}")
    values = series.astype("float64").to_numpy(dtype=np.float64, na_value=np.nan)
    return _with_nulls(values, missing)


def _bools(series: pd.Series, column: schema.Column, missing: np.ndarray | None) -> list[Any]:
    kind = pd.api.types.infer_dtype(series, skipna=True)
    if not (pdt.is_bool_dtype(series.dtype) or kind in ("boolean", "empty")):
        raise TypeError(f"expected booleans, got {kind} values")
    values = series.to_numpy(dtype=object, copy=True)  # never write into the caller's frame
    if missing is not None and missing.any():
        values[missing] = None
    return [None if v is None else bool(v) for v in values]


def _texts(series: pd.Series, column: schema.Column, missing: np.ndarray | None) -> list[Any]:
    kind = pd.api.types.infer_dtype(series, skipna=True)
    if kind not in ("string", "empty"):
        raise TypeError(f"expected strings, got {kind} values")
    values = series.to_numpy(dtype=object, copy=True)  # never write into the caller's frame
    if missing is not None and missing.any():
        values[missing] = None
    has_nul = pd.Series(values, dtype=object).str.contains("\x00", regex=False, na=False)
    if has_nul.any():
        row = int(np.flatnonzero(has_nul.to_numpy(dtype=bool))[0])
        raise ValueError(f"row {row} contains a NUL character, which PostgreSQL text cannot store")
    return values.tolist()


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _json_dumps(value: Any) -> str:
    return json.dumps(value, default=_json_default, allow_nan=False, ensure_ascii=False)


def _is_null(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _jsons(series: pd.Series, column: schema.Column, missing: np.ndarray | None) -> list[Any]:
    out: list[Any] = []
    for row, value in enumerate(series.to_numpy(dtype=object)):
        if _is_null(value):
            if not column.nullable:
                raise ValueError(f"is NOT NULL but row {row} is null")
            out.append(None)
            continue
        try:
            out.append(Jsonb(_json_dumps(value), dumps=_passthrough))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"row {row} is not JSON: {exc}") from None
    return out


def _passthrough(text: str) -> str:
    return text


def _vectors(series: pd.Series, column: schema.Column, missing: np.ndarray | None) -> list[Any]:
    values = series.to_numpy(dtype=object, copy=True)  # never write into the caller's frame
    nulls = np.fromiter((_is_null(v) for v in values), dtype=bool, count=len(values))
    if nulls.any() and not column.nullable:
        raise ValueError(f"is NOT NULL but row {int(np.flatnonzero(nulls)[0])} is null")
    present = [np.asarray(v, dtype=np.float32) for v in values[~nulls]]
    if not present:
        return [None] * len(values)
    shapes = {v.shape for v in present}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"vectors must be 1-D and of one dimension; found shapes {sorted(shapes)}")
    matrix = np.stack(present)
    dim = matrix.shape[1]
    if dim == 0 or (column.dimension is not None and dim != column.dimension):
        raise ValueError(f"vectors have {dim} dimensions, the column needs {column.dimension}")
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        row = int(np.flatnonzero(~nulls)[np.flatnonzero(~finite)[0]])
        raise ValueError(f"row {row} holds NaN or infinity, which pgvector cannot store")
    big_endian = matrix.astype(">f4")  # once for all rows: the binary dumper sends it as is
    if not nulls.any():
        return list(big_endian)
    out: list[Any] = [None] * len(values)
    for position, row in zip(np.flatnonzero(~nulls), big_endian, strict=True):
        out[position] = row
    return out


def _objects(series: pd.Series, column: schema.Column, missing: np.ndarray | None) -> list[Any]:
    return _with_nulls(series.to_numpy(dtype=object), missing)


_CONVERTERS = {
    "integer": _ints,
    "bigint": _ints,
    "double precision": _floats,
    "boolean": _bools,
    "text": _texts,
    "jsonb": _jsons,
    "vector": _vectors,
}


def frame_from_rows(table: schema.Table, rows: Sequence[tuple[Any, ...]]) -> pd.DataFrame:
    """A DataFrame with the table's columns and declared dtypes from fetched rows."""
    values: Iterable[Sequence[Any]] = zip(*rows, strict=True) if rows else [()] * len(table.columns)
    data = {c.name: _column_values(c, list(v)) for c, v in zip(table.columns, values, strict=True)}
    return pd.DataFrame(data, index=pd.RangeIndex(len(rows)))


def _column_values(column: schema.Column, values: list[Any]) -> Any:
    dtype = column.dtype
    if dtype in ("int64", "float64", "bool"):
        return np.array(values, dtype=dtype)
    if dtype in ("Int64", "boolean", "str"):
        return pd.array(values, dtype=dtype)
    if dtype.startswith("datetime64"):
        return pd.to_datetime(pd.Series(values, dtype=object), utc=True).astype(dtype)
    out = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):  # element-wise: equal-length arrays must not become 2-D
        out[i] = value
    return out
