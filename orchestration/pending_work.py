"""What is left to do for the batches, read from the data and the instance: builds readers do
not see yet (`unfinished`: `seams run` finishes them) and assets a change left stale
(`unsynced_assets`: `seams backfill` recomputes them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg

from seams.assets.partitions import CHUNK_BATCHES_JOB, DEFAULT_LINEAGE, Lineage
from seams.errors import counted
from seams.orchestration.dagster_internals import StaleStatus, stale_status_resolver
from seams.orchestration.lineages import batch_lineages
from seams.resources.keys import POSTGRES_KEY
from seams.resources.postgres import PostgresResource
from seams.storage import builds, publication

JOB_NAME = CHUNK_BATCHES_JOB
"""The default collection's per-batch job: every step a batch goes through, in one partitioned
run (each other collection has its own: `Lineage.job_name`)."""


def job_assets_in_order(
    defs: dg.Definitions, lineage: Lineage = DEFAULT_LINEAGE
) -> list[dg.AssetKey]:
    """A lineage's per-batch job's assets in dependency order (extracted_text first)."""
    wanted = set(defs.resolve_job_def(lineage.job_name).asset_layer.executable_asset_keys)
    return [k for k in defs.resolve_asset_graph().toposorted_asset_keys if k in wanted]


@dataclass(frozen=True)
class Unfinished:
    """A batch readers do not see as built (`publication.unpublished`), and what finishes it."""

    batch: str
    source: str
    assets: tuple[dg.AssetKey, ...]
    """The job's assets to materialize, in order; empty: the build is complete, publish it."""
    state: publication.Unpublished

    def describe(self) -> str:
        """`batch K: resuming at chunk_index` (or `from the start`, `publishing`)."""
        if not self.assets:
            what = "publishing its complete build"
        elif self.state.generation is None or not self.state.parts:
            what = "from the start"
        else:
            what = f"resuming at {self.assets[0].to_user_string()}"
        return f"batch {self.batch}: {what}"


def unfinished(defs: dg.Definitions, batch_keys: Sequence[str] | None = None) -> list[Unfinished]:
    """Every batch (of `batch_keys`, or all, whatever its source) whose index is not published:
    registered and never built, or with an open build (a run or backfill killed at any step,
    between `chunks` and `chunk_index` too). Decided from the data, not from Dagster's event
    log: a batch is done when readers see it, and a step's materialization event can land
    without its publication, or its publication without the event. Each batch is finished by
    its collection's lineage; a batch of a collection the settings no longer declare is left
    out (no job here can build it)."""
    wanted = None if batch_keys is None else set(batch_keys)
    postgres: PostgresResource = defs.resources[POSTGRES_KEY]
    postgres.ensure_schema()  # writers' entry: a first run finds no tables yet
    with postgres.connection() as conn:
        found = [
            u for u in publication.unpublished(conn) if wanted is None or u.batch_key in wanted
        ]
    lineage = batch_lineages(defs, [u.batch_key for u in found])
    found = [u for u in found if u.batch_key in lineage]
    orders = {lin: job_assets_in_order(defs, lin) for lin in set(lineage.values())}
    order = {u.batch_key: orders[lineage[u.batch_key]] for u in found}
    written = {u.batch_key: _as_build(u) for u in found if _written_through(order[u.batch_key], u)}
    with postgres.connection() as conn:
        lacking = publication.incomplete(conn, written) if written else {}
    return [
        Unfinished(
            u.batch_key, u.source, _remaining(order[u.batch_key], u, u.batch_key in lacking), u
        )
        for u in found
    ]


def _as_build(state: publication.Unpublished) -> builds.Build:
    assert state.generation is not None and state.started_at is not None
    return builds.Build(
        state.batch_key,
        state.generation,
        state.state,
        state.parts,
        state.run_id,
        state.started_at,
        state.published_generation,
    )


def _written_through(order: Sequence[dg.AssetKey], state: publication.Unpublished) -> bool:
    """Whether the batch's open build wrote every asset from its first part to the last."""
    return state.generation is not None and bool(state.parts) and not _gap(order, state.parts)


def _gap(order: Sequence[dg.AssetKey], parts: Sequence[str]) -> int | None:
    """The position in `order` of the first asset after `parts[0]` that is not a part."""
    names = [key.path[-1] for key in order]  # a build's parts are table names
    first = names.index(parts[0]) if parts[0] in names else 0
    return next((i for i in range(first, len(names)) if names[i] not in parts), None)


def _remaining(
    order: Sequence[dg.AssetKey], state: publication.Unpublished, lacking: bool
) -> tuple[dg.AssetKey, ...]:
    """The assets that finish a batch's build: all of them without one; else from the first
    asset after the build's first part that it has not written (its earlier parts are written,
    or inherited from the published build, and consistent: writing a table drops the build's
    later parts); a build written through `chunk_index`: `chunk_index` again when publication
    finds it `lacking` (chunks without vectors), else nothing (it only awaits publication)."""
    if state.generation is None or not state.parts:
        return tuple(order)
    gap = _gap(order, state.parts)
    if gap is not None:
        return tuple(order[gap:])
    return (order[-1],) if lacking else ()


def describe_unfinished(found: Sequence[Unfinished], *, most: int = 5) -> str:
    """One line: `finishing 2 batch(es) left unpublished: batch K: resuming at chunk_index; ...`."""
    shown = "; ".join(u.describe() for u in found[:most])
    more = f"; and {len(found) - most} more" if len(found) > most else ""
    return f"finishing {counted(len(found), 'batch')} left unpublished: {shown}{more}"


def model_switch(defs: dg.Definitions) -> publication.ModelSwitch | None:
    """The model switch in progress in the data (None: none): its held batches are complete
    and wait for the rest of the switch, which a backfill builds."""
    postgres: PostgresResource = defs.resources[POSTGRES_KEY]
    with postgres.connection() as conn:
        return publication.model_switch(conn)


def held_for_switch(defs: dg.Definitions) -> frozenset[str]:
    """The batches whose complete build waits for a model switch that still lacks batches:
    nothing a run can finish (a switch with every batch ready is published by resuming them)."""
    switch = model_switch(defs)
    if switch is None or not switch.waiting:
        return frozenset()
    return frozenset(switch.ready)


def unfinished_batches(
    instance: dg.DagsterInstance, *, defs: dg.Definitions, source: str | None = None
) -> list[str]:
    """The batches whose index is not published (see `unfinished`), of `source` or of all."""
    del instance  # decided from the data: see `unfinished`
    return [u.batch for u in unfinished(defs) if source is None or u.source == source]


def unsynced_assets(
    instance: dg.DagsterInstance,
    partition_keys: Sequence[str],
    *,
    defs: dg.Definitions,
) -> dict[str, list[dg.AssetKey]]:
    """Per partition, its lineage's per-batch assets Dagster considers stale (code, config or
    inputs); partitions of a collection the settings no longer declare are left out."""
    graph = defs.resolve_asset_graph()
    resolver = stale_status_resolver(instance, graph)
    lineage = batch_lineages(defs, partition_keys)
    orders = {lin: job_assets_in_order(defs, lin) for lin in set(lineage.values())}
    return {
        partition: [
            k
            for k in orders[lineage[partition]]
            if resolver.get_status(k, partition) != StaleStatus.FRESH
        ]
        for partition in partition_keys
        if partition in lineage
    }
