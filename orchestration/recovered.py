"""Published writes Dagster has no record of, recorded: the rerun after a run stopped mid-step.

A batch's `chunk_index` write publishes its build (`seams.storage.index_publication`), in the
write's own transaction, and Dagster stores the step's materialization only after that write
returns. A run stopped in between (kill -9, out of memory, a crash, a cancel) leaves the batch
published and searchable, so `runner.unfinished` rightly finds nothing left to do, but the instance
without that materialization: the UI shows the partition missing, or an older build's record, and
Dagster's staleness (`in_sync`, `seams backfill`, the UI's "unsynced") judges that older record. A
`chunks` write whose run stopped before its materialization, in a build that a later run finished,
leaves the same gap one step earlier.

`record_unrecorded` reports each such materialization as a runless event, with metadata that says
it was recovered (the run that wrote it, the build's generation, its rows) and the provenance tags
a run writes (the asset's code version, each input's data version and event, the data version
computed from them), so staleness stays exact. It does so only for builds made with the current
settings, as the stored rows tell them (the chunks' code version; the index's mode and text search
configuration): a build made with other settings is not claimed, shows as unsynced, and
`seams backfill` rebuilds it. `unrecorded` says what it would record, and what it cannot.

Only runs that ended without success are looked at (failed: the orphan check marks a killed
`seams` run so; canceled): a successful run recorded every step it wrote, and a run still in
progress may yet record its own. The earlier steps (extracted_text ... semantic_boundaries)
store no code version in their rows, so their settings cannot be told from the data: a missing
record of theirs is left to show, and `seams backfill` recomputes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import dagster as dg
import psycopg

from seams.assets.partitions import Lineage
from seams.environment import SeamsEnvironment
from seams.orchestration.dagster_internals import (
    StaleStatus,
    provenance_tags,
    stale_status_resolver,
)
from seams.orchestration.definitions import built_index_mode
from seams.orchestration.lineages import batch_lineages
from seams.resources.io_manager import column_schema
from seams.resources.keys import POSTGRES_KEY
from seams.resources.postgres import PostgresResource
from seams.settings import SeamsSettings
from seams.storage import schema

CHUNKS = dg.AssetKey(schema.CHUNKS.name)
CHUNK_INDEX = dg.AssetKey(schema.CHUNK_INDEX.name)
STOPPED = [dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
"""Run states that may leave a committed write without its materialization."""
RECOVERED = "recovered"
"""Metadata key of a recorded materialization: where it came from."""
GENERATION = "generation"
"""Metadata key of a recorded materialization: the build whose rows it describes."""

Report = Callable[[str], None]


@dataclass(frozen=True)
class Unrecorded:
    """A published write of `asset` for `batch` whose materialization Dagster has not recorded
    (or, `again`: recorded before its input's recovered materialization, so out of date)."""

    batch: str
    asset: dg.AssetKey
    generation: int
    """The build whose rows these are."""
    run_id: str | None
    """The run that wrote them (None: published outside a run)."""
    rows: int
    published_at: datetime
    other_settings: str | None
    """Why these rows are not what the current settings make (None: they are; recordable)."""
    again: bool = False

    @property
    def recordable(self) -> bool:
        return self.other_settings is None

    @property
    def origin(self) -> str:
        """`published by run R, which stopped before Dagster recorded it` (the metadata's text)."""
        verb = "published" if self.asset.path[-1] == CHUNK_INDEX.path[-1] else "written"
        if self.again:
            by = f" by run {self.run_id}" if self.run_id else ""
            return f"{verb}{by}; recorded again after its chunks' recovered record"
        return f"{verb} by run {self.run_id}, which stopped before Dagster recorded it"

    def state(self) -> str:
        """What Dagster lacks, before it is recorded (`seams check`)."""
        return f"batch {self.batch}: no record of its {self.asset.to_user_string()} ({self.origin})"

    def describe(self) -> str:
        """One line for a command's output, once recorded."""
        asset = self.asset.to_user_string()
        if self.again:
            by = f" (published by run {self.run_id})" if self.run_id else ""
            return f"recorded {asset} of batch {self.batch} again in Dagster, after its chunks{by}"
        return f"recorded {asset} of batch {self.batch} in Dagster: {self.origin}"


@dataclass(frozen=True)
class _Published:
    """A batch's published build (no newer one open) and who wrote its chunks and index."""

    batch: str
    generation: int
    published_at: datetime
    published_by: str | None
    chunks_generation: int | None
    chunks_run: str | None


def unrecorded(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    settings: SeamsSettings,
    *,
    environment: SeamsEnvironment | None = None,
) -> list[Unrecorded]:
    """Every published `chunks` and `chunk_index` write of a stopped run that Dagster has no
    materialization of, by batch, in pipeline order; `recordable` says whether the current
    settings made it (`defs` and `settings` must be the same settings', resolved in
    `environment`, default this process's)."""
    stopped = {run.run_id: run for run in instance.get_runs(dg.RunsFilter(statuses=STOPPED))}
    if not stopped:  # the usual case: one query
        return []
    environment = environment or SeamsEnvironment.from_os()
    postgres: PostgresResource = defs.resources[POSTGRES_KEY]
    found: list[Unrecorded] = []
    with postgres.connection() as conn:
        try:
            published = _published(conn, sorted(stopped))
        except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn):
            return []  # no schema yet, or one older than builds: nothing published to record
    lineage = batch_lineages(defs, [build.batch for build in published])
    per_collection = settings.collection_settings()
    modes = {
        lin: built_index_mode(per_collection[lin.collection], environment)
        for lin in set(lineage.values())
    }
    with postgres.connection() as conn:
        for build in published:
            if (lin := lineage.get(build.batch)) is None:
                continue  # a collection the settings no longer declare: no asset to record
            own = per_collection[lin.collection]
            found.extend(_unrecorded_of(instance, conn, defs, own, modes[lin], build, stopped, lin))
    return found


def record_unrecorded(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    settings: SeamsSettings,
    report: Report,
    *,
    environment: SeamsEnvironment | None = None,
) -> list[Unrecorded]:
    """Record every recordable materialization `unrecorded` finds, saying one line each; the
    ones recorded. An index is recorded `again` only where its chunks' new record made it
    unsynced. Idempotent: a second call finds them recorded."""
    done = []
    for found in unrecorded(instance, defs, settings, environment=environment):
        if not found.recordable or (found.again and _fresh(instance, defs, found)):
            continue
        _record(instance, defs, found)
        report(found.describe())
        done.append(found)
    return done


# --- what the data says ----------------------------------------------------------------------


def _published(conn: Any, runs: Sequence[str]) -> list[_Published]:
    """The published builds (without a newer open build) whose index or chunks one of `runs`
    wrote, with those runs (the chunks' run: each row names it)."""
    rows = conn.execute(
        "WITH pub AS ("
        "  SELECT DISTINCT ON (batch_key, generation) batch_key, generation, run_id"
        "  FROM seams.publications WHERE kind = 'batch'"
        "  ORDER BY batch_key, generation, seq DESC)"
        " SELECT b.batch_key, b.generation, b.published_at, pub.run_id, c.generation, c.run_id"
        " FROM seams.batch_builds AS b"
        " LEFT JOIN pub ON pub.batch_key = b.batch_key AND pub.generation = b.generation"
        " LEFT JOIN LATERAL (SELECT t.generation, t.run_id FROM seams.chunks AS t"
        "      WHERE t.batch_key = b.batch_key AND t.generation <= b.generation"
        "      ORDER BY t.generation DESC LIMIT 1) AS c ON true"
        " WHERE b.state = 'published' AND (pub.run_id = ANY(%(runs)s) OR c.run_id = ANY(%(runs)s))"
        "   AND NOT EXISTS (SELECT 1 FROM seams.batch_builds AS o"
        "       WHERE o.batch_key = b.batch_key AND o.state IN ('building', 'complete'))"
        " ORDER BY b.batch_key",
        {"runs": list(runs)},
    ).fetchall()
    return [_Published(*row) for row in rows]


def _unrecorded_of(
    instance: dg.DagsterInstance,
    conn: Any,
    defs: dg.Definitions,
    settings: SeamsSettings,
    mode: str,
    build: _Published,
    stopped: Mapping[str, dg.DagsterRun],
    lineage: Lineage,
) -> list[Unrecorded]:
    chunks_key, index_key = lineage.key(CHUNKS.path[-1]), lineage.key(CHUNK_INDEX.path[-1])
    found: list[Unrecorded] = []
    chunks_latest = _latest(instance, chunks_key, build.batch)
    chunks_why: str | None = None
    if build.chunks_generation is not None:
        chunks_why, chunk_rows = _chunks_settings(conn, defs, build, chunks_key)
        if build.chunks_run in stopped and _missing(
            chunks_latest, build.chunks_run, build.chunks_generation, build.published_at
        ):
            found.append(
                Unrecorded(
                    build.batch,
                    chunks_key,
                    build.chunks_generation,
                    build.chunks_run,
                    chunk_rows,
                    build.published_at,
                    chunks_why,
                )
            )
    index_latest = _latest(instance, index_key, build.batch)
    own = build.published_by in stopped and _missing(
        index_latest, build.published_by, build.generation, build.published_at
    )
    # The index's record names the chunks event it was computed from: once chunks are recorded
    # anew (here, or by an earlier call that stopped before the index), it must follow them.
    over_chunks = bool(found and found[0].recordable) or (
        chunks_latest is not None
        and _is_recovered(chunks_latest)
        and (index_latest is None or index_latest.storage_id < chunks_latest.storage_id)
    )
    if own or over_chunks:
        why, index_rows = _index_settings(conn, settings, mode, build)
        found.append(
            Unrecorded(
                build.batch,
                index_key,
                build.generation,
                build.published_by,
                index_rows,
                build.published_at,
                chunks_why or why,
                again=not own,
            )
        )
    return found


def _missing(
    latest: dg.EventLogRecord | None, writer: str | None, generation: int, published_at: datetime
) -> bool:
    """Whether `latest`, the partition's newest materialization, is not of the write `writer`
    made for build `generation`: none, or another run's made before the build was published
    (one made after it describes what Dagster did since: it is left alone)."""
    if latest is None:
        return True
    if latest.run_id == writer or _is_recovered(latest, generation):
        return False
    return latest.timestamp < published_at.timestamp()


def _is_recovered(record: dg.EventLogRecord, generation: int | None = None) -> bool:
    """Whether `record` is a materialization recorded here (of build `generation`, if given)."""
    event = record.asset_materialization
    if record.run_id or event is None or RECOVERED not in event.metadata:
        return False
    if generation is None:
        return True
    value = event.metadata.get(GENERATION)
    return value is not None and value.value == generation


def _chunks_settings(
    conn: Any, defs: dg.Definitions, build: _Published, chunks_key: dg.AssetKey
) -> tuple[str | None, int]:
    """Why the build's chunks are not what the current settings make (None: they are), and how
    many there are: each chunk row stores the `chunks` code version that made it."""
    versions, rows = conn.execute(
        "SELECT coalesce(array_agg(DISTINCT code_version), '{}'), count(*) FROM seams.chunks"
        " WHERE batch_key = %s AND generation = %s",
        (build.batch, build.chunks_generation),
    ).fetchone()
    current = _code_version(defs, chunks_key)
    if not rows:
        return "it holds no chunks to tell its settings by", 0
    if list(versions) != [current]:
        made = ", ".join(sorted(versions))
        return f"its chunks were made by code version {made}, the current one is {current}", rows
    return None, rows


def _index_settings(
    conn: Any, settings: SeamsSettings, mode: str, build: _Published
) -> tuple[str | None, int]:
    """Why the build's index is not what the current settings make (None: it is), and how many
    rows it has: each row stores its mode and text search configuration (the index's code
    version adds the chunks' settings, checked on the chunks' rows)."""
    modes, configs, rows = conn.execute(
        "SELECT coalesce(array_agg(DISTINCT mode), '{}'),"
        " coalesce(array_agg(DISTINCT text_search_config), '{}'), count(*)"
        " FROM seams.chunk_index WHERE batch_key = %s AND generation = %s",
        (build.batch, build.generation),
    ).fetchone()
    config = settings.retrieval.text_search_config
    if not rows:
        return "its index has no rows to tell its settings by", 0
    if list(modes) != [mode]:
        return f"its index was built in mode {', '.join(sorted(modes))}, now {mode}", rows
    if list(configs) != [config]:
        made = ", ".join(sorted(configs))
        return f"its index was analysed with text search configuration {made}, now {config}", rows
    return None, rows


# --- what Dagster records ----------------------------------------------------------------------


def _latest(instance: dg.DagsterInstance, key: dg.AssetKey, batch: str) -> dg.EventLogRecord | None:
    """The partition's newest materialization, if any."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[batch]), limit=1
    ).records
    return records[0] if records else None


def _fresh(instance: dg.DagsterInstance, defs: dg.Definitions, found: Unrecorded) -> bool:
    """Whether Dagster judges the partition's newest record of `found.asset` fresh."""
    resolver = stale_status_resolver(instance, defs.resolve_asset_graph())
    return resolver.get_status(found.asset, found.batch) == StaleStatus.FRESH


def _code_version(defs: dg.Definitions, key: dg.AssetKey) -> str:
    version = defs.resolve_assets_def(key).code_versions_by_key[key]
    assert version is not None, f"{key.to_user_string()} has no code version"
    return version


def _record(instance: dg.DagsterInstance, defs: dg.Definitions, found: Unrecorded) -> None:
    """Report `found` materialized, with the tags a run's materialization of it carries: computed
    from the newest materialization of each input partition (what the write read: its build's
    rows, or the ones it inherited)."""
    key = found.asset
    parents = sorted(defs.resolve_asset_graph().get(key).parent_keys, key=str)
    inputs = {parent: _latest(instance, parent, found.batch) for parent in parents}
    table = schema.ASSET_TABLES[key.path[-1]]
    metadata: dict[str, Any] = {
        RECOVERED: found.origin,
        GENERATION: found.generation,
        "published_at": dg.MetadataValue.timestamp(found.published_at),
        "dagster/row_count": found.rows,
        "dagster/partition_row_count": found.rows,
        "dagster/table_name": table.qualified_name,
        "dagster/column_schema": column_schema(table),
    }
    if found.run_id:
        metadata["written_by"] = dg.MetadataValue.dagster_run(found.run_id)
    instance.report_runless_asset_event(
        dg.AssetMaterialization(
            asset_key=key,
            partition=found.batch,
            metadata=metadata,
            tags=provenance_tags(_code_version(defs, key), inputs),
        )
    )
