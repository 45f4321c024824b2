"""`sentence_candidates`: sentences and structural units with exact offsets (stage 1)."""

import dagster as dg
import pandas as pd

from assets.frames import candidate_rows, extracted, frame
from assets.partitions import BATCH_ASSET_DEFAULTS
from assets.versions import CONFIG, SEGMENTATION_PARTS, code_version
from chunking import segment
from chunking.pages import PageIndex
from resources.embedder import OnnxEmbedder

SEGMENTATION_VERSION = "1"


@dg.asset(
    **BATCH_ASSET_DEFAULTS,
    code_version=code_version(SEGMENTATION_VERSION, *SEGMENTATION_PARTS),
    description="Sentences, headings, list items, tables and code blocks of every document, "
    "with exact character offsets and token counts (the embedding model's tokenizer).",
)
def sentence_candidates(
    context: dg.AssetExecutionContext, embedder: OnnxEmbedder, extracted_text: pd.DataFrame
) -> pd.DataFrame:
    rows = []
    for doc in extracted_text.itertuples(index=False):
        if not extracted(doc):
            continue
        candidates = segment(doc.text, CONFIG, embedder.token_count)
        page_of = PageIndex(doc.page_spans).page_at if doc.page_spans else None
        rows.extend(candidate_rows(doc.batch_key, doc.document_id, candidates, page_of))
    df = frame("sentence_candidates", rows)
    context.add_output_metadata(
        {
            "candidates": len(df),
            "documents": int(df["document_id"].nunique()) if len(df) else 0,
            "kinds": dg.MetadataValue.json(df["kind"].value_counts().to_dict() if len(df) else {}),
        }
    )
    return df
