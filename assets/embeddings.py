"""`candidate_embeddings`: every candidate with its unit vector (stage 2).

Texts go through the embedding cache first, so a rerun or a backfill after a non-embedding
config change calls the model for nothing. When the model fails, the batch's rows carry no
vector (NULL) and the boundary step falls back to lexical similarity, recorded per chunk.
Each row carries its candidate on (see `sentence_candidates`), so the boundary step reads only
this table.

In a run over several batches each batch's materialization shows its own rows and what the cache
did for its texts, and the checks are evaluated per batch. The step's output (the run's log, and
what `seams run` sums for its summary) keeps the run's cache totals under the same names; every
batch's materialization overrides each of them with that batch's share.
"""

from collections import Counter
from collections.abc import Iterator, Sequence

import dagster as dg
import numpy as np
import pandas as pd

from seams.assets import checks
from seams.assets.checks import check_result
from seams.assets.display import (
    cache_numbers,
    cache_numbers_by_batch,
    describe_batches,
)
from seams.assets.frames import (
    by_batch,
    by_document,
    candidates_from,
    carry,
    document_text,
    frame,
    per_candidate,
    run_batches,
)
from seams.assets.stages import ChunkingStages
from seams.chunking import ChunkingConfig, embedding_texts
from seams.chunking.chunker import Embedder
from seams.chunking.similarity import expected_rows
from seams.errors import ConfigError, EmbeddingError
from seams.resources.embedder import OnnxEmbedderResource
from seams.resources.keys import POSTGRES_KEY
from seams.resources.postgres import PostgresResource
from seams.resources.static_embedder import StaticEmbedderResource
from seams.storage.embedding_cache import CacheStats, EmbeddingCache

EMBEDDING_VERSION = "2"
CHECKS = {
    "one_row_per_candidate": "every candidate of every document has exactly one row",
    "finite_unit_vectors": "every embedding is finite with length 1 (NULL = lexical fallback)",
}


DESCRIPTION = (
    "Every candidate with its L2-normalised embedding (in text-window mode also the window "
    "ending at it), through the embedding cache."
)


def build_embeddings_asset(
    stages: ChunkingStages, model_resource: str | None = None
) -> dg.AssetsDefinition:
    """`candidate_embeddings` of the texts `stages.config` embeds, by the `embedder` resource
    (the packaged model), `static_embedder` when the config finds boundaries with the static
    model, or the resource named `model_resource` (a model folder of `embedder.model`)."""
    config = stages.config
    attributes = stages.arguments(
        "candidate_embeddings",
        EMBEDDING_VERSION,
        description=DESCRIPTION,
        kinds=("postgres", "onnx"),
        checks=CHECKS,
    )
    attributes["deps"] = ["embedding_model"]

    if model_resource is not None:
        if config.boundary_model == "static":
            raise ConfigError(
                "a model folder and boundary_model 'static' both claim the boundaries: drop one"
            )

        @dg.asset(**attributes, required_resource_keys={model_resource, POSTGRES_KEY})
        def candidate_embeddings(
            context: dg.AssetExecutionContext, sentence_candidates: pd.DataFrame
        ) -> Iterator[dg.Output | dg.AssetCheckEvaluation]:
            model = getattr(context.resources, model_resource)
            postgres = getattr(context.resources, POSTGRES_KEY)
            yield from _embed_candidates(context, model, postgres, sentence_candidates, config)

        return candidate_embeddings

    @dg.asset(**attributes)
    def candidate_embeddings(  # the packaged model, or the static one (`fast`)
        context: dg.AssetExecutionContext,
        seams_embedder: OnnxEmbedderResource,
        seams_static_embedder: StaticEmbedderResource,
        seams_postgres: PostgresResource,
        sentence_candidates: pd.DataFrame,
    ) -> Iterator[dg.Output | dg.AssetCheckEvaluation]:
        # Boundaries may come from the static model (the `fast` preset); retrieval stays on
        # its own resource.
        static = config.boundary_model == "static"
        model = seams_static_embedder if static else seams_embedder
        yield from _embed_candidates(context, model, seams_postgres, sentence_candidates, config)

    return candidate_embeddings


def _embed_candidates(
    context: dg.AssetExecutionContext,
    model: Embedder,
    postgres: PostgresResource,
    sentence_candidates: pd.DataFrame,
    config: ChunkingConfig,
) -> Iterator[dg.Output | dg.AssetCheckEvaluation]:
    """The step itself, whichever resource holds the model: embed, lay the vectors out per
    candidate, describe each batch, then check each batch."""
    counts, texts, text_batches = [], [], []
    for key, group in by_document(sentence_candidates):
        doc_texts = embedding_texts(document_text(group), candidates_from(group), config)
        counts.append(len(group))
        texts.extend(doc_texts)
        text_batches.extend([key[0]] * len(doc_texts))
    model_id, vectors, stats, sent = _embed_through_cache(context, model, postgres, texts)
    cache = _cache_by_batch(run_batches(context), text_batches, texts, sent, vectors is None)
    df = _embedding_frame(sentence_candidates, counts, model_id, vectors, config)
    model_used = {"model_id": model_id, "fallback": vectors is None}
    describe_batches(context, df, lambda part: model_used, also=cache)
    # The run's totals under the same names: every batch's materialization overrides them.
    yield dg.Output(df, metadata=cache_numbers(stats.texts, stats.hits, stats.embedded))
    batches = run_batches(context)
    pairs = zip(by_batch(sentence_candidates, batches), by_batch(df, batches), strict=True)
    results = ((batch, embedding_checks(cands, rows)) for (batch, cands), (_, rows) in pairs)
    yield from checks.evaluated_per_batch(context, results)


def _embed_through_cache(
    context: dg.AssetExecutionContext,
    model: Embedder,
    postgres: PostgresResource,
    texts: list[str],
) -> tuple[str, np.ndarray | None, CacheStats, set[str]]:
    """`texts`' vectors through the embedding cache, with the model's id and the texts the model
    was sent; a missing, corrupt or failing model gives no vectors (the lexical fallback)
    instead of failing the batch."""
    model_id, vectors, sent = "none", None, set[str]()

    def embed(pending: list[str]) -> np.ndarray:  # remembers what the model was sent
        sent.update(pending)
        return model.embed(pending)

    try:
        model_id = model.model_id  # a missing or corrupt model fails here: fall back too
        vectors, stats = EmbeddingCache(postgres).get_or_embed(model_id, texts, embed)
    except EmbeddingError as exc:
        context.log.warning(f"embedding failed, boundaries will use the lexical fallback: {exc}")
        stats = CacheStats(len(texts), 0, 0, 0)
    return model_id, vectors, stats, sent


def _embedding_frame(
    sentence_candidates: pd.DataFrame,
    counts: Sequence[int],
    model_id: str,
    vectors: np.ndarray | None,
    config: ChunkingConfig,
) -> pd.DataFrame:
    """The step's rows: each candidate carried on with its vector (and, in text-window mode, the
    window ending at it), documents in the order `counts` lists them."""
    forward, backward, offset = [], [], 0
    for n in counts:
        rows = expected_rows(n, config)
        doc_vectors = vectors[offset : offset + rows] if vectors is not None else None
        ahead, behind = per_candidate(doc_vectors, n, config)
        forward.extend(ahead)
        backward.extend(behind)
        offset += rows
    if not len(sentence_candidates):
        return frame("candidate_embeddings", [])
    return carry(
        sentence_candidates,
        "candidate_embeddings",
        model_id=[model_id] * len(forward),
        embedding=forward,
        window_before=backward,
    )


def _cache_by_batch(
    run: Sequence[str],
    text_batches: Sequence[str],
    texts: Sequence[str],
    sent: set[str],
    failed: bool,
) -> dict[str, dict[str, object]]:
    """Each batch's `cache_numbers`: what came from the cache and what the model embedded
    (`sent`); when the model failed, nothing did."""
    if failed:
        per_batch = Counter(text_batches)
        return {batch: cache_numbers(per_batch[batch], 0, 0) for batch in run}
    embedded = [text if text in sent else None for text in texts]
    return cache_numbers_by_batch(run, text_batches, embedded)


def embedding_checks(
    candidates: pd.DataFrame, embeddings: pd.DataFrame
) -> Iterator[dg.AssetCheckResult]:
    """The blocking checks of one batch's embeddings, each with the numbers it checked."""
    yield check_result(
        "one_row_per_candidate",
        checks.one_row_per_candidate(candidates, embeddings),
        checked={"candidates": len(candidates), "rows": len(embeddings)},
    )
    yield check_result(
        "finite_unit_vectors",
        checks.unit_vectors(embeddings),
        checked={"vectors": int(embeddings["embedding"].notna().sum()) if len(embeddings) else 0},
    )
