"""`chunk_index`: one retrieval embedding per chunk (pgvector, HNSW) and its BM25 entry.

The mode (seams.yaml `retrieval.mode`, see `seams.models.chunk_vectors`: "text", "pooled" or
"late") and the BM25 analyzer (`retrieval.text_search_config`) are part of the code version,
so changing either marks every batch's index unsynced and a backfill rebuilds exactly the index.

The lexical index rides on the same rows: each row names the text search configuration of its
chunk, and the write of a partition updates the BM25 entries and statistics in the same
transaction (`storage.search.lexical_index` triggers). One step, not a second asset: the analysis
is a few milliseconds of SQL per batch next to the embeddings, and dense and lexical search can
never describe different versions of a batch.
The asset writes its rows itself and publishes the builds they complete, in one transaction
(`storage.index_publication`: delete + COPY + publication), so a rerun replaces its rows and
never duplicates them, and readers switch to a batch's new build whole. All chunks of the batch
are indexed, stale versions included: search reads only `current_chunks`, so an older batch's
rows simply stop matching once a newer version of its document is chunked.

In a run over several batches each batch's materialization counts its own chunks and what the
embedding cache did for them; only the step's time is the run's (`run_seconds`).
"""

import time
from dataclasses import dataclass

import dagster as dg
import numpy as np
import pandas as pd

from seams.assets.display import (
    asset_attributes,
    cache_numbers_by_batch,
    describe_batches,
    rounded,
)
from seams.assets.frames import (
    by_document,
    candidates_from,
    document_text,
    frame,
    run_batches,
    stored_candidate_vectors,
)
from seams.assets.partitions import DEFAULT_LINEAGE, RETRIEVAL_GROUP, Lineage
from seams.assets.versions import StageParts, code_version
from seams.chunking import ChunkingConfig
from seams.errors import EmbeddingError, SeamsError, counted
from seams.models.chunk_vectors import (
    RetrievalMode,
    check_late_model,
    late_cache_keys,
    late_cache_model_id,
    late_vectors,
    pooled_vectors,
)
from seams.models.known_models import remember_model
from seams.resources.embedder import OnnxEmbedderResource
from seams.resources.io_manager import batch_metadata, write_metadata
from seams.resources.keys import EMBEDDER_KEY, POSTGRES_KEY
from seams.resources.postgres import PostgresResource
from seams.storage import schema
from seams.storage.embedding_cache import EmbeddingCache
from seams.storage.index_publication import write_and_publish
from seams.storage.search import DEFAULT_TEXT_SEARCH_CONFIG, check_text_search_config
from seams.storage.vector_indexes import drop_unused_model_indexes, ensure_model_index

INDEX_VERSION = "2"


@dataclass(frozen=True)
class IndexModel:
    """Which model `chunk_index` embeds with (seams.yaml's `retrieval.model` and prompts, as
    `seams.resources.embedder.PipelineModels` resolved them)."""

    resource: str = EMBEDDER_KEY
    """The resource key: `EMBEDDER_KEY` (the packaged model) or `RETRIEVAL_EMBEDDER_KEY`."""
    identity: str | None = None
    """What the code version adds for it; None: nothing (the chunks' parts already say it)."""
    reuses_candidates: bool = True
    """Whether it is the model that embedded the candidates, prompt included (pooled allowed)."""
    described: str = "packaged"
    """`packaged` or the model folder, for the UI."""


def index_mode(
    requested: RetrievalMode, config: ChunkingConfig, *, reuses_candidates: bool = True
) -> RetrievalMode:
    """The mode `chunk_index` builds for seams.yaml's `retrieval.mode` under `config`.

    Pooled vectors are the boundary model's: with the static model (`fast`), or when the
    retrieval model is another model (or the same with another document prompt), they would not
    match the model that embeds queries, so the index embeds each chunk's text instead, with the
    retrieval model's document prompt. Search reads the mode back from the index's rows, so it
    never needs this rule.
    """
    if requested == "pooled" and (config.boundary_model == "static" or not reuses_candidates):
        return "text"
    return requested


@dataclass(frozen=True)
class _IndexPlan:
    """What one `chunk_index` definition builds: its mode, model, BM25 analyzer and collection."""

    mode: RetrievalMode
    model: IndexModel
    text_search_config: str
    late_overlap_tokens: int
    collection: str | None
    mode_note: str | None
    """Why the mode differs from the one asked for (None: it does not)."""


def build_index_asset(
    config: ChunkingConfig,
    parts: StageParts,
    requested_mode: RetrievalMode,
    late_overlap_tokens: int,
    automation_condition: dg.AutomationCondition | None = None,
    text_search_config: str = DEFAULT_TEXT_SEARCH_CONFIG,
    model: IndexModel = IndexModel(),
    lineage: Lineage = DEFAULT_LINEAGE,
) -> dg.AssetsDefinition:
    """`chunk_index` in the mode `index_mode` picks, its chunks analysed for BM25 with
    `text_search_config`, embedded by `model` (its code version folds in `parts`, the mode,
    the configuration and the retrieval model's identity when it is not the chunks' model).

    It reads what its mode needs, and no more: chunk texts ("text") come from `chunks` alone;
    pooled candidate vectors and late chunking's document text from `semantic_boundaries` too.
    It writes its rows itself and publishes the builds they complete (`_write`).
    """
    mode = index_mode(requested_mode, config, reuses_candidates=model.reuses_candidates)
    overlap = f"late_overlap:{late_overlap_tokens}" if mode == "late" else ""
    lexical = f"text_search_config:{text_search_config}"
    retrieval_model = (f"retrieval_model:{model.identity}",) if model.identity else ()
    index_code_version = code_version(
        INDEX_VERSION, *parts.assembly, f"mode:{mode}", overlap, lexical, *retrieval_model
    )
    text_instead = (
        f"pooled was asked for, but the index's model ({model.described}) did not embed the "
        "candidates: each chunk's text is embedded with its document prompt"
        if requested_mode == "pooled" and mode == "text"
        else None
    )
    plan = _IndexPlan(
        mode, model, text_search_config, late_overlap_tokens, lineage.collection, text_instead
    )
    attributes = dict(
        **lineage.asset_defaults(RETRIEVAL_GROUP),
        **asset_attributes("chunk_index", stage="index", kinds=("postgres", "onnx")),
        code_version=index_code_version,
        automation_condition=automation_condition,
        description="One embedding per chunk (mode: text, pooled or late chunking) in "
        "seams.chunk_index, searched with HNSW (cosine) by `seams search`.",
    )
    resources = {model.resource, POSTGRES_KEY}
    if mode == "text":

        @dg.asset(**attributes, required_resource_keys=resources)
        def chunk_index(context: dg.AssetExecutionContext, chunks: pd.DataFrame) -> None:
            _index(context, plan, chunks, None)

        return chunk_index

    @dg.asset(**attributes, required_resource_keys=resources)
    def chunk_index(  # the mode that reads candidates too
        context: dg.AssetExecutionContext,
        chunks: pd.DataFrame,
        semantic_boundaries: pd.DataFrame,
    ) -> None:
        _index(context, plan, chunks, semantic_boundaries)

    return chunk_index


def _index(
    context: dg.AssetExecutionContext,
    plan: _IndexPlan,
    chunks: pd.DataFrame,
    candidates: pd.DataFrame | None,
) -> None:
    """Embed the step's chunks in the plan's mode, then write and publish them (`_write`)."""
    model, mode = plan.model, plan.mode
    embedder: OnnxEmbedderResource = getattr(context.resources, model.resource)
    postgres: PostgresResource = getattr(context.resources, POSTGRES_KEY)
    started = time.perf_counter()
    chunks = chunks.reset_index(drop=True)  # positions below index the vectors' rows
    with postgres.connection() as conn:  # a clear error before any model work
        check_text_search_config(conn, plan.text_search_config)
    try:
        model_id = embedder.model_id
    except EmbeddingError as exc:
        # The chunks are stored (with lexical boundaries); only the index must wait for a model.
        context.log.warning(f"embedding model unavailable, nothing indexed: {exc}")
        unavailable = {"mode": mode, "chunks_indexed": 0, "model_unavailable": str(exc)[:500]}
        empty = frame("chunk_index", [])
        describe_batches(context, empty, lambda part: unavailable)
        _write(context, postgres, empty)
        return
    vectors, keep, embedded = _chunk_vectors(
        mode, chunks, candidates, embedder, postgres, model_id, plan.late_overlap_tokens
    )
    # Where a slow run's time went: the vectors, or the model's HNSW index (built over every
    # stored row of a new model the first time; the write's own time is `write_seconds`).
    phases = {"vectors_seconds": rounded(time.perf_counter() - started, 2)}
    indexed = chunks[keep]
    if keep.any():  # the model's HNSW index is there before its first vectors are
        index_started = time.perf_counter()
        with postgres.connection() as conn:
            # A collection's searches walk its own index (`default`'s: the model's).
            ensure_model_index(conn, model_id, vectors.shape[1], collection=plan.collection)
            drop_unused_model_indexes(conn, keep=(model_id,))
        phases["vector_index_seconds"] = rounded(time.perf_counter() - index_started, 2)
        _remember(context, embedder)
    df = frame(
        "chunk_index",
        [
            {
                "batch_key": r.batch_key,
                "chunk_id": r.chunk_id,
                "document_id": r.document_id,
                "mode": mode,
                "model_id": model_id,
                "embedding": v,
                "text_search_config": plan.text_search_config,
            }
            for r, v in zip(indexed.itertuples(index=False), vectors[keep], strict=True)
        ],
    )
    _describe(context, plan, chunks, keep, embedded, df, model_id)
    context.add_output_metadata(
        {"run_seconds": rounded(time.perf_counter() - started, 2), **phases}
    )
    _write(context, postgres, df)


def _describe(
    context: dg.AssetExecutionContext,
    plan: _IndexPlan,
    chunks: pd.DataFrame,
    keep: np.ndarray,
    embedded: list[object | None],
    df: pd.DataFrame,
    model_id: str,
) -> None:
    """Each batch's materialization: its index's setup, chunks indexed and skipped, and what
    the embedding cache did for it; the step's own totals as output metadata."""
    skipped = chunks.loc[~keep, "batch_key"].value_counts()
    if len(skipped):
        context.log.warning(
            f"{counted(skipped.sum(), 'chunk')} without candidate embeddings: not indexed"
        )
    batches = run_batches(context)
    cache = cache_numbers_by_batch(batches, list(chunks["batch_key"]), embedded)
    setup: dict[str, object] = {
        "mode": plan.mode,
        "model_id": model_id,
        "text_search_config": plan.text_search_config,
        "retrieval_model": plan.model.described,
    }
    if plan.mode_note:
        setup["mode_note"] = plan.mode_note
    describe_batches(
        context,
        df,
        lambda part: {**setup, "chunks_indexed": len(part)},
        also={b: {**cache[b], "chunks_skipped": int(skipped.get(b, 0))} for b in batches},
    )
    whole = {  # what the model did here (the summary of `seams run` / `seams backfill`)
        name: sum(int(cache[b][name]) for b in batches)
        for name in ("cache_hits", "texts_embedded")
        if plan.mode != "pooled"  # pooled vectors come from the candidates' embeddings
    }
    context.add_output_metadata(whole)


def _write(context: dg.AssetExecutionContext, postgres: PostgresResource, df: pd.DataFrame) -> None:
    """The step's index rows written and the builds they complete published, in one
    transaction (`write_and_publish`); the write's numbers go on the materializations as the
    IO manager puts them on every other table's."""
    result = write_and_publish(postgres, df, run_batches(context), run_id=context.run.run_id)
    for batch, reason in sorted(result.held.items()):
        context.log.warning(f"batch {batch} not published: {reason}")
    context.add_output_metadata(write_metadata(result, schema.CHUNK_INDEX))
    if len(result.batches) > 1:  # each batch's materialization shows its own write
        for key, written in result.batches.items():
            context.add_asset_metadata(
                batch_metadata(written, result.held.get(key)), partition_key=key
            )


def _remember(context: dg.AssetExecutionContext, embedder: OnnxEmbedderResource) -> None:
    """Record the index's model (`seams.models.known_models`), so queries reach this index
    with the right model while a later model's index is built; a record that cannot be
    written only costs that."""
    try:
        remember_model(embedder, embedder.resolved_models_dir())
    except (OSError, SeamsError) as exc:
        context.log.warning(f"could not record the index's model for search: {exc}")


def _chunk_vectors(
    mode: RetrievalMode,
    chunks: pd.DataFrame,
    candidates: pd.DataFrame | None,
    embedder: OnnxEmbedderResource,
    postgres: PostgresResource,
    model_id: str,
    late_overlap_tokens: int,
) -> tuple[np.ndarray, np.ndarray, list[object | None]]:
    """Each chunk's vector in `mode`, whether it has one (pooled: its document has candidate
    vectors), and what the model embedded for it (None: the cache held it, or no model ran),
    so each batch can report its own cache hits."""
    keep = np.ones(len(chunks), bool)
    if mode == "pooled":  # the candidates' vectors, pooled: the model is never called
        vectors, keep = _pooled(chunks, candidates)
        return vectors, keep, [None] * len(chunks)
    if mode == "late":
        vectors, embedded = _late(
            chunks, candidates, embedder, postgres, model_id, late_overlap_tokens
        )
        return vectors, keep, embedded
    sent: set[str] = set()

    def embed(texts: list[str]) -> np.ndarray:  # remembers what the model was sent
        sent.update(texts)
        return embedder.embed(texts)

    texts = list(chunks["text"])
    vectors, _ = EmbeddingCache(postgres).get_or_embed(model_id, texts, embed)
    return vectors, keep, [text if text in sent else None for text in texts]


def _pooled(chunks: pd.DataFrame, candidates: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Pooled candidate vectors per chunk, of the candidates' own dimension (no column when
    none has vectors); chunks of a document without vectors are skipped."""
    out: np.ndarray | None = None
    keep = np.zeros(len(chunks), bool)
    positions = {key: group.index.to_numpy() for key, group in by_document(chunks)}
    for key, group in by_document(candidates):
        rows, vectors = positions.get(key), stored_candidate_vectors(group)
        if rows is None or vectors is None:
            continue
        found = candidates_from(group)
        doc_chunks = chunks.loc[rows]
        if out is None:
            out = np.zeros((len(chunks), vectors.shape[1]), np.float32)
        out[rows] = pooled_vectors(
            list(zip(doc_chunks["start_char"], doc_chunks["end_char"], strict=True)),
            [(c.start_char, c.end_char) for c in found],
            [c.token_count for c in found],
            vectors,
        )
        keep[rows] = True
    return (np.zeros((len(chunks), 0), np.float32) if out is None else out), keep


def _late(
    chunks: pd.DataFrame,
    candidates: pd.DataFrame,
    embedder: OnnxEmbedderResource,
    postgres: PostgresResource,
    model_id: str,
    overlap_tokens: int,
) -> tuple[np.ndarray, list[object | None]]:
    """Late-chunked vectors, through the embedding cache (keyed by document hash + span), and per
    chunk whether the model computed it (its row number) or the cache held it (None)."""
    texts = {key: document_text(group) for key, group in by_document(candidates)}
    keys, positions, documents, offsets = [], [], [], []
    for key, group in by_document(chunks):
        spans = list(zip(group["start_char"], group["end_char"], strict=True))
        offsets.append(len(keys))
        keys.extend(late_cache_keys(texts[key], spans))
        positions.append(group.index.to_numpy())
        documents.append((texts[key], spans))
    check_late_model(embedder.runtime(), embedder.resolved_document_prompt())
    cache_id = late_cache_model_id(model_id, embedder.window_tokens, overlap_tokens)
    cache = EmbeddingCache(postgres)
    lookup = cache.get(cache_id, keys)
    out = np.zeros((len(chunks), embedder.dims), np.float32)
    missing_docs = []
    for number, rows in enumerate(positions):
        cached = lookup.vectors[offsets[number] : offsets[number] + len(rows)]
        if any(v is None for v in cached):
            missing_docs.append(number)
        else:
            out[rows] = np.stack(cached)
    fresh = late_vectors(
        embedder.runtime(),
        [documents[n] for n in missing_docs],
        max_tokens=embedder.window_tokens,
        overlap_tokens=overlap_tokens,
        batch_size=embedder.batch_size,
    )
    new_keys, new_vectors = [], []
    embedded: list[object | None] = [None] * len(chunks)
    for number, vectors in zip(missing_docs, fresh, strict=True):
        out[positions[number]] = vectors
        new_keys.extend(keys[offsets[number] : offsets[number] + len(vectors)])
        new_vectors.append(vectors)
        for row in positions[number]:
            embedded[int(row)] = int(row)
    if new_vectors:
        cache.put(cache_id, new_keys, np.vstack(new_vectors))
    return out, embedded
