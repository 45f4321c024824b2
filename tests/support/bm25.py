"""BM25 computed in Python from PostgreSQL's own lexemes: the reference the lexical index's
scores are checked against (the formula of `seams.storage.search.lexical`)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping
from typing import Any, TypeVar

import psycopg

from seams.storage.search import lexical

Key = TypeVar("Key", bound=Hashable)


def bm25_scores(
    conn: psycopg.Connection[Any], config: str, query: str, texts: Mapping[Key, str]
) -> dict[Key, float]:
    """The BM25 score of `query` for each text of `texts` (key -> chunk text), with the
    document frequencies and average length of `texts` alone, analysed with `config`."""
    tf: dict[Key, Counter[str]] = {
        key: Counter(
            dict(
                conn.execute(
                    "SELECT lexeme, cardinality(positions)"
                    " FROM unnest(to_tsvector(%s::regconfig, %s))",
                    (config, text),
                ).fetchall()
            )
        )
        for key, text in texts.items()
    }
    n = len(tf)
    avgdl = sum(sum(c.values()) for c in tf.values()) / n
    df = Counter(t for c in tf.values() for t in c)
    terms = {
        t
        for (t,) in conn.execute(
            "SELECT unnest(tsvector_to_array(to_tsvector(%s::regconfig, %s)))", (config, query)
        )
    }
    scores = {}
    for key, counts in tf.items():
        length = sum(counts.values())
        score = 0.0
        for t in terms & set(counts):
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            f = counts[t]
            norm = f + lexical.K1 * (1 - lexical.B + lexical.B * length / avgdl)
            score += idf * f * (lexical.K1 + 1) / norm
        scores[key] = score
    return scores
