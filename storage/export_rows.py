"""The rows of `seams export`: which columns an export has and the query that streams them.

One row per published chunk with every column of `seams.chunks` (provenance included: run_id,
config_hash, model_id, source_sha256, code_version; and its `collection`, so an export of
several collections tells their chunks apart) plus the document's `source_uri`; with
`vectors`, also the chunk's `chunk_index` entry (`vector_model_id`, `vector_mode`, `embedding`).
The schema is `export_columns()`, derived from the declared tables, and documented in
docs/library.md.

Memory stays bounded whatever the table size: rows come through a server-side cursor
(`DECLARE ... CURSOR`) `batch_rows` at a time inside one read-only REPEATABLE READ transaction
(a consistent snapshot). Writing them to a file is `seams.storage.export_files`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from seams.errors import ConfigError, InputError
from seams.storage import schema
from seams.storage.export_formats import DEFAULT_BATCH_ROWS, FORMATS, ExportFormat

_CURSOR_NAME = "seams_export"


@dataclass(frozen=True)
class ExportColumn:
    """One exported column: its name, PostgreSQL type, whether it may be null, what it holds."""

    name: str
    pg_type: str
    nullable: bool
    description: str = ""

    @property
    def base_type(self) -> str:
        return self.pg_type.split("(", 1)[0].strip()


@dataclass(frozen=True)
class ExportRequest:
    """What to export: every batch or one (`batch_key`), every collection or one
    (`collection`), all versions or only the current ones (`seams.current_chunks`), with or
    without vectors, in batches of `batch_rows` rows. The file (and any folder made for it) is
    written as `umask` allows (None: this process's umask), as any other tool's output is."""

    out: Path
    format: ExportFormat
    batch_key: str | None = None
    collection: str | None = None
    current: bool = False
    vectors: bool = False
    batch_rows: int = DEFAULT_BATCH_ROWS
    umask: int | None = None

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ConfigError(f"format: {self.format!r} is not one of {', '.join(FORMATS)}")
        if not isinstance(self.batch_rows, int) or self.batch_rows < 1:
            raise ConfigError(f"batch_rows: must be a positive integer, got {self.batch_rows!r}")
        if self.batch_key is not None and not self.batch_key:
            raise ConfigError("batch_key: give a batch key, or None for every batch")
        if self.collection is not None and not self.collection:
            raise ConfigError("collection: give a collection name, or None for every one")


# --- the schema ------------------------------------------------------------------------------

_DESCRIPTIONS = {
    "batch_key": "the batch (Dagster partition) that produced the chunk",
    "chunk_id": "sha256 of document_id and the normalised text (unique within a document)",
    "document_id": "stable id of the source document (derived from its URI)",
    "chunk_index": "position of the chunk in its document, from 0",
    "total_chunks": "number of chunks of the document version",
    "text": "the chunk's text, exactly source[start_char:end_char]",
    "start_char": "offset of the chunk's first character in the extracted text",
    "end_char": "offset one past its last character",
    "overlap_start": "start of the prefix repeated from the previous chunk (= start_char if none)",
    "overlap_end": "end of that prefix; overlap_end:end_char is the chunk's own text",
    "token_count": "tokens of the embedding model's tokenizer (metadata.token_counter names it)",
    "sentence_count": "sentences and structural units in the chunk",
    "page_start": "first page (PDF), else null",
    "page_end": "last page (PDF), else null",
    "section": 'heading path of the chunk\'s first unit, "A > B" ("" if none)',
    "cohesion": "mean pairwise cosine similarity of the chunk's sentences (null if < 2)",
    "boundary_method": '"semantic" or "jaccard" (lexical fallback without a model)',
    "strategy": 'chunking strategy, "context_aware"',
    "metadata": "JSON object: size_unit, size, token_counter, boundary_reason, flags",
    "run_id": "Dagster run that materialized the chunk",
    "config_hash": "fingerprint of the ChunkingConfig that shaped it",
    "model_id": "sha256 of the embedding model that found its boundaries",
    "source_sha256": "sha256 of the source file version",
    "code_version": "code version of the chunks asset",
    "source_uri": "where the source file was read from (from seams.batch_documents)",
    "generation": "the build of the batch that wrote the chunk (seams.batch_builds)",
    "collection": 'the collection of the chunk\'s batch ("default" without collections)',
    "vector_model_id": "model of the retrieval embedding (seams.chunk_index), null if none",
    "vector_mode": "how the retrieval embedding was made (seams.chunk_index.mode)",
    "embedding": "the retrieval embedding of `vector_model_id` (384 dimensions for the packaged "
    "model), L2-normalised float32",
}


def export_columns(vectors: bool = False) -> list[ExportColumn]:
    """The exported columns in file order: `seams.chunks`' declared columns, `source_uri`, and
    with `vectors` the `chunk_index` entry. Derived from `seams.storage.schema`, never restated."""
    columns = [
        ExportColumn(c.name, c.pg_type, c.nullable, _DESCRIPTIONS.get(c.name, ""))
        for c in schema.CHUNKS.columns
    ]
    columns.append(ExportColumn("source_uri", "text", True, _DESCRIPTIONS["source_uri"]))
    if vectors:
        embedding = schema.CHUNK_INDEX.column("embedding")
        columns += [
            ExportColumn("vector_model_id", "text", True, _DESCRIPTIONS["vector_model_id"]),
            ExportColumn("vector_mode", "text", True, _DESCRIPTIONS["vector_mode"]),
            ExportColumn("embedding", embedding.pg_type, True, _DESCRIPTIONS["embedding"]),
        ]
    return columns


# --- reading -------------------------------------------------------------------------------


def export_query(request: ExportRequest) -> tuple[sql.Composed, dict[str, Any]]:
    """The SELECT that yields the export rows in a stable order (batch, document, chunk), of
    one batch and one collection where the request names them.

    Only published rows: every version's chunks as its batch's published build holds them
    (`seams.published_chunks`; `current`: each document's current version only,
    `seams.current_chunks`); the rows of a build still being written, or of a batch never
    published, are never exported. A chunk's
    vectors are its published build's (`chunk_index` at the generation that build sees)."""
    selected = [sql.SQL("c.{}").format(sql.Identifier(c.name)) for c in schema.CHUNKS.columns]
    selected.append(sql.SQL("d.source_uri"))
    view = schema.CURRENT_CHUNKS_VIEW if request.current else schema.PUBLISHED_CHUNKS_VIEW
    # The batch's published build bounds the generation of its vectors, as of its chunks.
    source = sql.SQL(
        "{} AS c JOIN {} AS b ON b.batch_key = c.batch_key AND b.state = 'published'"
    ).format(sql.Identifier(schema.SCHEMA, view), schema.BATCH_BUILDS.identifier())
    joins = [
        sql.SQL(
            "LEFT JOIN {} AS d ON d.batch_key = c.batch_key AND d.document_id = c.document_id"
        ).format(schema.BATCH_DOCUMENTS.identifier())
    ]
    order = [sql.SQL("c.batch_key"), sql.SQL("c.document_id"), sql.SQL("c.chunk_index")]
    if request.vectors:
        selected += [sql.SQL("i.model_id"), sql.SQL("i.mode"), sql.SQL("i.embedding")]
        joins.append(
            sql.SQL(
                "LEFT JOIN {} AS i ON i.batch_key = c.batch_key AND i.generation <= b.generation"
                " AND i.document_id = c.document_id AND i.chunk_id = c.chunk_id"
            ).format(schema.CHUNK_INDEX.identifier())
        )
        order += [sql.SQL("i.model_id"), sql.SQL("i.mode")]
    filters = []
    if request.batch_key:
        filters.append(sql.SQL("c.batch_key = %(batch_key)s"))
    if request.collection is not None:
        filters.append(sql.SQL("c.collection = %(collection)s"))
    where = sql.SQL("WHERE ") + sql.SQL(" AND ").join(filters) if filters else sql.SQL("")
    query = sql.SQL("SELECT {} FROM {} {} {} ORDER BY {}").format(
        sql.SQL(", ").join(selected),
        source,
        sql.SQL(" ").join(joins),
        where,
        sql.SQL(", ").join(order),
    )
    return query, {"batch_key": request.batch_key, "collection": request.collection}


def stream_rows(
    conn: psycopg.Connection[Any], request: ExportRequest
) -> Iterator[list[tuple[Any, ...]]]:
    """Export rows, `request.batch_rows` at a time, from one consistent snapshot.

    A named (server-side) cursor keeps the result in PostgreSQL: only one batch is ever in this
    process. The transaction is read-only, so an export can never change the data.
    """
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        if request.batch_key is not None:
            _check_batch(conn, request.batch_key)
        query, params = export_query(request)
        with conn.cursor(name=_CURSOR_NAME) as cursor:
            cursor.itersize = request.batch_rows
            cursor.execute(query, params)
            while rows := cursor.fetchmany(request.batch_rows):
                yield rows


def _check_batch(conn: psycopg.Connection[Any], batch_key: str) -> None:
    query = sql.SQL("SELECT 1 FROM {} WHERE batch_key = %s").format(schema.BATCHES.identifier())
    if conn.execute(query, (batch_key,)).fetchone() is None:
        raise InputError(
            f"--batch: no batch {batch_key!r} in {schema.BATCHES.qualified_name}; list the keys "
            f"with SELECT batch_key FROM {schema.BATCHES.qualified_name}, or omit --batch"
        )
