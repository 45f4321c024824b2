"""`chunks`: size-bounded, traceable chunks with lineage (stage 4), guarded by blocking checks."""

from collections.abc import Iterator

import dagster as dg
import numpy as np
import pandas as pd

from assets import checks
from assets.checks import check_result
from assets.frames import (
    boundaries_from,
    by_document,
    candidates_from,
    chunk_rows,
    embedding_matrix,
    extracted,
    frame,
)
from assets.partitions import BATCH_ASSET_DEFAULTS
from assets.versions import ASSEMBLY_PARTS, CONFIG, code_version
from chunking import assemble_chunks, candidate_vectors
from resources.embedder import OnnxEmbedder

CHUNKS_VERSION = "1"
CHUNKS_CODE_VERSION = code_version(CHUNKS_VERSION, *ASSEMBLY_PARTS)
PREVIEW_CHUNKS = 5

CHECKS = {
    "exact_slices": "every chunk's text equals source[start_char:end_char]",
    "nothing_lost": "every non-whitespace character lies in some chunk's core",
    "sizes_within_bounds": "no chunk over chunk_size_max unless flagged oversized",
    "unique_chunk_ids": "chunk ids are unique within the batch",
}


@dg.asset(
    **BATCH_ASSET_DEFAULTS,
    code_version=CHUNKS_CODE_VERSION,
    check_specs=[
        dg.AssetCheckSpec(name, asset="chunks", description=text, blocking=True)
        for name, text in CHECKS.items()
    ],
    description="The chunks a RAG system reads, each with offsets, sizes, pages, section, "
    "cohesion, boundary method and lineage (run, config, model, file version, code version).",
)
def chunks(
    context: dg.AssetExecutionContext,
    embedder: OnnxEmbedder,
    extracted_text: pd.DataFrame,
    sentence_candidates: pd.DataFrame,
    candidate_embeddings: pd.DataFrame,
    semantic_boundaries: pd.DataFrame,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    docs = {(d.batch_key, d.document_id): d for d in extracted_text.itertuples(index=False)}
    embedded = dict(by_document(candidate_embeddings))
    cuts = dict(by_document(semantic_boundaries))
    rows = []
    for key, group in by_document(sentence_candidates):
        doc, candidates = docs[key], candidates_from(group)
        vectors_frame = embedded.get(key)
        vectors = embedding_matrix(vectors_frame) if vectors_frame is not None else None
        boundary_group = cuts.get(key)
        boundaries = boundaries_from(boundary_group) if boundary_group is not None else []
        method = boundary_group["method"].iloc[0] if boundary_group is not None else "semantic"
        made = assemble_chunks(
            doc.text,
            candidates,
            boundaries,
            CONFIG,
            document_id=doc.document_id,
            embeddings=candidate_vectors(vectors, len(candidates), CONFIG)
            if vectors is not None
            else None,
            page_spans=doc.page_spans,
            boundary_method=method,
            # In cl100k mode sizes are LLM tokens; this flags chunks over the model's window.
            window_counter=embedder.token_count if CONFIG.tokenizer == "cl100k_base" else None,
        )
        model_id = vectors_frame["model_id"].iloc[0] if vectors is not None else "none"
        lineage = {
            "run_id": context.run.run_id,
            "config_hash": CONFIG.fingerprint(),
            "model_id": model_id,
            "source_sha256": doc.source_sha256,
            "code_version": CHUNKS_CODE_VERSION,
        }
        rows.extend(chunk_rows(key[0], made, lineage))
    df = frame("chunks", rows)
    yield dg.Output(df, metadata=chunk_metadata(df))
    texts = {key: doc.text for key, doc in docs.items() if extracted(doc)}
    results = {
        "exact_slices": checks.exact_slices(texts, df),
        "nothing_lost": checks.nothing_lost(texts, df),
        "sizes_within_bounds": checks.sizes_within_bounds(df, CONFIG.chunk_size_max),
        "unique_chunk_ids": checks.unique_ids(df),
    }
    for name, problems in results.items():
        yield check_result(name, problems)


def chunk_metadata(df: pd.DataFrame) -> dict[str, object]:
    """What the UI shows: counts, size percentiles, a preview with boundary reasons."""
    if df.empty:
        return {"chunks": 0, "documents": 0}
    tokens = df["token_count"].to_numpy()
    p50, p95 = np.percentile(tokens, [50, 95])
    preview = ["| # | document | tokens | starts because | text |", "|---|---|---|---|---|"]
    for row in df.head(PREVIEW_CHUNKS).itertuples(index=False):
        snippet = " ".join(row.text.split())[:120].replace("|", "\\|")
        reason = (row.metadata or {}).get("boundary_reason", "")
        preview.append(
            f"| {row.chunk_index} | {row.document_id[:16]} | {row.token_count} | {reason} "
            f"| {snippet} |"
        )
    methods = df["boundary_method"].value_counts().to_dict()
    return {
        "chunks": len(df),
        "documents": int(df["document_id"].nunique()),
        "tokens_p50": float(p50),
        "tokens_p95": float(p95),
        "tokens_max": int(tokens.max()),
        "oversized": int(sum(bool((m or {}).get("oversized")) for m in df["metadata"])),
        "boundary_methods": dg.MetadataValue.json(methods),
        "config_fingerprint": CONFIG.fingerprint()[:12],
        "preview": dg.MetadataValue.md("\n".join(preview)),
    }
