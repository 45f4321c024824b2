"""Staleness where people look: an `in_sync` check on every per-batch asset.

Dagster 1.13 shows that a partition is unsynced (its code version, which folds in the settings
that shape it, or an upstream data version changed since it was materialized) only on that
partition's page, never on the asset graph or overview (dagster-io/dagster#22553). So Seams
reports Dagster's own per-partition verdict as an asset check, which both show: after a settings
change and "Reload definitions", the affected assets carry a failed (warning) `in_sync` check
naming how many batches are unsynced and what to click (the `backfill_unsynced` job), the others
a passed one.

The `settings_sync` sensor recomputes the verdict on every tick and reports it again whenever
the verdict, the set of batches or any watched asset's latest materialization changed (the UI
shows an unpartitioned check's result only while it targets the asset's latest
materialization). Executed from the UI, the check judges against the whole code location's
asset graph, as the sensor does, never the run's. A model switch held for a batch
(`seams.storage.publication.ModelSwitch`) fails `in_sync` on every collection's `chunk_index`
too, whatever Dagster's verdict: search answers with the old model until the batch is built.

Both live with the orchestration, not with the assets: they read the instance's verdict, which
Dagster exposes only through its internals (`dagster_internals`).
"""

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence

import dagster as dg
import psycopg

from seams.assets.partitions import DEFAULT_LINEAGE, Lineage
from seams.errors import SeamsError, counted
from seams.orchestration.dagster_internals import (
    AssetCheckEvaluationTargetMaterializationData,
    StaleStatus,
    stale_status_resolver,
)
from seams.resources.keys import POSTGRES_KEY
from seams.storage import publication

SYNC_CHECK = "in_sync"
SYNC_SENSOR = "settings_sync"
LISTED_BATCHES = 20
SYNC_DESCRIPTION = (
    "Every batch is in sync: materialized with the current settings, code and inputs (Dagster's "
    "per-partition unsynced status). Fails (warning) after a settings change until a backfill "
    "recomputes the unsynced batches."
)
BACKFILL_JOB = "backfill_unsynced"
"""The job that backfills exactly the unsynced batches of exactly the unsynced assets."""
ADVICE = (
    f"Jobs -> {BACKFILL_JOB} -> Launchpad -> Launch Run: one backfill of exactly the unsynced "
    'batches and assets (the same as `seams backfill`). Dagster\'s own "Materialize unsynced" '
    "does not see unsynced partitions."
)


def sync_check_keys(lineages: Sequence[Lineage]) -> tuple[dg.AssetCheckKey, ...]:
    """The `in_sync` check of every watched asset of `lineages`."""
    return tuple(dg.AssetCheckKey(key, SYNC_CHECK) for lin in lineages for key in lin.keys)


SYNC_CHECK_KEYS = sync_check_keys([DEFAULT_LINEAGE])
"""The default collection's `in_sync` checks (a project without `collections:`)."""


def lineage_partitions(
    instance: dg.DagsterInstance, lineages: Sequence[Lineage]
) -> dict[Lineage, list[str]]:
    """Each lineage's batches (its own dynamic partitions)."""
    return {lin: instance.get_dynamic_partitions(lin.partitions.name) for lin in lineages}


def unsynced_partitions(
    instance: dg.DagsterInstance,
    asset_graph: object,
    partitions: Mapping[Lineage, Sequence[str]],
) -> dict[dg.AssetKey, list[str]]:
    """Per watched asset of each lineage, its partitions Dagster reports STALE
    (never-materialized ones are missing, not unsynced, and are left out)."""
    resolver = stale_status_resolver(instance, asset_graph)
    return {
        key: [p for p in batches if resolver.get_status(key, p) == StaleStatus.STALE]
        for lin, batches in partitions.items()
        for key in lin.keys
    }


def held_switch(defs: dg.Definitions) -> str | None:
    """Why the index is held (a model switch waiting for batches: its `describe()`), or None:
    nothing held, or the data cannot be read (the check then judges on Dagster's verdict)."""
    try:
        with defs.resources[POSTGRES_KEY].connection() as conn:
            switch = publication.model_switch(conn)
    except (psycopg.Error, SeamsError, KeyError):
        return None
    return switch.describe() if switch is not None and switch.waiting else None


def held_keys(lineages: Sequence[Lineage]) -> frozenset[dg.AssetKey]:
    """The assets a held switch fails `in_sync` on: every lineage's `chunk_index`."""
    return frozenset(lin.key("chunk_index") for lin in lineages)


def _metadata(stale: list[str], total: int, held: str | None = None) -> dict[str, object]:
    if held is not None:
        return {"unsynced_batches": len(stale), "batches": total, "held": held}
    listed = "\n".join(f"- {p}" for p in stale[:LISTED_BATCHES])
    if len(stale) > LISTED_BATCHES:
        listed += f"\n- ... and {len(stale) - LISTED_BATCHES} more"
    metadata: dict[str, object] = {"unsynced_batches": len(stale), "batches": total}
    if stale:
        metadata["unsynced"] = dg.MetadataValue.md(listed)
        metadata["what to do"] = ADVICE
    return metadata


def _verdict(stale: list[str], total: int, held: str | None = None) -> str | None:
    """The result's one line, what to click included (None when in sync)."""
    if held is not None:
        return held
    if not stale:
        return None
    return f"{len(stale)} of {counted(total, 'batch')} unsynced: launch the job {BACKFILL_JOB}"


def sync_evaluation(
    key: dg.AssetKey,
    stale: list[str],
    total: int,
    latest: object | None = None,
    held: str | None = None,
) -> dg.AssetCheckEvaluation:
    """The `in_sync` verdict of one asset, as the sensor reports it, tied to `latest` (the asset's
    latest materialization record, if any) so the UI counts it as evaluated on that one; `held`:
    why its index is held (it fails whatever Dagster says)."""
    target = None
    if latest is not None:
        target = AssetCheckEvaluationTargetMaterializationData(
            storage_id=latest.storage_id,
            run_id=latest.run_id,
            timestamp=latest.timestamp,
        )
    return dg.AssetCheckEvaluation(
        asset_key=key,
        check_name=SYNC_CHECK,
        passed=not stale and held is None,
        metadata=_metadata(stale, total, held),
        severity=dg.AssetCheckSeverity.WARN,
        description=_verdict(stale, total, held),
        target_materialization_data=target,
    )


def describe(
    stale: Mapping[dg.AssetKey, Sequence[str]], total: int, held: str | None = None
) -> str:
    """One line on what is unsynced: `2 of 3 batches unsynced: in_sync failed on chunks, ...`
    (and why the index is held, when it is)."""
    batches = {batch for keys in stale.values() for batch in keys}
    failed = [key.to_user_string() for key, keys in stale.items() if keys]
    if held is not None:
        return f"{len(batches)} of {counted(total, 'batch')} unsynced; the index is {held}"
    if not failed:
        return f"{counted(total, 'batch')} in sync: in_sync passed on every asset"
    return (
        f"{len(batches)} of {counted(total, 'batch')} unsynced: in_sync failed on "
        f"{', '.join(failed)}"
    )


def latest_materializations(
    instance: dg.DagsterInstance, keys: Sequence[dg.AssetKey]
) -> dict[dg.AssetKey, object]:
    """Per asset with one, its latest materialization record (storage id, run, timestamp)."""
    found = {}
    for record in instance.get_asset_records(list(keys)):
        latest = record.asset_entry.last_materialization_record
        if latest is not None:
            found[record.asset_entry.asset_key] = latest
    return found


def build_sync_check(
    location: Callable[[], dg.Definitions], lineages: Sequence[Lineage] = (DEFAULT_LINEAGE,)
) -> dg.AssetChecksDefinition:
    """`in_sync` on every per-batch asset of `lineages`, executable from the UI (the sensor
    reports it too).

    It judges against the asset graph of `location()`, the definitions of the whole code
    location (as the sensor judges against its repository), never the graph of the run it is
    in: a run that executes only the check (the Checks tab's "Execute") holds the assets as
    unexecutable stubs, on which nothing is ever unsynced.
    """

    @dg.multi_asset_check(
        specs=[
            dg.AssetCheckSpec(SYNC_CHECK, asset=key.asset_key, description=SYNC_DESCRIPTION)
            for key in sync_check_keys(lineages)
        ],
        name="in_sync_checks",
        # A run that materializes some assets (an asset backfill of the unsynced ones) selects
        # only their in_sync checks: without subsetting such a run cannot even be built.
        can_subset=True,
    )
    def in_sync(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        selected = {check.asset_key for check in context.selected_asset_check_keys}
        partitions = lineage_partitions(context.instance, lineages)
        totals = _totals(partitions)
        try:
            defs = location()
            graph = defs.resolve_asset_graph()
            stale = unsynced_partitions(context.instance, graph, partitions)
            held = held_switch(defs)
        except Exception as exc:  # a check that cannot look must not fail the run it is in
            context.log.warning(f"in_sync could not be evaluated: {exc}")
            for key in totals:
                if key not in selected:
                    continue
                yield dg.AssetCheckResult(
                    asset_key=key,
                    check_name=SYNC_CHECK,
                    passed=False,
                    severity=dg.AssetCheckSeverity.WARN,
                    metadata={"not evaluated": str(exc)[:300]},
                )
            return
        for key, batches in stale.items():
            if key not in selected:
                continue
            why = held if key in held_keys(lineages) else None
            yield dg.AssetCheckResult(
                asset_key=key,
                check_name=SYNC_CHECK,
                passed=not batches and why is None,
                severity=dg.AssetCheckSeverity.WARN,
                metadata=_metadata(batches, totals[key], why),
                description=_verdict(batches, totals[key], why),
            )

    return in_sync


def _totals(partitions: Mapping[Lineage, Sequence[str]]) -> dict[dg.AssetKey, int]:
    """Per watched asset, how many batches its lineage has."""
    return {key: len(batches) for lin, batches in partitions.items() for key in lin.keys}


def build_sync_sensor(
    minimum_interval_seconds: int = 30,
    lineages: Sequence[Lineage] = (DEFAULT_LINEAGE,),
    location: Callable[[], dg.Definitions] | None = None,
) -> dg.SensorDefinition:
    """Reports `in_sync` for every watched asset of `lineages` whenever the answer changes (on
    by default); with `location` (the code location's definitions), a held model switch fails
    `chunk_index`'s too."""

    @dg.sensor(
        name=SYNC_SENSOR,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Shows which assets a settings or code change left unsynced: reports the "
        "in_sync check of every per-batch asset when the unsynced batches change.",
    )
    def settings_sync(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        partitions = lineage_partitions(context.instance, lineages)
        totals = _totals(partitions)
        graph = context.repository_def.asset_graph
        stale = unsynced_partitions(context.instance, graph, partitions)
        held = held_switch(location()) if location is not None else None
        latest = latest_materializations(context.instance, list(stale))
        state = {
            key.to_user_string(): [batches, getattr(latest.get(key), "storage_id", None)]
            for key, batches in stale.items()
        }
        every = sorted(batch for batches in partitions.values() for batch in batches)
        state["__batches__"] = every
        state["__held__"] = held
        digest = hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()
        found = describe(stale, len(every), held)
        # The tick's text is what it found; a SkipReason is the one text a tick shows, and the
        # evaluations it carries are reported all the same.
        if digest == context.cursor:
            return dg.SensorResult(skip_reason=dg.SkipReason(f"{found} (unchanged)"))
        return dg.SensorResult(
            asset_events=[
                sync_evaluation(
                    key,
                    batches,
                    totals[key],
                    latest.get(key),
                    held if key in held_keys(lineages) else None,
                )
                for key, batches in stale.items()
            ],
            cursor=digest,
            skip_reason=dg.SkipReason(f"{found} (reported on {len(stale)} assets)"),
        )

    return settings_sync
