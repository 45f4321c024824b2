"""`chunks`: size-bounded chunks with their provenance (stage 4), guarded by blocking checks.

It reads only `semantic_boundaries`, whose rows carry each candidate with its vector, its text
piece and its file: the document text is rebuilt from those pieces, exactly up to the last
candidate (nothing after it belongs to any chunk).

One run may materialize many batches (a single-run backfill). Dagster then records one
materialization per batch, and each must describe its own batch: every count, histogram and
preview is computed per batch and attached to that batch's materialization, and every check is
evaluated per batch (the checks are partitioned like the asset), so a batch's page and its check
history never show another batch's numbers.
"""

from collections.abc import Iterator
from dataclasses import replace

import dagster as dg
import numpy as np
import pandas as pd

from seams.assets import checks
from seams.assets.checks import check_result
from seams.assets.display import (
    cut_words,
    file_name,
    md_cell,
    rounded,
    size_histogram,
    start_reasons,
)
from seams.assets.frames import (
    boundaries_from,
    by_batch,
    by_document,
    candidates_from,
    chunk_rows,
    document_text,
    frame,
    run_batches,
    stored_candidate_vectors,
)
from seams.assets.stages import ChunkingStages
from seams.chunking import Chunk, ChunkingConfig, assemble_chunks
from seams.chunking.tokens import counter_name, resolve_token_counter
from seams.resources.embedder import OnnxEmbedderResource
from seams.resources.postgres import PostgresResource
from seams.storage.batches import batch_sources

CHUNKS_VERSION = "1"
PREVIEW_CHUNKS = 5
PREVIEW_CHARS = 120

CHECKS = {
    "exact_slices": "every chunk's text equals source[start_char:end_char]",
    "nothing_lost": "every non-whitespace character lies in some chunk's core",
    "sizes_within_bounds": "no chunk over chunk_size_max unless flagged oversized",
    "unique_chunk_ids": "chunk ids are unique within the batch",
}


def build_chunks_asset(stages: ChunkingStages) -> dg.AssetsDefinition:
    """`chunks`, assembled with `stages.config`."""
    config = stages.config
    chunks_code_version = stages.code_version("chunks", CHUNKS_VERSION)

    @dg.asset(**stages.arguments("chunks", CHUNKS_VERSION, checks=CHECKS))
    def chunks(
        context: dg.AssetExecutionContext,
        seams_embedder: OnnxEmbedderResource,
        seams_postgres: PostgresResource,
        semantic_boundaries: pd.DataFrame,
    ) -> Iterator[dg.Output | dg.AssetCheckEvaluation]:
        """The chunks a RAG system reads, each with offsets, sizes, pages, section, cohesion,
        boundary method and provenance (run, config, model, file version, code version)."""
        count_tokens = seams_embedder.count_tokens
        counter = counter_name(resolve_token_counter(count_tokens, config))
        rows, texts, files = [], {}, {}
        for key, group in by_document(semantic_boundaries):
            group = group.sort_values("candidate_index")
            first = group.iloc[0]
            text, candidates = document_text(group), candidates_from(group)
            vectors = stored_candidate_vectors(group)
            made = assemble_chunks(
                text,
                candidates,
                boundaries_from(group),
                config,
                document_id=key[1],
                embeddings=vectors,
                boundary_method=first["method"],
                token_counter_name=counter,
                # In cl100k mode sizes are LLM tokens; this flags chunks over the model's window.
                window_counter=count_tokens if config.tokenizer == "cl100k_base" else None,
            )
            provenance = {
                "run_id": context.run.run_id,
                "config_hash": config.fingerprint(),
                "model_id": first["model_id"] if vectors is not None else "none",
                "source_sha256": first["source_sha256"],
                "code_version": chunks_code_version,
            }
            rows.extend(chunk_rows(key[0], with_pages(made, group), provenance))
            texts[key], files[key[1]] = text, file_name(first["source_uri"])
        df = frame("chunks", rows)
        batch_frames = list(by_batch(df, run_batches(context)))
        with seams_postgres.connection() as conn:  # batch keys are stamps: say where each came from
            sources = batch_sources(conn, [batch for batch, _ in batch_frames])
        for batch, part in batch_frames:  # each batch's materialization describes that batch only
            metadata = chunk_metadata(part, config, files)
            if batch in sources:
                metadata = {
                    "source": sources[batch].folder,
                    "files": sources[batch].files,
                    **metadata,
                }
            context.add_asset_metadata(
                {**metadata, "dagster/row_count": len(part)}, partition_key=batch
            )
        yield dg.Output(df)
        yield from checks.evaluated_per_batch(
            context,
            (
                (batch, chunk_checks(part, _of_batch(texts, batch), config))
                for batch, part in batch_frames
            ),
        )

    return chunks


def _of_batch(texts: dict[tuple[str, str], str], batch: str) -> dict[tuple[str, str], str]:
    return {key: text for key, text in texts.items() if key[0] == batch}


def with_pages(made: list[Chunk], group: pd.DataFrame) -> list[Chunk]:
    """`made` with page_start/page_end from the carried candidates' pages (paged formats): a
    chunk starts at a candidate's start and ends at a candidate's end."""
    if group["page"].isna().all():
        return made
    first_page = dict(zip(group["start_char"], group["page"], strict=True))
    last_page = dict(zip(group["end_char"], group["last_page"], strict=True))

    def page(value: object) -> int | None:
        return None if value is None or pd.isna(value) else int(value)

    return [
        replace(
            c,
            page_start=page(first_page.get(c.start_char)),
            page_end=page(last_page.get(c.end_char)),
        )
        for c in made
    ]


def chunk_checks(
    df: pd.DataFrame, texts: dict[tuple[str, str], str], config: ChunkingConfig
) -> Iterator[dg.AssetCheckResult]:
    """The blocking checks of one `chunks` output, each with the numbers it checked."""
    size_max, chars_max = config.chunk_size_max, config.effective_chars_max()
    counted = {"chunks": len(df), "documents": len(texts)}
    yield check_result("exact_slices", checks.exact_slices(texts, df), counted)
    yield check_result(
        "nothing_lost",
        checks.nothing_lost(texts, df),
        {**counted, "characters": sum(len(t) for t in texts.values())},
    )
    bounds = {"chunk_size_max": size_max} if size_max is not None else {}
    if chars_max is not None:
        bounds["chunk_chars_max"] = chars_max
    largest = int(df["token_count"].max()) if len(df) else 0
    yield check_result(
        "sizes_within_bounds",
        checks.sizes_within_bounds(df, size_max, chars_max),
        {**counted, **bounds, "largest_token_count": largest},
    )
    yield check_result("unique_chunk_ids", checks.unique_ids(df), counted)


def chunk_metadata(
    df: pd.DataFrame, config: ChunkingConfig, files: dict[str, str] | None = None
) -> dict[str, object]:
    """What the UI shows: counts, sizes (percentiles and a histogram), a preview naming files.

    `files` maps document ids to file names (the basename of the source URI). Why chunks start
    where they do is counted in the words of `display.START_REASONS`, as the preview shows it.
    """
    if df.empty:
        return {"chunks": 0, "documents_chunked": 0}
    files = files or {}
    tokens = df["token_count"].to_numpy()
    p50, p95 = np.percentile(tokens, [50, 95])
    reasons = [(m or {}).get("boundary_reason", "") for m in df["metadata"]]
    preview = ["| file | # | tokens | starts because | text |", "|---|---|---|---|---|"]
    for row, reason in zip(df.head(PREVIEW_CHUNKS).itertuples(index=False), reasons, strict=False):
        name = md_cell(files.get(row.document_id, row.document_id))
        snippet = md_cell(cut_words(row.text, PREVIEW_CHARS))
        preview.append(f"| {name} | {row.chunk_index} | {row.token_count} | {reason} | {snippet} |")
    lexical = int((df["boundary_method"] == "jaccard").sum())
    return {
        "chunks": len(df),
        "documents_chunked": int(df["document_id"].nunique()),
        "tokens_p50": rounded(p50),
        "tokens_p95": rounded(p95),
        "tokens_max": int(tokens.max()),
        "oversized": int(sum(bool((m or {}).get("oversized")) for m in df["metadata"])),
        "chunk_starts": dg.MetadataValue.json(start_reasons(reasons)),
        "lexical_fallback_chunks": lexical,
        "size_histogram": dg.MetadataValue.md(size_histogram(tokens.tolist())),
        "config_fingerprint": config.fingerprint()[:12],
        "preview": dg.MetadataValue.md("\n".join(preview)),
    }
