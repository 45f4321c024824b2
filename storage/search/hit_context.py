"""Ranked chunk keys to hit rows, in SQL: the visible ones among them (their document's published
current version, at its build's generation) joined with their document,
their parent (section or whole document, its text capped and centred on the hit) and their
neighbours, with the source text from the previous chunk's start to the next chunk's end
(sentence-window retrieval, without duplicating any overlap). One statement, one round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import psycopg
from psycopg import sql

from seams.storage import schema
from seams.storage.search.hits import HitContext, Neighbour, ParentContext, SearchHit
from seams.storage.search.signals import ChunkKey

HITS = """
WITH ranked AS (
    SELECT * FROM unnest(%(batches)s::text[], %(docs)s::text[], %(ids)s::text[],
                         %(ranks)s::int[]) AS n(batch_key, document_id, chunk_id, rank)
), hits AS (
    SELECT n.rank, c.batch_key, c.document_id, c.chunk_id, c.chunk_index, c.total_chunks,
           c.text, c.start_char, c.end_char, c.page_start, c.page_end, c.section, c.source_sha256,
           c.generation, cur.generation AS published_generation, c.collection
    FROM ranked AS n
    -- Visible: the document's published current version is in this batch, and each table is
    -- read at the one generation that build sees (never a build still being written).
    JOIN {current} AS cur ON cur.document_id = n.document_id AND cur.batch_key = n.batch_key
    JOIN {chunks} AS c ON c.batch_key = n.batch_key AND c.document_id = n.document_id
                      AND c.chunk_id = n.chunk_id AND c.generation <= cur.generation
    ORDER BY n.rank, c.document_id, c.chunk_index
    LIMIT %(k)s
), texts AS MATERIALIZED (
    -- Each document's text decompressed once (`|| ''`), not once per hit and substring: an
    -- answer's hits mostly come from a few documents.
    SELECT e.batch_key, e.document_id, v.published_generation, e.title, e.text || '' AS text
    FROM (SELECT DISTINCT batch_key, document_id, published_generation FROM hits) AS v
    JOIN {extracted} AS e ON e.batch_key = v.batch_key AND e.document_id = v.document_id
                         AND e.generation <= v.published_generation
)
SELECT h.rank, h.batch_key, h.document_id, h.chunk_id, h.chunk_index, h.total_chunks,
       h.text, h.start_char, h.end_char, h.page_start, h.page_end, h.section,
       d.source_uri, e.title,
       p.parent_kind, p.start_char, p.end_char, p.first_chunk_index, p.last_chunk_index,
       p.chunk_count, w.text_start, w.text_end,
       substr(e.text, w.text_start + 1, w.text_end - w.text_start),
       prev.chunk_id, prev.chunk_index, prev.start_char, prev.end_char, prev.text,
       nxt.chunk_id, nxt.chunk_index, nxt.start_char, nxt.end_char, nxt.text,
       coalesce(prev.start_char, h.start_char), coalesce(nxt.end_char, h.end_char),
       substr(e.text, coalesce(prev.start_char, h.start_char) + 1,
              coalesce(nxt.end_char, h.end_char) - coalesce(prev.start_char, h.start_char)),
       h.published_generation, h.collection
FROM hits AS h
JOIN {documents} AS d ON d.batch_key = h.batch_key AND d.document_id = h.document_id
JOIN texts AS e ON e.batch_key = h.batch_key AND e.document_id = h.document_id
               AND e.published_generation = h.published_generation
CROSS JOIN LATERAL (
    -- The parent (seams.chunk_parents' rule) over the hit's own build: its chunks share one
    -- generation, so the section's span never mixes versions or builds.
    SELECT CASE WHEN h.section = '' THEN 'document' ELSE 'section' END AS parent_kind,
           min(s.start_char) AS start_char, max(s.end_char) AS end_char,
           min(s.chunk_index) AS first_chunk_index, max(s.chunk_index) AS last_chunk_index,
           count(*) AS chunk_count
    FROM {chunks} AS s
    WHERE s.batch_key = h.batch_key AND s.generation = h.generation
      AND s.document_id = h.document_id AND s.source_sha256 = h.source_sha256
      AND s.section = h.section
) AS p
CROSS JOIN LATERAL (
    SELECT s AS text_start, least(p.end_char, s + %(cap)s) AS text_end
    FROM (SELECT CASE WHEN p.end_char - p.start_char <= %(cap)s THEN p.start_char
                      ELSE greatest(p.start_char, least(
                          h.start_char - greatest(0, (%(cap)s - (h.end_char - h.start_char)) / 2),
                          p.end_char - %(cap)s))
                 END AS s) AS bounds
) AS w
LEFT JOIN {chunks} AS prev ON prev.batch_key = h.batch_key AND prev.generation = h.generation
                          AND prev.document_id = h.document_id
                          AND prev.chunk_index = h.chunk_index - 1
LEFT JOIN {chunks} AS nxt ON nxt.batch_key = h.batch_key AND nxt.generation = h.generation
                         AND nxt.document_id = h.document_id
                         AND nxt.chunk_index = h.chunk_index + 1
ORDER BY h.rank, h.document_id, h.chunk_index
"""


class HitRow(NamedTuple):
    """A visible chunk with its document, parent and neighbours, as `hit_rows` reads it."""

    rank: int
    """The rank it was asked for at (its order among the rows)."""
    batch_key: str
    document_id: str
    chunk_id: str
    chunk_index: int
    total_chunks: int
    text: str
    start_char: int
    end_char: int
    page_start: int | None
    page_end: int | None
    section: str
    source_uri: str
    title: str | None
    parent_kind: str
    parent_start: int
    parent_end: int
    parent_first_chunk: int
    parent_last_chunk: int
    parent_chunk_count: int
    parent_text_start: int
    parent_text_end: int
    parent_text: str | None
    previous_chunk_id: str | None
    previous_chunk_index: int | None
    previous_start: int | None
    previous_end: int | None
    previous_text: str | None
    next_chunk_id: str | None
    next_chunk_index: int | None
    next_start: int | None
    next_end: int | None
    next_text: str | None
    window_start: int
    window_end: int
    window_text: str | None
    generation: int
    """The published build of its batch that it is read from."""
    collection: str

    @property
    def key(self) -> ChunkKey:
        return (self.batch_key, self.document_id, self.chunk_id)


def hit_rows(
    conn: psycopg.Connection[Any],
    keys: Sequence[ChunkKey],
    ranks: Sequence[int],
    k: int,
    cap: int,
) -> list[HitRow]:
    """The first `k` of `keys` by `ranks` (ties: document, then chunk order) that are visible
    (published, current), joined with their document, parent and neighbours; `cap` bounds each
    parent's text. One statement, one round trip."""
    query = sql.SQL(HITS).format(
        current=schema.CURRENT_DOCUMENTS.identifier(),
        documents=schema.BATCH_DOCUMENTS.identifier(),
        extracted=schema.EXTRACTED_TEXT.identifier(),
        chunks=schema.CHUNKS.identifier(),
    )
    params = {
        "batches": [key[0] for key in keys],
        "docs": [key[1] for key in keys],
        "ids": [key[2] for key in keys],
        "ranks": list(ranks),
        "k": k,
        "cap": max(1, cap),
    }
    # Prepared: planning this join costs more than running it.
    return [HitRow(*row) for row in conn.execute(query, params, prepare=True).fetchall()]


_SAME_NAMES = (
    *("chunk_id", "document_id", "batch_key", "chunk_index", "total_chunks", "source_uri"),
    *("title", "section", "start_char", "end_char", "text"),
)
"""The fields a hit takes from its row as they are."""


def _neighbour(chunk_id: str | None, *fields: Any) -> Neighbour | None:
    return None if chunk_id is None else Neighbour(chunk_id, *fields)


def hit_from_row(rank: int, row: HitRow, score: float, **scores: Any) -> SearchHit:
    """The hit at `rank` for `row`, with the `score` that ranked it and the other scores and
    passage fields of `SearchHit` given by name."""
    previous = _neighbour(row.previous_chunk_id, row.previous_chunk_index, row.previous_start,
                          row.previous_end, row.previous_text)  # fmt: skip
    following = _neighbour(row.next_chunk_id, row.next_chunk_index, row.next_start, row.next_end,
                           row.next_text)  # fmt: skip
    if row.parent_kind == "section":
        parent_title = row.section.rsplit(" > ", 1)[-1]
    else:
        parent_title = row.title or row.source_uri.rsplit("/", 1)[-1]
    parent = ParentContext(
        kind=row.parent_kind,
        section=row.section,
        title=parent_title,
        start_char=row.parent_start,
        end_char=row.parent_end,
        first_chunk_index=row.parent_first_chunk,
        last_chunk_index=row.parent_last_chunk,
        chunk_count=int(row.parent_chunk_count),
        text_start=row.parent_text_start,
        text_end=row.parent_text_end,
        text=row.parent_text or "",
    )
    pages = (row.page_start, row.page_end) if row.page_start is not None else None
    same = {name: getattr(row, name) for name in _SAME_NAMES}
    return SearchHit(
        rank=rank,
        score=score,
        pages=pages,
        context=HitContext(
            parent, previous, following, row.window_start, row.window_end, row.window_text or ""
        ),
        generation=int(row.generation),
        collection=str(row.collection),
        **same,
        **scores,
    )


SENTENCES = """
WITH q AS (
    SELECT * FROM unnest(%(lexemes)s::text[], %(idf)s::float8[]) AS q(lexeme, idf)
), hits AS (
    SELECT * FROM unnest(%(batches)s::text[], %(docs)s::text[], %(starts)s::int[],
                         %(ends)s::int[], %(generations)s::int[])
         WITH ORDINALITY AS h(batch_key, document_id, start_char, end_char, generation, pos)
)
SELECT DISTINCT ON (h.pos, s.start_char)
       h.pos, s.start_char, s.end_char,
       CASE WHEN s.model_id = %(model)s AND s.embedding IS NOT NULL AND %(q)s::vector IS NOT NULL
            THEN 1 - (s.embedding <=> %(q)s::vector) END,
       CASE WHEN %(config)s::text IS NULL THEN 0 ELSE coalesce((
           SELECT sum(q.idf)
           FROM unnest(tsvector_to_array(to_tsvector(%(config)s::text::regconfig, s.text)))
                AS u(lexeme)
           JOIN q ON q.lexeme = u.lexeme), 0) END,
       s.kind
FROM hits AS h
JOIN {boundaries} AS s ON s.batch_key = h.batch_key AND s.document_id = h.document_id
                      AND s.start_char >= h.start_char AND s.end_char <= h.end_char
                      -- implied (a candidate ends after it starts), and bounds the index scan
                      -- to the hit's span instead of the rest of its document
                      AND s.start_char <= h.end_char
                      -- the candidates of the build the hit was read from, never an older one's
                      AND s.generation = (
                          SELECT max(b.generation) FROM {boundaries} AS b
                          WHERE b.batch_key = h.batch_key AND b.document_id = h.document_id
                            AND b.generation <= h.generation)
ORDER BY h.pos, s.start_char, (s.model_id = %(model)s) DESC
"""


class SentenceRow(NamedTuple):
    """A sentence of a hit, as `sentence_rows` reads it."""

    start: int
    end: int
    cosine: float | None
    """Its cosine with the query; None without a vector of the query's model (or no query
    vector)."""
    idf: float
    """The summed IDF of the query lexemes it holds."""
    kind: str
    """Its candidate kind (`chunking.segment`)."""


def sentence_rows(
    conn: psycopg.Connection[Any],
    hits: Sequence[HitRow],
    *,
    vector: Any,
    model_id: str,
    config: str | None,
    lexemes: tuple[str, ...] = (),
    idf: tuple[float, ...] = (),
) -> list[list[SentenceRow]]:
    """Per hit, its sentences (the candidates `semantic_boundaries` holds inside its span, of the
    build it was read from) in order, each as (start, end, cosine with the query or None, sum of
    the IDF of the query lexemes it contains, the candidate's kind). One statement: pgvector and
    `to_tsvector` score next to the rows, so no vector and no sentence text travels."""
    out: list[list[SentenceRow]] = [[] for _ in hits]
    if not hits:
        return out
    statement = sql.SQL(SENTENCES).format(boundaries=schema.SEMANTIC_BOUNDARIES.identifier())
    params = {
        "lexemes": list(lexemes),
        "idf": list(idf),
        "batches": [h.batch_key for h in hits],
        "docs": [h.document_id for h in hits],
        "starts": [h.start_char for h in hits],
        "ends": [h.end_char for h in hits],
        "generations": [h.generation for h in hits],
        "model": model_id,
        "q": vector,
        "config": config,
    }
    for pos, start, end, dense, lexical, kind in conn.execute(statement, params).fetchall():
        dense = None if dense is None else float(dense)
        out[pos - 1].append(SentenceRow(start, end, dense, float(lexical), kind))
    return out
