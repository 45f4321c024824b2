"""The inbox sensor and the sealing schedule: how new documents become batches and runs.

Both freeze pending file versions into a batch (`seams.storage.batches`), add its partition and
request its run. Both are idempotent: the database refuses a file version already in a batch, and
`run_key=batch_key` makes Dagster drop a repeated request. A batch registered by a tick that
failed before its partition was added is picked up by the next tick.
"""

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from seams.assets.partitions import DEFAULT_LINEAGE, Lineage
from seams.collections import Collection, route
from seams.errors import counted
from seams.extraction import MAX_BYTES
from seams.resources.postgres import PostgresResource
from seams.settings import InboxSettings
from seams.storage.batches import (
    all_batch_keys,
    register_batch,
    unregistered,
)
from seams.storage.sources import (
    BATCH_OBJECTS_MAX,
    ObjectSource,
    Report,
    Version,
    found_at,
    location_text,
    open_source,
)


@dataclass(frozen=True)
class InboxTick:
    """What one look at the inbox decided: batches to launch and why."""

    new_batch: str | None
    orphaned: list[str]
    reason: str

    @property
    def batch_keys(self) -> list[str]:
        return [*self.orphaned, *([self.new_batch] if self.new_batch else [])]


def look_at_inbox(
    postgres: PostgresResource,
    inbox: InboxSettings,
    known_partitions: set[str],
    *,
    seal: bool,
    now: float | None = None,
    lineage: Lineage = DEFAULT_LINEAGE,
    collections: Mapping[str, Collection] | None = None,
    max_bytes: int = MAX_BYTES,
    report: Report | None = None,
) -> InboxTick:
    """Register a batch of `lineage`'s collection when enough files wait, the oldest waited
    long enough, or `seal` is set. With `collections`, only the files of the inbox that belong
    to that collection count (another collection may read a folder inside this one).

    An object prefix is listed (no bytes read to decide what is new); only the objects that
    make the batch are read, at most `BATCH_OBJECTS_MAX` per look (the rest make the next)."""
    location = inbox.location()
    if isinstance(location, Path):
        location.mkdir(parents=True, exist_ok=True)
    source = open_source(location, endpoint_url=inbox.endpoint_url, max_bytes=max_bytes)
    found = _files_of(source.scan(report).found, lineage, collections)
    now = time.time() if now is None else now
    with postgres.connection() as conn:
        mine = all_batch_keys(conn, collection=lineage.collection)
        orphaned = [k for k in mine if k not in known_partitions]
        pending = unregistered(conn, found, lineage.collection)
    if not pending:
        return InboxTick(None, orphaned, "no new or changed files")
    waited_min = (now - min(f.mtime for f in pending)) / 60
    if seal:
        reason = f"sealed {counted(len(pending), 'pending file')} on schedule"
    elif len(pending) >= inbox.min_files:
        reason = f"{counted(len(pending), 'new file')} >= min_files={inbox.min_files}"
    elif waited_min >= inbox.max_wait_minutes:
        reason = f"oldest file waited {waited_min:.1f} min >= {inbox.max_wait_minutes}"
    else:
        return InboxTick(
            None, orphaned, f"{counted(len(pending), 'file')} waiting ({waited_min:.1f} min)"
        )
    if isinstance(source, ObjectSource):
        pending = pending[:BATCH_OBJECTS_MAX]
    frozen = source.freeze(pending, report)
    with postgres.connection() as conn:
        key = register_batch(
            conn,
            frozen,
            source=f"inbox:{location_text(location)}",
            collection=lineage.collection,
        )
    return InboxTick(key, orphaned, reason)


def _files_of(
    files: Sequence[Version], lineage: Lineage, collections: Mapping[str, Collection] | None
) -> list[Version]:
    if not collections:
        return list(files)
    return [f for f in files if route(found_at(f), collections) == lineage.collection]


def _run_requests(tick: InboxTick) -> list[dg.RunRequest]:
    return [
        dg.RunRequest(partition_key=k, run_key=k, tags={"seams/trigger": tick.reason[:200]})
        for k in tick.batch_keys
    ]


def build_inbox_sensor(
    inbox: InboxSettings,
    lineage: Lineage = DEFAULT_LINEAGE,
    collections: Mapping[str, Collection] | None = None,
    max_bytes: int = MAX_BYTES,
) -> dg.SensorDefinition:
    """The sensor that turns what waits in `inbox` into batches of `lineage`'s collection and
    runs of its job (objects over `max_bytes` are refused unread)."""
    partitions = lineage.partitions

    @dg.sensor(
        name=_named("inbox_sensor", lineage),
        job_name=lineage.job_name,
        minimum_interval_seconds=30,
        description="Registers a batch when enough new files wait in the inbox or the oldest "
        "waited long enough (seams.yaml: inbox), adds its partition and requests its run.",
    )
    def inbox_sensor(
        context: dg.SensorEvaluationContext, seams_postgres: PostgresResource
    ) -> dg.SensorResult | dg.SkipReason:
        tick = _look(context, seams_postgres, inbox, lineage, collections, max_bytes, seal=False)
        if not tick.batch_keys:
            return dg.SkipReason(tick.reason)
        return dg.SensorResult(
            run_requests=_run_requests(tick),
            dynamic_partitions_requests=[partitions.build_add_request(tick.batch_keys)],
            cursor=tick.batch_keys[-1],
        )

    return inbox_sensor


def build_seal_schedule(
    inbox: InboxSettings,
    lineage: Lineage = DEFAULT_LINEAGE,
    collections: Mapping[str, Collection] | None = None,
    max_bytes: int = MAX_BYTES,
) -> dg.ScheduleDefinition:
    """The schedule that seals whatever of `lineage`'s collection waits in `inbox` on
    `inbox.seal_cron` into a batch, run by its job."""
    partitions = lineage.partitions

    @dg.schedule(
        name=_named("seal_inbox_schedule", lineage),
        job_name=lineage.job_name,
        cron_schedule=inbox.seal_cron,
        description="Seals whatever waits in the inbox into a batch and runs it.",
    )
    def seal_inbox_schedule(
        context: dg.ScheduleEvaluationContext, seams_postgres: PostgresResource
    ) -> list[dg.RunRequest] | dg.SkipReason:
        tick = _look(context, seams_postgres, inbox, lineage, collections, max_bytes, seal=True)
        if not tick.batch_keys:
            return dg.SkipReason(tick.reason)
        # Schedules cannot return partition requests: add the partitions before requesting runs.
        context.instance.add_dynamic_partitions(partitions.name, tick.batch_keys)
        return _run_requests(tick)

    return seal_inbox_schedule


def _look(
    context: dg.SensorEvaluationContext | dg.ScheduleEvaluationContext,
    postgres: PostgresResource,
    inbox: InboxSettings,
    lineage: Lineage,
    collections: Mapping[str, Collection] | None,
    max_bytes: int,
    *,
    seal: bool,
) -> InboxTick:
    """A sensor's or a schedule's look at the inbox: against the partitions its instance
    knows, progress in its log."""
    known = set(context.instance.get_dynamic_partitions(lineage.partitions.name))
    return look_at_inbox(
        postgres,
        inbox,
        known,
        seal=seal,
        lineage=lineage,
        collections=collections,
        max_bytes=max_bytes,
        report=context.log.info,
    )


def _named(name: str, lineage: Lineage) -> str:
    """`inbox_sensor` for the default collection, `handbook__inbox_sensor` for another."""
    return name if lineage.is_default else f"{lineage.collection}__{name}"
