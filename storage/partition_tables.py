"""A partition's DataFrame to and from its declared `seams.<asset>` table, with COPY.

The contract the assets rely on (the IO manager, `seams.resources.io_manager`, is this module
behind Dagster's `handle_output` / `load_input`; benchmarks and tools call it directly):

- An asset's table is `seams.<asset>`, declared in `seams/storage/schema.py`. The DataFrame must
  carry exactly the declared columns (`batch_key` is optional: it is filled from the partition
  key); values are coerced only where nothing can be lost (1.0 -> 1 is fine, 1.5 -> int is an
  error, as is a string in a number column).
- Writing a partition is one transaction: an advisory lock on (table, partition) so two runs of
  the same partition queue instead of interleaving, the batch's open build
  (`seams.storage.publication`), DELETE of that build's earlier rows of the table, COPY of the
  new ones with the build's `generation`, commit. The published rows stay beside them, visible
  to readers, until the `chunk_index` write that completes the build publishes it (same
  transaction). A rerun replaces, never duplicates; a failure anywhere (a bad value, a
  duplicate key, a lost server) leaves the previous rows intact.
- Loading selects the requested partitions in the table's key order, one generation per batch
  (the open build's rows of the table if it wrote them, else the published ones: a step reads
  what its build computed upstream), with exact dtypes: ints
  `int64` (`Int64` when nullable), floats `float64`, booleans `bool`, text `str`, jsonb Python
  objects, vectors 1-D float32 arrays (`stack_vectors` stacks them). Loaded frames include
  `batch_key`, so a frame loaded from several partitions can be written back as it is.

Plain psycopg 3 over any `ConnectionSource` (the Postgres resource is one); no Dagster here.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import pandas as pd
import psycopg
from pandas.api import types as pdt
from psycopg import sql
from psycopg.copy import LibpqWriter
from psycopg.types.json import Jsonb

from seams.errors import StorageError
from seams.storage import publication, schema
from seams.storage.connections import ConnectionSource, connection_lost, retrying

CopyFormat = Literal["binary", "text"]
_INT_RANGES = {"integer": (-(2**31), 2**31 - 1), "bigint": (-(2**63), 2**63 - 1)}


@dataclass(frozen=True)
class BatchWrite:
    """What one write did to one partition: its DELETE and its COPY."""

    rows_written: int
    rows_deleted: int
    """Rows the write replaces: the build's own earlier rows, or the published ones (which
    stay visible until the build is published)."""
    bytes_written: int
    seconds: float
    generation: int | None = None
    """The batch's build the rows belong to (None: an unpartitioned table)."""


@dataclass(frozen=True)
class WriteResult:
    """What one write did, for output metadata and benchmarks: totals over all its partitions,
    and each partition's own `BatchWrite` (one entry, key "", for an unpartitioned table)."""

    partitions: tuple[str, ...]
    rows_written: int
    rows_deleted: int
    bytes_written: int
    seconds: float
    batches: dict[str, BatchWrite] = field(default_factory=dict)
    published: dict[str, int] = field(default_factory=dict)
    """Batches this write published (a `chunk_index` write), with their generation."""
    held: dict[str, str] = field(default_factory=dict)
    """Batches whose build this `chunk_index` write could not publish, and why."""


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


def partition_lock(conn: psycopg.Connection[Any], table: str, partition: str) -> None:
    """Take the transaction-scoped advisory lock of one partition of `table` (released at commit
    or rollback), so two writers of the same partition queue instead of interleaving.

    The name is hashed server-side; a (rare) collision only serialises two unrelated writers.
    """
    name = "\x1f".join(("seams", table, partition))
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (name,))


# --- write ---------------------------------------------------------------------------------


def write_table(
    postgres: ConnectionSource,
    table: schema.Table,
    frame: pd.DataFrame,
    partition_keys: Sequence[str] | None,
    *,
    asset: str | None = None,
    copy_format: CopyFormat = "binary",
    run_id: str | None = None,
) -> WriteResult:
    """`_write_table_once`, rerun whole when PostgreSQL aborts its transaction (a deadlock or a
    serialization failure: nothing was written); past the last attempt, a `StorageError` that
    names the abort."""
    return retrying(
        postgres.redacted_url,
        f"writing asset {asset or table.name} to {table.qualified_name}",
        lambda: _write_table_once(
            postgres,
            table,
            frame,
            partition_keys,
            asset=asset,
            copy_format=copy_format,
            run_id=run_id,
        ),
    )


def _write_table_once(
    postgres: ConnectionSource,
    table: schema.Table,
    frame: pd.DataFrame,
    partition_keys: Sequence[str] | None,
    *,
    asset: str | None = None,
    copy_format: CopyFormat = "binary",
    run_id: str | None = None,
) -> WriteResult:
    """Replace the rows of `partition_keys` (all rows when unpartitioned) with `frame`, atomically.

    A partition's rows go to its batch's open build (`seams.storage.publication`, opened by
    `run_id` if there is none), beside the published rows readers see; a `chunk_index` write
    publishes the builds it completes, in the same transaction.

    Raises `StorageError` naming the asset, table and column for bad frames, duplicate keys or a
    lost connection; the table then still holds exactly its previous rows.
    """
    started = time.perf_counter()
    asset = asset or table.name
    keys = _check_partitioning(table, partition_keys, asset)
    columns = coerce_frame(table, frame, keys, asset=asset)
    batches: dict[str, BatchWrite] = {}
    builds: dict[str, publication.Build] = {}
    published = publication.Publication()
    with postgres.connection() as conn:
        try:
            with conn.transaction():
                for key in sorted(keys) if keys else [""]:  # sorted: no lock-order deadlocks
                    partition_lock(conn, table.name, key)
                if keys is not None:
                    builds = publication.open_builds(conn, keys, run_id)
                # Every partition's rows go before any are written (a key that spans batches
                # cannot collide with a row about to be deleted); each is timed and counted.
                deleted, seconds = {}, {}
                for key in keys or [None]:
                    begun = time.perf_counter()
                    build = None if key is None else builds[key]
                    deleted[key] = _delete(conn, table, key, build)
                    seconds[key] = time.perf_counter() - begun
                for key, rows in _rows_by_partition(table, columns, keys):
                    begun = time.perf_counter()
                    if key is not None:  # the build's generation, whatever the frame held
                        rows[_GENERATION_POSITION[table.name]] = [builds[key].generation] * len(
                            rows[0]
                        )
                    empty = not rows[0]  # a partition replaced by no rows needs no COPY
                    written, nbytes = (
                        (0, 0) if empty else _copy_rows(conn, table, rows, copy_format)
                    )
                    batches[key or ""] = BatchWrite(
                        written,
                        deleted[key],
                        nbytes,
                        seconds[key] + time.perf_counter() - begun,
                        None if key is None else builds[key].generation,
                    )
                if builds:
                    publication.record_part(conn, table, builds)
                    if table is schema.CHUNK_INDEX or table.name == schema.CHUNK_INDEX.name:
                        published = publication.complete_and_publish(
                            conn, _with_part(builds, table.name), run_id=run_id
                        )
        except psycopg.errors.UniqueViolation as exc:
            raise StorageError(
                f"asset {asset}: two rows share a key {table.order_by} of "
                f"{table.qualified_name} ({_detail(exc)}); nothing was written. Each key must "
                "appear once per partition: fix the duplicate rows in the asset's output."
            ) from exc
        except psycopg.OperationalError as exc:
            raise connection_lost(
                postgres.redacted_url, f"writing asset {asset} to {table.qualified_name}", exc
            ) from exc
        except (psycopg.DataError, psycopg.IntegrityError, psycopg.ProgrammingError) as exc:
            raise StorageError(
                f"asset {asset}: PostgreSQL rejected the rows for {table.qualified_name}: "
                f"{_detail(exc)}. Nothing was written; the previous rows are intact."
            ) from exc
    return WriteResult(
        partitions=tuple(keys or ()),
        rows_written=sum(b.rows_written for b in batches.values()),
        rows_deleted=sum(b.rows_deleted for b in batches.values()),
        bytes_written=sum(b.bytes_written for b in batches.values()),
        seconds=time.perf_counter() - started,
        batches=batches,
        published=published.published,
        held=published.held,
    )


def _with_part(builds: dict[str, publication.Build], table: str) -> dict[str, publication.Build]:
    """The builds as `record_part` left them: `table` their last part."""
    return {
        key: replace(build, parts=(*build.parts[: _part_end(build.parts, table)], table))
        for key, build in builds.items()
    }


def _part_end(parts: tuple[str, ...], table: str) -> int:
    order = publication.ASSET_ORDER
    return sum(1 for p in parts if order.index(p) < order.index(table))


_GENERATION_POSITION = {
    t.name: t.column_names.index(schema.GENERATION)
    for t in schema.ASSET_TABLES.values()
    if t.partitioned
}


def _check_partitioning(
    table: schema.Table, partition_keys: Sequence[str] | None, asset: str
) -> list[str] | None:
    if table.partitioned and not partition_keys:
        raise StorageError(
            f"asset {asset} is not partitioned but {table.qualified_name} is stored per batch: "
            "give the asset partitions_def=document_batches"
        )
    if not table.partitioned and partition_keys:
        raise StorageError(
            f"asset {asset} is partitioned but {table.qualified_name} is declared without "
            "batch_key in seams/storage/schema.py: declare it partitioned"
        )
    return list(dict.fromkeys(partition_keys)) if partition_keys else None


def _rows_by_partition(
    table: schema.Table, columns: list[list[Any]], keys: list[str] | None
) -> Iterator[tuple[str | None, list[list[Any]]]]:
    """`columns` split into each partition's rows, in `keys` order (None: unpartitioned), so each
    partition has its own COPY and its own byte count; one partition takes the columns as they
    are."""
    if not keys or len(keys) == 1:
        yield (keys[0] if keys else None), columns
        return
    positions: dict[str, list[int]] = {key: [] for key in keys}
    for row, key in enumerate(columns[table.column_names.index(schema.BATCH_KEY)]):
        positions[key].append(row)
    for key, rows in positions.items():
        yield key, [[column[i] for i in rows] for column in columns]


def _delete(
    conn: psycopg.Connection[Any],
    table: schema.Table,
    key: str | None,
    build: publication.Build | None,
) -> int:
    """Remove what this write replaces; returns how many rows it replaces.

    Unpartitioned: every row. A partition: the open build's own rows of the table (a rerun of
    the step). A table the build had not written yet replaces the published rows, which stay
    visible and go when the build is published: they are counted, not deleted.
    """
    if key is None or build is None:
        return conn.execute(sql.SQL("DELETE FROM {}").format(table.identifier())).rowcount
    query = sql.SQL("DELETE FROM {} WHERE {} = %s AND {} = %s").format(
        table.identifier(), sql.Identifier(schema.BATCH_KEY), sql.Identifier(schema.GENERATION)
    )
    removed = conn.execute(query, (key, build.generation)).rowcount
    if table.name in build.parts or build.published_generation is None:
        return removed
    count = sql.SQL("SELECT count(*) FROM {} WHERE {} = %s AND {} <= %s").format(
        table.identifier(), sql.Identifier(schema.BATCH_KEY), sql.Identifier(schema.GENERATION)
    )
    return int(conn.execute(count, (key, build.published_generation)).fetchone()[0])


class _CountingWriter(LibpqWriter):
    """Counts the COPY bytes sent: the "bytes" of a write, at no extra cost."""

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        super().__init__(cursor)
        self.bytes = 0

    def write(self, data: Any) -> None:
        self.bytes += len(data)
        super().write(data)


def _copy_rows(
    conn: psycopg.Connection[Any],
    table: schema.Table,
    columns: list[list[Any]],
    copy_format: CopyFormat,
) -> tuple[int, int]:
    statement = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT {})").format(
        table.identifier(),
        sql.SQL(", ").join(sql.Identifier(c.name) for c in table.columns),
        sql.SQL("BINARY" if copy_format == "binary" else "TEXT"),
    )
    written = 0
    with conn.cursor() as cur:
        writer = _CountingWriter(cur)
        with cur.copy(statement, writer=writer) as copy:
            copy.set_types([c.copy_type for c in table.columns])
            for row in iter_rows(columns):
                copy.write_row(row)
                written += 1
    return written, writer.bytes


def iter_rows(columns: list[list[Any]]) -> Iterator[tuple[Any, ...]]:
    """Rows for COPY from per-column value lists (a seam tests use to fail mid-write)."""
    return zip(*columns, strict=True)


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


# --- read ----------------------------------------------------------------------------------


def read_table(
    postgres: ConnectionSource,
    table: schema.Table,
    partition_keys: Sequence[str] | None,
    *,
    asset: str | None = None,
) -> pd.DataFrame:
    """The rows of `partition_keys` (all rows when None) in key order, with declared dtypes."""
    asset = asset or table.name
    query = sql.SQL("SELECT {} FROM {} AS t").format(
        sql.SQL(", ").join(sql.SQL("t.{}").format(sql.Identifier(c.name)) for c in table.columns),
        table.identifier(),
    )
    conditions: list[sql.Composable] = []
    params: tuple[Any, ...] = ()
    if table.partitioned:
        # Per batch, one generation: its open build's rows where the build wrote this table,
        # else the published ones.
        query = sql.SQL("{} {}").format(query, publication.read_joins(table))
        conditions.append(publication.read_filter())
        if partition_keys is not None:
            conditions.append(sql.SQL("t.{} = ANY(%s)").format(sql.Identifier(schema.BATCH_KEY)))
            params = (list(partition_keys),)
    if conditions:
        query = sql.SQL("{} WHERE {}").format(query, sql.SQL(" AND ").join(conditions))
    query = sql.SQL("{} ORDER BY {}").format(
        query,
        sql.SQL(", ").join(sql.SQL("t.{}").format(sql.Identifier(n)) for n in table.order_by),
    )
    with postgres.connection() as conn:
        try:
            with conn.cursor(binary=True) as cur:
                cur.execute(query, params)
                rows = cur.fetchall()
        except psycopg.OperationalError as exc:
            raise connection_lost(
                postgres.redacted_url, f"loading asset {asset} from {table.qualified_name}", exc
            ) from exc
    return frame_from_rows(table, rows)


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


def _detail(exc: psycopg.Error) -> str:
    diag = exc.diag
    parts = [diag.message_primary or str(exc).strip().splitlines()[0]]
    if diag.message_detail:
        parts.append(diag.message_detail)
    if diag.context:
        parts.append(diag.context.strip().splitlines()[0])
    return "; ".join(parts)
