"""Conversions between the chunking engine's records and the asset tables' DataFrames.

One home for the column mapping, so an asset body reads as "load, call `chunking`, return".
Every per-batch frame carries `batch_key`: a run may cover several partitions (a single-run
backfill), and the IO manager writes each partition's rows in its own transaction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from seams.chunking import Boundary, Candidate, Chunk, candidate_vectors
from seams.storage.frame_codec import stack_vectors
from seams.storage.schema import ASSET_TABLES, BATCH_KEY

if TYPE_CHECKING:
    import dagster as dg

CANDIDATE_FIELDS = tuple(f.name for f in dataclasses.fields(Candidate) if f.name != "index")
"""The candidate columns of a row, in the record's order (its position is the row's own)."""


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


def run_batches(context: dg.AssetExecutionContext) -> list[str]:
    """The batches this step materializes: one, or every key of a backfill's partition range."""
    return sorted(context.partition_keys)


def by_batch(df: pd.DataFrame, batches: Iterable[str]) -> Iterator[tuple[str, pd.DataFrame]]:
    """`df`'s rows of each batch in `batches`, in order (an empty frame for a batch with none)."""
    groups = dict(iter(df.groupby(BATCH_KEY, sort=False))) if len(df) else {}
    for batch in batches:
        yield batch, groups.get(batch, df.iloc[0:0])


def candidate_rows(
    doc: Any, candidates: Sequence[Candidate], pages: Any = None
) -> list[dict[str, Any]]:
    """Rows of `sentence_candidates` for one `extracted_text` row: each candidate with the text
    pieces that rebuild the document (`gap_before` + `text`) and the file it comes from."""
    rows = []
    previous_end = 0
    for c in candidates:
        row = {BATCH_KEY: doc.batch_key, "document_id": doc.document_id, "candidate_index": c.index}
        row.update({f: getattr(c, f) for f in CANDIDATE_FIELDS})
        row["page"] = pages.page_at(c.start_char) if pages else None
        row["last_page"] = pages.page_at(max(c.start_char, c.end_char - 1)) if pages else None
        row["gap_before"] = doc.text[previous_end : c.start_char]
        row["text"] = doc.text[c.start_char : c.end_char]
        row["source_uri"] = doc.source_uri
        row["source_sha256"] = doc.source_sha256
        rows.append(row)
        previous_end = c.end_char
    return rows


def document_text(group: pd.DataFrame) -> str:
    """The document's text up to its last candidate, rebuilt from one document's carried rows.

    Every offset a later step uses lies inside it (whitespace after the last candidate belongs
    to no chunk). Raises ValueError when the rows do not tile the text (a broken upstream).
    """
    group = group.sort_values("candidate_index")
    pieces: list[str] = []
    length = 0
    for row in group.itertuples(index=False):
        length += len(row.gap_before)
        if length != row.start_char or row.end_char - row.start_char != len(row.text):
            raise ValueError(
                f"{row.document_id}: candidate {row.candidate_index} does not continue the "
                "document's text; re-materialize sentence_candidates for this batch"
            )
        pieces += (row.gap_before, row.text)
        length += len(row.text)
    return "".join(pieces)


def carry(source: pd.DataFrame, asset: str, **columns: Sequence[Any]) -> pd.DataFrame:
    """`source`'s rows (sorted by batch, document, candidate) with `columns` added, as `asset`'s
    frame: how a per-candidate step passes the candidate on to the next one.

    `columns` values must be in that sorted order (the order `by_document` yields).
    """
    rows = sort_candidates(source).assign(**{name: list(v) for name, v in columns.items()})
    return rows.reindex(columns=_columns(asset))


def sort_candidates(df: pd.DataFrame) -> pd.DataFrame:
    """Rows in (batch, document, candidate) order, with a fresh index."""
    keys = [BATCH_KEY, "document_id", "candidate_index"]
    return df.sort_values(keys, kind="stable").reset_index(drop=True)


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


def verdicts(boundaries: Sequence[Boundary], n_candidates: int) -> dict[str, list[Any]]:
    """Per candidate, the verdict on the gap before it; candidate 0 opens the document."""
    similarity: list[Any] = [None] * n_candidates
    threshold: list[Any] = [None] * n_candidates
    cut = [False] * n_candidates
    reason = [""] * n_candidates
    if n_candidates:
        cut[0], reason[0] = True, "document_start"
    for b in boundaries:
        similarity[b.index], threshold[b.index] = b.similarity, b.threshold
        cut[b.index], reason[b.index] = b.is_boundary, b.reason or ""
    return {"similarity": similarity, "threshold": threshold, "is_boundary": cut, "reason": reason}


def boundaries_from(group: pd.DataFrame) -> list[Boundary]:
    """The gaps' verdicts of one document (candidate 0 has no gap before it)."""
    group = group.sort_values("candidate_index")
    group = group[group["candidate_index"] > 0]
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


def stored_candidate_vectors(group: pd.DataFrame) -> np.ndarray | None:
    """One document's stored `embedding` column, one row per candidate in candidate order (what
    `chunking.candidate_vectors` gave when it was embedded); None when the model gave none
    (fallback)."""
    group = group.sort_values("candidate_index")
    values = list(group["embedding"])
    if not values or any(v is None for v in values):
        return None
    return stack_vectors(values)


def chunk_rows(batch_key: str, chunks: Sequence[Chunk], provenance: dict[str, str]) -> list[dict]:
    rows = []
    for c in chunks:
        row = {BATCH_KEY: batch_key}
        row.update({name: getattr(c, name) for name in CHUNK_FIELDS})
        row.update(provenance)
        rows.append(row)
    return rows


CHUNK_FIELDS = (
    "chunk_id",
    "document_id",
    "chunk_index",
    "total_chunks",
    "text",
    "start_char",
    "end_char",
    "overlap_start",
    "overlap_end",
    "token_count",
    "sentence_count",
    "page_start",
    "page_end",
    "section",
    "cohesion",
    "boundary_method",
    "strategy",
    "metadata",
)


def stored_text_vectors(group: pd.DataFrame, config: Any) -> np.ndarray | None:
    """One document's vectors in `embedding_texts` order (what `gap_similarities` reads), rebuilt
    from its carried `candidate_embeddings` rows; None when the model gave none (fallback).

    Text windows: row j < n is the window ending at candidate j (`window_before`), row j >= n the
    forward window of candidate j - w + 1 (`embedding`), clipped at the document's start.
    """
    forward = stored_candidate_vectors(group)
    if forward is None or config.window_mode != "text":
        return forward
    backward = stack_vectors(group.sort_values("candidate_index")["window_before"])
    n, w = len(forward), config.window_size
    tail = [forward[max(0, j - w + 1)] for j in range(n, n + w - 1)]
    return np.vstack([backward, *tail]) if tail else backward


def per_candidate(vectors: np.ndarray | None, n: int, config: Any) -> tuple[list, list]:
    """The `embedding` and `window_before` columns of one document's `n` candidates, from the
    vectors of its `embedding_texts` (inverse of `stored_text_vectors`)."""
    if vectors is None:
        return [None] * n, [None] * n
    forward = candidate_vectors(vectors, n, config)
    backward = list(vectors[:n]) if config.window_mode == "text" else [None] * n
    return list(forward), backward
