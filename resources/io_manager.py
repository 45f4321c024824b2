"""`PostgresIOManager`: each asset's DataFrame in its declared `seams.<asset>` table.

The storing itself (columns and values checked against the declaration, one transaction per
partition write, exact dtypes on load) is `seams.storage.partition_tables`; this module maps
Dagster's contexts onto it and turns what a write did into the metadata the UI shows.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
import pandas as pd

from seams.errors import StorageError
from seams.resources.postgres import PostgresResource
from seams.storage import schema
from seams.storage.partition_tables import (
    BatchWrite,
    CopyFormat,
    WriteResult,
    read_table,
    write_table,
)


class PostgresIOManager(dg.ConfigurableIOManager):
    """Stores each asset's DataFrame in its declared table in schema `seams`."""

    postgres: PostgresResource
    copy_format: CopyFormat = "binary"

    def handle_output(self, context: dg.OutputContext, obj: pd.DataFrame | None) -> None:
        if obj is None:  # an asset that stores nothing here (e.g. returns MaterializeResult)
            return
        asset = context.asset_key.path[-1]
        table = _declared_table(asset)
        if not isinstance(obj, pd.DataFrame):
            raise StorageError(
                f"asset {asset} returned {type(obj).__name__}; the Postgres IO manager stores "
                f"pandas DataFrames with the columns of {table.qualified_name}"
            )
        keys = list(context.asset_partition_keys) if context.has_asset_partitions else None
        result = write_table(
            self.postgres,
            table,
            obj,
            keys,
            asset=asset,
            copy_format=self.copy_format,
            run_id=_run_id(context),
        )
        for batch, reason in sorted(result.held.items()):
            context.log.warning(f"batch {batch} not published: {reason}")
        context.add_output_metadata(write_metadata(result, table))
        if len(result.batches) > 1:
            _add_batch_metadata(context, result)

    def load_input(self, context: dg.InputContext) -> pd.DataFrame:
        asset = context.asset_key.path[-1]
        keys = list(context.asset_partition_keys) if context.has_asset_partitions else None
        return read_table(self.postgres, _declared_table(asset), keys, asset=asset)


def _run_id(context: dg.OutputContext) -> str | None:
    """The run writing (recorded on the batch's build), None outside a run."""
    try:
        return context.run_id
    except (dg.DagsterInvariantViolationError, AttributeError):
        return None


def write_metadata(result: WriteResult, table: schema.Table) -> dict[str, Any]:
    """Output metadata, which Dagster puts on every partition's materialization.

    One partition (or an unpartitioned table): the write's numbers, which are that partition's;
    `write_seconds` is the whole write (validation, lock, DELETE, COPY, commit). Several
    partitions (a single-run backfill): only what is true of each of them, the table, and the
    run's share named as the run's (`run_*`); each partition's own numbers come from
    `batch_metadata`.
    """
    # Dagster's standard table keys: the UI shows the row count, columns and table name.
    meta: dict[str, Any] = {
        "dagster/table_name": table.qualified_name,
        "dagster/column_schema": column_schema(table),
    }
    if len(result.partitions) > 1:
        return {
            **meta,
            "run_partitions_written": len(result.partitions),
            "run_write_seconds": _seconds(result.seconds),
        }
    meta.update(
        {
            "dagster/row_count": result.rows_written,
            "rows_written": result.rows_written,
            "rows_deleted": result.rows_deleted,
            "bytes_written": result.bytes_written,
            "write_seconds": _seconds(result.seconds),
        }
    )
    if table.partitioned:
        meta["dagster/partition_row_count"] = result.rows_written
        (written,) = result.batches.values()
        meta.update(_build_state(written, result.held.get(result.partitions[0])))
    return meta


def _build_state(batch: BatchWrite, held: str | None) -> dict[str, Any]:
    """A partition write's effect on what readers see: the published rows its build replaces
    once published (`rows_replaced`; readers still see them), and why its build is held."""
    state: dict[str, Any] = {"rows_replaced": batch.rows_replaced}
    if held is not None:
        state["held"] = held
    return state


def batch_metadata(batch: BatchWrite, held: str | None = None) -> dict[str, Any]:
    """One partition's own numbers, for its materialization (Dagster's row-count keys too), and
    why its build is held (`held`)."""
    return {
        "dagster/row_count": batch.rows_written,
        "dagster/partition_row_count": batch.rows_written,
        "rows_written": batch.rows_written,
        "rows_deleted": batch.rows_deleted,
        "bytes_written": batch.bytes_written,
        "write_seconds": _seconds(batch.seconds),
        **_build_state(batch, held),
    }


def _add_batch_metadata(context: dg.OutputContext, result: WriteResult) -> None:
    """A multi-batch run (a single-run backfill) writes many partitions at once; Dagster records
    one materialization per partition, and each must show its own batch's write, not the run's."""
    try:
        step = context.step_context
    except dg.DagsterInvariantViolationError:  # built outside a run: no materializations to tag
        return
    for key, written in result.batches.items():
        step.add_asset_metadata(
            batch_metadata(written, result.held.get(key)),
            asset_key=context.asset_key,
            partition_key=key,
        )


def column_schema(table: schema.Table) -> dg.TableSchema:
    """The table's columns as a Dagster `TableSchema`, so the UI shows them."""
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                name=c.name,
                type=c.pg_type,
                description=c.description or None,
                constraints=dg.TableColumnConstraints(nullable=c.nullable),
            )
            for c in table.columns
        ]
    )


def _seconds(seconds: float) -> float:
    """A duration as people read it: milliseconds are enough. (The assets' `rounded` lives above
    this layer: resources never import assets.)"""
    return round(seconds, 3)


def _declared_table(asset: str) -> schema.Table:
    table = schema.asset_table(asset)
    if table is None:
        raise StorageError(
            f"asset {asset} has no table declared in seams/storage/schema.py: declare one there, "
            "or give the asset another io_manager_key"
        )
    return table
