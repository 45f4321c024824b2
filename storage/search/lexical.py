"""BM25 queries over the current chunks (the index is kept by `lexical_index`).

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
TERM_DEPTH = 200
"""Postings read per query lexeme, best impact first."""
MAX_QUERY_TERMS = 32
"""Query lexemes whose postings are read (the rarest); all of them count in the exact score."""
DEFAULT_TEXT_SEARCH_CONFIG = "english"


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
        raise _unknown_config(config) from exc
    if not rows:
        indexed = conn.execute(
            sql.SQL(
                "SELECT EXISTS (SELECT 1 FROM {} WHERE text_search_config = %s AND chunks > 0)"
            ).format(schema.LEXICAL_TOTALS.identifier()),
            (config,),
        ).fetchone()[0]
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
        "lexemes": list(terms.lexemes),
        "idf": list(terms.idf),
        "read": [t for t, _, _ in read],
        "read_idf": [i for _, _, i in read],
        "config": terms.config,
        "depth": depth,
        "shortlist": shortlist,
        "pool": pool,
        "avgdl": terms.avgdl,
    }
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
        "lexemes": list(terms.lexemes),
        "idf": list(terms.idf),
        "config": terms.config,
        "batches": [b for b, _ in keys],
        "ids": [c for _, c in keys],
        "avgdl": terms.avgdl,
    }
    rows = conn.execute(statement, params, prepare=True).fetchall()
    return {(b, c): LexicalScore(b, d, c, float(s), tuple(m)) for b, d, c, s, m in rows}


def check_config(conn: psycopg.Connection[Any], config: str) -> str:
    """`config` when PostgreSQL knows that text search configuration, else a `ConfigError`."""
    found = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_ts_config WHERE cfgname = %s)", (config,)
    ).fetchone()[0]
    if not found:
        raise _unknown_config(config)
    return config


def _unknown_config(config: str) -> ConfigError:
    return ConfigError(
        f"retrieval.text_search_config={config!r}: PostgreSQL has no such text search "
        "configuration (`SELECT cfgname FROM pg_ts_config` lists them; e.g. english, simple)"
    )
