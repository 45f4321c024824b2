"""`candidate_embeddings`: every candidate with its unit vector (stage 2).

Texts go through the embedding cache first, so a rerun or a backfill after a non-embedding
config change calls the model for nothing. When the model fails, the batch's rows carry no
vector (NULL) and the boundary step falls back to lexical similarity, recorded per chunk.
Each row carries its candidate on (see `sentence_candidates`), so the boundary step reads only
this table.
"""

from collections.abc import Iterator

import dagster as dg
import pandas as pd

from seams.assets import checks
from seams.assets.checks import check_result
from seams.assets.display import asset_attributes
from seams.assets.frames import (
    by_document,
    candidates_from,
    carry,
    document_text,
    frame,
    per_candidate,
)
from seams.assets.partitions import BATCH_ASSET_DEFAULTS
from seams.assets.versions import StageParts, code_version
from seams.chunking import ChunkingConfig, embedding_texts
from seams.chunking.similarity import expected_rows
from seams.errors import EmbeddingError
from seams.resources.embedder import OnnxEmbedder
from seams.resources.postgres import PostgresResource
from seams.resources.static_embedder import StaticEmbedder
from seams.storage.embedding_cache import CacheStats, EmbeddingCache

EMBEDDING_VERSION = "2"
CHECKS = {
    "one_row_per_candidate": "every candidate of every document has exactly one row",
    "finite_unit_vectors": "every embedding is finite with length 1 (NULL = lexical fallback)",
}


def build_embeddings_asset(
    config: ChunkingConfig,
    parts: StageParts,
    automation_condition: dg.AutomationCondition | None = None,
) -> dg.AssetsDefinition:
    """`candidate_embeddings` of the texts `config` embeds (its code version folds in `parts`)."""

    @dg.asset(
        **BATCH_ASSET_DEFAULTS,
        **asset_attributes("candidate_embeddings", stage="embed", kinds=("postgres", "onnx")),
        deps=["embedding_model"],
        code_version=code_version(EMBEDDING_VERSION, *parts.embedding),
        automation_condition=automation_condition,
        check_specs=[
            dg.AssetCheckSpec(name, asset="candidate_embeddings", blocking=True, description=text)
            for name, text in CHECKS.items()
        ],
        description="Every candidate with its L2-normalised embedding (in text-window mode also "
        "the window ending at it), through the embedding cache.",
    )
    def candidate_embeddings(
        context: dg.AssetExecutionContext,
        embedder: OnnxEmbedder,
        static_embedder: StaticEmbedder,
        postgres: PostgresResource,
        sentence_candidates: pd.DataFrame,
    ) -> Iterator[dg.Output | dg.AssetCheckResult]:
        counts, texts = [], []
        for _key, group in by_document(sentence_candidates):
            doc_texts = embedding_texts(document_text(group), candidates_from(group), config)
            counts.append(len(group))
            texts.extend(doc_texts)
        # Boundaries may come from the static model (the `fast` preset); retrieval stays on
        # `embedder`.
        model = static_embedder if config.boundary_model == "static" else embedder
        model_id, vectors = "none", None
        try:
            model_id = model.model_id  # a missing or corrupt model fails here: fall back too
            vectors, stats = EmbeddingCache(postgres).get_or_embed(model_id, texts, model.embed)
        except EmbeddingError as exc:
            context.log.warning(
                f"embedding failed, boundaries will use the lexical fallback: {exc}"
            )
            stats = CacheStats(len(texts), 0, 0, 0)
        forward, backward, offset = [], [], 0
        for n in counts:
            rows = expected_rows(n, config)
            doc_vectors = vectors[offset : offset + rows] if vectors is not None else None
            ahead, behind = per_candidate(doc_vectors, n, config)
            forward.extend(ahead)
            backward.extend(behind)
            offset += rows
        df = carry(
            sentence_candidates,
            "candidate_embeddings",
            model_id=[model_id] * len(forward),
            embedding=forward,
            window_before=backward,
        ) if len(sentence_candidates) else frame("candidate_embeddings", [])  # fmt: skip
        yield dg.Output(
            df,
            metadata={
                "texts": stats.texts,
                "cache_hits": stats.hits,
                "texts_embedded": stats.embedded,
                "cache_hit_rate": round(stats.hit_rate, 4),
                "model_id": model_id,
                "fallback": vectors is None,
            },
        )
        yield check_result(
            "one_row_per_candidate",
            checks.one_row_per_candidate(sentence_candidates, df),
            checked={"candidates": len(sentence_candidates), "rows": len(df)},
        )
        yield check_result(
            "finite_unit_vectors",
            checks.unit_vectors(df),
            checked={"vectors": int(df["embedding"].notna().sum()) if len(df) else 0},
        )

    return candidate_embeddings
