"""A query's candidate pool, read complete in one step (`read_pool`): the union of every
signal's best chunks (`signal_dense`, `signal_lexical`), each entry scored by every signal, and
the order that ranks it (`ranked_entries`: dense, BM25, or the two fused).

All scores are exact for every entry (a chunk found by one signal is scored by the others too),
so a caller can rank a pool with any fusion weight without a database.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import psycopg

from seams.storage.search import lexical
from seams.storage.search.dense import IndexTarget, index_target
from seams.storage.search.fusion import LEXICAL_WEIGHT, fuse_scores
from seams.storage.search.query import QueryEmbedder, SearchKind
from seams.storage.search.request import SearchRequest
from seams.storage.search.signal_dense import DenseSignal, read_dense
from seams.storage.search.signal_lexical import LexicalSignal, read_lexical
from seams.storage.search.signals import ChunkKey
from seams.storage.search.snapshot import Snapshot


@dataclass(frozen=True)
class PoolEntry:
    """One current chunk of a query's candidate pool, with every signal's score."""

    batch_key: str
    document_id: str
    chunk_id: str
    dense_score: float | None
    """Cosine of the query with the chunk vector, mixed with its best sentence's
    (`sentence_weight`); None when the search is lexical."""
    lexical_score: float | None
    """Exact BM25 (0.0 when the chunk holds no query lexeme); None when the search is dense."""
    matched_terms: tuple[str, ...]
    dense_rank: int | None
    """Rank (1-based) among the `pool` nearest current chunk vectors; None if not among them."""
    lexical_rank: int | None
    """Rank (1-based) among the `pool` best current chunks by BM25 (the first `exact_k`
    exactly the exhaustive ones); None if not among them."""
    lexical_group: tuple[str, str] | None = None
    """(collection, text search configuration) of its BM25 entry, whose statistics scored it;
    None when it has none (or the search is dense)."""

    @property
    def key(self) -> ChunkKey:
        return (self.batch_key, self.document_id, self.chunk_id)


@dataclass(frozen=True)
class SearchPool:
    """A query's pool: the union of every signal's top `pool`, each scored by all of
    them, so any fusion (`fuse_scores`, rank fusion on the ranks) can be computed from it."""

    query: str
    kind: SearchKind
    target: IndexTarget | None
    """The published vectors searched (mode, model); None when nothing is indexed."""
    entries: tuple[PoolEntry, ...] = ()
    lexemes: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    embed_ms: float = 0.0
    search_ms: float = 0.0
    scanned: int = 0
    """How many nearest vectors the dense signal read."""
    published_seq: int | None = None
    """The publication the pool's snapshot saw (see `SearchResponse.published_seq`)."""
    collections: tuple[str, ...] | None = None
    """The collections searched (None: every collection the connection may read)."""
    terms: tuple[lexical.QueryTerms, ...] = ()
    """The query's terms in each BM25 group searched (empty for a dense search)."""
    lexical_exact: bool = True
    """Whether the BM25 side's first `exact_k` are proven to be the exhaustive ones (False:
    its read stopped at `lexical.MAX_DEPTH` postings per word first)."""
    vector: np.ndarray | None = field(default=None, repr=False, compare=False)
    """The query's vector (None when the search uses none)."""


class RankedEntry(NamedTuple):
    entry: PoolEntry
    score: float
    """The score that ranks it (fused, dense or BM25, as the pool's kind says)."""


def read_pool(snapshot: Snapshot, embedder: QueryEmbedder, request: SearchRequest) -> SearchPool:
    """The pool of `request`, complete, in the answer's snapshot: the published target decides
    the model that embeds the query, so both are read from the same publication, and every
    signal reads in that snapshot too. The query is embedded only when the search uses vectors."""
    conn = snapshot.conn
    among = request.collections
    target = index_target(conn, mode=request.mode, model_id=request.model_id, collections=among)
    notes = request.query.notes
    if target is None:
        notes += (_nothing_indexed(conn, request),)
        return SearchPool(request.query.text, request.kind, None, notes=notes,
                          published_seq=snapshot.published_seq, collections=among)  # fmt: skip
    started = time.perf_counter()
    vector = None
    if request.kind != "lexical":
        vector = embedder.for_model(target.model_id).embed_queries([request.query.text])[0]
        vector = np.asarray(vector, dtype=np.float32)
    embedded = time.perf_counter()
    dense: DenseSignal | None = None
    if vector is not None:
        dense = read_dense(conn, target, vector, request.pool, among, request.sentence_weight)
    words: LexicalSignal | None = None
    if request.kind != "dense":
        words = read_lexical(conn, request.query.text, among, request.pool, request.exact_k)
    entries = _entries(conn, dense, words)
    return SearchPool(
        query=request.query.text,
        kind=request.kind,
        target=target,
        entries=entries,
        lexemes=words.lexemes if words else (),
        notes=notes + (words.notes if words else ()),
        embed_ms=(embedded - started) * 1000,
        search_ms=(time.perf_counter() - embedded) * 1000,
        scanned=len(dense.nearest) if dense else 0,
        published_seq=snapshot.published_seq,
        collections=among,
        terms=words.terms if words else (),
        lexical_exact=words.exact if words else True,
        vector=vector,
    )


def _entries(
    conn: psycopg.Connection[Any], dense: DenseSignal | None, words: LexicalSignal | None
) -> tuple[PoolEntry, ...]:
    """The union of the signals' tops (dense first), each entry scored by every signal."""
    keys = list(dict.fromkeys((*(dense.top if dense else ()), *(words.top if words else ()))))
    near = dense.scored(conn, keys) if dense else None
    bm25 = words.scored(conn, keys) if words else None
    out = []
    for key in keys:
        hit = bm25.hits.get(key) if bm25 else None
        out.append(
            PoolEntry(
                *key,
                dense_score=near.scores.get(key) if near else None,
                lexical_score=bm25.scores[key] if bm25 else None,
                matched_terms=hit.matched_terms if hit else (),
                dense_rank=near.ranks.get(key) if near else None,
                lexical_rank=bm25.ranks.get(key) if bm25 else None,
                lexical_group=(hit.collection, hit.text_search_config) if hit else None,
            )
        )
    return tuple(out)


def _nothing_indexed(conn: psycopg.Connection[Any], request: SearchRequest) -> str:
    """The note of a search that found no published vectors to read: nothing published at all
    (or in `mode`, or in `collections`) needs a run; vectors of other models only need the
    batches re-indexed with the model asked for."""
    mode, model_id, collections = request.mode, request.model_id, request.collections
    wanted = f" in mode {mode!r}" if mode else ""
    if collections is not None:
        wanted += f" in collection(s) {', '.join(collections)}"
    if model_id is not None and index_target(conn, mode=mode, collections=collections):
        return (
            f"nothing is indexed{wanted} with model {model_id[:12]}: `seams backfill` re-indexes "
            "every batch with the current settings' model"
        )
    return f"nothing is indexed{wanted} yet: run `seams run` (or materialize chunk_index) first"


def ranked_entries(pool: SearchPool, lexical_weight: float = LEXICAL_WEIGHT) -> list[RankedEntry]:
    """The pool's entries with the score that ranks them, best first (ties: chunk_id)."""
    found = pool.entries
    if pool.kind == "dense":
        scores = np.array([c.dense_score for c in found], dtype=np.float64)
    elif pool.kind == "lexical":
        scores = np.array([c.lexical_score for c in found], dtype=np.float64)
    else:
        scores = fuse_scores(
            [c.dense_score for c in found], [c.lexical_score for c in found], lexical_weight
        )
    order = sorted(
        range(len(found)), key=lambda i: (-scores[i], found[i].chunk_id, found[i].batch_key)
    )
    if pool.kind == "lexical":  # a chunk without any query lexeme is no lexical hit
        order = [i for i in order if scores[i] > 0]
    return [RankedEntry(found[i], float(scores[i])) for i in order]
