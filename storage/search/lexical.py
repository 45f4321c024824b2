"""BM25 queries over the current chunks (the index is kept by `lexical_index`).

BM25 (Robertson/Sparck Jones with Lucene's non-negative IDF, `K1`, `B`), its statistics counted
per collection and text search configuration (a *group*): a chunk is scored with its own
collection's statistics, and a query's lexemes come from each group's own configuration.

`top_chunks` returns the top k without reading every posting, exact by construction: postings
are read best stored impact first (`START_DEPTH` per lexeme, then `GROWTH` times deeper up to
`MAX_DEPTH`); a posting's stored impact bounds its true term score from below and above
(`term_bounds`), and a round stops once its k-th exact score reaches what a chunk never read can
score. A query not proven by `MAX_DEPTH` keeps the deepest round's best, flagged
(`LexicalRead.exact`). `depth=` and `exhaustive=True` are references to measure that read
against. The formula, the bounds and why the read is exact: docs/architecture.md, "BM25
queries".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from seams.errors import ConfigError
from seams.storage import schema

K1 = 1.2
B = 0.75
START_DEPTH = 400
"""Postings read per query lexeme, best impact first, in the first round of the exact read."""
GROWTH = 4
"""How many times deeper each further round of the exact read reads."""
REFERENCE_LENGTH = 64
"""The chunk length at which postings' stored impacts are computed (lexeme occurrences of a chunk
of ~150-200 model tokens). Impacts order a lexeme's postings and bound its true term scores
(`term_bounds`); scores use the live average."""
MAX_DEPTH = 25_600
"""The deepest round of the exact read (`START_DEPTH` * `GROWTH`**3: four rounds at most). A
query whose top k is not proven by then keeps that round's best (exact scores of the chunks of
highest bound; `LexicalRead.exact` is False), so a query of words in most chunks never reads
them all: at a million chunks every sampled query was proven within it, and one in twenty
needed more than 6,400 postings per word."""
TERM_DEPTH = 200
"""Postings per lexeme of the fixed-depth read (`depth=`: a reference, not exact)."""
MAX_QUERY_TERMS = 32
"""Query lexemes whose postings are read at a time (the rarest first); all of them count in the
exact score."""
BOUND_SLACK = 1e-6
"""Relative margin of the term bounds over float8 sums: every upper bound strictly above the
score it bounds."""
IMPACT_ULP = 2.0**-23
"""The stored impact's float4 rounding, at most half of this relative to it: the bounds widen
the impact by it before bounding, since near a tight bound its error is multiplied (up to ~80x
for an average length far below the reference length)."""
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

_ROUND = """
WITH q AS (
    SELECT * FROM unnest(%(lexemes)s::text[], %(idf)s::float8[]) AS q(lexeme, idf)
), rest AS (
    -- Per read lexeme, what a chunk not read for it can still get from it: the bound at the
    -- impact of its depth-th posting, 0 when it has fewer (all read).
    SELECT r.lexeme, r.idf, coalesce(r.idf * {last_high}, 0) AS rest
    FROM unnest(%(read)s::text[], %(read_idf)s::float8[]) AS r(lexeme, idf)
    LEFT JOIN LATERAL (
        SELECT p.impact FROM {postings} AS p
        WHERE p.collection = %(collection)s AND p.text_search_config = %(config)s
          AND p.lexeme = r.lexeme
        ORDER BY p.impact DESC, p.batch_key DESC, p.chunk_id DESC
        OFFSET %(depth)s::bigint - 1 LIMIT 1
    ) AS x ON true
), unseen AS (
    SELECT %(unread)s::float8 + sum(t.rest) AS bound, bool_and(t.rest = 0) AS exhausted
    FROM rest AS t
), seen AS (
    -- Each chunk read: a lower bound, and what its upper bound adds to `unseen`'s.
    SELECT p.batch_key, p.chunk_id, sum(p.low) AS low, sum(p.gain) AS gain
    FROM rest AS t
    CROSS JOIN LATERAL (
        SELECT p.batch_key, p.chunk_id, t.idf * {low} AS low, t.idf * {high} - t.rest AS gain
        FROM {postings} AS p
        WHERE p.collection = %(collection)s AND p.text_search_config = %(config)s
          AND p.lexeme = t.lexeme
        ORDER BY p.impact DESC, p.batch_key DESC, p.chunk_id DESC
        LIMIT %(depth)s::bigint
    ) AS p
    GROUP BY p.batch_key, p.chunk_id
), best AS (
    SELECT s.batch_key, s.chunk_id FROM seen AS s
    ORDER BY s.gain DESC, s.chunk_id, s.batch_key
    LIMIT %(pool)s::bigint
), first AS (
    -- The pool's worth of the best upper bounds, scored exactly.
    SELECT c.batch_key, c.document_id, c.chunk_id, s.score, s.matched, c.collection
    FROM best AS l
    JOIN {chunks} AS c ON c.batch_key = l.batch_key AND c.chunk_id = l.chunk_id
    CROSS JOIN LATERAL ({exact}) AS s
), floor AS (
    -- The k-th true score is at least the k-th exact score so far and the k-th lower bound.
    SELECT greatest(
        (SELECT f.score FROM first AS f ORDER BY f.score DESC LIMIT 1 OFFSET %(k)s::bigint - 1),
        (SELECT s.low FROM seen AS s ORDER BY s.low DESC LIMIT 1 OFFSET %(k)s::bigint - 1),
        0) AS low
), more AS (
    -- Every other chunk read whose upper bound reaches the floor, scored exactly: only when
    -- the floor reaches the bound of the chunks never read (or every posting is read), else
    -- this round cannot prove its top k and the next one reads deeper first.
    SELECT c.batch_key, c.document_id, c.chunk_id, s.score, s.matched, c.collection
    FROM seen AS l
    CROSS JOIN floor AS f
    CROSS JOIN unseen AS u
    JOIN {chunks} AS c ON c.batch_key = l.batch_key AND c.chunk_id = l.chunk_id
    CROSS JOIN LATERAL ({exact}) AS s
    WHERE (u.exhausted OR f.low >= u.bound) AND u.bound + l.gain >= f.low
      AND NOT EXISTS (SELECT 1 FROM best AS b
                      WHERE b.batch_key = l.batch_key AND b.chunk_id = l.chunk_id)
), scored AS (
    SELECT * FROM first UNION ALL SELECT * FROM more
)
SELECT s.batch_key, s.document_id, s.chunk_id, s.score, s.matched, s.collection,
       u.bound, u.exhausted, count(*) OVER () AS scored
FROM scored AS s CROSS JOIN unseen AS u
ORDER BY s.score DESC, s.chunk_id, s.batch_key
LIMIT %(pool)s::bigint
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


def _bound(impact: sql.Composable, *, high: bool) -> sql.Composable:
    """`term_bounds` in SQL for a posting's `impact`, with `%(rho)s` = R / avgdl: the upper
    bound (`high`) or the lower one. With u = (k1+1) / I, the score is (k1+1) / d for d
    between d0 = (1-rho) + rho u and d1 = (1-rho)(1 + min(c, u-1)) + rho u."""
    u = sql.SQL("({k1p} / ({i}::float8 * {ulp}))").format(
        k1p=sql.Literal(K1 + 1),
        i=impact,
        ulp=sql.Literal(1 + IMPACT_ULP if high else 1 - IMPACT_ULP),
    )
    rho = sql.SQL("%(rho)s::float8")
    d0 = sql.SQL("((1 - {rho}) + {rho} * {u})").format(rho=rho, u=u)
    d1 = sql.SQL("((1 - {rho}) * (1 + least({c}, {u} - 1)) + {rho} * {u})").format(
        rho=rho, u=u, c=sql.Literal(K1 * (1 - B))
    )
    return sql.SQL("({k1p} / {pick}({d0}, {d1}) * {slack})").format(
        k1p=sql.Literal(K1 + 1),
        pick=sql.SQL("least" if high else "greatest"),
        d0=d0,
        d1=d1,
        slack=sql.Literal(1 + BOUND_SLACK if high else 1 - BOUND_SLACK),
    )


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
        check_text_search_config(conn, config)
        return None
    return found[0]


@dataclass(frozen=True)
class LexicalRead:
    """A group's top chunks by the exact read, and what it took."""

    hits: list[LexicalScore]
    depth: int
    """Postings read per lexeme in the last round."""
    scored: int
    """Chunks scored exactly, over every round."""
    rounds: int
    """Statements run (one per round)."""
    exact: bool = True
    """Whether the first k are proven to be the exhaustive top k (False: the read stopped at
    `max_depth` first)."""


def term_bounds(impact: float, avgdl: float) -> tuple[float, float]:
    """(lowest, highest) true term score (before idf) of a posting of stored `impact`.

    The stored impact is I = tf (k1+1) / (tf + x) with x = k1 (1 - b + b L / R) at the reference
    length R; the true score uses the live avgdl A. With u = (k1+1) / I, rho = R / A and
    c = k1 (1 - b), the true score is (k1+1) / ((1 - rho)(1 + e) + rho u) with e = c / tf, and
    tf >= 1 and L >= 0 (x >= c) keep e within [0, min(c, u - 1)]. The score is monotone in e,
    so its extremes are at the ends of that range (equal when A = R: the score is I). Both are
    monotone in I, so the bound at a lexeme's last read impact holds for all its unread
    postings. The impact is widened by `IMPACT_ULP` (its float4 rounding) and both bounds by
    `BOUND_SLACK`: the upper bound is strictly above the true score.
    """
    k1p = K1 + 1
    c = K1 * (1 - B)
    rho = REFERENCE_LENGTH / avgdl

    def ends(stored: float) -> tuple[float, float]:
        u = k1p / stored
        d0 = (1 - rho) + rho * u
        d1 = (1 - rho) * (1 + min(c, u - 1)) + rho * u
        return max(d0, d1), min(d0, d1)

    low = k1p / ends(impact * (1 - IMPACT_ULP))[0] * (1 - BOUND_SLACK)
    high = k1p / ends(impact * (1 + IMPACT_ULP))[1] * (1 + BOUND_SLACK)
    return low, high


def top_chunks(
    conn: psycopg.Connection[Any],
    terms: QueryTerms,
    pool: int,
    *,
    exact_k: int | None = None,
    depth: int | None = None,
    max_terms: int = MAX_QUERY_TERMS,
    exhaustive: bool = False,
    start_depth: int = START_DEPTH,
    growth: int = GROWTH,
    max_depth: int | None = MAX_DEPTH,
) -> list[LexicalScore]:
    """The `pool` best current chunks by BM25 (exact scores), best first, ties broken by
    chunk_id then batch_key; the first `exact_k` (default: all `pool`) are exactly the
    exhaustive ones (see the module doc, and `exact_read`). `depth` reads that many postings
    of each of the `max_terms` rarest query lexemes instead (not exact once a lexeme has more);
    `exhaustive` reads them all (a reference: slow)."""
    if exhaustive or depth is not None:
        return _fixed_depth(conn, terms, pool, depth, max_terms, exhaustive)
    return exact_read(
        conn, terms, pool, exact_k=exact_k, start_depth=start_depth, growth=growth,
        max_terms=max_terms, max_depth=max_depth,
    ).hits  # fmt: skip


def _known(terms: QueryTerms) -> list[tuple[str, int, float]]:
    """(lexeme, df, idf) of the query lexemes some current chunk of the group holds, rarest
    first (ties by lexeme)."""
    known = [
        (t, df, idf)
        for t, df, idf in zip(terms.lexemes, terms.document_frequencies, terms.idf, strict=True)
        if df > 0
    ]
    return sorted(known, key=lambda x: (x[1], x[0]))


def exact_read(
    conn: psycopg.Connection[Any],
    terms: QueryTerms,
    pool: int,
    *,
    exact_k: int | None = None,
    start_depth: int = START_DEPTH,
    growth: int = GROWTH,
    max_terms: int = MAX_QUERY_TERMS,
    max_depth: int | None = MAX_DEPTH,
) -> LexicalRead:
    """`top_chunks`' exact read, with its cost: one statement per round (read, bounds and
    exact scores of the chunks that can still enter), `start_depth` postings per lexeme first,
    `growth` times more each further round, until the `exact_k`-th exact score reaches the
    bound of every chunk not scored, or the next round would read more than `max_depth`
    postings per lexeme (None: no limit; `exact` says which)."""
    known = _known(terms)
    if not known or pool < 1:
        return LexicalRead([], 0, 0, 0)
    if start_depth < 1 or growth < 2:
        raise ValueError(
            f"start_depth={start_depth}, growth={growth}: the exact read needs start_depth >= 1 "
            "and growth >= 2"
        )
    k = pool if exact_k is None else max(1, min(exact_k, pool))
    statement = sql.SQL(_ROUND).format(
        postings=schema.LEXICAL_POSTINGS.identifier(),
        chunks=schema.LEXICAL_CHUNKS.identifier(),
        exact=_exact(),
        last_high=_bound(sql.SQL("x.impact"), high=True),
        low=_bound(sql.SQL("p.impact"), high=False),
        high=_bound(sql.SQL("p.impact"), high=True),
    )
    params: dict[str, Any] = {
        "lexemes": list(terms.lexemes),
        "idf": list(terms.idf),
        "config": terms.config,
        "collection": terms.collection,
        "k": k,
        "pool": pool,
        "avgdl": terms.avgdl,
        "rho": REFERENCE_LENGTH / terms.avgdl,
        **_read_words(known, max_terms),
    }
    depth, rounds, scored, width = start_depth, 0, 0, max_terms
    while True:
        rounds += 1
        rows = conn.execute(statement, {**params, "depth": depth}, prepare=True).fetchall()
        if not rows:  # nothing of the group readable here
            return LexicalRead([], depth, scored, rounds)
        hits = [
            LexicalScore(b, d, c, float(s), tuple(m), g, terms.config)
            for b, d, c, s, m, g, *_ in rows
        ]
        unseen, exhausted, count = float(rows[0][6]), bool(rows[0][7]), int(rows[0][8])
        scored += count
        kth = hits[k - 1].score if len(hits) >= k else -math.inf
        if kth >= unseen or (exhausted and width >= len(known)):
            return LexicalRead(hits, depth, scored, rounds)
        if exhausted:  # every posting of the words read is in: read the next rarest ones too
            width += max_terms
            params.update(_read_words(known, width))
            continue
        if max_depth is not None and depth * growth > max_depth:
            return LexicalRead(hits, depth, scored, rounds, exact=False)
        depth *= growth


def _read_words(known: list[tuple[str, int, float]], width: int) -> dict[str, Any]:
    """The exact read's parameters for reading the `width` rarest of the `known` lexemes: their
    lexemes and IDF, and the most the others can add to a chunk's score."""
    read, unread = known[:width], known[width:]
    return {
        "read": [t for t, _, _ in read],
        "read_idf": [i for _, _, i in read],
        "unread": sum(i * (K1 + 1) for _, _, i in unread) * (1 + BOUND_SLACK),
    }


def _fixed_depth(
    conn: psycopg.Connection[Any],
    terms: QueryTerms,
    pool: int,
    depth: int | None,
    max_terms: int,
    exhaustive: bool,
) -> list[LexicalScore]:
    """`depth` postings of the `max_terms` rarest lexemes (every posting when `exhaustive`);
    their partial sums pick a shortlist of 2 `pool`, scored exactly."""
    if exhaustive:
        depth = max_terms = shortlist = 2**31 - 1
    else:
        shortlist = 2 * pool
    known = _known(terms)
    if not known or pool < 1:
        return []
    read = known[:max_terms]
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
    return _merged([top_chunks(conn, terms, pool, **options) for terms in groups], pool)


def exact_read_of(
    conn: psycopg.Connection[Any], groups: Sequence[QueryTerms], pool: int, **options: Any
) -> LexicalRead:
    """`exact_read` over several groups, merged as `top_chunks_of` merges them: exact when
    every group's read is; depth the deepest, scored and rounds summed."""
    reads = [exact_read(conn, terms, pool, **options) for terms in groups]
    return LexicalRead(
        _merged([r.hits for r in reads], pool),
        max((r.depth for r in reads), default=0),
        sum(r.scored for r in reads),
        sum(r.rounds for r in reads),
        all(r.exact for r in reads),
    )


def _merged(per_group: list[list[LexicalScore]], pool: int) -> list[LexicalScore]:
    """The `pool` best of several groups' hits, best first (ties by chunk_id, then batch_key)."""
    found = [hit for hits in per_group for hit in hits]
    if len(per_group) > 1:
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


def check_text_search_config(conn: psycopg.Connection[Any], config: str) -> str:
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
