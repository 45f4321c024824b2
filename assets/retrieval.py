"""`chunk_index`: one retrieval embedding per chunk, in pgvector behind an HNSW index.

The mode (seams.yaml `retrieval.mode`, see `resources.chunk_vectors`: "text", "pooled" or
"late") is part of the code version,
so changing it marks every batch's index unsynced and a backfill rebuilds exactly the index.
Every partition is rewritten whole (the IO manager's delete + COPY in one transaction), so a
rerun replaces its rows and never duplicates them. All chunks of the batch are indexed, stale
versions included: search reads only `current_chunks`, so an older batch's rows simply stop
matching once a newer version of its document is chunked.
"""

import time

import dagster as dg
import numpy as np
import pandas as pd

from assets.frames import by_document, candidates_from, embedding_matrix, frame
from assets.partitions import BATCH_ASSET_DEFAULTS
from assets.versions import ASSEMBLY_PARTS, CONFIG, SETTINGS, code_version
from chunking import candidate_vectors
from chunking.errors import EmbeddingError
from resources.chunk_vectors import (
    late_cache_keys,
    late_cache_model_id,
    late_vectors,
    pooled_vectors,
    runtime_of,
)
from resources.embedder import OnnxEmbedder
from resources.embedding_cache import CacheStats, EmbeddingCache
from resources.postgres import PostgresResource
from resources.schema import EMBEDDING_DIM

RETRIEVAL_GROUP = "retrieval"
# Pooled vectors are the boundary model's: with the static model (`fast`) they would not match
# the transformer that embeds queries, so the index embeds chunk texts instead.
RETRIEVAL_MODE = (
    "text"
    if SETTINGS.retrieval.mode == "pooled" and CONFIG.boundary_model == "static"
    else SETTINGS.retrieval.mode
)
LATE_OVERLAP_TOKENS = SETTINGS.retrieval.late_overlap_tokens
INDEX_VERSION = "1"
INDEX_CODE_VERSION = code_version(
    INDEX_VERSION,
    *ASSEMBLY_PARTS,
    f"mode:{RETRIEVAL_MODE}",
    f"late_overlap:{LATE_OVERLAP_TOKENS}" if RETRIEVAL_MODE == "late" else "",
)


@dg.asset(
    **{**BATCH_ASSET_DEFAULTS, "group_name": RETRIEVAL_GROUP},
    code_version=INDEX_CODE_VERSION,
    description="One embedding per chunk (mode: text, pooled or late chunking) in "
    "seams.chunk_index, searched with HNSW (cosine) by `seams search`.",
)
def chunk_index(
    context: dg.AssetExecutionContext,
    embedder: OnnxEmbedder,
    postgres: PostgresResource,
    extracted_text: pd.DataFrame,
    sentence_candidates: pd.DataFrame,
    candidate_embeddings: pd.DataFrame,
    chunks: pd.DataFrame,
) -> pd.DataFrame:
    started = time.perf_counter()
    chunks = chunks.reset_index(drop=True)  # positions below index the vectors' rows
    try:
        model_id = embedder.model_id
    except EmbeddingError as exc:
        # The chunks are stored (with lexical boundaries); only the index must wait for a model.
        context.log.warning(f"embedding model unavailable, nothing indexed: {exc}")
        context.add_output_metadata({"mode": RETRIEVAL_MODE, "chunks_indexed": 0,
                                     "model_unavailable": str(exc)[:500]})  # fmt: skip
        return frame("chunk_index", [])
    if RETRIEVAL_MODE == "text":
        vectors, stats = EmbeddingCache(postgres).get_or_embed(
            model_id, list(chunks["text"]), embedder.embed
        )
        keep = np.ones(len(chunks), bool)
    elif RETRIEVAL_MODE == "pooled":
        vectors, keep = _pooled(chunks, sentence_candidates, candidate_embeddings)
        stats = CacheStats(len(chunks), len(chunks), 0, 0)
    else:
        vectors, stats = _late(chunks, extracted_text, embedder, postgres, model_id)
        keep = np.ones(len(chunks), bool)
    indexed = chunks[keep]
    df = frame(
        "chunk_index",
        [
            {"batch_key": r.batch_key, "chunk_id": r.chunk_id, "document_id": r.document_id,
             "mode": RETRIEVAL_MODE, "model_id": model_id, "embedding": v}
            for r, v in zip(indexed.itertuples(index=False), vectors[keep], strict=True)
        ],
    )  # fmt: skip
    skipped = int((~keep).sum())
    if skipped:
        context.log.warning(f"{skipped} chunk(s) have no candidate embeddings: not indexed")
    context.add_output_metadata(
        {
            "mode": RETRIEVAL_MODE,
            "model_id": model_id,
            "chunks_indexed": len(df),
            "chunks_skipped": skipped,
            "cache_hits": stats.hits,
            "texts_embedded": stats.embedded,
            "seconds": round(time.perf_counter() - started, 3),
        }
    )
    return df


def _pooled(
    chunks: pd.DataFrame, candidates: pd.DataFrame, embeddings: pd.DataFrame
) -> tuple[np.ndarray, np.ndarray]:
    """Pooled candidate vectors per chunk; chunks of a document without vectors are skipped."""
    out = np.zeros((len(chunks), EMBEDDING_DIM), np.float32)
    keep = np.zeros(len(chunks), bool)
    positions = {key: group.index.to_numpy() for key, group in by_document(chunks)}
    embedded = dict(by_document(embeddings))
    for key, group in by_document(candidates):
        rows, vectors_frame = positions.get(key), embedded.get(key)
        vectors = embedding_matrix(vectors_frame) if vectors_frame is not None else None
        if rows is None or vectors is None:
            continue
        found = candidates_from(group)
        doc_chunks = chunks.loc[rows]
        out[rows] = pooled_vectors(
            list(zip(doc_chunks["start_char"], doc_chunks["end_char"], strict=True)),
            [(c.start_char, c.end_char) for c in found],
            [c.token_count for c in found],
            candidate_vectors(vectors, len(found), CONFIG),
        )
        keep[rows] = True
    return out, keep


def _late(
    chunks: pd.DataFrame,
    extracted_text: pd.DataFrame,
    embedder: OnnxEmbedder,
    postgres: PostgresResource,
    model_id: str,
) -> tuple[np.ndarray, CacheStats]:
    """Late-chunked vectors, through the embedding cache (keyed by document hash + span)."""
    texts = {(d.batch_key, d.document_id): d.text for d in extracted_text.itertuples(index=False)}
    keys, positions, documents, offsets = [], [], [], []
    for key, group in by_document(chunks):
        spans = list(zip(group["start_char"], group["end_char"], strict=True))
        offsets.append(len(keys))
        keys.extend(late_cache_keys(texts[key], spans))
        positions.append(group.index.to_numpy())
        documents.append((texts[key], spans))
    cache_id = late_cache_model_id(model_id, embedder.max_tokens, LATE_OVERLAP_TOKENS)
    cache = EmbeddingCache(postgres)
    lookup = cache.get(cache_id, keys)
    out = np.zeros((len(chunks), EMBEDDING_DIM), np.float32)
    missing_docs = []
    for number, rows in enumerate(positions):
        cached = lookup.vectors[offsets[number] : offsets[number] + len(rows)]
        if any(v is None for v in cached):
            missing_docs.append(number)
        else:
            out[rows] = np.stack(cached)
    fresh = late_vectors(
        runtime_of(embedder),
        [documents[n] for n in missing_docs],
        max_tokens=embedder.max_tokens,
        overlap_tokens=LATE_OVERLAP_TOKENS,
        batch_size=embedder.batch_size,
    )
    new_keys, new_vectors = [], []
    for number, vectors in zip(missing_docs, fresh, strict=True):
        out[positions[number]] = vectors
        new_keys.extend(keys[offsets[number] : offsets[number] + len(vectors)])
        new_vectors.append(vectors)
    stored = cache.put(cache_id, new_keys, np.vstack(new_vectors)) if new_vectors else 0
    return out, CacheStats(len(keys), len(keys) - len(new_keys), len(new_keys), stored)
