"""`semantic_boundaries`: one row per gap between candidates, with its verdict (stage 3)."""

import dagster as dg
import pandas as pd

from assets.frames import boundary_rows, by_document, candidates_from, embedding_matrix, frame
from assets.partitions import BATCH_ASSET_DEFAULTS
from assets.versions import BOUNDARY_PARTS, CONFIG, code_version
from chunking import detect_boundaries, gap_similarities, jaccard_similarities

BOUNDARY_VERSION = "1"


@dg.asset(
    **BATCH_ASSET_DEFAULTS,
    code_version=code_version(BOUNDARY_VERSION, *BOUNDARY_PARTS),
    description="Similarity across every gap between candidates, the threshold it was held to, "
    "and whether it is a boundary (semantic, structural, or lexical fallback).",
)
def semantic_boundaries(
    context: dg.AssetExecutionContext,
    extracted_text: pd.DataFrame,
    sentence_candidates: pd.DataFrame,
    candidate_embeddings: pd.DataFrame,
) -> pd.DataFrame:
    texts = {(d.batch_key, d.document_id): d.text for d in extracted_text.itertuples(index=False)}
    vectors_by_doc = dict(by_document(candidate_embeddings))
    rows, fallback_docs = [], 0
    for key, group in by_document(sentence_candidates):
        candidates = candidates_from(group)
        embedded = vectors_by_doc.get(key)
        vectors = embedding_matrix(embedded) if embedded is not None else None
        if vectors is not None:
            method = "semantic"
            similarities = gap_similarities(vectors, len(candidates), CONFIG)
        else:
            method, fallback_docs = "jaccard", fallback_docs + 1
            similarities = jaccard_similarities(texts[key], candidates, CONFIG)
        found = detect_boundaries(similarities, candidates, CONFIG, method=method)
        rows.extend(boundary_rows(key[0], key[1], found, method))
    df = frame("semantic_boundaries", rows)
    cuts = df[df["is_boundary"]] if len(df) else df
    context.add_output_metadata(
        {
            "gaps": len(df),
            "boundaries": len(cuts),
            "reasons": dg.MetadataValue.json(cuts["reason"].value_counts().to_dict()),
            "fallback_documents": fallback_docs,
            "config_fingerprint": CONFIG.fingerprint("boundaries")[:12],
        }
    )
    return df
