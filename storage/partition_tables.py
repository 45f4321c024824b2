"""A partition's DataFrame to and from its declared `seams.<asset>` table, with COPY.

The contract the assets rely on (the IO manager, `seams.resources.io_manager`, is this module
behind Dagster's `handle_output` / `load_input`; tools call it directly):

- An asset's table is `seams.<asset>`, declared in `seams/storage/schema.py`. The DataFrame must
  carry exactly the declared columns (`batch_key` is optional: it is filled from the partition
  key); values are coerced only where nothing can be lost (1.0 -> 1 is fine, 1.5 -> int is an
  error, as is a string in a number column).
- Writing a partition is one transaction: a writer lock on (table, partition) so two runs of
  the same partition queue instead of interleaving, the batch's open build
  (`seams.storage.builds`), DELETE of that build's earlier rows of the table, COPY of the new
  ones with the build's `generation`, then the caller's `publish` step if it passed one (the
  `chunk_index` write's: `seams.storage.index_publication`), commit. The published rows stay
  beside them, visible to readers, until that step publishes the build. A rerun replaces,
  never duplicates; a failure anywhere (a bad value, a duplicate key, a lost server) leaves
  the previous rows intact.
- Loading selects the requested partitions in the table's key order, one generation per batch
  (the open build's rows of the table if it wrote them, else the published ones: a step reads
  what its build computed upstream), with exact dtypes (`seams.storage.frame_codec`, the
  DataFrame <-> values codec). Loaded frames include `batch_key`, so a frame loaded from several
  partitions can be written back as it is.

This module holds the SQL (locks, builds, DELETE, COPY and SELECT), in plain psycopg 3 over any
`ConnectionSource` (the Postgres resource is one); no Dagster here.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

import pandas as pd
import psycopg
from psycopg import sql
from psycopg.copy import LibpqWriter

from seams.errors import StorageError
from seams.storage import builds as build_store
from seams.storage import schema, writer_locks
from seams.storage.connections import ConnectionSource, connection_lost, retrying
from seams.storage.frame_codec import coerce_frame, frame_from_rows

CopyFormat = Literal["binary", "text"]


class Published(Protocol):
    """What a write's `publish` step did (`seams.storage.publication.Publication` is one)."""

    @property
    def published(self) -> dict[str, int]:
        """The batches it published, with their generation."""
        ...

    @property
    def held(self) -> dict[str, str]:
        """The batches it could not publish, and why."""
        ...


PublishStep = Callable[[psycopg.Connection[Any], dict[str, build_store.Build]], Published]
"""Run in a write's transaction after its rows, with the builds it wrote (the table their last
part): publishes what they complete."""


@dataclass(frozen=True)
class BatchWrite:
    """What one write did to one partition: its DELETE and its COPY."""

    rows_written: int
    rows_deleted: int
    """Rows the write retired: the build's own earlier rows, and the published rows it replaces
    once its build is published (a build held or left open retires none of those: readers
    still see them)."""
    bytes_written: int
    seconds: float
    generation: int | None = None
    """The batch's build the rows belong to (None: an unpartitioned table)."""
    rows_replaced: int = 0
    """Published rows the write's build replaces that readers still see: they are retired when
    the build is published (a later write's publication, or never if it is held)."""


@dataclass(frozen=True)
class WriteResult:
    """What one write did, for output metadata and measurements: totals over all its partitions,
    and each partition's own `BatchWrite` (one entry, key "", for an unpartitioned table)."""

    partitions: tuple[str, ...]
    rows_written: int
    rows_deleted: int
    bytes_written: int
    seconds: float
    batches: dict[str, BatchWrite] = field(default_factory=dict)
    published: dict[str, int] = field(default_factory=dict)
    """Batches this write's `publish` step published, with their generation."""
    held: dict[str, str] = field(default_factory=dict)
    """Batches whose build this write's `publish` step could not publish, and why."""
    publication: Published | None = None
    """What the `publish` step returned (None: the write had none, or no build to publish)."""


def partition_lock(conn: psycopg.Connection[Any], table: str, partition: str) -> None:
    """Take the transaction-scoped writer lock of one partition of `table` (released at commit
    or rollback), so two writers of the same partition queue instead of interleaving."""
    writer_locks.lock(conn, "\x1f".join(("seams", table, partition)))


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
    publish: PublishStep | None = None,
) -> WriteResult:
    """`_write_table_once`, rerun whole when PostgreSQL aborts its transaction (a deadlock or a
    serialization failure: nothing was written); past the last attempt, a `StorageError` that
    names the abort."""
    doing = f"writing asset {asset or table.name} to {table.qualified_name}"
    once = functools.partial(
        _write_table_once, postgres, table, frame, partition_keys, asset, copy_format, run_id,
        publish,
    )  # fmt: skip
    return retrying(postgres.redacted_url, doing, once)


def _write_table_once(
    postgres: ConnectionSource,
    table: schema.Table,
    frame: pd.DataFrame,
    partition_keys: Sequence[str] | None,
    asset: str | None,
    copy_format: CopyFormat,
    run_id: str | None,
    publish: PublishStep | None,
) -> WriteResult:
    """Replace the rows of `partition_keys` (all rows when unpartitioned) with `frame`, atomically.

    A partition's rows go to its batch's open build (`seams.storage.builds`, opened by
    `run_id` if there is none), beside the published rows readers see; `publish`, given, then
    publishes the builds the write completes, in the same transaction.

    Raises `StorageError` naming the asset, table and column for bad frames, duplicate keys or a
    lost connection; the table then still holds exactly its previous rows.
    """
    started = time.perf_counter()
    asset = asset or table.name
    keys = _check_partitioning(table, partition_keys, asset)
    if keys is not None:
        # The batch's, filled in below: a frame need not carry it and whatever it holds there
        # is replaced (copy-on-write: the frame's other columns are not copied).
        frame = frame.assign(**{schema.COLLECTION: schema.DEFAULT_COLLECTION})
    columns = coerce_frame(table, frame, keys, asset=asset)
    batches: dict[str, BatchWrite] = {}
    builds: dict[str, build_store.Build] = {}
    published: Published | None = None
    with postgres.connection() as conn:
        try:
            with conn.transaction():
                for key in sorted(keys) if keys else [""]:  # sorted: no lock-order deadlocks
                    partition_lock(conn, table.name, key)
                if keys is not None:
                    builds = build_store.open_builds(conn, keys, run_id)
                # Every partition's rows go before any are written (a key that spans batches
                # cannot collide with a row about to be deleted); each is timed and counted.
                deleted, replaced, seconds = {}, {}, {}
                for key in keys or [None]:
                    begun = time.perf_counter()
                    build = None if key is None else builds[key]
                    deleted[key], replaced[key] = _delete(conn, table, key, build)
                    seconds[key] = time.perf_counter() - begun
                for key, rows in _rows_by_partition(table, columns, keys):
                    begun = time.perf_counter()
                    if key is not None:  # the build's generation and collection
                        count = len(rows[0])
                        rows[_GENERATION_POSITION[table.name]] = [builds[key].generation] * count
                        rows[_COLLECTION_POSITION[table.name]] = [builds[key].collection] * count
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
                        replaced[key],
                    )
                if builds:
                    build_store.record_part(conn, table, builds)
                    if publish is not None:
                        published = publish(conn, _with_part(builds, table.name))
            for key in batches.keys() & (published.published if published else {}).keys():
                done = batches[key]  # its build is published: the rows it replaced are gone
                batches[key] = replace(
                    done, rows_deleted=done.rows_deleted + done.rows_replaced, rows_replaced=0
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
        published=dict(published.published) if published else {},
        held=dict(published.held) if published else {},
        publication=published,
    )


def _with_part(builds: dict[str, build_store.Build], table: str) -> dict[str, build_store.Build]:
    """The builds as `record_part` left them: `table` their last part."""
    return {
        key: replace(build, parts=(*build.parts[: _part_end(build.parts, table)], table))
        for key, build in builds.items()
    }


def _part_end(parts: tuple[str, ...], table: str) -> int:
    order = schema.BATCH_ASSETS
    return sum(1 for p in parts if order.index(p) < order.index(table))


_GENERATION_POSITION = {
    t.name: t.column_names.index(schema.GENERATION)
    for t in schema.ASSET_TABLES.values()
    if t.partitioned
}
_COLLECTION_POSITION = {
    t.name: t.column_names.index(schema.COLLECTION)
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
    build: build_store.Build | None,
) -> tuple[int, int]:
    """Remove what this write replaces; returns how many rows it removed, and how many published
    rows it replaces without removing them.

    Unpartitioned: every row. A partition: the open build's own rows of the table (a rerun of
    the step). A table the build had not written yet replaces the published rows, which stay
    visible and go when the build is published: they are counted apart, not deleted.
    """
    if key is None or build is None:
        return conn.execute(sql.SQL("DELETE FROM {}").format(table.identifier())).rowcount, 0
    query = sql.SQL("DELETE FROM {} WHERE {} = %s AND {} = %s").format(
        table.identifier(), sql.Identifier(schema.BATCH_KEY), sql.Identifier(schema.GENERATION)
    )
    removed = conn.execute(query, (key, build.generation)).rowcount
    if table.name in build.parts or build.published_generation is None:
        return removed, 0
    count = sql.SQL("SELECT count(*) FROM {} WHERE {} = %s AND {} <= %s").format(
        table.identifier(), sql.Identifier(schema.BATCH_KEY), sql.Identifier(schema.GENERATION)
    )
    return removed, int(conn.execute(count, (key, build.published_generation)).fetchone()[0])


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
        query = sql.SQL("{} {}").format(query, build_store.read_joins(table))
        conditions.append(build_store.read_filter())
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


def _detail(exc: psycopg.Error) -> str:
    diag = exc.diag
    parts = [diag.message_primary or str(exc).strip().splitlines()[0]]
    if diag.message_detail:
        parts.append(diag.message_detail)
    if diag.context:
        parts.append(diag.context.strip().splitlines()[0])
    return "; ".join(parts)
