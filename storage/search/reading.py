"""What one search reads beside its pool (`SearchReading`): for the entries it reads, each
one's hit row (document, parent, neighbours; `hit_context`) and its sentences' raw dense and
lexical scores, all in the pool's snapshot. No weight and no budget applies here: the answer is
computed from a reading in memory (`engine.ranked_response`)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from seams.storage.search import lexical
from seams.storage.search.dense import IndexTarget
from seams.storage.search.hit_context import HitRow, SentenceRow, hit_rows, sentence_rows
from seams.storage.search.pool import PoolEntry, SearchPool
from seams.storage.search.signals import ChunkKey


@dataclass(frozen=True)
class SearchReading:
    """Everything one search reads from the index, before any weight or budget is applied: the
    candidate pool, and for the entries it read, each one's hit row and its sentences' raw
    scores. `search_response` reads the entries its answer needs; `read_search` reads every
    entry, so one reading answers every weight and budget (`seams eval`)."""

    pool: SearchPool
    mode: str | None
    """The mode asked for (None: the newest batch's)."""
    rows: Mapping[ChunkKey, HitRow | None] = field(default_factory=dict)
    """Per entry read: its hit row, or None when it is not visible."""
    sentences: Mapping[ChunkKey, list[SentenceRow]] | None = None
    """Per visible entry read: its sentences in order; None when passages were not read."""
    others: bool = False
    """Whether the index also holds vectors of another mode or model (a note when an answer has
    fewer hits than asked; read only where it can matter)."""
    read_ms: float = 0.0
    """Time spent reading the rows and the sentences."""

    @property
    def visible(self) -> int:
        """How many of the entries read are visible."""
        return sum(row is not None for row in self.rows.values())


def read_entries(
    conn: psycopg.Connection[Any],
    pool: SearchPool,
    entries: Sequence[PoolEntry],
    *,
    mode: str | None,
    parent_chars: int,
    passages: bool,
) -> SearchReading:
    """The reading of `pool` with the rows of `entries` (and, for `passages`, the visible ones'
    sentences with their raw scores), in the pool's snapshot."""
    if pool.target is None or not entries:
        return SearchReading(pool, mode, sentences={} if passages else None)
    started = time.perf_counter()
    keys = [entry.key for entry in entries]
    rows: dict[ChunkKey, HitRow | None] = dict.fromkeys(keys)
    found = hit_rows(conn, keys, range(len(keys)), len(keys), parent_chars)
    rows.update((row.key, row) for row in found)
    sentences: dict[ChunkKey, list[SentenceRow]] | None = {} if passages else None
    if passages and found:
        per_row = _sentences(conn, pool, found)
        sentences = {row.key: per for row, per in zip(found, per_row, strict=True)}
    read_ms = (time.perf_counter() - started) * 1000
    return SearchReading(pool, mode, rows, sentences, read_ms=read_ms)


def _sentences(
    conn: psycopg.Connection[Any], pool: SearchPool, rows: list[HitRow]
) -> list[list[SentenceRow]]:
    """Per row, its sentences with their raw scores for the query: the cosine where the search
    embeds the query, the IDF of the query lexemes they hold where it uses BM25, with the
    statistics of the row's own BM25 group (its collection and configuration)."""
    target = pool.target
    assert target is not None
    entries = {entry.key: entry for entry in pool.entries}
    groups = {(g.collection, g.config): g for g in pool.terms}
    by_terms: dict[lexical.QueryTerms | None, list[int]] = {}
    for i, row in enumerate(rows):
        entry = entries.get(row.key)
        terms = _row_terms(groups, entry.lexical_group if entry else None, row, target)
        by_terms.setdefault(terms, []).append(i)
    out: list[list[SentenceRow]] = [[] for _ in rows]
    for terms, positions in by_terms.items():
        found = sentence_rows(
            conn,
            [rows[i] for i in positions],
            vector=pool.vector,
            model_id=target.model_id,
            config=terms.config if terms else None,
            lexemes=terms.lexemes if terms else (),
            idf=terms.idf if terms else (),
        )
        for i, per_row in zip(positions, found, strict=True):
            out[i] = per_row
    return out


def _row_terms(
    groups: dict[tuple[str, str], lexical.QueryTerms],
    group: tuple[str, str] | None,
    row: HitRow,
    target: IndexTarget,
) -> lexical.QueryTerms | None:
    """The query terms a row's sentences are weighed with: its BM25 entry's group, else its
    collection's group under the index's configuration, else its collection's first group."""
    if group in groups:
        return groups[group]
    if (row.collection, target.text_search_config) in groups:
        return groups[(row.collection, target.text_search_config)]
    return next((g for (c, _), g in groups.items() if c == row.collection), None)
