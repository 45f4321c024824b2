"""What `seams run` and `seams backfill` do, as functions the CLI and the tests share.

Runs go through the project's Dagster instance (PostgreSQL-backed), in-process: they appear in
the UI like any other run, without a run worker process to start per run (seconds each, far
more than a small partition's own work).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import numpy as np

from seams.assets.model import MODEL_KEY, distils_static
from seams.assets.partitions import document_batches
from seams.errors import InputError, SeamsError
from seams.models.model_store import load_manifest, load_static_manifest
from seams.orchestration import command_lock, launch, ownership
from seams.orchestration.dagster_internals import StaleStatus, stale_status_resolver
from seams.orchestration.found_model import record_found_model
from seams.paths import sample_corpus
from seams.resources.postgres import PostgresResource
from seams.storage import publication, quarantine
from seams.storage.batches import (
    RETIRE_REASON,
    batch_sources,
    register_batch,
    retire_missing,
    scan_inbox,
)

SAMPLE_CORPUS = sample_corpus()
"""The bundled sample corpus (package data): what `seams run` chunks when given no folder."""
JOB_NAME = "chunk_batches"
MAX_BATCH_DOCUMENTS = 500

Report = Callable[[str], None]
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
"""In-process runs log every event to the terminal at DEBUG; the UI keeps the full log."""


@dataclass
class RunSummary:
    """What a user wants to know after a run, in numbers."""

    batches: list[str] = field(default_factory=list)
    documents: int = 0
    failed_documents: int = 0
    words: int = 0
    chunks: int = 0
    tokens_p50: float = 0.0
    tokens_p95: float = 0.0
    cache_hits: int = 0
    texts_embedded: int = 0
    seconds: float = 0.0
    run_ids: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    """Files that were in the scanned folder's earlier batches and are gone now."""
    resumed: list[str] = field(default_factory=list)
    """Batches an earlier run left unfinished, finished here from their first unfinished step."""
    words_done: int | None = None
    """Words of the batches processed whole here (None: all of them): what throughput counts,
    as a resumed batch's earlier steps ran, and took their time, in an earlier run."""
    backfill_ids: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    """Per batch, where it came from (`/data/in, 3 file(s)`): batch keys are only stamps."""

    @property
    def words_per_second(self) -> float:
        words = self.words if self.words_done is None else self.words_done
        return words / self.seconds if self.seconds else 0.0


def _postgres(*, defs: dg.Definitions) -> PostgresResource:
    """The pipeline's own Postgres resource: the same database the assets write."""
    return defs.resources["postgres"]


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
    embedder, static_embedder = defs.resources["embedder"], defs.resources["static_embedder"]
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
        + " (one-off, ~10-30 s)..."
    )
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(
        instance=instance,
        asset_selection=[dg.AssetKey("embedding_model")],
        run_config=QUIET,
        tags={**launch.started_by_tags(started_by), **ownership.owner_tags()},
        raise_on_error=False,
    )
    if not result.success:
        raise SeamsError("exporting the embedding model failed: see the run in the Dagster UI")


def source_of(path: Path) -> str:
    """How batches registered by `seams run PATH` name their source: the absolute folder, so the
    UI shows where a batch came from and `seams run .` gets the folder's name in its key."""
    return f"cli:{path.absolute()}"


def register_path(
    path: Path,
    report: Report,
    *,
    defs: dg.Definitions,
    retired: list[str] | None = None,
) -> list[str]:
    """Freeze the new file versions under `path` (a folder or one file) into batches of
    <= MAX_BATCH_DOCUMENTS, and retire the documents whose files left the folder (their URIs
    are appended to `retired`)."""
    files, refused = scan_inbox(path)
    for item in refused:
        report(f"skipped {item.path}: {item.reason}")
    postgres = _postgres(defs=defs)
    postgres.ensure_schema()
    keys = []
    with postgres.connection() as conn:
        for start in range(0, len(files), MAX_BATCH_DOCUMENTS):
            key = register_batch(
                conn, files[start : start + MAX_BATCH_DOCUMENTS], source=source_of(path)
            )
            if key:
                keys.append(key)
        gone = retire_missing(conn, path, [*(f.path for f in files), *(r.path for r in refused)])
    for document in gone:
        report(f"retired {document.source_uri}: {RETIRE_REASON}")
    if retired is not None:
        retired.extend(document.source_uri for document in gone)
    if not files and not gone:
        raise InputError(f"{path} holds no files to chunk")
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
    keys = list(asset_selection or defs.resolve_job_def(JOB_NAME).asset_layer.executable_asset_keys)
    targets: dict[str, Sequence[dg.AssetKey]] = {key: keys for key in batch_keys}
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


def job_assets_in_order(defs: dg.Definitions) -> list[dg.AssetKey]:
    """The per-batch job's assets in dependency order (extracted_text first)."""
    wanted = set(defs.resolve_job_def(JOB_NAME).asset_layer.executable_asset_keys)
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
    without its publication, or its publication without the event."""
    order = job_assets_in_order(defs)
    wanted = None if batch_keys is None else set(batch_keys)
    postgres = _postgres(defs=defs)
    postgres.ensure_schema()  # writers' entry: a first run finds no tables yet
    with postgres.connection() as conn:
        found = [
            u for u in publication.unpublished(conn) if wanted is None or u.batch_key in wanted
        ]
        written = {u.batch_key: _as_build(u) for u in found if _written_through(order, u)}
        lacking = publication.incomplete(conn, written) if written else {}
    return [
        Unfinished(u.batch_key, u.source, _remaining(order, u, u.batch_key in lacking), u)
        for u in found
    ]


def _as_build(state: publication.Unpublished) -> publication.Build:
    assert state.generation is not None and state.started_at is not None
    return publication.Build(
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
    names = [key.to_user_string() for key in order]
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


def publish_ready(batch_keys: Sequence[str], *, defs: dg.Definitions) -> dict[str, int]:
    """Publish the complete builds of `batch_keys` that nothing is left to write for; per
    batch, the generation published."""
    with _postgres(defs=defs).connection() as conn:
        return publication.publish_ready(conn, batch_keys).published


def describe_unfinished(found: Sequence[Unfinished], *, most: int = 5) -> str:
    """One line: `finishing 2 batch(es) left unpublished: batch K: resuming at chunk_index; ...`."""
    shown = "; ".join(u.describe() for u in found[:most])
    more = f"; and {len(found) - most} more" if len(found) > most else ""
    return f"finishing {len(found)} batch(es) left unpublished: {shown}{more}"


def check_can_submit(defs: dg.Definitions, command: str) -> None:
    """Before any work: a distributed executor needs the one shared PostgreSQL (fail fast)."""
    if launch.is_distributed(defs, JOB_NAME):
        launch.require_shared_database(
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
) -> launch.BackfillOutcome:
    """One asset backfill of `targets` (batch -> assets), executed here or by a running daemon;
    `tags` go on the backfill and its runs.

    Raises SeamsError naming the failed run when any batch failed (the CLI's exit code 2).
    """
    distributed = launch.is_distributed(defs, JOB_NAME)
    check_can_submit(defs, started_by)
    instance.add_dynamic_partitions(document_batches.name, list(targets))
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
    report(f"backfill {backfill.backfill_id}: {len(targets)} batch(es), {where}{shown}")
    outcome = launch.run_backfill_here(
        instance, defs, backfill, JOB_NAME, report, distributed=distributed
    )
    results = [_RunEvents.of_result(result) for result in outcome.results]
    summary.run_ids.extend(outcome.run_ids)
    for events in results:
        summary.cache_hits += events.metadata_sum("candidate_embeddings", "cache_hits")
        summary.texts_embedded += events.metadata_sum("candidate_embeddings", "texts_embedded")
    failed = next((events for events in results if not events.success), None)
    if failed is not None or outcome.status != launch.BulkActionStatus.COMPLETED_SUCCESS:
        run_id = failed.run_id if failed else "-"
        reason = failed.failure_reason()[:500] if failed else f"it ended {outcome.status.value}"
        raise SeamsError(
            f"backfill {backfill.backfill_id} failed (run {run_id}): {reason} "
            "Open it in the UI (`seams dev`, Runs -> Backfills) for the full log."
        )
    return outcome


@dataclass
class _RunEvents:
    """A finished run's events, from an in-process result or the instance's event log."""

    run_id: str
    success: bool
    events: list[dg.DagsterEvent]

    @classmethod
    def of_result(cls, result: dg.ExecuteInProcessResult) -> _RunEvents:
        return cls(result.run_id, result.success, list(result.all_events))

    @classmethod
    def of_run(cls, instance: dg.DagsterInstance, run_id: str) -> _RunEvents:
        run = instance.get_run_by_id(run_id)
        events = [r.dagster_event for r in instance.all_logs(run_id) if r.dagster_event]
        return cls(run_id, bool(run and run.status == dg.DagsterRunStatus.SUCCESS), events)

    def metadata_sum(self, step: str, name: str) -> int:
        """`name` of the step's whole output (its STEP_OUTPUT event), summed over the run's
        outputs: per-partition materializations would count a multi-batch step once per batch."""
        total = 0
        for event in self.events:
            if event.is_successful_output and event.step_key == step:
                value = event.step_output_data.metadata.get(name)
                total += int(value.value) if value is not None else 0
        return total

    def failure_reason(self) -> str:
        return failure_reason(self.events)


_SEAMS_ERRORS = {"SeamsError", "ConfigError", "InputError", "EmbeddingError", "StorageError"}


def failure_reason(events: dg.ExecuteInProcessResult | Sequence[dg.DagsterEvent]) -> str:
    """The Seams error behind the first failed step (the cause Dagster wraps), else its message."""
    if isinstance(events, dg.ExecuteInProcessResult):
        events = events.all_events
    for event in events:
        if event.is_step_failure and event.step_failure_data.error:
            chain, error = [], event.step_failure_data.error
            while error is not None:
                chain.append(error)
                error = error.cause
            cause = next((e for e in chain if e.cls_name in _SEAMS_ERRORS), chain[-1])
            return f'step "{event.step_key}": {cause.message.strip()}'
        if event.is_failure:
            return (event.message or "").strip()
    return ""


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


def unfinished_batches(
    instance: dg.DagsterInstance, *, defs: dg.Definitions, source: str | None = None
) -> list[str]:
    """The batches whose index is not published (see `unfinished`), of `source` or of all."""
    del instance  # decided from the data: see `unfinished`
    return [u.batch for u in unfinished(defs) if source is None or u.source == source]


def summarize(summary: RunSummary, *, defs: dg.Definitions) -> RunSummary:
    """Fill in the numbers of `summary.batches`, read back from the stored tables."""
    if not summary.batches:
        return summary
    keys = summary.batches
    with _postgres(defs=defs).connection() as conn:
        docs = conn.execute(
            "SELECT count(*), count(error), coalesce(sum(array_length("
            "regexp_split_to_array(btrim(text), '\\s+'), 1)) FILTER (WHERE btrim(text) <> ''), 0)"
            " FROM seams.extracted_text WHERE batch_key = ANY(%s)",
            (keys,),
        ).fetchone()
        tokens = [
            r[0]
            for r in conn.execute(
                "SELECT token_count FROM seams.chunks WHERE batch_key = ANY(%s)", (keys,)
            )
        ]
        summary.sources = {k: str(v) for k, v in batch_sources(conn, keys).items()}
    summary.documents, summary.failed_documents, summary.words = docs[0], docs[1], int(docs[2])
    fresh = [k for k in keys if k not in summary.resumed]
    if summary.resumed:
        summary.words_done = _words(fresh, defs=defs) if fresh else 0
    summary.chunks = len(tokens)
    if tokens:
        summary.tokens_p50, summary.tokens_p95 = (float(x) for x in np.percentile(tokens, [50, 95]))
    return summary


def format_summary(summary: RunSummary, *, home: Path) -> str:
    """The end-of-run summary; it never prints a database URL (it may hold a password).
    `home`: the Dagster home whose `seams dev` UI to point at."""
    sources = summary.sources
    batches = [f"{k} ({sources[k]})" if k in sources else k for k in summary.batches]
    ui = ownership.ui_address(home)  # the UI `seams dev` serves now, if it runs
    lines = [
        f"batches:        {', '.join(batches) or '-'}",
        f"documents:      {summary.documents} ({summary.failed_documents} failed)",
        f"retired:        {len(summary.retired)} document(s) whose file left the folder "
        "(gone from current_chunks and search; history kept)",
        f"chunks:         {summary.chunks} (tokens per chunk p50 {summary.tokens_p50:.0f}, "
        f"p95 {summary.tokens_p95:.0f})",
        f"embeddings:     {summary.texts_embedded} texts embedded, {summary.cache_hits} from cache",
        _throughput(summary),
        f"look at them:   the Dagster UI at {ui} (asset group 'chunking')"
        if ui
        else f"look at them:   {seams_command()} dev  (UI: http://127.0.0.1:3000, asset group "
        "'chunking')",
        f'                {seams_command()} search "your question"',
        f'                {python_command()} -c "import psycopg, sys; '
        "print(*psycopg.connect(sys.argv[1]).execute('SELECT document_id, chunk_index, "
        "token_count, left(text, 60) FROM seams.current_chunks LIMIT 10'), sep='\\n')\" "
        f'"$({seams_command()} db url)"',
    ]
    if not summary.retired:
        lines.pop(2)
    return "\n".join(lines)


def _throughput(summary: RunSummary) -> str:
    """The throughput line: words per second of the work done here, never of work skipped (a
    resumed batch's finished steps), preceded by what was resumed."""
    if not summary.resumed:
        return (
            f"throughput:     {summary.words} words in {summary.seconds:.1f} s "
            f"({summary.words_per_second:,.0f} words/s)"
        )
    resumed = (
        f"resumed:        {len(summary.resumed)} batch(es) an earlier run left unfinished, "
        "from their first unfinished step"
    )
    if not summary.words_done:
        return (
            f"{resumed}\nthroughput:     not measured: {summary.seconds:.1f} s finishing resumed "
            "work (their earlier steps ran in the earlier run)"
        )
    return (
        f"{resumed}\nthroughput:     {summary.words_done} words of new batches in "
        f"{summary.seconds:.1f} s ({summary.words_per_second:,.0f} words/s; the time includes "
        "finishing the resumed batches)"
    )


def _words(keys: Sequence[str], *, defs: dg.Definitions) -> int:
    """Words of the extracted text of `keys`, counted as `summarize` counts them."""
    with _postgres(defs=defs).connection() as conn:
        row = conn.execute(
            "SELECT coalesce(sum(array_length(regexp_split_to_array(btrim(text), '\\s+'), 1))"
            " FILTER (WHERE btrim(text) <> ''), 0) FROM seams.extracted_text"
            " WHERE batch_key = ANY(%s)",
            (list(keys),),
        ).fetchone()
    return int(row[0]) if row else 0


def _as_typed(executable: Path) -> str:
    """`executable` as a person types it here: relative to the working folder when inside it."""
    with contextlib.suppress(ValueError):
        return str(Path(".") / executable.relative_to(Path.cwd()))
    return str(executable)


def python_command() -> str:
    """The Python that runs Seams, as a command that works in a fresh shell."""
    return _as_typed(Path(sys.executable))


def seams_command() -> str:
    """The `seams` command as it works in a fresh shell: `seams` when that is on PATH and the
    one of this environment, else this environment's script (`.venv/bin/seams`), else
    `python -m seams`."""
    script = Path(sys.executable).parent / "seams"
    on_path = shutil.which("seams")
    if on_path and Path(on_path).resolve() == script.resolve():
        return "seams"
    if script.exists():
        return _as_typed(script)
    return f"{python_command()} -m seams"


def unsynced_assets(
    instance: dg.DagsterInstance,
    partition_keys: Sequence[str],
    *,
    defs: dg.Definitions,
) -> dict[str, list[dg.AssetKey]]:
    """Per partition, the per-batch assets Dagster considers stale (code, config or inputs)."""
    graph = defs.resolve_asset_graph()
    resolver = stale_status_resolver(instance, graph)
    ordered = job_assets_in_order(defs)
    return {
        partition: [k for k in ordered if resolver.get_status(k, partition) != StaleStatus.FRESH]
        for partition in partition_keys
    }


def backfill(instance: dg.DagsterInstance, report: Report, *, defs: dg.Definitions) -> RunSummary:
    """One Dagster backfill of exactly the unsynced assets of every batch (none: no backfill)."""
    partitions = instance.get_dynamic_partitions(document_batches.name)
    stale = {
        p: keys for p, keys in unsynced_assets(instance, partitions, defs=defs).items() if keys
    }
    summary = RunSummary(batches=list(stale))
    if not stale:
        report(f"all {len(partitions)} batch(es) are up to date: nothing to backfill")
        return summary
    for partition, keys in stale.items():
        report(f"batch {partition}: unsynced {', '.join(k.to_user_string() for k in keys)}")
    run_backfill(instance, stale, report, summary, defs=defs, started_by="seams backfill")
    return summary
