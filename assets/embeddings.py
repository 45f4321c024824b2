"""`candidate_embeddings`: one unit vector per embedded text of each document (stage 2).

Texts go through the embedding cache first, so a rerun or a backfill after a non-embedding
config change calls the model for nothing. When the model fails, the batch's rows carry no
vector (NULL) and the boundary step falls back to lexical similarity, recorded per chunk.
"""

from collections.abc import Iterator

import dagster as dg
import pandas as pd

from assets import checks
from assets.checks import check_result
from assets.frames import by_document, candidates_from, frame
from assets.model import embedding_model
from assets.partitions import BATCH_ASSET_DEFAULTS
from assets.versions import CONFIG, EMBEDDING_PARTS, code_version
from chunking import embedding_texts
from chunking.errors import EmbeddingError
from resources.embedder import OnnxEmbedder
from resources.embedding_cache import CacheStats, EmbeddingCache
from resources.postgres import PostgresResource
from resources.static_embedder import StaticEmbedder

EMBEDDING_VERSION = "1"
CHECKS = {
    "one_row_per_text": "every document has one row per embedded text, indexed 0..n-1",
    "finite_unit_vectors": "every embedding is finite with length 1 (NULL = lexical fallback)",
}


@dg.asset(
    **BATCH_ASSET_DEFAULTS,
    deps=[embedding_model],
    code_version=code_version(EMBEDDING_VERSION, *EMBEDDING_PARTS),
    check_specs=[
        dg.AssetCheckSpec(name, asset="candidate_embeddings", blocking=True, description=text)
        for name, text in CHECKS.items()
    ],
    description="L2-normalised embeddings of every candidate (or window text), via the cache.",
)
def candidate_embeddings(
    context: dg.AssetExecutionContext,
    embedder: OnnxEmbedder,
    static_embedder: StaticEmbedder,
    postgres: PostgresResource,
    extracted_text: pd.DataFrame,
    sentence_candidates: pd.DataFrame,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    texts_by_doc = {
        (d.batch_key, d.document_id): d.text for d in extracted_text.itertuples(index=False)
    }
    keys, texts = [], []
    for (batch_key, document_id), group in by_document(sentence_candidates):
        doc_texts = embedding_texts(
            texts_by_doc[(batch_key, document_id)], candidates_from(group), CONFIG
        )
        keys.extend((batch_key, document_id, i) for i in range(len(doc_texts)))
        texts.extend(doc_texts)
    # Boundaries may come from the static model (the `fast` preset); retrieval stays on `embedder`.
    model = static_embedder if CONFIG.boundary_model == "static" else embedder
    model_id, fallback = "none", False
    try:
        model_id = model.model_id  # a missing or corrupt model fails here: fall back too
        vectors, stats = EmbeddingCache(postgres).get_or_embed(model_id, texts, model.embed)
        rows_vectors = list(vectors)
    except EmbeddingError as exc:
        context.log.warning(f"embedding failed, boundaries will use the lexical fallback: {exc}")
        fallback = True
        rows_vectors, stats = [None] * len(texts), CacheStats(len(texts), 0, 0, 0)
    rows = [
        {"batch_key": b, "document_id": d, "candidate_index": i, "model_id": model_id,
         "embedding": v}
        for (b, d, i), v in zip(keys, rows_vectors, strict=True)
    ]  # fmt: skip
    df = frame("candidate_embeddings", rows)
    yield dg.Output(
        df,
        metadata={
            "texts": stats.texts,
            "cache_hits": stats.hits,
            "texts_embedded": stats.embedded,
            "cache_hit_rate": round(stats.hit_rate, 4),
            "model_id": model_id,
            "fallback": fallback,
        },
    )
    yield check_result("one_row_per_text", checks.one_row_per_candidate(sentence_candidates, df))
    yield check_result("finite_unit_vectors", checks.unit_vectors(df))
