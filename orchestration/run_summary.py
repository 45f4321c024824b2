"""The end-of-run summary of `seams run` and `seams backfill`: the numbers, read back from the
stored tables, and the lines that print them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import numpy as np

from seams.assets.partitions import PIPELINE_GROUP
from seams.errors import counted
from seams.orchestration import ownership
from seams.orchestration.lineages import batch_lineages
from seams.orchestration.shell_commands import python_command, seams_command
from seams.resources.keys import POSTGRES_KEY
from seams.resources.postgres import PostgresResource
from seams.storage.batches import batch_sources


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
    groups: list[str] = field(default_factory=lambda: [PIPELINE_GROUP])
    """The UI's asset groups of the batches' collections (`chunking` without collections)."""

    @property
    def words_per_second(self) -> float:
        words = self.words if self.words_done is None else self.words_done
        return words / self.seconds if self.seconds else 0.0


def _postgres(*, defs: dg.Definitions) -> PostgresResource:
    """The pipeline's own Postgres resource: the database the assets wrote."""
    return defs.resources[POSTGRES_KEY]


def summarize(summary: RunSummary, *, defs: dg.Definitions) -> RunSummary:
    """Fill in the numbers of `summary.batches`, read back from the stored tables."""
    if not summary.batches:
        return summary
    keys = summary.batches
    lineages = batch_lineages(defs, keys)
    summary.groups = list(
        dict.fromkeys(lin.group(PIPELINE_GROUP) for lin in lineages.values())
    ) or [PIPELINE_GROUP]
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
    if any(not lin.is_default for lin in lineages.values()):  # say whose batch each is
        for key, lin in lineages.items():
            if key in summary.sources:
                summary.sources[key] += f", collection {lin.collection}"
    summary.documents, summary.failed_documents, summary.words = docs[0], docs[1], int(docs[2])
    fresh = [k for k in keys if k not in summary.resumed]
    if summary.resumed:
        summary.words_done = _words(fresh, defs=defs) if fresh else 0
    summary.chunks = len(tokens)
    if tokens:
        summary.tokens_p50, summary.tokens_p95 = (float(x) for x in np.percentile(tokens, [50, 95]))
    return summary


def format_summary(summary: RunSummary, *, home: Path, team: bool = False) -> str:
    """The end-of-run summary; it never prints a database URL (it may hold a password).
    `home`: the Dagster home whose `seams dev` UI to point at; `team`: it is a team's own
    deployment's (`DAGSTER_HOME`), whose UI shows Seams as its code location `seams`."""
    sources = summary.sources
    batches = [f"{k} ({sources[k]})" if k in sources else k for k in summary.batches]
    ui = ownership.ui_address(home)  # the UI `seams dev` serves now, if it runs
    lines = [
        f"batches:        {', '.join(batches) or '-'}",
        f"documents:      {summary.documents} ({summary.failed_documents} failed)",
        f"retired:        {counted(len(summary.retired), 'document')} whose file left the folder "
        "(gone from current_chunks and search; history kept)",
        f"chunks:         {summary.chunks} (tokens per chunk p50 {summary.tokens_p50:.0f}, "
        f"p95 {summary.tokens_p95:.0f})",
        f"embeddings:     {summary.texts_embedded} texts embedded, {summary.cache_hits} from cache",
        _throughput(summary),
        f"look at them:   your Dagster UI, code location seams ({_groups(summary.groups)})"
        if team
        else f"look at them:   the Dagster UI at {ui} ({_groups(summary.groups)})"
        if ui
        else f"look at them:   {seams_command()} dev  (UI: http://127.0.0.1:3000, "
        f"{_groups(summary.groups)})",
        f'                {seams_command()} search "your question"',
        f'                {python_command()} -c "import psycopg, sys; '
        "print(*psycopg.connect(sys.argv[1]).execute('SELECT file_name, chunk_index, "
        "token_count, left(text, 60) FROM seams.current_chunks LIMIT 10'), sep='\\n')\" "
        f'"$({seams_command()} db url)"',
    ]
    if not summary.retired:
        lines.pop(2)
    return "\n".join(lines)


def _groups(groups: Sequence[str]) -> str:
    """`asset group 'chunking'`, or `asset groups 'handbook', 'notes'`."""
    named = ", ".join(f"'{group}'" for group in groups)
    return f"asset group{'s' if len(groups) > 1 else ''} {named}"


def _throughput(summary: RunSummary) -> str:
    """The throughput line: words per second of the work done here, never of work skipped (a
    resumed batch's finished steps), preceded by what was resumed."""
    if not summary.resumed:
        return (
            f"throughput:     {summary.words} words in {summary.seconds:.1f} s "
            f"({summary.words_per_second:,.0f} words/s)"
        )
    resumed = (
        f"resumed:        {counted(len(summary.resumed), 'batch')} an earlier run left unfinished, "
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
