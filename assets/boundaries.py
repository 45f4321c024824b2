"""`semantic_boundaries`: every candidate with the verdict on the gap before it (stage 3).

Rows carry the candidate, its vector and its text on (see `sentence_candidates`), so `chunks`
reads only this table. Candidate 0 of a document always starts a chunk (`document_start`), so
`reason` speaks the same words as the chunks' `boundary_reason`.
"""

import dagster as dg
import pandas as pd

from seams.assets.display import describe_batches, start_reasons
from seams.assets.frames import (
    by_document,
    candidates_from,
    carry,
    document_text,
    frame,
    stored_candidate_vectors,
    stored_text_vectors,
    verdicts,
)
from seams.assets.stages import ChunkingStages
from seams.chunking import detect_boundaries, gap_similarities, jaccard_similarities

BOUNDARY_VERSION = "2"
VERDICT_COLUMNS = ("similarity", "threshold", "is_boundary", "reason", "method")


def build_boundaries_asset(stages: ChunkingStages) -> dg.AssetsDefinition:
    """`semantic_boundaries`, cutting with `stages.config`."""
    config = stages.config

    @dg.asset(**stages.arguments("semantic_boundaries", BOUNDARY_VERSION))
    def semantic_boundaries(
        context: dg.AssetExecutionContext, candidate_embeddings: pd.DataFrame
    ) -> pd.DataFrame:
        """Every candidate with the gap before it: its similarity, the threshold rule's
        threshold, and whether (and why) a chunk starts there: document_start, structural,
        semantic, size, or fallback (lexical similarity)."""
        columns: dict[str, list] = {name: [] for name in VERDICT_COLUMNS}
        for _key, group in by_document(candidate_embeddings):
            candidates = candidates_from(group)
            vectors = stored_text_vectors(group, config)
            if vectors is not None:
                method = "semantic"
                similarities = gap_similarities(vectors, len(candidates), config)
            else:
                method = "jaccard"
                similarities = jaccard_similarities(document_text(group), candidates, config)
            found = detect_boundaries(
                similarities,
                candidates,
                config,
                method=method,
                vectors=stored_candidate_vectors(group),
            )
            for name, values in verdicts(found, len(candidates)).items():
                columns[name].extend(values)
            columns["method"].extend([method] * len(candidates))
        if len(candidate_embeddings):
            df = carry(candidate_embeddings, "semantic_boundaries", **columns)
        else:
            df = frame("semantic_boundaries", [])
        fingerprint = config.fingerprint("boundaries")[:12]
        describe_batches(context, df, lambda part: boundary_metadata(part, fingerprint))
        return df

    return semantic_boundaries


def boundary_metadata(df: pd.DataFrame, config_fingerprint: str) -> dict[str, object]:
    """Gaps judged, chunk starts by reason, documents cut on lexical similarity (the fallback)
    and the boundary settings' fingerprint, of one batch's rows (see `describe_batches`)."""
    cuts = df[df["is_boundary"]] if len(df) else df
    documents = int(df["document_id"].nunique()) if len(df) else 0
    fallback = df.loc[df["method"] == "jaccard", "document_id"].nunique() if len(df) else 0
    return {
        "gaps": len(df) - documents,
        "chunk_starts": len(cuts),
        "reasons": dg.MetadataValue.json(start_reasons(cuts["reason"])),
        "fallback_documents": int(fallback),
        "config_fingerprint": config_fingerprint,
    }
