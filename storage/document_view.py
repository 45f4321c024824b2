"""One document as readers see it: its current chunks, in order, each with the boundary before
it (why a chunk starts there, and how similar the sentences on either side of the cut were).

What a person tuning chunking wants to look at (`seams serve`'s document page and
`GET /documents/{id}`): the published current version only (`seams.current_documents`, each
table at the generation that build sees), read in one published snapshot like every search
answer, through the caller's connection, so a tenant's row-level security applies.

The boundary of a chunk is the `semantic_boundaries` row of the candidate its own text starts
with (`overlap_end`: after any overlap taken from the previous chunk); a chunk that starts inside
a candidate (an oversized sentence split by size) has none, and its reason is the one the chunk
recorded (`metadata.boundary_reason`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

import psycopg
from psycopg import sql

from seams.storage import schema
from seams.storage.connections import ConnectionSource, connection_lost
from seams.storage.search.snapshot import published_snapshot

DOCUMENT = """
SELECT cur.document_id, cur.collection, cur.batch_key, cur.generation, cur.source_sha256,
       d.source_uri, e.title, e.mime, e.char_count, {text}
FROM {current} AS cur
JOIN {documents} AS d ON d.batch_key = cur.batch_key AND d.document_id = cur.document_id
JOIN {extracted} AS e ON e.batch_key = cur.batch_key AND e.document_id = cur.document_id
                     AND e.generation <= cur.generation
WHERE cur.document_id = %(document)s
"""

CHUNKS = """
SELECT c.chunk_index, c.chunk_id, c.start_char, c.end_char, c.overlap_start, c.overlap_end,
       c.token_count, c.sentence_count, c.page_start, c.page_end, c.section, c.cohesion,
       c.boundary_method, c.metadata ->> 'boundary_reason', c.text,
       b.reason, b.similarity, b.threshold, b.method
FROM {chunks} AS c
LEFT JOIN LATERAL (
    SELECT s.reason, s.similarity, s.threshold, s.method
    FROM {boundaries} AS s
    WHERE s.batch_key = c.batch_key AND s.document_id = c.document_id
      AND s.start_char = c.overlap_end
      AND s.generation = (
          SELECT max(g.generation) FROM {boundaries} AS g
          WHERE g.batch_key = c.batch_key AND g.document_id = c.document_id
            AND g.generation <= c.generation)
    ORDER BY s.candidate_index
    LIMIT 1
) AS b ON true
WHERE c.batch_key = %(batch)s AND c.document_id = %(document)s
  AND c.generation <= %(generation)s AND c.source_sha256 = %(sha)s
ORDER BY c.chunk_index
"""


@dataclass(frozen=True)
class ChunkView:
    """A current chunk and the boundary it starts at."""

    chunk_index: int
    chunk_id: str
    start_char: int
    end_char: int
    overlap_start: int
    overlap_end: int
    token_count: int
    sentence_count: int
    page_start: int | None
    page_end: int | None
    section: str
    cohesion: float | None
    reason: str
    """Why a chunk starts here: document_start, structural, semantic, size or fallback."""
    similarity: float | None
    """Similarity across the gap before the chunk's first candidate (None: no gap scored)."""
    threshold: float | None
    method: str
    """How the similarity was measured: semantic (embeddings) or jaccard (lexical fallback)."""
    text: str


@dataclass(frozen=True)
class DocumentView:
    """A document's current version and its chunks, as one published snapshot has them."""

    document_id: str
    collection: str
    batch_key: str
    source_uri: str
    title: str | None
    mime: str
    char_count: int
    published_seq: int | None
    chunks: list[ChunkView] = field(default_factory=list)
    text: str | None = None
    """The whole extracted text, when asked for (`with_text`)."""

    @property
    def file_name(self) -> str:
        """The source file's name, as a search hit names it."""
        return unquote(urlparse(self.source_uri).path).rstrip("/").rsplit("/", 1)[-1]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["file_name"] = self.file_name
        if self.text is None:
            del out["text"]
        return out


def document_view(
    postgres: ConnectionSource, document_id: str, *, with_text: bool = False
) -> DocumentView | None:
    """The current version of `document_id` with its chunks, or None when no current version
    is visible to the connection (never published, retired, or another tenant's)."""
    try:
        with postgres.connection() as conn, published_snapshot(conn) as snapshot:
            return _read(conn, document_id, snapshot.published_seq, with_text)
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "reading a document", exc) from exc


def _read(
    conn: psycopg.Connection[Any], document_id: str, seq: int | None, with_text: bool
) -> DocumentView | None:
    row = conn.execute(
        sql.SQL(DOCUMENT).format(
            text=sql.SQL("e.text" if with_text else "NULL::text"),
            current=schema.CURRENT_DOCUMENTS.identifier(),
            documents=schema.BATCH_DOCUMENTS.identifier(),
            extracted=schema.EXTRACTED_TEXT.identifier(),
        ),
        {"document": document_id},
    ).fetchone()
    if row is None:
        return None
    document, collection, batch, generation, sha, uri, title, mime, chars, text = row
    rows = conn.execute(
        sql.SQL(CHUNKS).format(
            chunks=schema.CHUNKS.identifier(), boundaries=schema.SEMANTIC_BOUNDARIES.identifier()
        ),
        {"batch": batch, "document": document, "generation": generation, "sha": sha},
    ).fetchall()
    chunks = [
        ChunkView(
            chunk_index=int(r[0]),
            chunk_id=str(r[1]),
            start_char=int(r[2]),
            end_char=int(r[3]),
            overlap_start=int(r[4]),
            overlap_end=int(r[5]),
            token_count=int(r[6]),
            sentence_count=int(r[7]),
            page_start=r[8],
            page_end=r[9],
            section=str(r[10] or ""),
            cohesion=None if r[11] is None else float(r[11]),
            reason=str(r[15] or r[13] or ""),
            similarity=None if r[16] is None else float(r[16]),
            threshold=None if r[17] is None else float(r[17]),
            method=str(r[18] or r[12] or ""),
            text=str(r[14]),
        )
        for r in rows
    ]
    return DocumentView(
        document_id=str(document),
        collection=str(collection),
        batch_key=str(batch),
        source_uri=str(uri),
        title=title,
        mime=str(mime or ""),
        char_count=int(chars or 0),
        published_seq=seq,
        chunks=chunks,
        text=text,
    )
