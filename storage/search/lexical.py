"""BM25 queries over the current chunks (the index is kept by `lexical_index`).

BM25 (Robertson/Sparck Jones with Lucene's non-negative IDF), per distinct query lexeme t:

    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(q, d) = sum_t idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

with N the current chunks, avgdl their mean length, `K1` = 1.2, `B` = 0.75, all counted per
collection and text search configuration (a *group*): a chunk is scored with the statistics of
its own collection, so documents added to one collection never change another's scores. A
query's lexemes come from each group's own `to_tsvector` configuration, so stemming and stop
words match the index's even where collections analyse their text differently. tf is the
lexeme's position count in the tsvector (PostgreSQL keeps at most 256 per lexeme).

Query: the postings of the query's rarest `MAX_QUERY_TERMS` lexemes are read in impact order,
`TERM_DEPTH` per lexeme; their partial sums pick a shortlist, which is scored exactly (every query
lexeme, the live statistics), group by group, and the groups' best are merged by score.
Scores returned are exact BM25; the candidate set is exact whenever
no query lexeme has more than `TERM_DEPTH` postings, and an approximation above
(`benchmarks/search_latency.py` reports its recall against the exhaustive sum).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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
    collection: str = schema.DEFAULT_COLLECTION
    """The chunk's collection, whose statistics scored it."""
    text_search_config: str = DEFAULT_TEXT_SEARCH_CONFIG
    """The configuration of its entry (the group's, with `collection`)."""


_GROUP_TERMS = """
WITH groups AS (
    SELECT o.collection, o.text_search_config AS config, o.chunks::float8 AS n,
           o.length_sum::float8 / nullif(o.chunks, 0) AS avgdl
    FROM {totals} AS o
    WHERE o.chunks > 0 AND (%(every)s OR o.collection = ANY(%(collections)s::text[]))
      AND (%(config)s::text IS NULL OR o.text_search_config = %(config)s::text)
), lexemes AS (
    SELECT g.collection, g.config, u.lexeme
    FROM groups AS g
    CROSS JOIN LATERAL (
        SELECT DISTINCT x.lexeme
        FROM unnest(tsvector_to_array(to_tsvector(g.config::regconfig, %(query)s))) AS x(lexeme)
    ) AS u
)
SELECT g.collection, g.config, g.avgdl, l.lexeme, coalesce(t.df, 0),
       ln(1 + (g.n - coalesce(t.df, 0) + 0.5) / (coalesce(t.df, 0) + 0.5))
FROM groups AS g
LEFT JOIN lexemes AS l ON l.collection = g.collection AND l.config = g.config
LEFT JOIN {terms} AS t ON t.collection = g.collection AND t.text_search_config = g.config
                      AND t.lexeme = l.lexeme
ORDER BY g.collection, g.config, l.lexeme
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
        WHERE p.collection = %(collection)s AND p.text_search_config = %(config)s
          AND p.lexeme = r.lexeme
        ORDER BY p.impact DESC, p.batch_key DESC, p.chunk_id DESC
        LIMIT %(depth)s
    ) AS p
    GROUP BY p.batch_key, p.chunk_id
    ORDER BY partial DESC, p.chunk_id, p.batch_key
    LIMIT %(shortlist)s
)
SELECT c.batch_key, c.document_id, c.chunk_id, s.score, s.matched, c.collection
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
SELECT c.batch_key, c.document_id, c.chunk_id, s.score, s.matched, c.collection
FROM keys AS k
JOIN {chunks} AS c ON c.batch_key = k.batch_key AND c.chunk_id = k.chunk_id
   AND c.collection = %(collection)s AND c.text_search_config = %(config)s
CROSS JOIN LATERAL ({exact}) AS s
"""


@dataclass(frozen=True)
class QueryTerms:
    """The query's distinct lexemes under one collection's configuration, with their live IDF
    and the collection's average chunk length under it (a group of the index)."""

    config: str
    lexemes: tuple[str, ...]
    document_frequencies: tuple[int, ...]
    idf: tuple[float, ...]
    avgdl: float
    collection: str = schema.DEFAULT_COLLECTION

    @property
    def known(self) -> tuple[str, ...]:
        """Lexemes that occur in at least one current chunk."""
        return tuple(t for t, df in zip(self.lexemes, self.document_frequencies, strict=True) if df)


def _exact() -> sql.Composable:
    return sql.SQL(_EXACT).format(k1=sql.Literal(K1), b=sql.Literal(B))


def group_terms(
    conn: psycopg.Connection[Any],
    query: str,
    collections: Sequence[str] | None = None,
    *,
    config: str | None = None,
) -> list[QueryTerms]:
    """The query's terms in every group of the index (collection and text search configuration
    with current chunks), each parsed with its group's configuration, among `collections`
    (None: every collection the connection may read) and, given, of `config` only; ordered by
    collection, then configuration. [] when nothing is indexed there."""
    statement = sql.SQL(_GROUP_TERMS).format(
        totals=schema.LEXICAL_TOTALS.identifier(), terms=schema.LEXICAL_TERMS.identifier()
    )
    params = {
        "every": collections is None,
        "collections": list(collections or ()),
        "config": config,
        "query": query,
    }
    rows = conn.execute(statement, params, prepare=True).fetchall()
    grouped: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for row in rows:
        grouped.setdefault((row[0], row[1]), []).append(row)
    out = []
    for (collection, group_config), members in grouped.items():
        found = [r for r in members if r[3] is not None]
        out.append(
            QueryTerms(
                config=group_config,
                lexemes=tuple(r[3] for r in found),
                document_frequencies=tuple(int(r[4]) for r in found),
                idf=tuple(float(r[5]) for r in found),
                avgdl=float(members[0][2]) if found else 0.0,
                collection=collection,
            )
        )
    return out


def query_terms(
    conn: psycopg.Connection[Any],
    config: str,
    query: str,
    collection: str = schema.DEFAULT_COLLECTION,
) -> QueryTerms | None:
    """The query's lexemes and IDF under `config` in `collection`; None when nothing of it is
    indexed under that configuration (an unknown configuration: a `ConfigError`)."""
    found = group_terms(conn, query, [collection], config=config)
    if not found:
        check_config(conn, config)
        return None
    return found[0]


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
        "collection": terms.collection,
        "depth": depth,
        "shortlist": shortlist,
        "pool": pool,
        "avgdl": terms.avgdl,
    }
    rows = conn.execute(statement, params, prepare=True).fetchall()
    return [LexicalScore(b, d, c, float(s), tuple(m), g, terms.config) for b, d, c, s, m, g in rows]


def top_chunks_of(
    conn: psycopg.Connection[Any], groups: Sequence[QueryTerms], pool: int, **options: Any
) -> list[LexicalScore]:
    """`top_chunks` over several groups: each group's best scored with its own statistics, the
    `pool` best of them all, best first (ties by chunk_id, then batch_key)."""
    found = [hit for terms in groups for hit in top_chunks(conn, terms, pool, **options)]
    if len(groups) > 1:
        found.sort(key=lambda h: (-h.score, h.chunk_id, h.batch_key))
    return found[:pool]


def score_chunks(
    conn: psycopg.Connection[Any], terms: QueryTerms, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], LexicalScore]:
    """Exact BM25 of the given (batch_key, chunk_id) chunks; chunks without a current lexical
    entry in `terms.collection` under `terms.config` are absent from the result."""
    if not keys or not terms.lexemes:
        return {}
    statement = sql.SQL(_SCORE_KEYS).format(
        chunks=schema.LEXICAL_CHUNKS.identifier(), exact=_exact()
    )
    params = {
        "lexemes": list(terms.lexemes),
        "idf": list(terms.idf),
        "config": terms.config,
        "collection": terms.collection,
        "batches": [b for b, _ in keys],
        "ids": [c for _, c in keys],
        "avgdl": terms.avgdl,
    }
    rows = conn.execute(statement, params, prepare=True).fetchall()
    return {
        (b, c): LexicalScore(b, d, c, float(s), tuple(m), g, terms.config)
        for b, d, c, s, m, g in rows
    }


def score_chunks_of(
    conn: psycopg.Connection[Any], groups: Iterable[QueryTerms], keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], LexicalScore]:
    """`score_chunks` over several groups: each chunk scored by the group of its own entry."""
    out: dict[tuple[str, str], LexicalScore] = {}
    for terms in groups:
        out.update(score_chunks(conn, terms, [k for k in keys if k not in out]))
    return out


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
