"""What `seams run` and `seams backfill` do, as functions the CLI and the tests share.

Runs go through the project's Dagster instance (PostgreSQL-backed), in-process: they appear in
the UI like any other run, without the ~2-4 s per-run subprocess overhead of the default
executor (design.md section 9).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import numpy as np

from assets.partitions import document_batches
from chunking.errors import InputError, SeamsError
from resources.batches import register_batch, scan_inbox
from resources.model_store import load_manifest
from resources.paths import PROJECT_ROOT
from resources.postgres import PostgresResource

SAMPLE_CORPUS = PROJECT_ROOT / "orchestration" / "sample_corpus"
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

    @property
    def words_per_second(self) -> float:
        return self.words / self.seconds if self.seconds else 0.0


def _postgres() -> PostgresResource:
    # An empty URL resolves SEAMS_DATABASE_URL or the embedded server, as the assets' does.
    return PostgresResource()


def ensure_model(instance: dg.DagsterInstance, report: Report) -> None:
    """Materialize `embedding_model` unless a verified export is already there."""
    from orchestration import defs

    try:
        load_manifest()
        return
    except SeamsError:
        pass
    report("exporting the embedding model to ONNX (one-off, ~10-30 s)...")
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(
        instance=instance,
        asset_selection=[dg.AssetKey("embedding_model")],
        run_config=QUIET,
        raise_on_error=False,
    )
    if not result.success:
        raise SeamsError("exporting the embedding model failed: see the run in the Dagster UI")


def source_of(path: Path) -> str:
    """How batches registered by `seams run PATH` name their source."""
    return f"cli:{path}"


def register_path(path: Path, report: Report) -> list[str]:
    """Freeze the new file versions under `path` into batches of <= MAX_BATCH_DOCUMENTS."""
    files, refused = scan_inbox(path)
    for item in refused:
        report(f"skipped {item.path}: {item.reason}")
    if not files:
        raise InputError(f"{path} holds no files to chunk")
    postgres = _postgres()
    postgres.ensure_schema()
    keys = []
    with postgres.connection() as conn:
        for start in range(0, len(files), MAX_BATCH_DOCUMENTS):
            key = register_batch(
                conn, files[start : start + MAX_BATCH_DOCUMENTS], source=source_of(path)
            )
            if key:
                keys.append(key)
    return keys


def materialize_batches(
    instance: dg.DagsterInstance,
    batch_keys: Sequence[str],
    report: Report,
    summary: RunSummary,
    asset_selection: Sequence[dg.AssetKey] | None = None,
) -> None:
    """Run the `chunk_batches` job once per batch, in-process, adding to `summary`."""
    from orchestration import defs

    instance.add_dynamic_partitions(document_batches.name, list(batch_keys))
    job = defs.resolve_job_def(JOB_NAME)
    for number, key in enumerate(batch_keys, 1):
        started = time.perf_counter()
        result = job.execute_in_process(
            instance=instance,
            partition_key=key,
            asset_selection=list(asset_selection) if asset_selection else None,
            run_config=QUIET,
            raise_on_error=False,
        )
        summary.run_ids.append(result.run_id)
        if not result.success:
            raise SeamsError(
                f"run {result.run_id} for batch {key} failed: {failure_reason(result)[:500]} "
                "Open it in the UI (`seams dev`) for the full log."
            )
        for event in result.get_asset_materialization_events():
            materialization = event.step_materialization_data.materialization
            if materialization.asset_key == dg.AssetKey("candidate_embeddings"):
                meta = materialization.metadata
                summary.cache_hits += int(meta["cache_hits"].value)
                summary.texts_embedded += int(meta["texts_embedded"].value)
        seconds = time.perf_counter() - started
        report(f"batch {number}/{len(batch_keys)} {key}: done in {seconds:.1f} s")


_SEAMS_ERRORS = {"SeamsError", "ConfigError", "InputError", "EmbeddingError", "StorageError"}


def failure_reason(result: dg.ExecuteInProcessResult) -> str:
    """The Seams error behind the first failed step (the cause Dagster wraps), else its message."""
    for event in result.all_events:
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


def unfinished_batches(instance: dg.DagsterInstance, *, source: str) -> list[str]:
    """Batches registered from `source` whose chunks were never materialized (a killed run)."""
    with _postgres().connection() as conn:
        keys = [
            r[0]
            for r in conn.execute(
                "SELECT batch_key FROM seams.batches WHERE source = %s ORDER BY batch_key",
                (source,),
            )
        ]
    done = instance.get_materialized_partitions(dg.AssetKey("chunks"))
    return [k for k in keys if k not in done]


def summarize(summary: RunSummary) -> RunSummary:
    """Fill in the numbers of `summary.batches`, read back from the stored tables."""
    if not summary.batches:
        return summary
    keys = summary.batches
    with _postgres().connection() as conn:
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
    summary.documents, summary.failed_documents, summary.words = docs[0], docs[1], int(docs[2])
    summary.chunks = len(tokens)
    if tokens:
        summary.tokens_p50, summary.tokens_p95 = (float(x) for x in np.percentile(tokens, [50, 95]))
    return summary


def format_summary(summary: RunSummary) -> str:
    """The end-of-run summary; it never prints a database URL (it may hold a password)."""
    lines = [
        f"batches:        {', '.join(summary.batches) or '-'}",
        f"documents:      {summary.documents} ({summary.failed_documents} failed)",
        f"chunks:         {summary.chunks} (tokens per chunk p50 {summary.tokens_p50:.0f}, "
        f"p95 {summary.tokens_p95:.0f})",
        f"embeddings:     {summary.texts_embedded} texts embedded, {summary.cache_hits} from cache",
        f"throughput:     {summary.words} words in {summary.seconds:.1f} s "
        f"({summary.words_per_second:,.0f} words/s)",
        "look at them:   seams dev  (UI: http://127.0.0.1:3000, asset group 'chunking')",
        '                psql "$(seams db url)" -c \'SELECT document_id, chunk_index, token_count,'
        " left(text, 60) FROM seams.current_chunks LIMIT 10'",
    ]
    return "\n".join(lines)


def unsynced_assets(
    instance: dg.DagsterInstance, partition_keys: Sequence[str]
) -> dict[str, list[dg.AssetKey]]:
    """Per partition, the per-batch assets Dagster considers stale (code, config or inputs)."""
    # Dagster's own staleness resolver, as the UI uses it (no public wrapper in 1.13).
    from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
    from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
    from dagster._time import get_current_datetime

    from orchestration import defs

    graph = defs.resolve_asset_graph()
    view = AssetGraphView(
        temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
        instance=instance,
        asset_graph=graph,
    )
    resolver = CachingStaleStatusResolver(
        instance=instance, asset_graph=graph, loading_context=view
    )
    job_keys = defs.resolve_job_def(JOB_NAME).asset_layer.executable_asset_keys
    ordered = [k for k in graph.toposorted_asset_keys if k in job_keys]
    return {
        partition: [k for k in ordered if resolver.get_status(k, partition) != StaleStatus.FRESH]
        for partition in partition_keys
    }


def backfill(instance: dg.DagsterInstance, report: Report) -> RunSummary:
    """Re-materialize, for every batch, exactly the assets that are unsynced."""
    partitions = instance.get_dynamic_partitions(document_batches.name)
    stale = unsynced_assets(instance, partitions)
    summary = RunSummary()
    for partition, keys in stale.items():
        if not keys:
            continue
        names = ", ".join(k.to_user_string() for k in keys)
        report(f"batch {partition}: unsynced {names}")
        summary.batches.append(partition)
        materialize_batches(instance, [partition], report, summary, asset_selection=keys)
    if not summary.batches:
        report(f"all {len(partitions)} batch(es) are up to date: nothing to backfill")
    return summary
