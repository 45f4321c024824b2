"""The inbox sensor and the sealing schedule: how new documents become batches and runs.

Both freeze pending file versions into a batch (`seams.storage.batches`), add its partition and
request its run. Both are idempotent: the database refuses a file version already in a batch, and
`run_key=batch_key` makes Dagster drop a repeated request. A batch registered by a tick that
failed before its partition was added is picked up by the next tick.
"""

import time
from dataclasses import dataclass

import dagster as dg

from seams.assets.partitions import document_batches
from seams.orchestration.jobs import chunk_batches_job
from seams.resources.postgres import PostgresResource
from seams.settings import InboxSettings
from seams.storage.batches import all_batch_keys, register_batch, scan_inbox, unregistered


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
) -> InboxTick:
    """Register a batch when enough files wait, the oldest waited long enough, or `seal` is set."""
    folder = inbox.folder()
    folder.mkdir(parents=True, exist_ok=True)
    files, _refused = scan_inbox(folder)
    now = time.time() if now is None else now
    with postgres.connection() as conn:
        orphaned = [k for k in all_batch_keys(conn) if k not in known_partitions]
        pending = unregistered(conn, files)
        if not pending:
            return InboxTick(None, orphaned, "no new or changed files")
        waited_min = (now - min(f.mtime for f in pending)) / 60
        if seal:
            reason = f"sealed {len(pending)} pending file(s) on schedule"
        elif len(pending) >= inbox.min_files:
            reason = f"{len(pending)} new file(s) >= min_files={inbox.min_files}"
        elif waited_min >= inbox.max_wait_minutes:
            reason = f"oldest file waited {waited_min:.1f} min >= {inbox.max_wait_minutes}"
        else:
            return InboxTick(
                None, orphaned, f"{len(pending)} file(s) waiting ({waited_min:.1f} min)"
            )
        key = register_batch(conn, pending, source=f"inbox:{folder}")
    return InboxTick(key, orphaned, reason)


def _run_requests(tick: InboxTick) -> list[dg.RunRequest]:
    return [
        dg.RunRequest(partition_key=k, run_key=k, tags={"seams/trigger": tick.reason[:200]})
        for k in tick.batch_keys
    ]


def build_inbox_sensor(inbox: InboxSettings) -> dg.SensorDefinition:
    """The sensor that turns what waits in `inbox` into batches and `chunk_batches` runs."""

    @dg.sensor(
        job=chunk_batches_job,
        minimum_interval_seconds=30,
        description="Registers a batch when enough new files wait in the inbox or the oldest "
        "waited long enough (seams.yaml: inbox), adds its partition and requests its run.",
    )
    def inbox_sensor(
        context: dg.SensorEvaluationContext, postgres: PostgresResource
    ) -> dg.SensorResult | dg.SkipReason:
        known = set(context.instance.get_dynamic_partitions(document_batches.name))
        tick = look_at_inbox(postgres, inbox, known, seal=False)
        if not tick.batch_keys:
            return dg.SkipReason(tick.reason)
        return dg.SensorResult(
            run_requests=_run_requests(tick),
            dynamic_partitions_requests=[document_batches.build_add_request(tick.batch_keys)],
            cursor=tick.batch_keys[-1],
        )

    return inbox_sensor


def build_seal_schedule(inbox: InboxSettings) -> dg.ScheduleDefinition:
    """The schedule that seals whatever waits in `inbox` on `inbox.seal_cron` into a batch."""

    @dg.schedule(
        job=chunk_batches_job,
        cron_schedule=inbox.seal_cron,
        description="Seals whatever waits in the inbox into a batch and runs it.",
    )
    def seal_inbox_schedule(
        context: dg.ScheduleEvaluationContext, postgres: PostgresResource
    ) -> list[dg.RunRequest] | dg.SkipReason:
        known = set(context.instance.get_dynamic_partitions(document_batches.name))
        tick = look_at_inbox(postgres, inbox, known, seal=True)
        if not tick.batch_keys:
            return dg.SkipReason(tick.reason)
        # Schedules cannot return partition requests: add the partitions before requesting runs.
        context.instance.add_dynamic_partitions(document_batches.name, tick.batch_keys)
        return _run_requests(tick)

    return seal_inbox_schedule
