"""Semantic search over the current chunks: top-k children with their parent and neighbours.

`search(postgres, embedder, "query", k=5)` embeds the query with the model that built the index,
asks pgvector's HNSW index (cosine) for the nearest chunk embeddings of the mode the index was
built in (model and mode are read from the published index's own rows, never assumed), among
the published chunks of each document's current version only (a stale version, or a build still
being written, is never returned: `dense`), all of one answer in one snapshot (`snapshot`),
re-scores that pool by each chunk's best sentence as well as its own vector (`sentence_rerank`,
seams.yaml `retrieval.sentence_weight`; the sentence vectors are the candidates' in
`semantic_boundaries`, already computed by the pipeline), adds the best chunks by BM25
(`lexical`) and ranks the union (`pool`, `fusion`). Each hit comes with the context a reader
needs (`hit_context`):

- its **parent** (`seams.chunk_parents`): the section of the document it belongs to (chunks
  sharing a heading path), or the whole document when it has no headings, with the parent's text
  (capped at `parent_chars`, centred on the hit), so a RAG prompt can use the small, precise
  child for matching and the parent for reading;
- its **neighbours** (chunk_index - 1 and + 1 of the same document version) and the exact
  source text from the previous chunk's start to the next chunk's end (sentence-window
  retrieval, without duplicating any overlap).

Entry points: `search_response` (and `search`, its hits) for text queries, `candidates` for a
query's scored pool, `search_vector` for an already-embedded query. Every text query enters
through `candidates`, whose first step is `prepare_query`.
`benchmarks/search_latency.py` measures it at 100k chunks.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np
import psycopg

from seams.errors import InputError
from seams.storage.connections import ConnectionSource, connection_lost
from seams.storage.search import lexical
from seams.storage.search.context_budget import (
    BudgetItem,
    Sentence,
    TokenCounter,
    best_passage,
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
from seams.storage.search.pool import CandidatePool, fill_pool, pool_size, ranked_candidates
from seams.storage.search.query import (
    PreparedQuery,
    QueryEmbedder,
    SearchKind,
    check_kind,
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
    sentence_weight: float = SENTENCE_WEIGHT,
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
    `mode` picks the index's vectors as in `search_response`. The query is embedded only when
    the search uses vectors.
    """
    check_kind(search)
    checked_weight(sentence_weight)
    if isinstance(pool, bool) or not isinstance(pool, int) or not 1 <= pool <= MAX_FETCH:
        raise InputError(f"pool must be an integer from 1 to {MAX_FETCH}, got {pool!r}")
    prepared = prepare_query(query)
    try:
        with postgres.connection() as conn, published_snapshot(conn) as snapshot:
            return _pool(snapshot, embedder, prepared, pool, search, mode, sentence_weight)[0]
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "searching the chunk index", exc) from exc


def _pool(
    snapshot: Snapshot,
    embedder: QueryEmbedder,
    prepared: PreparedQuery,
    pool: int,
    search: SearchKind,
    mode: str | None,
    sentence_weight: float,
) -> tuple[CandidatePool, np.ndarray | None]:
    """The pool of a checked query, inside the answer's snapshot, and the query's vector (None
    when the search uses none): the published target decides the model that embeds the query,
    so both are read from the same publication."""
    conn = snapshot.conn
    target = index_target(conn, mode=mode)
    result = CandidatePool(prepared.text, search, target, (), [], list(prepared.notes))
    result.published_seq = snapshot.published_seq
    if target is None:
        wanted = f" in mode {mode!r}" if mode else ""
        result.notes.append(
            f"nothing is indexed{wanted} yet: run `seams run` (or materialize chunk_index) first"
        )
        return result, None
    started = time.perf_counter()
    vector = None
    if search != "lexical":
        vector = embedder.for_model(target.model_id).embed([prepared.text])[0]
        vector = np.asarray(vector, dtype=np.float32)
    embedded = time.perf_counter()
    fill_pool(conn, result, vector, pool, sentence_weight)
    result.embed_ms = (embedded - started) * 1000
    result.search_ms = (time.perf_counter() - embedded) * 1000
    return result, vector


def search_response(
    postgres: ConnectionSource,
    embedder: QueryEmbedder,
    query: str,
    k: int = 5,
    *,
    search: SearchKind = "hybrid",
    lexical_weight: float = LEXICAL_WEIGHT,
    mode: str | None = None,
    parent_chars: int = PARENT_CHARS,
    sentence_weight: float = SENTENCE_WEIGHT,
    budget: int | None = None,
    count_tokens: TokenCounter | None = None,
    passages: bool = True,
) -> SearchResponse:
    """The top-`k` current chunks for `query` with their context, plus notes (e.g. truncation)
    and the time spent embedding and searching.

    `search`: "hybrid" (default) ranks the union of the dense and BM25 candidate pools by
    `fuse_scores` with `lexical_weight`; "dense" by the dense score alone (cosine with the chunk
    vector, re-scored by the best sentence: `sentence_weight`, 0 to turn off); "lexical" by BM25
    alone (`lexical`). Each hit carries both component scores and the query
    lexemes it contains. The query is embedded by the model the published index was built with,
    and matched against the vectors of the mode it was built in, both read from the index's own
    rows (`index_target`; `mode` picks one of several modes the index may hold);
    `embedder.for_model` switches to the index's variant when settings changed since.

    One answer reads one published state: the pool, the hits and their context come from one
    read-only snapshot (`snapshot`), whose publication is `response.published_seq`; a build
    being written meanwhile is never seen, a publication is seen whole or not at all.

    `budget` (tokens): instead of k hits, the hits of the ranked pool (`pool_size(k)`
    candidates) in rank order until the budget is full, hits that overlap or touch in one
    document merged into one span (`response.context`; `context_budget`: a hit that
    does not fit whole is skipped, the total never exceeds the budget). Tokens are counted by
    `count_tokens`, by default the embedder's tokenizer (`embedder.count_tokens`).

    `passages` (default): each hit's sentences are scored by the same fused lexical + dense
    evidence (`sentence_evidence`); with a budget each hit contributes whole sentences around its
    best one (`context_budget.pack_passages`), so more distinct evidence fits, and every hit
    given says which part of it was (`passage_start`, `passage_end`); without a budget the hits
    stay whole chunks with their best passage marked (`context_budget.best_passage`). False:
    whole hits only, and no passage.
    """
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InputError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
    check_kind(search)
    checked_lexical_weight(lexical_weight)
    checked_weight(sentence_weight)
    if budget is not None:
        check_budget(budget)
        count_tokens = count_tokens or getattr(embedder, "count_tokens", None)
        if count_tokens is None:
            raise InputError("a token budget needs a token counter: pass count_tokens")
    prepared = prepare_query(query)
    try:
        with postgres.connection() as conn, published_snapshot(conn) as snapshot:
            pool, vector = _pool(
                snapshot, embedder, prepared, pool_size(k), search, mode, sentence_weight
            )
            response = SearchResponse(
                query=pool.query,
                k=k,
                mode=pool.target.mode if pool.target else (mode or ""),
                model_id=pool.target.model_id if pool.target else "",
                hits=[],
                notes=pool.notes,
                embed_ms=pool.embed_ms,
                candidates_scanned=pool.scanned,
                search=search,
                lexemes=pool.lexemes,
                published_seq=snapshot.published_seq,
            )
            if pool.target is None:
                return response
            started = time.perf_counter()
            ranked = ranked_candidates(pool, lexical_weight)
            wanted = ranked if budget is not None else ranked[:k]
            # The rank position travels as the "distance", so the rows come back in rank order.
            keys = [
                (e.batch_key, e.document_id, e.chunk_id, float(i))
                for i, (e, _) in enumerate(wanted)
            ]
            rows = hit_rows(conn, keys, len(wanted), parent_chars) if wanted else []
            others = len(rows) < k and budget is None and other_targets(conn, pool.target)
            hits = [hit_from_row(rank, row) for rank, row in enumerate(rows, 1)]
            sentences = (
                _hit_sentences(conn, pool, vector, hits, search, lexical_weight)
                if passages and hits
                else [() for _ in hits]
            )
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "searching the chunk index", exc) from exc
    for hit, row, found in zip(hits, rows, sentences, strict=True):
        entry, score = wanted[int(row[0])]
        marked = best_passage(found)
        response.hits.append(
            replace(
                hit,
                score=score,
                dense_score=entry.dense_score,
                lexical_score=entry.lexical_score,
                matched_terms=entry.matched_terms,
                dense_rank=entry.dense_rank,
                lexical_rank=entry.lexical_rank,
                published_seq=snapshot.published_seq,
                passage_start=found[marked[0]].start if marked else None,
                passage_end=found[marked[1]].end if marked else None,
            )
        )
    if budget is not None:
        values = normalised([h.score for h in response.hits])
        items = [
            _budget_item(h, found, float(value))
            for h, found, value in zip(response.hits, sentences, values, strict=True)
        ]
        pack = pack_passages if passages else pack_budget
        response.context = pack(items, budget, count_tokens)  # type: ignore[arg-type]
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
    response.search_ms = pool.search_ms + (time.perf_counter() - started) * 1000
    if others:
        target = pool.target
        response.notes.append(
            f"the index also holds vectors of another mode or model than the newest batch's "
            f"({target.mode}, model {target.model_id[:12]}): `seams backfill` re-indexes every "
            "batch with the current settings"
        )
    return response


def _hit_sentences(
    conn: psycopg.Connection[Any],
    pool: CandidatePool,
    vector: np.ndarray | None,
    hits: list[SearchHit],
    search: SearchKind,
    lexical_weight: float,
) -> list[tuple[Sentence, ...]]:
    """Per hit, its sentences with their evidence for the query, fused over all the answer's
    sentences by the search's own rule: dense alone, BM25's terms alone, or both at
    `lexical_weight`."""
    target = pool.target
    assert target is not None
    terms = None
    if search != "dense":
        terms = lexical.query_terms(conn, target.text_search_config, pool.query)
    rows = sentence_rows(
        conn,
        hits,
        vector=vector,
        model_id=target.model_id,
        config=terms.config if terms else None,
        lexemes=terms.lexemes if terms else (),
        idf=terms.idf if terms else (),
    )
    weight = {"dense": 0.0, "lexical": 1.0}.get(search, lexical_weight)
    flat = [row for per_hit in rows for row in per_hit]
    evidence = sentence_evidence([r[2] for r in flat], [r[3] for r in flat], weight)
    out: list[tuple[Sentence, ...]] = []
    position = 0
    for per_hit in rows:
        scores = evidence[position : position + len(per_hit)]
        out.append(
            tuple(Sentence(r[0], r[1], float(e)) for r, e in zip(per_hit, scores, strict=True))
        )
        position += len(per_hit)
    return out


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
