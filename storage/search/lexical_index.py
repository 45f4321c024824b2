"""The BM25 index over the current chunks, inside PostgreSQL, kept exact as the corpus changes.

What is stored (tables declared in `seams.storage.schema`, maintained only by the function and
triggers below, never by hand):

- `seams.lexical_chunks`: one row per *current* indexed chunk: its lexemes (`to_tsvector` with
  the text search configuration its `chunk_index` rows name, `retrieval.text_search_config`),
  and its length (lexeme occurrences: stop words do not count).
- `seams.lexical_postings`: one row per (current chunk, lexeme) with the chunk's BM25 term
  *impact* at a reference length (see `REFERENCE_LENGTH`), ordered by impact within a lexeme so a
  query reads each term's best chunks first.
- `seams.lexical_terms` (document frequency per lexeme) and `seams.lexical_totals` (chunk count
  and total length per configuration): the statistics of IDF and average length.

Why "current only", kept by triggers: IDF must count exactly the chunks search can return
(`seams.current_chunks`: each document's newest version, minus retired documents), and what is
current changes on three kinds of writes, made by different parts of Seams: a `chunk_index`
partition write (delete + COPY: a batch arrives or a backfill replaces it), a registration of a
newer version (`batch_documents`), a retirement (`document_tombstones`). A statement trigger on
each calls `seams.lexical_sync(documents, batches)` in the writer's own transaction, which
re-derives the entries of just those documents: it removes what is no longer current (and
subtracts it from the statistics) and adds the current version's chunks (and adds them). So the
index is right after every commit, a failed write leaves it as it was, and no change ever
rebuilds it whole. One advisory lock serialises these updates (they touch shared counters).

Queries read it in `lexical` (the scores, and the formula the impacts come from).
"""

from __future__ import annotations

from psycopg import sql

from seams.storage import schema
from seams.storage.search.lexical import K1, B

REFERENCE_LENGTH = 64
"""The chunk length at which postings' stored impacts are computed (lexeme occurrences of a chunk
of ~150-200 model tokens). Impacts only order a lexeme's postings; scores use the live average."""
LOCK = "seams.lexical"

_SYNC = """
CREATE OR REPLACE FUNCTION {schema}.lexical_sync(docs text[], batches text[])
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    IF docs IS NULL OR cardinality(docs) = 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended({lock}, 0));
    -- 1. Entries that are no longer current, or belong to a batch being rewritten, go; the
    --    statistics lose what they counted.
    WITH target AS (
        SELECT v.document_id, v.batch_key FROM {versions} AS v WHERE v.document_id = ANY(docs)
    ), gone AS (
        DELETE FROM {chunks} AS c
        WHERE c.document_id = ANY(docs)
          AND (c.batch_key = ANY(batches) OR NOT EXISTS (
                SELECT 1 FROM target AS t
                WHERE t.document_id = c.document_id AND t.batch_key = c.batch_key))
        RETURNING c.text_search_config, c.batch_key, c.chunk_id, c.length, c.lexemes
    ), gone_postings AS (
        DELETE FROM {postings} AS p USING gone AS g
        WHERE p.batch_key = g.batch_key AND p.chunk_id = g.chunk_id
    ), gone_terms AS (
        UPDATE {terms} AS t SET df = t.df - d.n
        FROM (SELECT g.text_search_config, u.lexeme, count(*) AS n
              FROM gone AS g CROSS JOIN LATERAL unnest(g.lexemes) AS u
              GROUP BY 1, 2 ORDER BY 1, 2) AS d
        WHERE t.text_search_config = d.text_search_config AND t.lexeme = d.lexeme
    )
    UPDATE {totals} AS o
    SET chunks = o.chunks - d.n, length_sum = o.length_sum - d.len
    FROM (SELECT text_search_config, count(*) AS n, sum(length) AS len
          FROM gone GROUP BY 1) AS d
    WHERE o.text_search_config = d.text_search_config;

    -- 2. The current version's indexed chunks that have no entry yet are analysed and counted.
    WITH target AS (
        SELECT v.document_id, v.batch_key FROM {versions} AS v WHERE v.document_id = ANY(docs)
    ), fresh AS (
        SELECT DISTINCT ON (i.batch_key, i.chunk_id)
               i.text_search_config, i.batch_key, i.document_id, i.chunk_id
        FROM {index} AS i
        JOIN target AS t ON t.document_id = i.document_id AND t.batch_key = i.batch_key
        WHERE NOT EXISTS (SELECT 1 FROM {chunks} AS c
                          WHERE c.batch_key = i.batch_key AND c.chunk_id = i.chunk_id)
        ORDER BY i.batch_key, i.chunk_id, i.text_search_config
    ), added AS (
        INSERT INTO {chunks} (text_search_config, batch_key, document_id, chunk_id, length,
                              lexemes)
        SELECT f.text_search_config, f.batch_key, f.document_id, f.chunk_id,
               (SELECT coalesce(sum(cardinality(u.positions)), 0)::integer
                FROM unnest(a.lexemes) AS u),
               a.lexemes
        FROM fresh AS f
        JOIN {source} AS s ON s.batch_key = f.batch_key AND s.document_id = f.document_id
                          AND s.chunk_id = f.chunk_id
        CROSS JOIN LATERAL (
            SELECT to_tsvector(f.text_search_config::regconfig, s.text) AS lexemes
        ) AS a
        RETURNING text_search_config, batch_key, document_id, chunk_id, length, lexemes
    ), added_postings AS (
        INSERT INTO {postings} (text_search_config, lexeme, impact, batch_key, document_id,
                                chunk_id)
        SELECT a.text_search_config, u.lexeme,
               cardinality(u.positions) * ({k1} + 1)
                 / (cardinality(u.positions)
                    + {k1} * (1 - {b} + {b} * a.length / {reference}::float8)),
               a.batch_key, a.document_id, a.chunk_id
        FROM added AS a CROSS JOIN LATERAL unnest(a.lexemes) AS u
    ), added_terms AS (
        INSERT INTO {terms} AS t (text_search_config, lexeme, df)
        SELECT a.text_search_config, u.lexeme, count(*)
        FROM added AS a CROSS JOIN LATERAL unnest(a.lexemes) AS u
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (text_search_config, lexeme) DO UPDATE SET df = t.df + excluded.df
    )
    INSERT INTO {totals} AS o (text_search_config, chunks, length_sum)
    SELECT text_search_config, count(*), sum(length) FROM added GROUP BY 1
    ON CONFLICT (text_search_config) DO UPDATE
    SET chunks = o.chunks + excluded.chunks, length_sum = o.length_sum + excluded.length_sum;
END
$fn$
"""

# One function per transition-table shape. Its argument 'rewrite' (the chunk_index triggers) says
# the rows' batches are being rewritten, so their entries are re-derived even if still current.
_TRIGGER_FUNCTIONS = {
    "lexical_rows_added": ("new_rows",),
    "lexical_rows_removed": ("old_rows",),
    "lexical_rows_changed": ("old_rows", "new_rows"),
}
_TRIGGER_BODY = """
CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_NARGS > 0 AND TG_ARGV[0] = 'rewrite' THEN
        PERFORM {sync}((SELECT array_agg(DISTINCT document_id) FROM {first}),
                       (SELECT array_agg(DISTINCT batch_key) FROM {first}));
    ELSE
        PERFORM {sync}((SELECT array_agg(DISTINCT document_id) FROM ({docs}) AS r),
                       '{{}}'::text[]);
    END IF;
    RETURN NULL;
END
$fn$
"""

# (table, trigger function, event, transition tables) for every write that changes what is
# indexed or what is current.
_TRIGGERS: tuple[tuple[schema.Table, str, str, str], ...] = (
    (schema.CHUNK_INDEX, "lexical_rows_added", "INSERT", "NEW TABLE AS new_rows"),
    (schema.CHUNK_INDEX, "lexical_rows_removed", "DELETE", "OLD TABLE AS old_rows"),
    (schema.BATCH_DOCUMENTS, "lexical_rows_added", "INSERT", "NEW TABLE AS new_rows"),
    (schema.BATCH_DOCUMENTS, "lexical_rows_removed", "DELETE", "OLD TABLE AS old_rows"),
    (
        schema.BATCH_DOCUMENTS,
        "lexical_rows_changed",
        "UPDATE",
        "OLD TABLE AS old_rows NEW TABLE AS new_rows",
    ),
    (schema.DOCUMENT_TOMBSTONES, "lexical_rows_added", "INSERT", "NEW TABLE AS new_rows"),
    (schema.DOCUMENT_TOMBSTONES, "lexical_rows_removed", "DELETE", "OLD TABLE AS old_rows"),
    (
        schema.DOCUMENT_TOMBSTONES,
        "lexical_rows_changed",
        "UPDATE",
        "OLD TABLE AS old_rows NEW TABLE AS new_rows",
    ),
)


def maintenance_ddl() -> list[sql.Composable]:
    """The sync function and the triggers that call it (idempotent; after the tables)."""
    schema_id = sql.Identifier(schema.SCHEMA)
    statements: list[sql.Composable] = [
        sql.SQL(_SYNC).format(
            schema=schema_id,
            lock=sql.Literal(LOCK),
            versions=sql.Identifier(schema.SCHEMA, schema.CURRENT_VERSIONS_VIEW),
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
    ]
    for name, tables in _TRIGGER_FUNCTIONS.items():
        docs = sql.SQL(" UNION ALL ").join(
            sql.SQL("SELECT document_id FROM {}").format(sql.Identifier(t)) for t in tables
        )
        statements.append(
            sql.SQL(_TRIGGER_BODY).format(
                fn=sql.Identifier(schema.SCHEMA, name),
                sync=sql.Identifier(schema.SCHEMA, "lexical_sync"),
                first=sql.Identifier(tables[0]),
                docs=docs,
            )
        )
    for table, function, event, transitions in _TRIGGERS:
        statements.append(
            sql.SQL(
                "CREATE OR REPLACE TRIGGER {name} AFTER {event} ON {table} "
                "REFERENCING {transitions} FOR EACH STATEMENT EXECUTE FUNCTION {fn}({arg})"
            ).format(
                name=sql.Identifier(f"{table.name}_lexical_{event.lower()}"),
                event=sql.SQL(event),
                table=table.identifier(),
                transitions=sql.SQL(transitions),
                fn=sql.Identifier(schema.SCHEMA, function),
                arg=sql.Literal("rewrite" if table is schema.CHUNK_INDEX else "current"),
            )
        )
    return statements
