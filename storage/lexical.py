"""BM25 over the current chunks, inside PostgreSQL, kept exact as the corpus changes.

What is stored (tables declared in `seams.storage.schema`, maintained only by the functions and
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

BM25 (Robertson/Sparck Jones with Lucene's non-negative IDF), per distinct query lexeme t:

    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(q, d) = sum_t idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

with N the current chunks, avgdl their mean length, `K1` = 1.2, `B` = 0.75. A query's lexemes
come from the same `to_tsvector` configuration, so stemming and stop words match the index's.
tf is the lexeme's position count in the tsvector (PostgreSQL keeps at most 256 per lexeme).

Query: the postings of the query's rarest `MAX_QUERY_TERMS` lexemes are read in impact order,
`TERM_DEPTH` per lexeme; their partial sums pick a shortlist, which is scored exactly (every query
lexeme, the live statistics). Scores returned are exact BM25; the candidate set is exact whenever
no query lexeme has more than `TERM_DEPTH` postings, and an approximation above
(`benchmarks/search_latency.py` reports its recall against the exhaustive sum).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from seams.errors import ConfigError
from seams.storage import schema

K1 = 1.2
B = 0.75
REFERENCE_LENGTH = 64
"""The chunk length at which postings' stored impacts are computed (lexeme occurrences of a chunk
of ~150-200 model tokens). Impacts only order a lexeme's postings; scores use the live average."""
TERM_DEPTH = 200
"""Postings read per query lexeme, best impact first."""
MAX_QUERY_TERMS = 32
"""Query lexemes whose postings are read (the rarest); all of them count in the exact score."""
DEFAULT_TEXT_SEARCH_CONFIG = "english"
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


# --- queries ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LexicalScore:
    """A chunk's exact BM25 score for a query and the query lexemes it contains."""

    batch_key: str
    document_id: str
    chunk_id: str
    score: float
    matched_terms: tuple[str, ...]


_QUERY_TERMS = """
WITH lexemes AS (
    SELECT DISTINCT u.lexeme
    FROM unnest(tsvector_to_array(to_tsvector(%(config)s::text::regconfig, %(query)s))) AS u(lexeme)
), totals AS (
    SELECT o.chunks::float8 AS n, o.length_sum::float8 / nullif(o.chunks, 0) AS avgdl
    FROM {totals} AS o WHERE o.text_search_config = %(config)s::text AND o.chunks > 0
)
SELECT l.lexeme, coalesce(t.df, 0),
       ln(1 + (o.n - coalesce(t.df, 0) + 0.5) / (coalesce(t.df, 0) + 0.5)), o.avgdl
FROM lexemes AS l CROSS JOIN totals AS o
LEFT JOIN {terms} AS t ON t.text_search_config = %(config)s::text AND t.lexeme = l.lexeme
ORDER BY l.lexeme
"""

_TOP = """
WITH q AS (
    SELECT * FROM unnest(%(lexemes)s::text[], %(idf)s::float8[]) AS q(lexeme, idf)
), read AS (
    SELECT * FROM unnest(%(read)s::text[], %(read_idf)s::float8[]) AS r(lexeme, idf)
), shortlist AS (
    SELECT p.batch_key, p.chunk_id, sum(r.idf * p.impact) AS partial
    FROM read AS r
    CROSS JOIN LATERAL (
        SELECT p.batch_key, p.chunk_id, p.impact FROM {postings} AS p
        WHERE p.text_search_config = %(config)s AND p.lexeme = r.lexeme
        ORDER BY p.impact DESC, p.batch_key DESC, p.chunk_id DESC
        LIMIT %(depth)s
    ) AS p
    GROUP BY p.batch_key, p.chunk_id
    ORDER BY partial DESC, p.chunk_id, p.batch_key
    LIMIT %(shortlist)s
)
SELECT c.batch_key, c.document_id, c.chunk_id, s.score, s.matched
FROM shortlist AS l
JOIN {chunks} AS c ON c.batch_key = l.batch_key AND c.chunk_id = l.chunk_id
CROSS JOIN LATERAL ({exact}) AS s
ORDER BY s.score DESC, c.chunk_id, c.batch_key
LIMIT %(pool)s
"""

_EXACT = """
    SELECT coalesce(sum(q.idf * cardinality(u.positions) * ({k1} + 1)
                        / (cardinality(u.positions)
                           + {k1} * (1 - {b} + {b} * c.length / %(avgdl)s::float8))), 0) AS score,
           coalesce(array_agg(q.lexeme ORDER BY q.lexeme), '{{}}') AS matched
    FROM unnest(c.lexemes) AS u JOIN q ON q.lexeme = u.lexeme
"""

_SCORE_KEYS = """
WITH q AS (
    SELECT * FROM unnest(%(lexemes)s::text[], %(idf)s::float8[]) AS q(lexeme, idf)
), keys AS (
    SELECT * FROM unnest(%(batches)s::text[], %(ids)s::text[]) AS k(batch_key, chunk_id)
)
SELECT c.batch_key, c.document_id, c.chunk_id, s.score, s.matched
FROM keys AS k
JOIN {chunks} AS c ON c.batch_key = k.batch_key AND c.chunk_id = k.chunk_id
   AND c.text_search_config = %(config)s
CROSS JOIN LATERAL ({exact}) AS s
"""


@dataclass(frozen=True)
class QueryTerms:
    """The query's distinct lexemes under one configuration, with their live IDF."""

    config: str
    lexemes: tuple[str, ...]
    document_frequencies: tuple[int, ...]
    idf: tuple[float, ...]
    avgdl: float

    @property
    def known(self) -> tuple[str, ...]:
        """Lexemes that occur in at least one current chunk."""
        return tuple(t for t, df in zip(self.lexemes, self.document_frequencies, strict=True) if df)


def _exact() -> sql.Composable:
    return sql.SQL(_EXACT).format(k1=sql.Literal(K1), b=sql.Literal(B))


def query_terms(conn: psycopg.Connection[Any], config: str, query: str) -> QueryTerms | None:
    """The query's lexemes and IDF under `config`; None when nothing is indexed under it."""
    statement = sql.SQL(_QUERY_TERMS).format(
        totals=schema.LEXICAL_TOTALS.identifier(), terms=schema.LEXICAL_TERMS.identifier()
    )
    try:
        rows = conn.execute(statement, {"config": config, "query": query}, prepare=True).fetchall()
    except psycopg.errors.UndefinedObject as exc:
        raise ConfigError(
            f"retrieval.text_search_config={config!r}: PostgreSQL has no such text search "
            "configuration (`SELECT cfgname FROM pg_ts_config` lists them; e.g. english, simple)"
        ) from exc
    if not rows:
        indexed = conn.execute(
            sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE text_search_config = %s AND chunks > 0)")
            .format(schema.LEXICAL_TOTALS.identifier()),
            (config,),
        ).fetchone()[0]  # fmt: skip
        if not indexed:
            return None
        return QueryTerms(config, (), (), (), 0.0)
    return QueryTerms(
        config=config,
        lexemes=tuple(r[0] for r in rows),
        document_frequencies=tuple(int(r[1]) for r in rows),
        idf=tuple(float(r[2]) for r in rows),
        avgdl=float(rows[0][3]),
    )


def top_chunks(
    conn: psycopg.Connection[Any],
    terms: QueryTerms,
    pool: int,
    *,
    depth: int = TERM_DEPTH,
    max_terms: int = MAX_QUERY_TERMS,
    exhaustive: bool = False,
) -> list[LexicalScore]:
    """The `pool` best current chunks by BM25 (exact scores; see the module doc for the
    candidate set), best first, ties broken by chunk_id. `depth` postings are read for each of
    the `max_terms` rarest query lexemes; `exhaustive` reads them all (a reference: slow)."""
    if exhaustive:
        depth = max_terms = shortlist = 2**31 - 1
    else:
        shortlist = 2 * pool
    known = [
        (t, df, idf)
        for t, df, idf in zip(terms.lexemes, terms.document_frequencies, terms.idf, strict=True)
        if df > 0
    ]
    if not known or pool < 1:
        return []
    read = sorted(known, key=lambda x: (x[1], x[0]))[:max_terms]  # rarest first
    statement = sql.SQL(_TOP).format(
        postings=schema.LEXICAL_POSTINGS.identifier(),
        chunks=schema.LEXICAL_CHUNKS.identifier(),
        exact=_exact(),
    )
    params = {
        "lexemes": list(terms.lexemes), "idf": list(terms.idf),
        "read": [t for t, _, _ in read], "read_idf": [i for _, _, i in read],
        "config": terms.config, "depth": depth, "shortlist": shortlist, "pool": pool,
        "avgdl": terms.avgdl,
    }  # fmt: skip
    rows = conn.execute(statement, params, prepare=True).fetchall()
    return [LexicalScore(b, d, c, float(s), tuple(m)) for b, d, c, s, m in rows]


def score_chunks(
    conn: psycopg.Connection[Any], terms: QueryTerms, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], LexicalScore]:
    """Exact BM25 of the given (batch_key, chunk_id) chunks; chunks without a current lexical
    entry under `terms.config` are absent from the result."""
    if not keys or not terms.lexemes:
        return {}
    statement = sql.SQL(_SCORE_KEYS).format(
        chunks=schema.LEXICAL_CHUNKS.identifier(), exact=_exact()
    )
    params = {
        "lexemes": list(terms.lexemes), "idf": list(terms.idf), "config": terms.config,
        "batches": [b for b, _ in keys], "ids": [c for _, c in keys], "avgdl": terms.avgdl,
    }  # fmt: skip
    rows = conn.execute(statement, params, prepare=True).fetchall()
    return {(b, c): LexicalScore(b, d, c, float(s), tuple(m)) for b, d, c, s, m in rows}


def check_config(conn: psycopg.Connection[Any], config: str) -> str:
    """`config` when PostgreSQL knows that text search configuration, else a `ConfigError`."""
    found = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_ts_config WHERE cfgname = %s)", (config,)
    ).fetchone()[0]
    if not found:
        raise ConfigError(
            f"retrieval.text_search_config={config!r}: PostgreSQL has no such text search "
            "configuration (`SELECT cfgname FROM pg_ts_config` lists them; e.g. english, simple)"
        )
    return config
