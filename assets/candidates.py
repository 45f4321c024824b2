"""`sentence_candidates`: sentences and structural units with exact offsets (stage 1).

Each row carries what later steps need besides the candidate itself: the text pieces that
rebuild the document (`gap_before` + `text`), the file's URI and version, and its pages. So the
next step reads only this table, and the graph stays a straight line.
"""

import dagster as dg
import pandas as pd

from seams.assets.display import describe_batches
from seams.assets.frames import candidate_rows, extracted, frame
from seams.assets.stages import ChunkingStages
from seams.chunking import segment
from seams.chunking.pages import PageIndex
from seams.resources.embedder import OnnxEmbedderResource

SEGMENTATION_VERSION = "3"  # 3: English sentence rules read web text (lower-case starts, smileys)


def build_candidates_asset(stages: ChunkingStages) -> dg.AssetsDefinition:
    """`sentence_candidates`, segmenting with `stages.config`."""
    config = stages.config

    @dg.asset(**stages.arguments("sentence_candidates", SEGMENTATION_VERSION))
    def sentence_candidates(
        context: dg.AssetExecutionContext,
        seams_embedder: OnnxEmbedderResource,
        extracted_text: pd.DataFrame,
    ) -> pd.DataFrame:
        """Sentences, headings, list items, tables and code blocks of every document, with
        exact character offsets and token counts (the embedding model's tokenizer)."""
        rows = []
        for doc in extracted_text.itertuples(index=False):
            if not extracted(doc):
                continue
            candidates = segment(doc.text, config, seams_embedder.count_tokens)
            pages = PageIndex(doc.page_spans) if doc.page_spans else None
            rows.extend(candidate_rows(doc, candidates, pages))
        df = frame("sentence_candidates", rows)
        describe_batches(context, df, candidate_metadata)  # each batch's page: its own counts
        return df

    return sentence_candidates


def candidate_metadata(df: pd.DataFrame) -> dict[str, object]:
    """How many candidates of which kinds, in how many documents (of one batch's rows)."""
    kinds = df["kind"].value_counts().to_dict() if len(df) else {}
    return {
        "candidates": len(df),
        "documents_segmented": int(df["document_id"].nunique()) if len(df) else 0,
        "kinds": dg.MetadataValue.json({str(k): int(n) for k, n in kinds.items()}),
    }
