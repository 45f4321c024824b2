"""An exact BM25 top k without reading every posting: impact-ordered reads that stop on a bound.

`lexical.top_chunks` reads a fixed `TERM_DEPTH` postings per query lexeme, best stored impact
first, so its top k is exact only while no query lexeme is in more chunks than that: as the
corpus grows, a common lexeme's first 200 postings are a smaller share of its chunks and the top
k drifts from the exhaustive one (`benchmarks/scale.py` measures by how much). This is the read
with a stopping rule instead (a threshold algorithm over the impact-ordered lists):

1. read `depth` postings of each of the rarest `max_terms` query lexemes (one statement);
2. bound every chunk's true score from above: a posting's true term score is at most its stored
   impact times max(1, avgdl / REFERENCE_LENGTH) (and never above k1 + 1), see `term_bound`;
   a chunk not read for a lexeme gets that lexeme's bound at its last read impact (0 when all
   its postings were read), a lexeme not read at all idf * (k1 + 1);
3. score exactly (`lexical.score_chunks`) the `shortlist` read chunks of highest bound;
4. stop when the k-th exact score reaches both the bound of any unread chunk and the bound of
   the best read chunk not scored: nothing else can enter the top k, which is then exactly the
   exhaustive one (ties interchangeable). Otherwise read `growth` times deeper (when an unread
   chunk could still enter) or score `growth` times more (when a read one could), and repeat.

Used by `benchmarks/scale.py` (`--stopping`) against the exhaustive sum at each corpus size.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from seams.storage import schema
from seams.storage.search import lexical
from seams.storage.search.lexical_index import REFERENCE_LENGTH

START_DEPTH = lexical.TERM_DEPTH
GROWTH = 4

_READ = """
SELECT r.lexeme, p.batch_key, p.chunk_id, p.impact
FROM unnest(%(read)s::text[]) AS r(lexeme)
CROSS JOIN LATERAL (
    SELECT p.batch_key, p.chunk_id, p.impact FROM {postings} AS p
    WHERE p.text_search_config = %(config)s AND p.lexeme = r.lexeme
    ORDER BY p.impact DESC, p.batch_key DESC, p.chunk_id DESC
    LIMIT %(depth)s
) AS p
"""


@dataclass(frozen=True)
class StoppingRead:
    """The top `pool` by exact BM25 (the first `k` exactly the exhaustive top k), and what it
    took: the postings depth reached, chunks scored exactly and statements run."""

    hits: list[lexical.LexicalScore]
    depth: int
    scored: int
    rounds: int


def term_bound(impact: float, avgdl: float) -> float:
    """The most a posting of stored `impact` can add to a score (before idf).

    Stored impact I = tf(k1+1) / (tf + k1(1 - b + b L / R)) at the reference length R; the true
    term score S uses avgdl A instead of R. With c = k1(1 - b), the true denominator's length
    part is c + (x - c) R / A where x = k1(1 - b + b L / R) >= c: for A <= R it is >= x, so
    S <= I; for A > R it is >= x R / A, so S <= I A / R. And S < k1 + 1 always. The stored
    impact is a float4: one part in a million of slack covers its rounding.
    """
    scale = max(1.0, avgdl / REFERENCE_LENGTH)
    return min(lexical.K1 + 1, impact * scale * (1 + 1e-6))


def top_chunks(
    conn: psycopg.Connection[Any],
    terms: lexical.QueryTerms,
    pool: int,
    k: int,
    *,
    start_depth: int = START_DEPTH,
    growth: int = GROWTH,
    max_terms: int = lexical.MAX_QUERY_TERMS,
) -> StoppingRead:
    """The `pool` best current chunks by BM25, best first (ties by chunk_id), whose first `k`
    are exactly the exhaustive top `k`: see the module doc."""
    known = [
        (t, df, idf)
        for t, df, idf in zip(terms.lexemes, terms.document_frequencies, terms.idf, strict=True)
        if df > 0
    ]
    if not known or pool < 1:
        return StoppingRead([], 0, 0, 0)
    k = min(k, pool)
    ordered = sorted(known, key=lambda x: (x[1], x[0]))  # rarest first
    read, unread = ordered[:max_terms], ordered[max_terms:]
    idf = {t: i for t, _, i in read}
    unread_bound = sum(i * (lexical.K1 + 1) for _, _, i in unread)
    statement = sql.SQL(_READ).format(postings=schema.LEXICAL_POSTINGS.identifier())
    depth, shortlist, rounds = start_depth, max(2 * pool, 2 * k), 0
    exact: dict[tuple[str, str], lexical.LexicalScore] = {}  # scores do not change with depth
    while True:
        rounds += 1
        rows = conn.execute(
            statement,
            {"read": [t for t, _, _ in read], "config": terms.config, "depth": depth},
            prepare=True,
        ).fetchall()
        seen: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
        last: dict[str, float] = {}
        count: dict[str, int] = defaultdict(int)
        for lexeme, batch_key, chunk_id, impact in rows:
            seen[(batch_key, chunk_id)][lexeme] = impact
            last[lexeme] = min(last.get(lexeme, math.inf), impact)
            count[lexeme] += 1
        rest = {
            t: (idf[t] * term_bound(last[t], terms.avgdl) if count[t] >= depth else 0.0)
            for t, _, _ in read
        }
        unseen = sum(rest.values()) + unread_bound
        exhausted = all(v == 0.0 for v in rest.values())
        bounds = sorted(
            (
                (
                    unread_bound
                    + sum(
                        idf[t] * term_bound(impacts[t], terms.avgdl) if t in impacts else rest[t]
                        for t in rest
                    ),
                    key,
                )
                for key, impacts in seen.items()
            ),
            key=lambda x: (-x[0], x[1][1], x[1][0]),
        )
        while True:
            picked = [key for _, key in bounds[:shortlist]]
            exact.update(lexical.score_chunks(conn, terms, [p for p in picked if p not in exact]))
            hits = sorted(exact.values(), key=lambda h: (-h.score, h.chunk_id, h.batch_key))
            kth = hits[k - 1].score if len(hits) >= k else -math.inf
            next_read = next((b for b, key in bounds if key not in exact), 0.0)
            if kth >= next_read or len(bounds) <= shortlist:
                break
            shortlist *= growth
        # Exhausted: every read lexeme's postings are in (beyond `max_terms` lexemes a query's
        # rarer ones bound the rest, and the read stops there as the product's does).
        if kth >= unseen or exhausted:
            return StoppingRead(hits[:pool], depth, len(exact), rounds)
        depth *= growth
