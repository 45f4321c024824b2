"""Conversions between the chunking engine's records and the asset tables' DataFrames.

One home for the column mapping, so an asset body reads as "load, call `chunking`, return".
Every per-batch frame carries `batch_key`: a run may cover several partitions (a single-run
backfill), and the IO manager writes each partition's rows in its own transaction.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from chunking import Boundary, Candidate, Chunk
from resources.schema import ASSET_TABLES, BATCH_KEY

CANDIDATE_FIELDS = (
    "start_char", "end_char", "kind", "section", "token_count",
    "paragraph", "split", "header_start", "header_end",
)  # fmt: skip


def _columns(asset: str) -> list[str]:
    names = ASSET_TABLES[asset].column_names
    return names if BATCH_KEY in names else [BATCH_KEY, *names]


def frame(asset: str, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows in the declared column order (the IO manager checks names and types)."""
    return pd.DataFrame(rows, columns=_columns(asset))


def extracted(row: Any) -> bool:
    """Whether an `extracted_text` row holds text (its `error` is NULL, loaded as NaN/None)."""
    return not isinstance(row.error, str)


def by_document(df: pd.DataFrame) -> Iterator[tuple[tuple[str, str], pd.DataFrame]]:
    """Groups of one document of one batch, in a stable order."""
    if df.empty:
        return iter(())
    return iter(df.groupby([BATCH_KEY, "document_id"], sort=True))


def candidate_rows(batch_key: str, document_id: str, candidates: Sequence[Candidate],
                   page_of: Any = None) -> list[dict[str, Any]]:  # fmt: skip
    rows = []
    for c in candidates:
        row = {BATCH_KEY: batch_key, "document_id": document_id, "candidate_index": c.index}
        row.update({f: getattr(c, f) for f in CANDIDATE_FIELDS})
        row["page"] = page_of(c.start_char) if page_of else None
        rows.append(row)
    return rows


def candidates_from(group: pd.DataFrame) -> list[Candidate]:
    group = group.sort_values("candidate_index")
    out = []
    for row in group.itertuples(index=False):
        out.append(
            Candidate(
                index=int(row.candidate_index),
                start_char=int(row.start_char),
                end_char=int(row.end_char),
                kind=str(row.kind),
                section=str(row.section),
                token_count=int(row.token_count),
                paragraph=int(row.paragraph),
                split=bool(row.split),
                header_start=None if pd.isna(row.header_start) else int(row.header_start),
                header_end=None if pd.isna(row.header_end) else int(row.header_end),
            )
        )
    return out


def boundary_rows(batch_key: str, document_id: str, boundaries: Sequence[Boundary],
                  method: str) -> list[dict[str, Any]]:  # fmt: skip
    return [
        {
            BATCH_KEY: batch_key,
            "document_id": document_id,
            "candidate_index": b.index,
            "similarity": b.similarity,
            "threshold": b.threshold,
            "is_boundary": b.is_boundary,
            "reason": b.reason or "",
            "method": method,
        }
        for b in boundaries
    ]


def boundaries_from(group: pd.DataFrame) -> list[Boundary]:
    group = group.sort_values("candidate_index")
    return [
        Boundary(
            index=int(r.candidate_index),
            similarity=float(r.similarity),
            threshold=float(r.threshold),
            is_boundary=bool(r.is_boundary),
            reason=r.reason or None,
        )
        for r in group.itertuples(index=False)
    ]


def embedding_matrix(group: pd.DataFrame) -> np.ndarray | None:
    """The document's embeddings in row order, or None when the model gave none (fallback)."""
    group = group.sort_values("candidate_index")
    values = list(group["embedding"])
    if not values or any(v is None for v in values):
        return None
    return np.vstack([np.asarray(v, dtype=np.float32) for v in values])


def chunk_rows(batch_key: str, chunks: Sequence[Chunk], lineage: dict[str, str]) -> list[dict]:
    rows = []
    for c in chunks:
        row = {BATCH_KEY: batch_key}
        row.update({name: getattr(c, name) for name in CHUNK_FIELDS})
        row.update(lineage)
        rows.append(row)
    return rows


CHUNK_FIELDS = (
    "chunk_id", "document_id", "chunk_index", "total_chunks", "text", "start_char", "end_char",
    "overlap_start", "overlap_end", "token_count", "sentence_count", "page_start", "page_end",
    "section", "cohesion", "boundary_method", "strategy", "metadata",
)  # fmt: skip
