"""What `seams run` and `seams backfill` do, as functions the CLI and the tests share.

Runs go through the project's Dagster instance (PostgreSQL-backed), in-process: they appear in
the UI like any other run, without a run worker process to start per run (seconds each, far
more than a small partition's own work). What is left to do is read in `pending_work`, the
numbers printed at the end are made in `run_summary`; both are named here too, as the commands
and tests use them through this module.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence

import dagster as dg

from seams.assets.model import MODEL_KEY, distils_static
from seams.assets.partitions import Lineage
from seams.collections import Collection, route
from seams.errors import InputError, SeamsError, counted
from seams.extraction import MAX_BYTES
from seams.models.model_store import load_manifest, load_static_manifest
from seams.orchestration import command_lock, launch, ownership
from seams.orchestration.evaluation_run import refresh_retrieval_eval, retrieval_eval_unsynced
from seams.orchestration.found_model import record_found_model
from seams.orchestration.lineages import all_partitions, batch_lineages, lineage_named, lineages
from seams.orchestration.pending_work import (
    JOB_NAME,
    Unfinished,
    describe_unfinished,
    held_for_switch,
    job_assets_in_order,
    model_switch,
    unfinished,
    unfinished_batches,
    unsynced_assets,
)
from seams.orchestration.run_events import RunEvents, failure_reason
from seams.orchestration.run_summary import RunSummary, format_summary, summarize
from seams.orchestration.shell_commands import python_command, seams_command
from seams.orchestration.switch_completion import complete_switch
from seams.orchestration.target_run import refresh_targets
from seams.paths import sample_corpus
from seams.resources.keys import EMBEDDER_KEY, POSTGRES_KEY, STATIC_EMBEDDER_KEY
from seams.resources.postgres import PostgresResource
from seams.storage import publication, quarantine
from seams.storage.batches import RETIRE_REASON, register_batch, unregistered
from seams.storage.schema import DEFAULT_COLLECTION
from seams.storage.sources import (
    Location,
    ObjectSource,
    Version,
    found_at,
    location_text,
    open_source,
)

__all__ = [
    "JOB_NAME",
    "MAX_BATCH_DOCUMENTS",
    "QUIET",
    "SAMPLE_CORPUS",
    "Report",
    "RunSummary",
    "Unfinished",
    "backfill",
    "check_can_submit",
    "describe_unfinished",
    "ensure_model",
    "failure_reason",
    "format_summary",
    "held_for_switch",
    "hold_data",
    "job_assets_in_order",
    "materialize_batches",
    "model_switch",
    "publish_ready",
    "python_command",
    "quarantined_batches",
    "register_batch",
    "register_path",
    "run_backfill",
    "seams_command",
    "settle_in_flight",
    "source_of",
    "summarize",
    "unfinished",
    "unfinished_batches",
    "unsynced_assets",
]

SAMPLE_CORPUS = sample_corpus()
"""The bundled sample corpus (package data): what `seams run` chunks when given no folder."""
MAX_BATCH_DOCUMENTS = 500

Report = Callable[[str], None]
QUIET = launch.QUIET


def _postgres(*, defs: dg.Definitions) -> PostgresResource:
    """The pipeline's own Postgres resource: the same database the assets write."""
    return defs.resources[POSTGRES_KEY]


def hold_data(
    defs: dg.Definitions, command: str, report: Report, *, wait: bool = True
) -> contextlib.AbstractContextManager[object]:
    """The data's command lock, held by `command` (`seams run /data/in`) while the block runs:
    a second `seams run`/`seams backfill` on the same database waits (saying for whom) or, with
    `wait=False`, raises `command_lock.CommandBusy`. Take it before reading what is unfinished:
    what one command reads, another must not be changing."""
    url = _postgres(defs=defs).resolved_url()
    return command_lock.command_lock(url, command, report, wait=wait)


def ensure_model(
    instance: dg.DagsterInstance,
    report: Report,
    *,
    defs: dg.Definitions,
    started_by: str = "seams run",
) -> None:
    """Materialize `embedding_model` unless verified models are already there (in the folders
    the definitions' embedders read: the static one only when the settings use it); its run
    says who started it (the UI's "Launched by") and which process owns it (so the orphan check
    can mark it failed if that process dies)."""
    embedder, static_embedder = defs.resources[EMBEDDER_KEY], defs.resources[STATIC_EMBEDDER_KEY]
    static = distils_static(defs)
    try:
        load_manifest(embedder.resolved_model_dir())
        if static:
            load_static_manifest(static_embedder.resolved_model_dir())
    except SeamsError:
        pass
    else:  # copied in or exported elsewhere: the UI must not say "Never materialized"
        version = defs.resolve_assets_def(MODEL_KEY).code_versions_by_key[MODEL_KEY]
        record_found_model(instance, embedder, static_embedder, version=version)
        return
    report(
        "exporting the embedding model to ONNX"
        + (" and distilling its static model" if static else "")
        + " (once)..."
    )
    result = launch.materialize_here(instance, defs, [MODEL_KEY], started_by=started_by)
    if not result.success:
        raise SeamsError("exporting the embedding model failed: see the run in the Dagster UI")


def source_of(path: Location) -> str:
    """How batches registered by `seams run PATH` name their source: the absolute folder (or
    the `s3://` prefix), so the UI shows where a batch came from and `seams run .` gets the
    folder's name in its key."""
    return f"cli:{location_text(path)}"


def register_path(
    path: Location,
    report: Report,
    *,
    defs: dg.Definitions,
    retired: list[str] | None = None,
    collections: Mapping[str, Collection] | None = None,
    endpoint_url: str | None = None,
    max_bytes: int = MAX_BYTES,
) -> list[str]:
    """Freeze the new file versions under `path` (a folder, one file, or an `s3://` prefix on
    the store at `endpoint_url`) into batches of <= MAX_BATCH_DOCUMENTS, and retire the
    documents whose files left the folder (their URIs are appended to `retired`). With
    `collections`, each file goes to the collection that takes it (`seams.collections.route`),
    in batches of that collection; a file none takes is skipped, saying so. Objects are read
    only when new or changed, and only once the whole prefix is listed: a listing that fails
    midway registers nothing."""
    source = open_source(path, endpoint_url=endpoint_url, max_bytes=max_bytes)
    scan = source.scan(report)
    for item in scan.refused:
        report(f"skipped {item.path}: {item.reason}")
    files = scan.found
    grouped = _by_collection(files, collections, report)
    if files and not grouped:
        raise InputError(
            f"{location_text(path)}: no collection takes any of its "
            f"{counted(len(files), 'file')}: add a collection whose `source` holds them under "
            "`collections:`, or widen its `match`"
        )
    postgres = _postgres(defs=defs)
    postgres.ensure_schema()
    keys = []
    objects = isinstance(source, ObjectSource)
    with postgres.connection() as conn:
        for collection, mine in grouped.items():
            pending = unregistered(conn, mine, collection)
            for start in range(0, len(pending), MAX_BATCH_DOCUMENTS):
                part = source.freeze(pending[start : start + MAX_BATCH_DOCUMENTS], report)
                key = register_batch(conn, part, source=source_of(path), collection=collection)
                if key:
                    keys.append(key)
                if objects and len(pending) > MAX_BATCH_DOCUMENTS:
                    done = min(start + MAX_BATCH_DOCUMENTS, len(pending))
                    report(f"read and registered {done:,} of {len(pending):,} new objects")
        gone = source.retire_missing(conn, scan)
    for document in gone:
        report(f"retired {document.source_uri}: {RETIRE_REASON}")
    if retired is not None:
        retired.extend(document.source_uri for document in gone)
    if not files and not gone:
        raise InputError(f"{location_text(path)} holds no files to chunk")
    return keys


def materialize_batches(
    instance: dg.DagsterInstance,
    batch_keys: Sequence[str],
    report: Report,
    summary: RunSummary,
    asset_selection: Sequence[dg.AssetKey] | None = None,
    *,
    defs: dg.Definitions,
    started_by: str = "seams run",
    resume: Sequence[str] = (),
    tags: Mapping[str, str] | None = None,
    announce: bool = True,
) -> None:
    """Materialize `batch_keys` as one Dagster asset backfill, adding to `summary`.

    The batches in `resume` (left unpublished: see `unfinished`) restart at the first asset
    their open build lacks: a step whose rows are written is not redone, so a file that failed
    extraction (a zip bomb, a timeout) is not extracted again; `seams backfill` recomputes on
    purpose. A build that is complete but was never published (killed between its last write
    and its publication, or held) is published here without running anything. `announce`: one
    line per resumed batch (`batch K: resuming at chunks`); off where the caller said it.
    """
    lineage = batch_lineages(defs, batch_keys)
    targets: dict[str, Sequence[dg.AssetKey]] = {
        key: list(asset_selection or job_assets_in_order(defs, lineage[key]))
        for key in batch_keys
        if key in lineage  # a collection the settings no longer declare: nothing builds it
    }
    ready = []
    resumed = [k for k in resume if k in targets]
    for found in unfinished(defs, resumed) if resumed else ():  # nothing to read otherwise
        if announce:
            report(found.describe())
        if found.assets:
            targets[found.batch] = found.assets
        else:
            del targets[found.batch]
            ready.append(found.batch)
    if ready:
        publish_ready(ready, defs=defs)
    if targets:
        run_backfill(
            instance, targets, report, summary, defs=defs, started_by=started_by, tags=tags
        )
    if targets or ready:  # the published index changed: measure it (with evaluation.questions)
        refresh_retrieval_eval(instance, defs, report, started_by=started_by, tags=tags)
    # Also after a run that only retired files: each target mirrors what is published now.
    refresh_targets(instance, defs, report, started_by=started_by, tags=tags)


def publish_ready(batch_keys: Sequence[str], *, defs: dg.Definitions) -> dict[str, int]:
    """Publish the complete builds of `batch_keys` that nothing is left to write for; per
    batch, the generation published."""
    with _postgres(defs=defs).connection() as conn:
        return publication.publish_ready(conn, batch_keys).published


def check_can_submit(defs: dg.Definitions, command: str) -> None:
    """Before any work: a distributed executor needs the one shared PostgreSQL (fail fast)."""
    if launch.is_distributed(defs, lineages(defs)[0].job_name):
        launch.check_shared_database(
            f"`{command}` with execution.executor: celery",
            _postgres(defs=defs).database_url or None,
        )


def run_backfill(
    instance: dg.DagsterInstance,
    targets: dict[str, Sequence[dg.AssetKey]],
    report: Report,
    summary: RunSummary,
    *,
    defs: dg.Definitions,
    started_by: str,
    tags: Mapping[str, str] | None = None,
) -> list[launch.BackfillOutcome]:
    """Asset backfills of `targets` (batch -> assets), executed here or by a running daemon:
    one per collection, by its own job (a run builds the batches of one collection), and per
    first step (`launch.by_first_step`: the UI then lists every batch of each); `tags` go on
    the backfills and their runs.

    Raises SeamsError naming the failed run when any batch failed (the CLI's exit code 2).
    """
    lineage = batch_lineages(defs, list(targets))
    grouped: dict[Lineage, dict[str, Sequence[dg.AssetKey]]] = {}
    for batch, keys in targets.items():
        grouped.setdefault(lineage[batch], {})[batch] = keys
    return [
        _run_lineage_backfill(
            instance, lin, part, report, summary, defs=defs, started_by=started_by, tags=tags
        )
        for lin, by_lineage in grouped.items()
        for part in launch.by_first_step(by_lineage)
    ]


def _run_lineage_backfill(
    instance: dg.DagsterInstance,
    lineage: Lineage,
    targets: dict[str, Sequence[dg.AssetKey]],
    report: Report,
    summary: RunSummary,
    *,
    defs: dg.Definitions,
    started_by: str,
    tags: Mapping[str, str] | None,
) -> launch.BackfillOutcome:
    """One asset backfill of one collection's `targets`, run by its lineage's job."""
    distributed = launch.is_distributed(defs, lineage.job_name)
    check_can_submit(defs, started_by)
    instance.add_dynamic_partitions(lineage.partitions.name, list(targets))
    ownership.reap_orphans(instance, report)  # free what a killed `seams` left STARTED
    backfill = launch.create_backfill(
        instance,
        defs,
        targets,
        started_by=started_by,
        run_config=QUIET,
        tags={**(tags or {}), **ownership.owner_tags()},
    )
    summary.backfill_ids.append(backfill.backfill_id)
    where = "steps on the workers" if distributed else "running here"
    shown = " (the UI shows it live)" if launch.daemon_is_running(instance) else ""
    whose = "" if lineage.is_default else f" of collection {lineage.collection}"
    report(
        f"backfill {backfill.backfill_id}: {counted(len(targets), 'batch')}{whose}, {where}{shown}"
    )
    outcome = launch.run_backfill_here(
        instance, defs, backfill, lineage.job_name, report, distributed=distributed
    )
    results = [RunEvents.of_result(result) for result in outcome.results]
    summary.run_ids.extend(outcome.run_ids)
    for events in results:  # the candidates' model, and the index's when it embeds chunk texts
        for asset in ("candidate_embeddings", "chunk_index"):
            step = "__".join(lineage.key(asset).path)  # Dagster's step key of the asset
            summary.cache_hits += events.metadata_sum(step, "cache_hits")
            summary.texts_embedded += events.metadata_sum(step, "texts_embedded")
    failed = next((events for events in results if not events.success), None)
    if failed is not None or outcome.status != launch.BulkActionStatus.COMPLETED_SUCCESS:
        run_id = failed.run_id if failed else "-"
        reason = failed.failure_reason()[:500] if failed else f"it ended {outcome.status.value}"
        raise SeamsError(
            f"backfill {backfill.backfill_id} failed (run {run_id}): {reason} "
            "Open it in the UI (`seams dev`, Runs -> Backfills) for the full log."
        )
    return outcome


def settle_in_flight(instance: dg.DagsterInstance, report: Report, batches: Sequence[str]) -> bool:
    """Before redoing `batches`: fail the runs a dead `seams` process left STARTED, and wait for
    the runs another live `seams` process on this host is executing on any of them. True when
    it waited (what is unfinished may have changed meanwhile)."""
    found = ownership.reap_orphans(instance, report)
    wanted = set(batches)
    live = [r for r in found.live if ownership.batches_of(instance, r) & wanted]
    ownership.wait_for(instance, live, report)
    return bool(live)


def quarantined_batches(source: str, *, defs: dg.Definitions) -> list[str]:
    """Batches registered from `source` holding a quarantined document (see `seams run
    --retry-quarantined`)."""
    with _postgres(defs=defs).connection() as conn:
        return quarantine.quarantined_batches(conn, source)


def _by_collection(
    files: Sequence[Version],
    collections: Mapping[str, Collection] | None,
    report: Report,
) -> dict[str, list[Version]]:
    """The files per collection, in scan order (all the default collection's without
    `collections:`); a file no collection takes is said and left out."""
    if not collections:
        return {DEFAULT_COLLECTION: list(files)} if files else {}
    grouped: dict[str, list[Version]] = {}
    for f in files:
        name = route(found_at(f), collections)
        if name is None:
            report(f"skipped {found_at(f)}: no collection takes it (their `source` and `match`)")
            continue
        grouped.setdefault(name, []).append(f)
    return grouped


def backfill(
    instance: dg.DagsterInstance,
    report: Report,
    *,
    defs: dg.Definitions,
    collection: str | None = None,
) -> RunSummary:
    """One Dagster backfill per collection of exactly the unsynced assets of every batch (of
    `collection` only, when given; none unsynced: no backfill), and what a held model switch
    still waits for: `chunk_index` of its batches in declared collections, and the index of
    those in collections the settings no longer declare (`switch_completion`)."""
    found = all_partitions(instance, defs)
    if collection is not None:
        only = lineage_named(defs, collection)
        found = {key: lin for key, lin in found.items() if lin == only}
    partitions = list(found)
    stale = {
        p: keys for p, keys in unsynced_assets(instance, partitions, defs=defs).items() if keys
    }
    switch = model_switch(defs)
    for batch in switch.waiting if switch is not None else ():
        if batch in found and batch not in stale:  # Dagster sees it fresh; the switch does not
            stale[batch] = [found[batch].key("chunk_index")]
    summary = RunSummary(batches=list(stale))
    if not stale:
        report(f"{counted(len(partitions), 'batch')} up to date: nothing to backfill")
    else:
        for partition, keys in stale.items():
            report(f"batch {partition}: unsynced {', '.join(k.to_user_string() for k in keys)}")
        run_backfill(instance, stale, report, summary, defs=defs, started_by="seams backfill")
    completed = complete_switch(defs, report) if collection is None else None
    changed = stale or (completed is not None and completed.published)
    # The published index changed, or the evaluation's questions or search settings did.
    if changed or retrieval_eval_unsynced(instance, defs):
        refresh_retrieval_eval(instance, defs, report, started_by="seams backfill")
    refresh_targets(instance, defs, report, started_by="seams backfill")
    return summary
