"""`extracted_text`: one row per document of the batch, read from the frozen manifest.

The bytes come from where the batch froze them, never from a local inbox: a file's from the
database (stored when the batch was registered), an object's from its store, the very version
the manifest recorded (`seams.storage.sources.DocumentReader`). So a rerun sees exactly the
first run's input, or fails with one line naming the object, and no run needs the inbox mounted.
"""

import dagster as dg
import pandas as pd

from seams.assets.display import asset_attributes, cut_words, describe_batches, file_name
from seams.assets.frames import frame
from seams.assets.partitions import DEFAULT_LINEAGE, Lineage
from seams.assets.versions import code_version
from seams.extraction import extract_document
from seams.extraction.document import failed
from seams.extraction.limits import ExtractionLimits
from seams.resources.postgres import PostgresResource
from seams.storage import quarantine
from seams.storage.batches import batch_manifest
from seams.storage.object_store import ObjectChanged, ObjectGone
from seams.storage.sources import DocumentReader

# 2: NUL bytes stripped, mostly-UTF-8 kept as UTF-8, deep HTML flattened, per-document limits.
EXTRACTION_VERSION = "2"
MAX_LISTED_DOCUMENTS = 200
"""The `documents` table lists every failed file, then the others up to this many rows."""


def build_extraction_asset(
    limits: ExtractionLimits,
    lineage: Lineage = DEFAULT_LINEAGE,
    endpoint_url: str | None = None,
) -> dg.AssetsDefinition:
    """`extracted_text` of `lineage`'s batches under per-document `limits` (non-default limits
    join its code version), reading objects from the S3 store at `endpoint_url` (None: the
    environment's). Where the bytes come from changes no code version: they are checked
    against the manifest's sha256."""

    @dg.asset(
        **lineage.asset_defaults(),
        **asset_attributes("extracted_text", stage="extract"),
        code_version=code_version(EXTRACTION_VERSION, *limits.changed()),
        description="The text of every document in the batch (or a per-document error).",
    )
    def extracted_text(
        context: dg.AssetExecutionContext, seams_postgres: PostgresResource
    ) -> pd.DataFrame:
        return extract_batch(context, seams_postgres, limits, endpoint_url)

    return extracted_text


def extract_batch(
    context: dg.AssetExecutionContext,
    postgres: PostgresResource,
    limits: ExtractionLimits,
    endpoint_url: str | None = None,
) -> pd.DataFrame:
    """One row per document of the run's batches, each extracted under `limits`; a document
    whose extraction killed an earlier run is quarantined (see `seams.storage.quarantine`)."""
    rows = []
    run_id = context.run.run_id
    retry = context.run.tags.get(quarantine.QUARANTINE_RETRY_TAG) == "true"
    with postgres.connection() as conn:
        reader = DocumentReader(conn, endpoint_url=endpoint_url, max_bytes=limits.file_bytes_max)
        poison = {}
        if not retry:
            poison = quarantine.left_behind(
                conn, context.partition_keys, run_id, lambda run: _ended(context.instance, run)
            )
        for batch_key in context.partition_keys:
            for entry in batch_manifest(conn, batch_key):
                died_in = poison.get((batch_key, entry.document_id))
                if died_in is not None:
                    error = quarantine.quarantine_error(file_name(entry.source_uri), died_in)
                    doc = failed("application/octet-stream", error)
                else:
                    try:
                        content = reader.read(batch_key, entry)
                    except (ObjectChanged, ObjectGone) as exc:  # no retry brings it back
                        raise dg.Failure(description=str(exc), allow_retries=False) from None
                    quarantine.begin(
                        conn, batch_key, entry.document_id, entry.source_sha256, run_id
                    )
                    try:  # an exception ends the attempt; only a dead process leaves it behind
                        doc = extract_document(content, entry.source_uri, limits)
                    finally:
                        quarantine.end(conn, batch_key, entry.document_id)
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
    describe_batches(context, df, extraction_metadata)  # each batch's page: its own documents
    return df


def _ended(instance: dg.DagsterInstance, run_id: str) -> bool:
    """A run that is over (or gone from the instance) is not reading anything any more."""
    run = instance.get_run_by_id(run_id)
    return run is None or run.is_finished


def extraction_metadata(df: pd.DataFrame) -> dict[str, object]:
    """Counts, and a `documents` table naming every failed file with its error (of one batch's
    rows: see `describe_batches`)."""
    failed = df[df["error"].notna()] if len(df) else df
    return {
        "document_count": len(df),
        "failed_documents": len(failed),
        "extracted_documents": len(df) - len(failed),
        "characters": int(df["char_count"].sum()) if len(df) else 0,
        "documents": documents_table(df),
    }


def documents_table(df: pd.DataFrame) -> dg.MetadataValue:
    """One row per document (failed ones first, all of them): file, status, size, error."""
    if len(df):
        # False sorts first: failed files lead, each group by file URI.
        ordered = df.assign(_ok=df["error"].isna()).sort_values(["_ok", "source_uri"])
        limit = max(MAX_LISTED_DOCUMENTS, int((~ordered["_ok"]).sum()))
        ordered = ordered.head(limit)
    else:
        ordered = df
    records = [
        dg.TableRecord(
            {
                "file": file_name(row.source_uri),
                "status": "failed" if isinstance(row.error, str) else "extracted",
                "characters": int(row.char_count),
                "error": cut_words(row.error, 300) if isinstance(row.error, str) else "",
                "warnings": len(row.warnings) if isinstance(row.warnings, list) else 0,
            }
        )
        for row in ordered.itertuples(index=False)
    ]
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn("file", "text", description="basename of the source URI"),
            dg.TableColumn("status", "text", description="extracted or failed"),
            dg.TableColumn("characters", "int", description="characters of extracted text"),
            dg.TableColumn("error", "text", description="why extraction failed"),
            dg.TableColumn("warnings", "int", description="non-fatal problems (see the log)"),
        ]
    )
    return dg.MetadataValue.table(records=records, schema=schema)
