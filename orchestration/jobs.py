"""Jobs: one partitioned job that runs every per-batch step of a document batch, and the one-click
backfill of what a settings change left unsynced."""

from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg

from seams.assets.partitions import DEFAULT_LINEAGE, Lineage
from seams.errors import counted
from seams.orchestration import launch, runner
from seams.orchestration.lineages import all_partitions
from seams.orchestration.sync import BACKFILL_JOB, LISTED_BATCHES, sync_check_keys


def build_chunk_batches_job(
    lineage: Lineage = DEFAULT_LINEAGE, executor: dg.ExecutorDefinition | None = None
) -> Any:
    """The job of one collection, every per-batch step of its batches: `chunk_batches` for the
    default collection, `<collection>__chunk_batches` for another, on `executor` (None:
    Dagster's default). (An unresolved asset job: Dagster resolves it against the definitions
    it is in.)"""
    whose = "" if lineage.is_default else f" of collection {lineage.collection}"
    return dg.define_asset_job(
        name=lineage.job_name,
        # The in_sync checks look at every batch: the settings_sync sensor reports them, not runs.
        selection=dg.AssetSelection.assets(*lineage.keys)
        - dg.AssetSelection.checks(*sync_check_keys([lineage])),
        description="Extract, segment, embed, cut, assemble and index the chunks of a batch"
        f"{whose}. Backfills launched from this job (Materialize, batches picked) run as runs "
        "of this job, as `seams run` runs them; the global asset graph's Materialize runs them "
        "under Dagster's own __ASSET_JOB.",
        executor_def=executor,
    )


REQUESTED_BY_RUN_TAG = "seams/requested_by_run"
"""Tag on the backfill `backfill_unsynced` requests: the run that requested it."""


def build_backfill_unsynced_job(
    location: Callable[[], dg.Definitions], executor: dg.ExecutorDefinition | None = None
) -> dg.JobDefinition:
    """`backfill_unsynced`: the UI's one click after a settings change.

    Dagster's "Materialize unsynced" does not see unsynced partitions, and "Materialize -> all
    partitions" recomputes every batch of every selected asset. This job requests an asset
    backfill of exactly the unsynced assets of exactly the unsynced batches (one per first
    step, `launch.by_first_step`), judged against
    `location()` (the code location's definitions, as `in_sync` judges) and planned as `seams
    backfill` plans it; the daemon runs it (Runs -> Backfills), its runs launched by
    `backfill_unsynced`.
    """

    @dg.op(
        name="request_unsynced_backfill",
        description="Requests one backfill of exactly the unsynced batches and assets.",
    )
    def request_unsynced_backfill(context: dg.OpExecutionContext) -> Iterator[dg.Output]:
        defs = location()
        partitions = list(all_partitions(context.instance, defs))
        unsynced = runner.unsynced_assets(context.instance, partitions, defs=defs)
        stale = {batch: keys for batch, keys in unsynced.items() if keys}
        if not stale:
            context.log.info(f"{counted(len(partitions), 'batch')} up to date: nothing to backfill")
            yield dg.Output(None, metadata={"backfill": "none", "unsynced_batches": 0})
            return
        # Added as requested: the daemon plans and launches their runs, as for a UI backfill.
        # One per first step, so the UI's partition selection of each lists all its batches.
        backfills = [
            launch.create_backfill(
                context.instance,
                defs,
                part,
                started_by=BACKFILL_JOB,
                tags={REQUESTED_BY_RUN_TAG: context.run_id},
            )
            for part in launch.by_first_step(stale)
        ]
        for backfill in backfills:
            context.instance.add_backfill(backfill)
        ids = ", ".join(backfill.backfill_id for backfill in backfills)
        listed = [
            f"- {batch}: {', '.join(key.to_user_string() for key in keys)}"
            for batch, keys in list(stale.items())[:LISTED_BATCHES]
        ]
        if len(stale) > LISTED_BATCHES:
            listed.append(f"- ... and {len(stale) - LISTED_BATCHES} more")
        context.log.info(
            f"{'backfills' if len(backfills) > 1 else 'backfill'} {ids} requested: {len(stale)} of "
            f"{counted(len(partitions), 'batch')}; the daemon launches its runs (Runs -> Backfills)"
        )
        yield dg.Output(
            None,
            metadata={
                "backfill": ids,
                "unsynced_batches": len(stale),
                "batches": len(partitions),
                "unsynced": dg.MetadataValue.md("\n".join(listed)),
            },
        )

    @dg.job(
        name=BACKFILL_JOB,
        description="After a settings change: one backfill of exactly the unsynced batches of "
        "exactly the unsynced assets (what `seams backfill` does). Launch it from the Launchpad; "
        "the backfill shows under Runs -> Backfills.",
        executor_def=executor,
    )
    def backfill_unsynced() -> None:
        request_unsynced_backfill()

    return backfill_unsynced
