"""Ranked chunk keys to hits, in SQL: the visible ones among them (their document's published
current version, at its build's generation) joined with their document,
their parent (section or whole document, its text capped and centred on the hit) and their
neighbours, with the source text from the previous chunk's start to the next chunk's end
(sentence-window retrieval, without duplicating any overlap). One statement, one round trip.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from seams.storage import schema
from seams.storage.search.hits import HitContext, Neighbour, ParentContext, SearchHit

HITS = """
WITH nearest AS (
    SELECT * FROM unnest(%(batches)s::text[], %(docs)s::text[], %(ids)s::text[],
                         %(distances)s::float8[]) AS n(batch_key, document_id, chunk_id, distance)
), hits AS (
    SELECT n.distance, c.batch_key, c.document_id, c.chunk_id, c.chunk_index, c.total_chunks,
           c.text, c.start_char, c.end_char, c.page_start, c.page_end, c.section, c.source_sha256,
           c.generation, cur.generation AS published_generation, c.collection
    FROM nearest AS n
    -- Visible: the document's published current version is in this batch, and each table is
    -- read at the one generation that build sees (never a build still being written).
    JOIN {current} AS cur ON cur.document_id = n.document_id AND cur.batch_key = n.batch_key
    JOIN {chunks} AS c ON c.batch_key = n.batch_key AND c.document_id = n.document_id
                      AND c.chunk_id = n.chunk_id AND c.generation <= cur.generation
    ORDER BY n.distance, c.document_id, c.chunk_index
    LIMIT %(k)s
)
SELECT h.distance, h.batch_key, h.document_id, h.chunk_id, h.chunk_index, h.total_chunks,
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
JOIN {extracted} AS e ON e.batch_key = h.batch_key AND e.document_id = h.document_id
                     AND e.generation <= h.published_generation
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
ORDER BY h.distance, h.document_id, h.chunk_index
"""


def hit_rows(
    conn: psycopg.Connection[Any], nearest: list[tuple[str, str, str, float]], k: int, cap: int
) -> list[tuple[Any, ...]]:
    """The k best of `nearest` that are visible (published, current), joined with their
    document, parent and neighbours (one statement, one round trip)."""
    query = sql.SQL(HITS).format(
        current=schema.CURRENT_DOCUMENTS.identifier(),
        documents=schema.BATCH_DOCUMENTS.identifier(),
        extracted=schema.EXTRACTED_TEXT.identifier(),
        chunks=schema.CHUNKS.identifier(),
    )
    batches, docs, ids, distances = (list(col) for col in zip(*nearest, strict=True))
    params = {
        "batches": batches,
        "docs": docs,
        "ids": ids,
        "distances": distances,
        "k": k,
        "cap": max(1, cap),
    }
    # Prepared: planning this join costs more than running it.
    return conn.execute(query, params, prepare=True).fetchall()


def _neighbour(values: tuple[Any, ...]) -> Neighbour | None:
    return None if values[0] is None else Neighbour(*values)


def hit_from_row(rank: int, row: tuple[Any, ...]) -> SearchHit:
    (
        distance,
        batch_key,
        document_id,
        chunk_id,
        chunk_index,
        total_chunks,
        text,
        start,
        end,
        page_start,
        page_end,
        section,
        source_uri,
        title,
        parent_kind,
        p_start,
        p_end,
        p_first,
        p_last,
        p_count,
        text_start,
        text_end,
        parent_text,
    ) = row[:23]
    previous, following = _neighbour(row[23:28]), _neighbour(row[28:33])
    window_start, window_end, window_text = row[33:36]
    generation = int(row[36])
    collection = str(row[37])
    if parent_kind == "section":
        parent_title = section.rsplit(" > ", 1)[-1]
    else:
        parent_title = title or source_uri.rsplit("/", 1)[-1]
    parent = ParentContext(
        kind=parent_kind,
        section=section,
        title=parent_title,
        start_char=p_start,
        end_char=p_end,
        first_chunk_index=p_first,
        last_chunk_index=p_last,
        chunk_count=int(p_count),
        text_start=text_start,
        text_end=text_end,
        text=parent_text or "",
    )
    pages = (page_start, page_end) if page_start is not None else None
    return SearchHit(
        rank=rank,
        score=1.0 - float(distance),
        chunk_id=chunk_id,
        document_id=document_id,
        batch_key=batch_key,
        chunk_index=chunk_index,
        total_chunks=total_chunks,
        source_uri=source_uri,
        title=title,
        pages=pages,
        section=section,
        start_char=start,
        end_char=end,
        text=text,
        context=HitContext(
            parent, previous, following, window_start, window_end, window_text or ""
        ),
        generation=generation,
        collection=collection,
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
                      -- the candidates of the build the hit was read from, never an older one's
                      AND s.generation = (
                          SELECT max(b.generation) FROM {boundaries} AS b
                          WHERE b.batch_key = h.batch_key AND b.document_id = h.document_id
                            AND b.generation <= h.generation)
ORDER BY h.pos, s.start_char, (s.model_id = %(model)s) DESC
"""


def sentence_rows(
    conn: psycopg.Connection[Any],
    hits: list[SearchHit],
    *,
    vector: Any,
    model_id: str,
    config: str | None,
    lexemes: tuple[str, ...] = (),
    idf: tuple[float, ...] = (),
) -> list[list[tuple[int, int, float | None, float, str]]]:
    """Per hit, its sentences (the candidates `semantic_boundaries` holds inside its span, of the
    build it was read from) in order, each as (start, end, cosine with the query or None, sum of
    the IDF of the query lexemes it contains, the candidate's kind). One statement: pgvector and
    `to_tsvector` score next to the rows, so no vector and no sentence text travels."""
    out: list[list[tuple[int, int, float | None, float, str]]] = [[] for _ in hits]
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
        out[pos - 1].append((start, end, dense, float(lexical), kind))
    return out
