"""The BM25 index over the published current chunks, inside PostgreSQL, exact after every
publication.

Its tables (declared in `seams.storage.schema`, written only by `seams.lexical_sync`):
`lexical_chunks` (a current chunk's lexemes and length, with its `collection` for row-level
security), `lexical_postings` (a chunk's BM25 term impact per lexeme, in impact order) and
`lexical_terms` / `lexical_totals` (the per-collection statistics of IDF and average length).
Publication and retirement call `lexical_sync(documents, batches)` in their own transaction,
which re-derives just those documents' entries; it takes the publication locks of the
collections whose counters it changes in `lock_collections`' order. Why current only, and the
lock order: docs/architecture.md, "The BM25 index". Queries read it in `lexical`.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from seams.storage import schema, writer_locks
from seams.storage.publication import lock_collections, publish_lock_name
from seams.storage.search.lexical import K1, REFERENCE_LENGTH, B

LOCK_PREFIX = publish_lock_name("")
"""The publication lock of collection `c` is `LOCK_PREFIX || c` (`publish_lock_name`)."""

# The collections whose counters a sync of `docs` changes (their current one, and those of
# their indexed entries), in `lock_collections`' order: the others sorted, the default's last.
_LOCKS = """
    FOR c IN
        SELECT x.collection FROM (
            SELECT v.collection FROM {current} AS v WHERE v.document_id = ANY(docs)
            UNION
            SELECT l.collection FROM {chunks} AS l WHERE l.document_id = ANY(docs)
        ) AS x
        ORDER BY x.collection = {default}, x.collection
    LOOP
        {lock}
    END LOOP;
"""

_SYNC = """
CREATE OR REPLACE FUNCTION {schema}.lexical_sync(docs text[], batches text[])
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    c text;
BEGIN
    IF docs IS NULL OR cardinality(docs) = 0 THEN
        RETURN;
    END IF;
    {locks}
    -- 1. Entries that are no longer current, or belong to a batch being rewritten, go; the
    --    statistics lose what they counted.
    WITH target AS (
        SELECT v.document_id, v.batch_key FROM {current} AS v WHERE v.document_id = ANY(docs)
    ), gone AS (
        DELETE FROM {chunks} AS c
        WHERE c.document_id = ANY(docs)
          AND (c.batch_key = ANY(batches) OR NOT EXISTS (
                SELECT 1 FROM target AS t
                WHERE t.document_id = c.document_id AND t.batch_key = c.batch_key))
        RETURNING c.text_search_config, c.batch_key, c.chunk_id, c.length, c.lexemes,
                  c.collection
    ), gone_postings AS (
        DELETE FROM {postings} AS p USING gone AS g
        WHERE p.batch_key = g.batch_key AND p.chunk_id = g.chunk_id
    ), gone_terms AS (
        UPDATE {terms} AS t SET df = t.df - d.n
        FROM (SELECT g.collection, g.text_search_config, u.lexeme, count(*) AS n
              FROM gone AS g CROSS JOIN LATERAL unnest(g.lexemes) AS u
              GROUP BY 1, 2, 3 ORDER BY 1, 2, 3) AS d
        WHERE t.collection = d.collection AND t.text_search_config = d.text_search_config
          AND t.lexeme = d.lexeme
    )
    UPDATE {totals} AS o
    SET chunks = o.chunks - d.n, length_sum = o.length_sum - d.len
    FROM (SELECT collection, text_search_config, count(*) AS n, sum(length) AS len
          FROM gone GROUP BY 1, 2) AS d
    WHERE o.collection = d.collection AND o.text_search_config = d.text_search_config;

    -- 2. The current version's indexed chunks that have no entry yet are analysed and counted:
    --    those of its batch's published build (one generation at or below it: publication
    --    removes the older ones; a build in progress sits above it).
    WITH target AS (
        SELECT v.document_id, v.batch_key, v.generation
        FROM {current} AS v WHERE v.document_id = ANY(docs)
    ), fresh AS (
        SELECT DISTINCT ON (i.batch_key, i.chunk_id)
               i.text_search_config, i.batch_key, i.document_id, i.chunk_id, t.generation,
               i.collection
        FROM {index} AS i
        JOIN target AS t ON t.document_id = i.document_id AND t.batch_key = i.batch_key
                        AND i.generation <= t.generation
        WHERE NOT EXISTS (SELECT 1 FROM {chunks} AS c
                          WHERE c.batch_key = i.batch_key AND c.chunk_id = i.chunk_id)
        ORDER BY i.batch_key, i.chunk_id, i.text_search_config
    ), added AS (
        INSERT INTO {chunks} (text_search_config, batch_key, document_id, chunk_id, length,
                              lexemes, collection)
        SELECT f.text_search_config, f.batch_key, f.document_id, f.chunk_id,
               (SELECT coalesce(sum(cardinality(u.positions)), 0)::integer
                FROM unnest(a.lexemes) AS u),
               a.lexemes, f.collection
        FROM fresh AS f
        JOIN {source} AS s ON s.batch_key = f.batch_key AND s.document_id = f.document_id
                          AND s.chunk_id = f.chunk_id AND s.generation <= f.generation
        CROSS JOIN LATERAL (
            SELECT to_tsvector(f.text_search_config::regconfig, s.text) AS lexemes
        ) AS a
        RETURNING text_search_config, batch_key, document_id, chunk_id, length, lexemes,
                  collection
    ), added_postings AS (
        INSERT INTO {postings} (text_search_config, lexeme, impact, batch_key, document_id,
                                chunk_id, collection)
        SELECT a.text_search_config, u.lexeme,
               cardinality(u.positions) * ({k1} + 1)
                 / (cardinality(u.positions)
                    + {k1} * (1 - {b} + {b} * a.length / {reference}::float8)),
               a.batch_key, a.document_id, a.chunk_id, a.collection
        FROM added AS a CROSS JOIN LATERAL unnest(a.lexemes) AS u
        -- In the postings key's order: a batch's postings of one lexeme reach the key's leaf
        -- pages one after another, so each page is read and dirtied once per batch rather than
        -- once per posting (the key outgrows the buffers long before the corpus is large).
        ORDER BY 7, 1, 2, 3, 4, 6
    ), added_terms AS (
        INSERT INTO {terms} AS t (collection, text_search_config, lexeme, df)
        SELECT a.collection, a.text_search_config, u.lexeme, count(*)
        FROM added AS a CROSS JOIN LATERAL unnest(a.lexemes) AS u
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (collection, text_search_config, lexeme) DO UPDATE SET df = t.df + excluded.df
    )
    INSERT INTO {totals} AS o (collection, text_search_config, chunks, length_sum)
    SELECT collection, text_search_config, count(*), sum(length) FROM added GROUP BY 1, 2
    ON CONFLICT (collection, text_search_config) DO UPDATE
    SET chunks = o.chunks + excluded.chunks, length_sum = o.length_sum + excluded.length_sum;
END
$fn$
"""

# Statistics used to follow every write through statement triggers; they follow publication
# now. The triggers and their functions of an older schema are dropped.
_OLD_TRIGGERS: tuple[tuple[schema.Table, str], ...] = tuple(
    (table, f"{table.name}_lexical_{event}")
    for table in (schema.CHUNK_INDEX, schema.BATCH_DOCUMENTS, schema.DOCUMENT_TOMBSTONES)
    for event in ("insert", "delete", "update")
)
_OLD_TRIGGER_FUNCTIONS = ("lexical_rows_added", "lexical_rows_removed", "lexical_rows_changed")


def maintenance_ddl() -> list[sql.Composable]:
    """The sync function, the triggers of an older schema dropped and its shared statistics
    made per collection (`adoption_ddl`) (idempotent; after the tables and
    `seams.current_documents`)."""
    schema_id = sql.Identifier(schema.SCHEMA)
    statements: list[sql.Composable] = []
    for table, trigger in _OLD_TRIGGERS:
        statements.append(
            sql.SQL("DROP TRIGGER IF EXISTS {} ON {}").format(
                sql.Identifier(trigger), table.identifier()
            )
        )
    for function in _OLD_TRIGGER_FUNCTIONS:
        statements.append(
            sql.SQL("DROP FUNCTION IF EXISTS {}()").format(sql.Identifier(schema.SCHEMA, function))
        )
    statements.extend(adoption_ddl())
    statements.append(
        sql.SQL(_SYNC).format(
            schema=schema_id,
            locks=_locks(),
            current=schema.CURRENT_DOCUMENTS.identifier(),
            chunks=schema.LEXICAL_CHUNKS.identifier(),
            postings=schema.LEXICAL_POSTINGS.identifier(),
            terms=schema.LEXICAL_TERMS.identifier(),
            totals=schema.LEXICAL_TOTALS.identifier(),
            index=schema.CHUNK_INDEX.identifier(),
            source=schema.CHUNKS.identifier(),
            k1=sql.Literal(K1),
            b=sql.Literal(B),
            reference=sql.Literal(REFERENCE_LENGTH),
        )
    )
    return statements


def sync(conn: psycopg.Connection[Any], documents: list[str], batches: list[str]) -> None:
    """Re-derive the BM25 entries of `documents` from what is current now, in the caller's
    transaction; `batches` are being republished (their entries are re-analysed even where
    they stay current)."""
    conn.execute(
        sql.SQL("SELECT {}(%s::text[], %s::text[])").format(
            sql.Identifier(schema.SCHEMA, "lexical_sync")
        ),
        (documents, batches),
    )


def _locks() -> sql.Composable:
    return sql.SQL(_LOCKS).format(
        current=schema.CURRENT_DOCUMENTS.identifier(),
        chunks=schema.LEXICAL_CHUNKS.identifier(),
        default=sql.Literal(schema.DEFAULT_COLLECTION),
        lock=writer_locks.lock_sql(sql.SQL("{} || c").format(sql.Literal(LOCK_PREFIX))),
    )


def _indexed_collections(conn: psycopg.Connection[Any]) -> list[str]:
    """Every collection with BM25 entries or current documents."""
    rows = conn.execute(
        sql.SQL("SELECT collection FROM {} UNION SELECT collection FROM {}").format(
            schema.LEXICAL_CHUNKS.identifier(), schema.CURRENT_DOCUMENTS.identifier()
        )
    ).fetchall()
    return [r[0] for r in rows]


def rebuild(conn: psycopg.Connection[Any]) -> None:
    """The BM25 index and statistics derived from scratch from what is current, in the
    caller's transaction: what `sync` keeps them equal to, publication after publication."""
    lock_collections(conn, _indexed_collections(conn))
    for table in schema.LEXICAL_TABLES:
        conn.execute(sql.SQL("DELETE FROM {}").format(table.identifier()))
    conn.execute(
        sql.SQL("SELECT {}(ARRAY(SELECT document_id FROM {}), '{{}}'::text[])").format(
            sql.Identifier(schema.SCHEMA, "lexical_sync"), schema.CURRENT_DOCUMENTS.identifier()
        )
    )


_ADOPT = """
DO $adopt$
DECLARE
    changed boolean := false;
BEGIN
    IF NOT {terms_ok} THEN
        ALTER TABLE {terms} DROP CONSTRAINT IF EXISTS {terms_key},
            ADD PRIMARY KEY ({terms_cols});
        changed := true;
    END IF;
    IF NOT {totals_ok} THEN
        ALTER TABLE {totals} DROP CONSTRAINT IF EXISTS {totals_key},
            ADD PRIMARY KEY ({totals_cols});
        changed := true;
    END IF;
    IF NOT {postings_ok} THEN
        DROP INDEX IF EXISTS {postings_key_qualified};
        CREATE UNIQUE INDEX {postings_key} ON {postings} ({postings_cols});
    END IF;
    IF changed THEN
        DELETE FROM {terms};
        DELETE FROM {totals};
        INSERT INTO {terms} (collection, text_search_config, lexeme, df)
        SELECT c.collection, c.text_search_config, u.lexeme, count(*)
        FROM {chunks} AS c CROSS JOIN LATERAL unnest(c.lexemes) AS u
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
        INSERT INTO {totals} (collection, text_search_config, chunks, length_sum)
        SELECT collection, text_search_config, count(*), sum(length) FROM {chunks} GROUP BY 1, 2;
    END IF;
END
$adopt$
"""

_KEYED_BY_COLLECTION = """EXISTS (
        SELECT 1 FROM pg_index AS i
        JOIN pg_class AS c ON c.oid = i.indexrelid
        JOIN pg_namespace AS n ON n.oid = c.relnamespace
        JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
        WHERE n.nspname = {schema} AND c.relname = {index} AND a.attname = {column})"""


def _keyed_by_collection(index: str) -> sql.Composable:
    """Whether index `seams.<index>` exists and covers `collection`, in SQL."""
    return sql.SQL(_KEYED_BY_COLLECTION).format(
        schema=sql.Literal(schema.SCHEMA),
        index=sql.Literal(index),
        column=sql.Literal(schema.COLLECTION),
    )


def adoption_ddl() -> list[sql.Composable]:
    """BM25 statistics counted over every collection (an older schema) become per-collection
    ones: the statistics tables keyed by collection and re-derived from the index's own entries
    (each names its chunk's collection; in a database made before collections, the default
    one, so its scores stay exactly what they were), and the postings keyed by collection
    first. Idempotent, catalog lookups when there is nothing to do; after the tables (which
    gained `collection` by ADD COLUMN) and before anything calls `lexical_sync`."""
    terms, totals, postings = schema.LEXICAL_TERMS, schema.LEXICAL_TOTALS, schema.LEXICAL_POSTINGS
    terms_key, totals_key = f"{terms.name}_pkey", f"{totals.name}_pkey"
    postings_key = f"{postings.name}_key"

    def cols(names: tuple[str, ...]) -> sql.Composable:
        return sql.SQL(", ").join(sql.Identifier(n) for n in names)

    return [
        sql.SQL(_ADOPT).format(
            terms_ok=_keyed_by_collection(terms_key),
            terms=terms.identifier(),
            terms_key=sql.Identifier(terms_key),
            terms_cols=cols(terms.primary_key),
            totals_ok=_keyed_by_collection(totals_key),
            totals=totals.identifier(),
            totals_key=sql.Identifier(totals_key),
            totals_cols=cols(totals.primary_key),
            postings_ok=_keyed_by_collection(postings_key),
            postings=postings.identifier(),
            postings_key=sql.Identifier(postings_key),
            postings_key_qualified=sql.Identifier(schema.SCHEMA, postings_key),
            postings_cols=cols(postings.key),
            chunks=schema.LEXICAL_CHUNKS.identifier(),
        ),
    ]
