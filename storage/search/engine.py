"""Semantic search over the current chunks: top-k children with their parent and neighbours.

`search(postgres, embedder, "query", k=5)` embeds the query with the model that built the index
(the serving model, `publication`), asks pgvector's HNSW index for the nearest chunks of the
published current versions (`dense`), all of one answer in one snapshot (`snapshot`),
re-scores that pool by each chunk's best sentence (`sentence_rerank`), adds the best chunks by
BM25 (`lexical`) and ranks the union (`pool`, `fusion`). Each hit comes with its **parent**
(the section it belongs to, `seams.chunk_parents`, capped at `parent_chars` around the hit) and
its **neighbours** with the exact source text around it (`hit_context`).

Entry points: `search_response` (and `search`, its hits) for text queries, `candidates` for a
query's scored pool, `search_vector` for an already-embedded query. A search is two steps: what
it reads in its snapshot (`SearchReading`), and the answer computed from that in memory at a
fusion weight and a budget (`ranked_response`); `read_search` reads every candidate, so one
reading answers every weight and budget (`seams eval`). Every text query enters through
`prepare_query`; `model_id` picks one model's vectors where the index holds several.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import psycopg

from seams.chunking.segment import BINDS_NEXT
from seams.errors import InputError
from seams.storage.connections import ConnectionSource, connection_lost
from seams.storage.search import lexical
from seams.storage.search.context_budget import (
    BudgetItem,
    PackedContext,
    Sentence,
    TokenCounter,
    best_passage,
    bound_to_next,
    check_budget,
    pack_budget,
    pack_passages,
)
from seams.storage.search.dense import (
    MAX_FETCH,
    MIN_FETCH,
    IndexTarget,
    index_target,
    nearest_vectors,
    other_targets,
    rescored,
)
from seams.storage.search.fusion import LEXICAL_WEIGHT, checked_lexical_weight, normalised
from seams.storage.search.hit_context import hit_from_row, hit_rows, sentence_rows
from seams.storage.search.hits import SearchHit, SearchResponse
from seams.storage.search.pool import (
    CandidatePool,
    PoolEntry,
    fill_pool,
    pool_size,
    ranked_candidates,
)
from seams.storage.search.query import (
    PreparedQuery,
    QueryEmbedder,
    SearchKind,
    check_kind,
    checked_collections,
    prepare_query,
)
from seams.storage.search.sentence_rerank import (
    SENTENCE_WEIGHT,
    checked_weight,
    sentence_evidence,
)
from seams.storage.search.snapshot import Snapshot, published_snapshot

MAX_K = 100
PARENT_CHARS = 4000


def search(
    postgres: ConnectionSource, embedder: QueryEmbedder, query: str, k: int = 5, **options: Any
) -> list[SearchHit]:
    """The top-`k` current chunks for `query`, best first: the hits of `search_response`, which
    takes the same `options` (search kind, weights, mode, parent size, budget)."""
    return search_response(postgres, embedder, query, k, **options).hits


def candidates(
    postgres: ConnectionSource,
    embedder: QueryEmbedder,
    query: str,
    *,
    pool: int = MIN_FETCH,
    search: SearchKind = "hybrid",
    mode: str | None = None,
    model_id: str | None = None,
    sentence_weight: float = SENTENCE_WEIGHT,
    collections: Sequence[str] | None = None,
) -> CandidatePool:
    """The candidate pool of `query`: the visible chunks among the `pool` nearest by dense score
    (`dense.nearest_vectors`) and the `pool` best by BM25 (hybrid; only one side for "dense" or
    "lexical"), each with its dense score, its BM25 score and matched lexemes, and its rank on
    each side; unordered.

    Every candidate is published and current, read in one snapshot (`pool.published_seq`); both
    scores are exact for every candidate (a chunk found by one side is scored by the other too),
    so a caller can fuse them with any weight: `fuse_scores(dense, lexical, w)` reproduces
    `search_response`'s hybrid order (sorted by fused score, then chunk_id). The dense score
    re-scores by the best sentence as `search_response` does (`sentence_weight`, 0 to turn off);
    `mode` and `model_id` pick the index's vectors as in `search_response`, and `collections`
    the collections searched. The query is embedded only when the search uses vectors.
    """
    check_kind(search)
    checked_weight(sentence_weight)
    among = checked_collections(collections)
    if isinstance(pool, bool) or not isinstance(pool, int) or not 1 <= pool <= MAX_FETCH:
        raise InputError(f"pool must be an integer from 1 to {MAX_FETCH}, got {pool!r}")
    prepared = prepare_query(query)
    try:
        with postgres.connection() as conn, published_snapshot(conn) as snapshot:
            return _pool(
                snapshot, embedder, prepared, pool, search, mode, model_id, sentence_weight,
                among,
            )[0]  # fmt: skip
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "searching the chunk index", exc) from exc


def _pool(
    snapshot: Snapshot,
    embedder: QueryEmbedder,
    prepared: PreparedQuery,
    pool: int,
    search: SearchKind,
    mode: str | None,
    model_id: str | None,
    sentence_weight: float,
    collections: tuple[str, ...] | None,
    exact_k: int | None = None,
) -> tuple[CandidatePool, np.ndarray | None]:
    """The pool of a checked query, inside the answer's snapshot, and the query's vector (None
    when the search uses none): the published target decides the model that embeds the query,
    so both are read from the same publication."""
    conn = snapshot.conn
    target = index_target(conn, mode=mode, model_id=model_id, collections=collections)
    result = CandidatePool(prepared.text, search, target, (), [], list(prepared.notes))
    result.published_seq = snapshot.published_seq
    result.collections = collections
    if target is None:
        result.notes.append(_nothing_indexed(conn, mode, model_id, collections))
        return result, None
    started = time.perf_counter()
    vector = None
    if search != "lexical":
        vector = embedder.for_model(target.model_id).embed_queries([prepared.text])[0]
        vector = np.asarray(vector, dtype=np.float32)
    embedded = time.perf_counter()
    fill_pool(conn, result, vector, pool, sentence_weight, exact_k)
    result.embed_ms = (embedded - started) * 1000
    result.search_ms = (time.perf_counter() - embedded) * 1000
    return result, vector


def _nothing_indexed(
    conn: psycopg.Connection[Any],
    mode: str | None,
    model_id: str | None,
    collections: tuple[str, ...] | None,
) -> str:
    """The note of a search that found no published vectors to read: nothing published at all
    (or in `mode`, or in `collections`) needs a run; vectors of other models only need the
    batches re-indexed with the model asked for."""
    wanted = f" in mode {mode!r}" if mode else ""
    if collections is not None:
        wanted += f" in collection(s) {', '.join(collections)}"
    if model_id is not None and index_target(conn, mode=mode, collections=collections):
        return (
            f"nothing is indexed{wanted} with model {model_id[:12]}: `seams backfill` re-indexes "
            "every batch with the current settings' model"
        )
    return f"nothing is indexed{wanted} yet: run `seams run` (or materialize chunk_index) first"


ChunkKey = tuple[str, str, str]
"""(batch_key, document_id, chunk_id) of a pool entry."""
SentenceRow = tuple[int, int, float | None, float, str]
"""A sentence of a hit: (start, end, cosine with the query or None, summed IDF of the query
lexemes it holds, its candidate kind), as `hit_context.sentence_rows` reads it."""


@dataclass
class SearchReading:
    """Everything one search reads from the index, before any weight or budget is applied: the
    candidate pool, and for the candidates it read, each one's hit row (document, parent,
    neighbours) and its sentences' raw dense and lexical scores. `ranked_response` turns it into
    the answer, in memory, for any `lexical_weight` and budget: `search_response` reads the
    candidates its answer needs and calls it once; `read_search` reads every candidate, so one
    reading answers every weight and budget (`seams eval`)."""

    pool: CandidatePool
    mode: str | None
    """The mode asked for (None: the newest batch's)."""
    rows: dict[ChunkKey, tuple[Any, ...] | None] = field(default_factory=dict)
    """Per candidate read: its `hit_context.hit_rows` row, or None when it is not visible."""
    sentences: dict[ChunkKey, list[SentenceRow]] | None = None
    """Per visible candidate read: its sentences in order; None when passages were not read."""
    others: bool = False
    """Whether the index also holds vectors of another mode or model (a note when an answer has
    fewer hits than asked; read only where it can matter)."""
    read_ms: float = 0.0
    """Time spent reading the rows and the sentences."""


def read_search(
    postgres: ConnectionSource,
    embedder: QueryEmbedder,
    query: str,
    k: int = 5,
    *,
    search: SearchKind = "hybrid",
    mode: str | None = None,
    model_id: str | None = None,
    sentence_weight: float = SENTENCE_WEIGHT,
    parent_chars: int = PARENT_CHARS,
    passages: bool = True,
    collections: Sequence[str] | None = None,
) -> SearchReading:
    """The reading of a top-`k` search of `query` (the pool `search_response` builds, the same
    options), with the rows and sentences of every candidate, all in one snapshot:
    `ranked_response(reading, k, ...)` is then `search_response`'s answer at any
    `lexical_weight` and budget, without reading the index again."""
    _check_k(k)
    check_kind(search)
    checked_weight(sentence_weight)
    among = checked_collections(collections)
    prepared = prepare_query(query)
    try:
        with postgres.connection() as conn, published_snapshot(conn) as snapshot:
            pool, vector = _pool(
                snapshot, embedder, prepared, pool_size(k), search, mode, model_id,
                sentence_weight, among, exact_k=k,
            )  # fmt: skip
            reading = _read_hits(conn, pool, vector, mode, pool.candidates, parent_chars, passages)
            if pool.target is not None:
                reading.others = other_targets(conn, pool.target)
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "searching the chunk index", exc) from exc
    return reading


def search_response(
    postgres: ConnectionSource,
    embedder: QueryEmbedder,
    query: str,
    k: int = 5,
    *,
    search: SearchKind = "hybrid",
    lexical_weight: float = LEXICAL_WEIGHT,
    mode: str | None = None,
    model_id: str | None = None,
    parent_chars: int = PARENT_CHARS,
    sentence_weight: float = SENTENCE_WEIGHT,
    budget: int | None = None,
    count_tokens: TokenCounter | None = None,
    passages: bool = True,
    collections: Sequence[str] | None = None,
) -> SearchResponse:
    """The top-`k` current chunks for `query` with their context, plus notes (e.g. truncation)
    and the time spent embedding and searching.

    `collections`: only the chunks of these collections (None: every collection the connection
    may read; a tenant's connection reads only its own, by row-level security). Each chunk's
    BM25 score uses its own collection's statistics; each hit names its `collection`.

    `search`: "hybrid" (default) ranks the union of the dense and BM25 candidate pools by
    `fuse_scores` with `lexical_weight`; "dense" by the dense score alone (cosine with the chunk
    vector, re-scored by the best sentence: `sentence_weight`, 0 to turn off); "lexical" by BM25
    alone (`lexical`). Each hit carries both component scores and the query
    lexemes it contains. The query is embedded by the model the published index was built with,
    and matched against the vectors of the mode it was built in, both read from the index's own
    rows (`index_target`; `mode` picks one of several modes the index may hold, `model_id` one of
    several models: the newest published batch's vectors of that model, and a note saying what
    to run when none are indexed with it); `embedder.for_model` switches to the index's model
    when settings changed since, so while a backfill builds another model's vectors the answers
    stay those of the complete previous index, and switch with the publication that completes
    the new one (the same snapshot names the model and reads its vectors: never two models in
    one answer).

    One answer reads one published state: the pool, the hits and their context come from one
    read-only snapshot (`snapshot`), whose publication is `response.published_seq`; a build
    being written meanwhile is never seen, a publication is seen whole or not at all.

    `budget` (tokens): instead of k hits, the hits of the ranked pool (`pool_size(k)`
    candidates) packed into the budget (`response.context`; `context_budget`): passages by
    default, whole hits with `passages=False`; what overlaps or touches in one document is one
    span, and the total never exceeds the budget. Tokens are counted by `count_tokens`, by
    default the embedder's tokenizer (`embedder.count_tokens`).

    `passages` (default): each hit's sentences are scored by the same fused lexical + dense
    evidence (`sentence_evidence`); with a budget each hit contributes whole sentences around its
    best one (`context_budget.pack_passages`), so more distinct evidence fits, and every hit
    given says which part of it was (`passage_start`, `passage_end`); without a budget the hits
    stay whole chunks with their best passage marked (`context_budget.best_passage`). False:
    whole hits only, and no passage.

    It reads the pool and then only the candidates its answer can use (the top `k` at this
    weight, or the whole ranked pool with a budget), and answers with `ranked_response`, as
    `read_search` readings are answered.
    """
    _check_k(k)
    check_kind(search)
    checked_lexical_weight(lexical_weight)
    checked_weight(sentence_weight)
    if budget is not None:
        check_budget(budget)
        count_tokens = _token_counter(count_tokens or getattr(embedder, "count_tokens", None))
    among = checked_collections(collections)
    prepared = prepare_query(query)
    try:
        with postgres.connection() as conn, published_snapshot(conn) as snapshot:
            pool, vector = _pool(
                snapshot, embedder, prepared, pool_size(k), search, mode, model_id,
                sentence_weight, among, exact_k=k if budget is None else None,
            )  # fmt: skip
            wanted = [e for e, _ in ranked_candidates(pool, lexical_weight)] if pool.target else []
            if budget is None:
                wanted = wanted[:k]
            reading = _read_hits(conn, pool, vector, mode, wanted, parent_chars, passages)
            visible = sum(row is not None for row in reading.rows.values())
            if pool.target is not None and budget is None and visible < k:
                reading.others = other_targets(conn, pool.target)
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "searching the chunk index", exc) from exc
    return ranked_response(
        reading, k, lexical_weight=lexical_weight, budget=budget, count_tokens=count_tokens,
        passages=passages,
    )  # fmt: skip


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InputError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")


def _token_counter(count_tokens: TokenCounter | None) -> TokenCounter:
    if count_tokens is None:
        raise InputError("a token budget needs a token counter: pass count_tokens")
    return count_tokens


def _read_hits(
    conn: psycopg.Connection[Any],
    pool: CandidatePool,
    vector: np.ndarray | None,
    mode: str | None,
    entries: list[PoolEntry],
    parent_chars: int,
    passages: bool,
) -> SearchReading:
    """The reading of `pool` with the rows of `entries` (and, for `passages`, the visible ones'
    sentences with their raw scores), in the pool's snapshot."""
    reading = SearchReading(pool, mode, sentences={} if passages else None)
    if pool.target is None or not entries:
        return reading
    started = time.perf_counter()
    keys = [(e.batch_key, e.document_id, e.chunk_id) for e in entries]
    reading.rows = dict.fromkeys(keys)
    # The position travels as the "distance", so the rows come back in the entries' order.
    positions = [(*key, float(i)) for i, key in enumerate(keys)]
    rows = hit_rows(conn, positions, len(positions), parent_chars)
    for row in rows:
        reading.rows[keys[int(row[0])]] = row
    if passages and rows:
        hits = [hit_from_row(rank, row) for rank, row in enumerate(rows, 1)]
        found = _hit_sentences(conn, pool, vector, hits)
        reading.sentences = {keys[int(row[0])]: per for row, per in zip(rows, found, strict=True)}
    reading.read_ms = (time.perf_counter() - started) * 1000
    return reading


def _hit_sentences(
    conn: psycopg.Connection[Any],
    pool: CandidatePool,
    vector: np.ndarray | None,
    hits: list[SearchHit],
) -> list[list[SentenceRow]]:
    """Per hit, its sentences with their raw scores for the query: the cosine where the search
    embeds the query, the IDF of the query lexemes they hold where it uses BM25, with the
    statistics of the hit's own BM25 group (its collection and configuration)."""
    target = pool.target
    assert target is not None
    entries = {(e.batch_key, e.document_id, e.chunk_id): e for e in pool.candidates}
    groups = {(g.collection, g.config): g for g in pool.terms}
    by_terms: dict[lexical.QueryTerms | None, list[int]] = {}
    for i, hit in enumerate(hits):
        entry = entries.get((hit.batch_key, hit.document_id, hit.chunk_id))
        terms = _hit_terms(groups, entry.lexical_group if entry else None, hit, target)
        by_terms.setdefault(terms, []).append(i)
    out: list[list[SentenceRow]] = [[] for _ in hits]
    for terms, positions in by_terms.items():
        rows = sentence_rows(
            conn,
            [hits[i] for i in positions],
            vector=vector,
            model_id=target.model_id,
            config=terms.config if terms else None,
            lexemes=terms.lexemes if terms else (),
            idf=terms.idf if terms else (),
        )
        for i, found in zip(positions, rows, strict=True):
            out[i] = found
    return out


def _hit_terms(
    groups: dict[tuple[str, str], lexical.QueryTerms],
    group: tuple[str, str] | None,
    hit: SearchHit,
    target: IndexTarget,
) -> lexical.QueryTerms | None:
    """The query terms a hit's sentences are weighed with: its BM25 entry's group, else its
    collection's group under the index's configuration, else its collection's first group."""
    if group in groups:
        return groups[group]
    if (hit.collection, target.text_search_config) in groups:
        return groups[(hit.collection, target.text_search_config)]
    return next((g for (c, _), g in groups.items() if c == hit.collection), None)


def ranked_response(
    reading: SearchReading,
    k: int = 5,
    *,
    lexical_weight: float = LEXICAL_WEIGHT,
    budget: int | None = None,
    count_tokens: TokenCounter | None = None,
    passages: bool = True,
) -> SearchResponse:
    """The answer `search_response` gives for what a search read, at `lexical_weight` and
    `budget` (the options mean what they mean there), computed in memory: the pool ranked
    (`ranked_candidates`), the top `k` visible candidates (or, with a budget, all of them in
    rank order) as hits with both component scores, each hit's sentences weighed by the search's
    evidence rule (`sentence_evidence`) and its best passage marked, and with a budget the hits
    packed (`context_budget`). `search_response` answers through it, so a reading answered
    here at any weight and budget is exactly what `seams search` gives for it.

    A `ValueError` when the reading lacks what the answer needs (the rows of a candidate it
    ranks, or the sentences when `passages`): read it with `read_search`."""
    _check_k(k)
    checked_lexical_weight(lexical_weight)
    if budget is not None:
        check_budget(budget)
        count_tokens = _token_counter(count_tokens)
    pool = reading.pool
    search = pool.search
    response = SearchResponse(
        query=pool.query,
        k=k,
        mode=pool.target.mode if pool.target else (reading.mode or ""),
        model_id=pool.target.model_id if pool.target else "",
        hits=[],
        notes=list(pool.notes),
        embed_ms=pool.embed_ms,
        candidates_scanned=pool.scanned,
        search=search,
        lexemes=pool.lexemes,
        published_seq=pool.published_seq,
        collections=pool.collections,
    )
    if pool.target is None:
        return response
    started = time.perf_counter()
    hits, sentences = _ranked_hits(reading, k, lexical_weight, budget is not None, passages)
    response.hits = hits
    if budget is not None:
        _pack(response, sentences, budget, count_tokens, passages)  # type: ignore[arg-type]
    response.search_ms = pool.search_ms + reading.read_ms
    response.search_ms += (time.perf_counter() - started) * 1000
    if reading.others and budget is None and len(response.hits) < k:
        target = pool.target
        response.notes.append(
            f"the index also holds vectors of another mode or model than the newest batch's "
            f"({target.mode}, model {target.model_id[:12]}): `seams backfill` re-indexes every "
            "batch with the current settings"
        )
    return response


def packed_contexts(
    reading: SearchReading,
    budgets: Sequence[int],
    *,
    lexical_weight: float = LEXICAL_WEIGHT,
    count_tokens: TokenCounter | None = None,
) -> dict[int, PackedContext | None]:
    """Per budget, `ranked_response(reading, k, lexical_weight=..., budget=B,
    count_tokens=...).context` (passages, any k: a budget ranks the whole pool), ranking the
    reading once for all the budgets: what `seams eval` scores at every weight."""
    checked_lexical_weight(lexical_weight)
    for budget in budgets:
        check_budget(budget)
    count_tokens = _token_counter(count_tokens)
    if reading.pool.target is None:
        return dict.fromkeys(budgets)
    found = _visible(reading, lexical_weight, None)
    hits = [hit_from_row(rank, row) for rank, (_, _, row) in enumerate(found, 1)]
    weight = {"dense": 0.0, "lexical": 1.0}.get(reading.pool.search, lexical_weight)
    if reading.sentences is None:
        raise ValueError("the reading holds no sentences: read it with passages=True")
    keys = [(h.batch_key, h.document_id, h.chunk_id) for h in hits]
    sentences = _weighed([reading.sentences[key] for key in keys], weight) if hits else []
    values = normalised([score for _, score, _ in found])
    items = [
        _budget_item(h, units, float(value))
        for h, units, value in zip(hits, sentences, values, strict=True)
    ]
    return {budget: pack_passages(items, budget, count_tokens) for budget in budgets}


def _ranked_hits(
    reading: SearchReading, k: int, lexical_weight: float, budget: bool, passages: bool
) -> tuple[list[SearchHit], list[tuple[Sentence, ...]]]:
    """The reading's hits at `lexical_weight` (the top `k`, or with a `budget` every visible
    candidate), best first, each with its best passage marked, and their weighed sentences."""
    pool = reading.pool
    search = pool.search
    hits: list[SearchHit] = []
    for entry, score, row in _visible(reading, lexical_weight, None if budget else k):
        hit = hit_from_row(len(hits) + 1, row)
        hits.append(
            replace(
                hit,
                score=score,
                dense_score=entry.dense_score,
                lexical_score=entry.lexical_score,
                matched_terms=entry.matched_terms,
                dense_rank=entry.dense_rank,
                lexical_rank=entry.lexical_rank,
                published_seq=pool.published_seq,
            )
        )
    sentences: list[tuple[Sentence, ...]] = [() for _ in hits]
    if passages and hits:
        if reading.sentences is None:
            raise ValueError("the reading holds no sentences: read it with passages=True")
        weight = {"dense": 0.0, "lexical": 1.0}.get(search, lexical_weight)
        sentences = _weighed(
            [reading.sentences[(h.batch_key, h.document_id, h.chunk_id)] for h in hits], weight
        )
    if budget and passages:  # the packer marks the passage of each hit it gives
        return hits, sentences
    for i, (hit, found) in enumerate(zip(hits, sentences, strict=True)):
        marked = best_passage(found)
        hits[i] = replace(
            hit,
            passage_start=found[marked[0]].start if marked else None,
            passage_end=found[marked[1]].end if marked else None,
        )
    return hits, sentences


def _visible(
    reading: SearchReading, lexical_weight: float, k: int | None
) -> list[tuple[PoolEntry, float, tuple[Any, ...]]]:
    """The reading's ranked candidates at `lexical_weight` (the first `k`, None: all) that are
    visible, with their score and hit row: one that is not gives its rank to the next."""
    ranked = ranked_candidates(reading.pool, lexical_weight)
    out = []
    for entry, score in ranked if k is None else ranked[:k]:
        key = (entry.batch_key, entry.document_id, entry.chunk_id)
        if key not in reading.rows:
            raise ValueError(f"the reading lacks candidate {key}: read it with read_search")
        row = reading.rows[key]
        if row is not None:
            out.append((entry, score, row))
    return out


def _weighed(rows: list[list[SentenceRow]], lexical_weight: float) -> list[tuple[Sentence, ...]]:
    """Per hit, its sentences with their evidence for the query, fused over all the answer's
    sentences by the search's own rule (`lexical_weight`: 0 for dense, 1 for lexical); a heading
    or a lead-in is one unit with the sentence after it (`bound_to_next`), so no passage is a
    heading alone."""
    flat = [row for per_hit in rows for row in per_hit]
    evidence = sentence_evidence([r[2] for r in flat], [r[3] for r in flat], lexical_weight)
    out: list[tuple[Sentence, ...]] = []
    position = 0
    for per_hit in rows:
        scores = evidence[position : position + len(per_hit)]
        found = [Sentence(r[0], r[1], float(e)) for r, e in zip(per_hit, scores, strict=True)]
        out.append(bound_to_next(found, [r[4] in BINDS_NEXT for r in per_hit]))
        position += len(per_hit)
    return out


def _pack(
    response: SearchResponse,
    sentences: list[tuple[Sentence, ...]],
    budget: int,
    count_tokens: TokenCounter,
    passages: bool,
) -> None:
    """The ranked hits packed into `budget` tokens (`response.context`); the hits that were
    given stay, each with the passage of it that was."""
    items = _budget_items(response.hits, sentences)
    pack = pack_passages if passages else pack_budget
    response.context = pack(items, budget, count_tokens)
    given = response.context.passages
    response.hits = [
        replace(h, passage_start=given[h.rank][0], passage_end=given[h.rank][1])
        if passages and h.rank in given
        else h
        for h in response.hits
    ]
    kept = {rank for span in response.context.spans for rank in span.ranks}
    if not kept and response.hits:
        response.notes.append(
            f"no hit fits a budget of {budget} tokens: the best one alone needs more"
        )
    response.hits = [h for h in response.hits if h.rank in kept]


def _budget_items(hits: list[SearchHit], sentences: list[tuple[Sentence, ...]]) -> list[BudgetItem]:
    """The hits as the packer sees them, each valued by its score scaled over the answer."""
    values = normalised([h.score for h in hits])
    return [
        _budget_item(h, found, float(value))
        for h, found, value in zip(hits, sentences, values, strict=True)
    ]


def _budget_item(
    hit: SearchHit, sentences: tuple[Sentence, ...] = (), value: float = 1.0
) -> BudgetItem:
    context = hit.context
    return BudgetItem(
        rank=hit.rank,
        group=(hit.batch_key, hit.document_id),
        chunk_id=hit.chunk_id,
        start_char=hit.start_char,
        end_char=hit.end_char,
        text=hit.text,
        window_start=context.window_start,
        window_text=context.window_text,
        sentences=sentences,
        value=value,
    )


def search_vector(
    postgres: ConnectionSource,
    vector: np.ndarray,
    k: int,
    *,
    model_id: str,
    mode: str,
    parent_chars: int = PARENT_CHARS,
    sentence_weight: float = SENTENCE_WEIGHT,
) -> tuple[list[SearchHit], int]:
    """Hits for an already-embedded query, and how many index entries were fetched for them;
    one snapshot, as `search_response`."""
    checked_weight(sentence_weight)
    query_vector = np.asarray(vector, dtype=np.float32)
    target = IndexTarget(mode=mode, model_id=model_id)
    try:
        with postgres.connection() as conn, published_snapshot(conn) as snapshot:
            nearest = nearest_vectors(conn, query_vector, target, pool_size(k))
            if nearest and sentence_weight > 0:
                nearest = rescored(conn, query_vector, nearest, model_id, sentence_weight)
            rows = hit_rows(conn, nearest, k, parent_chars) if nearest else []
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "searching the chunk index", exc) from exc
    hits = [
        replace(hit_from_row(rank, row), published_seq=snapshot.published_seq)
        for rank, row in enumerate(rows, 1)
    ]
    return hits, len(nearest)
