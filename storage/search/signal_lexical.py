"""The lexical signal of a query's pool: the query's terms in each BM25 group searched, the
best chunks by exact BM25 (`lexical`), and every pooled chunk's BM25 score with the words of the
query it holds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from seams.storage.search import lexical
from seams.storage.search.signals import ChunkKey, SignalScores


@dataclass(frozen=True)
class LexicalScores(SignalScores):
    """`SignalScores` with each scored chunk's BM25 entry (its matched lexemes and group)."""

    hits: dict[ChunkKey, lexical.LexicalScore]


@dataclass(frozen=True)
class LexicalSignal:
    """A query's best chunks by BM25 in each group searched (`read_lexical`)."""

    terms: tuple[lexical.QueryTerms, ...]
    """The query's terms per BM25 group (collection, configuration); empty: nothing indexed."""
    found: tuple[lexical.LexicalScore, ...]
    """The best chunks by BM25, best first."""
    exact: bool
    """Whether the first `exact_k` of `found` are proven to be the exhaustive ones."""
    lexemes: tuple[str, ...]
    notes: tuple[str, ...]

    @property
    def top(self) -> tuple[ChunkKey, ...]:
        return tuple((h.batch_key, h.document_id, h.chunk_id) for h in self.found)

    def scored(self, conn: psycopg.Connection[Any], keys: Sequence[ChunkKey]) -> LexicalScores:
        """Every key's exact BM25 (0.0 without a query lexeme), each by the statistics of its
        own group, and the ranks of the best chunks that hold a query lexeme."""
        by_chunk = {(h.batch_key, h.chunk_id): h for h in self.found}
        missing = [(b, c) for b, _, c in keys if (b, c) not in by_chunk]
        by_chunk.update(lexical.score_chunks_of(conn, self.terms, missing))
        hits = {key: by_chunk[(key[0], key[2])] for key in keys if (key[0], key[2]) in by_chunk}
        ranks = {
            (h.batch_key, h.document_id, h.chunk_id): rank
            for rank, h in enumerate(self.found, 1)
            if h.score > 0
        }
        scores = {key: hits[key].score if key in hits else 0.0 for key in keys}
        return LexicalScores(scores, ranks, hits)


def read_lexical(
    conn: psycopg.Connection[Any],
    query: str,
    collections: tuple[str, ...] | None,
    size: int,
    exact_k: int,
) -> LexicalSignal:
    """The best `size` chunks of `collections` by BM25 for `query`, the first `exact_k` proven
    to be the exhaustive ones (or a note saying why they could not be), with notes for a query
    that BM25 cannot match."""
    groups = lexical.group_terms(conn, query, collections)
    notes: list[str] = []
    lexemes: tuple[str, ...] = ()
    if not groups:
        among = f" in collection(s) {', '.join(collections)}" if collections is not None else ""
        notes.append(
            f"no chunk is indexed for BM25{among}: `seams backfill` re-indexes every batch"
        )
    else:
        lexemes = tuple(sorted({t for g in groups for t in g.lexemes}))
        if not lexemes:
            notes.append("the query has no searchable words (only stop words?)")
        elif not any(g.known for g in groups):
            notes.append("no query word occurs in the indexed chunks")
    if not groups:
        return LexicalSignal((), (), True, lexemes, tuple(notes))
    read = lexical.exact_read_of(conn, groups, size, exact_k=exact_k)
    if not read.exact:
        notes.append(
            f"BM25: the query's words are in too many chunks to prove its best {exact_k} within "
            f"{lexical.MAX_DEPTH:,} postings per word; the hits are the best of those read, "
            "scored exactly"
        )
    return LexicalSignal(tuple(groups), tuple(read.hits), read.exact, lexemes, tuple(notes))
