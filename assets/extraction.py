"""`extracted_text`: one row per document of the batch, read from the frozen manifest.

The bytes come from the database (stored when the batch was registered), never from the inbox,
so a rerun sees exactly the first run's input and no run needs the inbox mounted.
"""

import dagster as dg
import pandas as pd

from assets.frames import frame
from assets.partitions import BATCH_ASSET_DEFAULTS
from assets.versions import code_version
from resources.batches import batch_manifest, source_bytes
from resources.extraction import extract_document
from resources.postgres import PostgresResource

EXTRACTION_VERSION = "1"


@dg.asset(
    **BATCH_ASSET_DEFAULTS,
    code_version=code_version(EXTRACTION_VERSION),
    description="The text of every document in the batch (or a per-document error).",
)
def extracted_text(context: dg.AssetExecutionContext, postgres: PostgresResource) -> pd.DataFrame:
    rows = []
    with postgres.connection() as conn:
        for batch_key in context.partition_keys:
            for entry in batch_manifest(conn, batch_key):
                doc = extract_document(source_bytes(conn, entry.source_sha256), entry.source_uri)
                for problem in [doc.error, *doc.warnings] if doc.error else doc.warnings:
                    context.log.warning(f"{entry.source_uri}: {problem}")
                rows.append(
                    {
                        "batch_key": batch_key,
                        "document_id": entry.document_id,
                        "source_uri": entry.source_uri,
                        "source_sha256": entry.source_sha256,
                        "mime": doc.mime,
                        "title": doc.title,
                        "text": doc.text,
                        "page_spans": doc.page_spans,
                        "char_count": len(doc.text),
                        "error": doc.error,
                        "warnings": list(doc.warnings) or None,
                    }
                )
    df = frame("extracted_text", rows)
    failed = int(df["error"].notna().sum()) if len(df) else 0
    context.add_output_metadata(
        {
            "documents": len(df),
            "failed_documents": failed,
            "characters": int(df["char_count"].sum()),
        }
    )
    return df
