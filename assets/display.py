"""What the Dagster UI shows about the pipeline's assets: names people know, one vocabulary.

Asset bodies call these so every stage presents the same things the same way: files by name
(the basename of their source URI, never a hash), text cut at word boundaries, one word list for
why a chunk starts where it does, and a chunk-size histogram the UI renders as Markdown. The
definition-time attributes (kinds, owners, tags, column schema) live here too, so the graph and
the asset pages read alike.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from urllib.parse import unquote, urlparse

import dagster as dg
import numpy as np
import pandas as pd

from seams.assets.frames import by_batch, run_batches
from seams.resources.io_manager import column_schema
from seams.resources.keys import IO_MANAGER_KEY
from seams.storage.schema import asset_table

OWNERS = ["team:seams"]
"""Who answers for the pipeline's assets (Dagster's `team:` owner form)."""

START_REASONS = ("document_start", "structural", "semantic", "size", "fallback")
"""Why a chunk starts where it does: the one vocabulary of `chunks.metadata.boundary_reason`,
`semantic_boundaries.reason` (which never says document_start: the first chunk has no gap) and
every count the UI shows of them."""

HISTOGRAM_BINS = 8
HISTOGRAM_WIDTH = 30


def file_name(source_uri: str) -> str:
    """The basename of a source URI (`file:///in/notes%20a.md` -> `notes a.md`)."""
    path = unquote(urlparse(source_uri).path) if "://" in source_uri else source_uri
    return path.rstrip("/").rsplit("/", 1)[-1] or source_uri


def cut_words(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters, cut at a word boundary with an ellipsis.

    A single word longer than the limit is cut inside it (there is no boundary to use).
    """
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    room = max(1, limit - 1)
    cut = flat.rfind(" ", 0, room + 1)
    return (flat[:cut] if cut > 0 else flat[:room]).rstrip() + "…"


def md_cell(text: str) -> str:
    """Text safe inside one Markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|")


def start_reasons(reasons: Iterable[str]) -> dict[str, int]:
    """Counts per start reason, in `START_REASONS` order (unknown words after, never dropped)."""
    counts: dict[str, int] = {}
    for reason in reasons:
        counts[reason or "none"] = counts.get(reason or "none", 0) + 1
    known = {r: counts.pop(r) for r in START_REASONS if r in counts}
    return {**known, **dict(sorted(counts.items()))}


def size_histogram(sizes: Sequence[int], unit: str = "tokens") -> str:
    """A Markdown histogram of chunk sizes: one row per bin, a bar, and the count."""
    if len(sizes) == 0:
        return "_no chunks_"
    values = np.asarray(sizes, dtype=np.int64)
    low, high = int(values.min()), int(values.max())
    bins = min(HISTOGRAM_BINS, max(1, high - low + 1))
    counts, edges = np.histogram(values, bins=bins, range=(low, high + 1))
    peak = int(counts.max())
    lines = [f"| {unit} | chunks | |", "|---:|---:|:---|"]
    for count, start, stop in zip(counts, edges[:-1], edges[1:], strict=True):
        first, last = int(np.ceil(start)), int(np.ceil(stop)) - 1
        label = f"{first}" if first >= last else f"{first}-{last}"
        bar = "█" * max(1 if count else 0, round(HISTOGRAM_WIDTH * int(count) / peak))
        lines.append(f"| {label} | {int(count)} | {bar} |")
    return "\n".join(lines)


def asset_attributes(
    asset: str, *, stage: str, kinds: Iterable[str] = ("postgres",)
) -> dict[str, object]:
    """`kinds`, `owners`, `tags`, definition metadata (table name and column schema) and the IO
    manager of one pipeline asset, for `@dg.asset(**asset_attributes(...))`."""
    metadata: dict[str, object] = {}
    table = asset_table(asset)
    if table is not None:
        metadata = {
            "dagster/table_name": table.qualified_name,
            "dagster/column_schema": column_schema(table),
        }
    return {
        "kinds": set(kinds),
        "owners": OWNERS,
        "tags": {"pipeline": "seams", "stage": stage},
        "metadata": metadata,
        # Never the default `io_manager`: merged into a team's definitions, theirs keeps it.
        "io_manager_key": IO_MANAGER_KEY,
    }


def rounded(value: float, digits: int = 1) -> float:
    """A measured number as people read it: `127.19999999999995` -> `127.2`."""
    return round(float(value), digits)


def numbers(values: Mapping[str, float | int]) -> dict[str, dg.MetadataValue]:
    """Check-result metadata: the numbers a check looked at, as Dagster metadata values (floats
    rounded for people)."""
    return {
        name: dg.MetadataValue.int(int(value))
        if isinstance(value, int | np.integer)
        else dg.MetadataValue.float(rounded(value, 3))
        for name, value in values.items()
    }


def cache_numbers(texts: int, hits: int, embedded: int) -> dict[str, object]:
    """What the embedding cache did for some texts, as asset metadata: `texts` looked up,
    `cache_hits`, `texts_embedded` (distinct texts the model computed) and the hit rate."""
    return {
        "texts": texts,
        "cache_hits": hits,
        "texts_embedded": embedded,
        "cache_hit_rate": rounded(hits / texts if texts else 1.0, 3),
    }


def cache_numbers_by_batch(
    run: Iterable[str], batches: Sequence[str], embedded: Sequence[Hashable | None]
) -> dict[str, dict[str, object]]:
    """`cache_numbers` of each batch of `run`, from one cache lookup over several batches' texts.

    Text i belongs to `batches[i]`; `embedded[i]` is None when its vector came from the cache,
    else what the model embedded for it. The cache embeds a repeated text once, so it counts for
    the first batch that has it: the batches' numbers add up to the whole lookup's, and a batch
    with no texts still gets its zeros (never the run's numbers).
    """
    texts, hits, new = Counter(batches), Counter(), Counter()
    seen: set[Hashable] = set()
    for batch, what in zip(batches, embedded, strict=True):
        if what is None:
            hits[batch] += 1
        elif what not in seen:
            seen.add(what)
            new[batch] += 1
    return {batch: cache_numbers(texts[batch], hits[batch], new[batch]) for batch in run}


def describe_batches(
    context: dg.AssetExecutionContext,
    df: pd.DataFrame,
    describe: Callable[[pd.DataFrame], Mapping[str, object]],
    also: Mapping[str, Mapping[str, object]] | None = None,
) -> None:
    """Attach `describe(rows of one batch)` to that batch's materialization, for every batch the
    step materializes, with the batch's own `dagster/row_count`.

    Use it instead of `context.add_output_metadata(describe(df))`: in a run over many batches
    (a single-run backfill) output metadata lands on every batch's materialization, so each
    batch's page would show the whole run's numbers. `also` holds, per batch, numbers its rows
    do not carry (what the embedding cache did for it); they join that batch's metadata.
    """
    for batch, part in by_batch(df, run_batches(context)):
        context.add_asset_metadata(
            {**describe(part), **(also or {}).get(batch, {}), "dagster/row_count": len(part)},
            partition_key=batch,
        )
