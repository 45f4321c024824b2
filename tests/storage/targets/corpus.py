"""Published states made at the storage level, as the pipeline's writes make them: a batch is
registered, its `chunks` written through `write_table` and its `chunk_index` through
`write_and_publish` (which publishes the build); a retired document leaves through
`publication.retire`. No model runs: a chunk's vector is a deterministic function of its id and
the model, so a chunk rewritten unchanged keeps its vector (and a target need not be sent it
again)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from seams.chunking.ids import assign_chunk_ids
from seams.resources.postgres import PostgresResource
from seams.storage import publication, schema, vector_indexes
from seams.storage.export_rows import ExportRequest, export_columns, stream_rows
from seams.storage.index_publication import write_and_publish
from seams.storage.partition_tables import write_table

Embed = Callable[[list[str]], np.ndarray]
"""A real model's `embed`: texts -> unit vectors."""
Documents = Mapping[str, Sequence[str]]
"""document_id -> its chunk texts, in order."""


def vector_of(chunk_id: str, model_id: str, dimension: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(f"{model_id}|{chunk_id}".encode()).digest()[:8], "big")
    vector = np.random.default_rng(seed).normal(size=dimension)
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def chunk_frame(batch: str, documents: Documents) -> pd.DataFrame:
    rows = []
    for document_id, texts in documents.items():
        ids = assign_chunk_ids(document_id, texts)
        start = 0
        for index, (chunk_id, text) in enumerate(zip(ids, texts, strict=True)):
            rows.append({
                "batch_key": batch, "chunk_id": chunk_id, "document_id": document_id,
                "chunk_index": index, "total_chunks": len(texts), "text": text,
                "start_char": start, "end_char": start + len(text), "overlap_start": start,
                "overlap_end": start, "token_count": len(text.split()), "sentence_count": 1,
                "page_start": None if index % 3 else index + 1,
                "page_end": None if index % 3 else index + 1,
                "section": "Intro" if index == 0 else "", "cohesion": None,
                "boundary_method": "semantic", "strategy": "context_aware", "metadata": {},
                "run_id": "r", "config_hash": f"cfg-{batch}", "model_id": "boundary-model",
                "source_sha256": _version(batch, document_id), "code_version": "v",
            })  # fmt: skip
            start += len(text) + 1
    columns = ["batch_key", *(c.name for c in schema.CHUNKS.data_columns)]
    return pd.DataFrame(rows, columns=columns)


def _version(batch: str, document_id: str) -> str:
    """The file version a batch registered (a backfill rewrites chunks, never the file)."""
    return hashlib.sha256(f"{batch}/{document_id}".encode()).hexdigest()


def register(
    postgres: PostgresResource, batch: str, documents: Documents, collection: str = "default"
) -> None:
    with postgres.connection() as conn, conn.transaction():
        conn.execute(
            "INSERT INTO seams.batches (batch_key, source, document_count, collection)"
            " VALUES (%s, 't', %s, %s)",
            (batch, len(documents), collection),
        )
        for document_id, _texts in documents.items():
            uri = f"file:///docs/{document_id}.txt"
            conn.execute(
                "INSERT INTO seams.batch_documents (batch_key, document_id, source_uri,"
                " source_sha256, size_bytes, collection) VALUES (%s, %s, %s, %s, 0, %s)",
                (batch, document_id, uri, _version(batch, document_id), collection),
            )


def write_index(
    postgres: PostgresResource,
    batch: str,
    chunks: pd.DataFrame,
    model_id: str,
    dimension: int,
    embed: Embed | None = None,
):
    """The batch's `chunk_index` of `model_id` (its write publishes, or holds for a switch);
    with `embed`, the vectors of the chunk texts by a real model."""
    with postgres.connection() as conn:
        vector_indexes.ensure_model_index(conn, model_id, dimension)
    vectors = (
        list(embed(list(chunks["text"])))
        if embed is not None
        else [vector_of(cid, model_id, dimension) for cid in chunks["chunk_id"]]
    )
    rows = [
        {
            "batch_key": batch,
            "chunk_id": r.chunk_id,
            "document_id": r.document_id,
            "mode": "pooled",
            "model_id": model_id,
            "embedding": vector,
            "text_search_config": "english",
        }
        for r, vector in zip(chunks.itertuples(index=False), vectors, strict=True)
    ]
    frame = pd.DataFrame(
        rows, columns=["batch_key", *(c.name for c in schema.CHUNK_INDEX.data_columns)]
    )
    return write_and_publish(postgres, frame, [batch], run_id="r")


def publish_batch(
    postgres: PostgresResource,
    batch: str,
    documents: Documents,
    model_id: str,
    dimension: int,
    collection: str = "default",
    embed: Embed | None = None,
) -> None:
    """Register `batch` with `documents` and publish its chunks and vectors."""
    register(postgres, batch, documents, collection)
    chunks = chunk_frame(batch, documents)
    write_table(postgres, schema.CHUNKS, chunks, [batch], run_id="r")
    written = write_index(postgres, batch, chunks, model_id, dimension, embed)
    assert batch in written.published, written.held


def rebuild(
    postgres: PostgresResource,
    batch: str,
    documents: Documents,
    model_id: str,
    dimension: int,
):
    """A new build of `batch` (a backfill: other chunk texts, or another model)."""
    chunks = chunk_frame(batch, documents)
    write_table(postgres, schema.CHUNKS, chunks, [batch], run_id="backfill")
    return write_index(postgres, batch, chunks, model_id, dimension)


def retire(postgres: PostgresResource, document_ids: Sequence[str]) -> None:
    with postgres.connection() as conn, conn.transaction():
        publication.retire(conn, document_ids)


def current_records(postgres: PostgresResource) -> dict[str, tuple[str, str, np.ndarray]]:
    """chunk id -> (text, model, vector) of the published current chunks with the serving
    model's vectors, read as `seams export --current --vectors` reads them."""
    request = ExportRequest(out=Path("unused"), format="jsonl", current=True, vectors=True)
    names = [c.name for c in export_columns(vectors=True)]
    with postgres.connection() as conn:
        serving = publication.serving_model(conn)
        found = {}
        for rows in stream_rows(conn, request):
            for row in rows:
                values = dict(zip(names, row, strict=True))
                if values["vector_model_id"] == serving:
                    vector = values["embedding"]
                    found[values["chunk_id"]] = (values["text"], serving, np.asarray(vector))
    return found
