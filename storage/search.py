"""Semantic search over the current chunks: top-k children with their parent and neighbours.

`search(postgres, embedder, "query", k=5)` embeds the query with the model that built the index,
asks pgvector's HNSW index (cosine) for the nearest chunk embeddings of the mode the index was
built in (model and mode are read from the index's own rows, never assumed), keeps
only chunks of each document's newest version (`seams.current_chunks`: a stale version is never
returned), re-scores that pool by each chunk's best sentence as well as its own vector
(`seams.models.sentence_rerank`, seams.yaml `retrieval.sentence_weight`; the sentence vectors are
the candidates' in `semantic_boundaries`, already computed by the pipeline), and returns each hit
with the context seed 003 asks for:

- its **parent** (`seams.chunk_parents`): the section of the document it belongs to (chunks
  sharing a heading path), or the whole document when it has no headings, with the parent's text
  (capped at `parent_chars`, centred on the hit), so a RAG prompt can use the small, precise
  child for matching and the parent for reading;
- its **neighbours** (chunk_index - 1 and + 1 of the same document version) and the exact
  source text from the previous chunk's start to the next chunk's end (sentence-window
  retrieval, without duplicating any overlap).

Four round trips: one index probe for the newest batch's mode and model, the ANN query (which
over-fetches, since stale versions and other modes share the index, and retries wider when too
few survive), one for the pool's best sentences, then one query that joins everything else for
the k hits.
`benchmarks/search_latency.py` measures it at 100k chunks.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, Protocol, get_args
from urllib.parse import unquote, urlparse

import numpy as np
import psycopg
from psycopg import sql

from seams.errors import InputError
from seams.models.context_budget import (
    BudgetItem,
    PackedContext,
    TokenCounter,
    check_budget,
    pack_budget,
)
from seams.models.fusion import LEXICAL_WEIGHT, checked_lexical_weight, fuse_scores
from seams.models.sentence_rerank import SENTENCE_WEIGHT, checked_weight, rerank_order
from seams.storage import lexical, schema
from seams.storage.connections import ConnectionSource, connection_lost


class QueryEmbedder(Protocol):
    """What embeds a query: `OnnxEmbedder` (the resource), or anything with its interface."""

    @property
    def model_id(self) -> str: ...

    def embed(self, texts: list[str]) -> np.ndarray: ...

    def for_model(self, model_id: str) -> QueryEmbedder:
        """The same embedder running the model whose id is `model_id` (or a clear error)."""
        ...


@dataclass(frozen=True)
class IndexTarget:
    """How the chunk index was built: the retrieval mode and the model of its vectors, and the
    text search configuration of its BM25 entries."""

    mode: str
    model_id: str
    text_search_config: str = lexical.DEFAULT_TEXT_SEARCH_CONFIG


SearchKind = Literal["hybrid", "dense", "lexical"]
"""Which scores rank the hits (seams.yaml `retrieval.search`)."""
SEARCH_KINDS: tuple[str, ...] = get_args(SearchKind)


MAX_K = 100
MAX_QUERY_CHARS = 4096
"""Longer queries are cut (at a word boundary) with a note: a query is a question, not a
document, and ~4 model windows of it already average into one vector."""
PARENT_CHARS = 4000
MIN_FETCH = 40
MAX_FETCH = 4000


def pool_size(k: int) -> int:
    """How many nearest chunk vectors a top-`k` search fetches first (and re-scores)."""
    return max(MIN_FETCH, 4 * k)


@dataclass(frozen=True)
class Neighbour:
    """A chunk next to the hit in its document version."""

    chunk_id: str
    chunk_index: int
    start_char: int
    end_char: int
    text: str


@dataclass(frozen=True)
class ParentContext:
    """The hit's parent: a section ("section") or the whole document ("document").

    `start_char:end_char` is the parent's span in the source; `text` is
    `source[text_start:text_end]`, the whole parent unless it is longer than the cap
    (`truncated`), then a window of the parent around the hit."""

    kind: str
    section: str
    title: str
    start_char: int
    end_char: int
    first_chunk_index: int
    last_chunk_index: int
    chunk_count: int
    text_start: int
    text_end: int
    text: str

    @property
    def truncated(self) -> bool:
        return self.text_start > self.start_char or self.text_end < self.end_char


@dataclass(frozen=True)
class HitContext:
    parent: ParentContext
    previous: Neighbour | None
    next: Neighbour | None
    window_start: int
    window_end: int
    window_text: str
    """source[previous.start_char : next.end_char]: the hit with its neighbours, exactly once."""


@dataclass(frozen=True)
class SearchHit:
    """One retrieved chunk (a child) with its score and context."""

    rank: int
    score: float
    """The score that ranked it: the fused score (`fuse_scores`) in hybrid search, the dense score
    in dense search, BM25 in lexical search."""
    chunk_id: str
    document_id: str
    batch_key: str
    chunk_index: int
    total_chunks: int
    source_uri: str
    title: str | None
    pages: tuple[int, int] | None
    section: str
    start_char: int
    end_char: int
    text: str
    context: HitContext
    dense_score: float | None = None
    """Cosine similarity between the query and the chunk's embedding, mixed with the best of its
    sentences' when sentence re-scoring is on (`seams.models.sentence_rerank`); None in lexical
    search."""
    lexical_score: float | None = None
    """BM25 of the chunk for the query (0.0: no query lexeme in it); None in dense search."""
    matched_terms: tuple[str, ...] = ()
    """The query's lexemes (stemmed, as the index stores them) that the chunk contains."""
    dense_rank: int | None = None
    """Its rank among the dense search's nearest chunks (None: not among them)."""
    lexical_rank: int | None = None
    """Its rank among the BM25 search's best chunks (None: not among them)."""

    @property
    def matched(self) -> str:
        """Which parts found it: "dense", "lexical" or "dense+lexical" (dense: among the nearest
        chunk vectors; lexical: it contains query lexemes)."""
        parts = ["dense"] if self.dense_rank is not None else []
        if self.matched_terms:
            parts.append("lexical")
        return "+".join(parts) or "none"

    @property
    def file_name(self) -> str:
        """The source file's name (the URI's basename): what people call the document."""
        return unquote(urlparse(self.source_uri).path).rstrip("/").rsplit("/", 1)[-1]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["file_name"] = self.file_name
        out["matched"] = self.matched
        out["matched_terms"] = list(self.matched_terms)
        out["context"]["parent"]["truncated"] = self.context.parent.truncated
        return out


@dataclass(frozen=True)
class PreparedQuery:
    text: str
    original_chars: int
    notes: tuple[str, ...] = ()


@dataclass
class SearchResponse:
    """Hits plus what a caller (the CLI, a benchmark) wants to know about how they were found."""

    query: str
    k: int
    mode: str
    model_id: str
    hits: list[SearchHit]
    notes: list[str] = field(default_factory=list)
    embed_ms: float = 0.0
    search_ms: float = 0.0
    candidates_scanned: int = 0
    search: str = "dense"
    lexemes: tuple[str, ...] = ()
    """The query's lexemes under the index's text search configuration."""
    context: PackedContext | None = None
    """With a token budget: the spans given to the reader (`seams.models.context_budget`)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "query": self.query,
            "k": self.k,
            "search": self.search,
            "mode": self.mode,
            "model_id": self.model_id,
            "lexemes": list(self.lexemes),
            "notes": self.notes,
            "embed_ms": round(self.embed_ms, 3),
            "search_ms": round(self.search_ms, 3),
            "hits": [h.to_dict() for h in self.hits],
        }
        if self.context is not None:
            out["budget"] = self.context.budget
            out["tokens"] = self.context.tokens
            out["spans"] = [asdict(span) for span in self.context.spans]
        return out


def prepare_query(query: object, max_chars: int = MAX_QUERY_CHARS) -> PreparedQuery:
    """Validate a query: a non-blank str; lone surrogates replaced; over `max_chars` cut at a
    word boundary (with a note). Raises `InputError` saying what to pass instead."""
    if not isinstance(query, str):
        raise InputError(f"the query must be a string, got {type(query).__name__}")
    original = len(query)
    # Lone surrogates (from a bad decode) cannot reach the tokenizer; everything else can.
    text = query.encode("utf-8", "replace").decode("utf-8").strip()
    if not text or not any(ch.isprintable() and not ch.isspace() for ch in text):
        raise InputError("the query is empty: pass some words to search for")
    notes: list[str] = []
    if len(text) > max_chars:
        cut = text.rfind(" ", max_chars // 2, max_chars + 1)
        text = text[: cut if cut > 0 else max_chars].rstrip()
        notes.append(
            f"query truncated from {original:,} to {len(text):,} characters (max {max_chars:,})"
        )
    return PreparedQuery(text, original, tuple(notes))


def search(
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
) -> list[SearchHit]:
    """The top-`k` current chunks for `query`, best first (see `search_response`)."""
    return search_response(
        postgres, embedder, query, k, search=search, lexical_weight=lexical_weight, mode=mode,
        parent_chars=parent_chars, sentence_weight=sentence_weight,
    ).hits  # fmt: skip


@dataclass(frozen=True)
class Candidate:
    """One current chunk of a query's candidate pool, with both component scores."""

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
    """Rank (1-based) among the `pool` best current chunks by BM25; None if not among them."""


@dataclass
class CandidatePool:
    """A query's candidates: the union of the dense and the lexical top `pool`, each scored by
    both parts, so any fusion (`fuse_scores`, rank fusion on the ranks) can be computed from it."""

    query: str
    search: str
    target: IndexTarget | None
    lexemes: tuple[str, ...]
    candidates: list[Candidate]
    notes: list[str] = field(default_factory=list)
    embed_ms: float = 0.0
    search_ms: float = 0.0
    scanned: int = 0


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
    """The candidate pool of `query`: the current chunks among the `pool` nearest by dense score
    (`_current_nearest`) and the `pool` best by BM25 (hybrid; only one side for "dense" or
    "lexical"), each with its dense score, its BM25 score and matched lexemes, and its rank on
    each side; unordered.

    Every candidate is current (`seams.current_chunks`); both scores are exact for every
    candidate (a chunk found by one side is scored by the other too), so a caller can fuse them
    with any weight: `fuse_scores(dense, lexical, w)` reproduces `search_response`'s hybrid
    order (sorted by fused score, then chunk_id). The dense score re-scores by the best sentence
    as `search_response` does (`sentence_weight`, 0 to turn off); `mode` picks the index's
    vectors as in `search_response`. The query is embedded only when the search uses vectors.
    """
    _check_kind(search)
    checked_weight(sentence_weight)
    if isinstance(pool, bool) or not isinstance(pool, int) or not 1 <= pool <= MAX_FETCH:
        raise InputError(f"pool must be an integer from 1 to {MAX_FETCH}, got {pool!r}")
    prepared = prepare_query(query)
    target = index_target(postgres, mode=mode)
    result = CandidatePool(prepared.text, search, target, (), [], list(prepared.notes))
    if target is None:
        wanted = f" in mode {mode!r}" if mode else ""
        result.notes.append(
            f"nothing is indexed{wanted} yet: run `seams run` (or materialize chunk_index) first"
        )
        return result
    started = time.perf_counter()
    vector = None
    if search != "lexical":
        vector = embedder.for_model(target.model_id).embed([prepared.text])[0]
        vector = np.asarray(vector, dtype=np.float32)
    embedded = time.perf_counter()
    try:
        with postgres.connection() as conn:
            _fill_pool(conn, result, vector, pool, sentence_weight)
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "searching the chunk index", exc) from exc
    result.embed_ms = (embedded - started) * 1000
    result.search_ms = (time.perf_counter() - embedded) * 1000
    return result


def _fill_pool(
    conn: psycopg.Connection[Any],
    result: CandidatePool,
    vector: np.ndarray | None,
    pool: int,
    sentence_weight: float,
) -> None:
    """Both sides' top `pool`, then the missing component of every candidate."""
    target = result.target
    assert target is not None
    terms = None
    if result.search != "dense":
        terms = lexical.query_terms(conn, target.text_search_config, result.query)
        if terms is None:
            result.notes.append(
                f"no chunk is indexed for BM25 under text search configuration "
                f"{target.text_search_config!r}: `seams backfill` re-indexes every batch"
            )
        else:
            result.lexemes = terms.lexemes
            if not terms.lexemes:
                result.notes.append("the query has no searchable words (only stop words?)")
            elif not terms.known:
                result.notes.append("no query word occurs in the indexed chunks")
    dense: list[tuple[str, str, str, float]] = []
    if vector is not None:
        dense, result.scanned = _current_nearest(conn, vector, target, pool)
    found = lexical.top_chunks(conn, terms, pool) if terms is not None else []
    keys = {(b, d, c): None for b, d, c, _ in dense}
    keys.update({(h.batch_key, h.document_id, h.chunk_id): None for h in found})
    dense_scores: dict[tuple[str, str, str], float] = {}
    dense_ranks: dict[tuple[str, str, str], int] = {}
    if vector is not None and keys:
        have = {(b, d, c) for b, d, c, _ in dense}
        extra = _chunk_distances(conn, vector, target, [k for k in keys if k not in have])
        every = dense + extra
        if sentence_weight > 0:
            every = _rescored(conn, vector, every, target.model_id, sentence_weight)
        dense_scores = {(b, d, c): 1.0 - dist for b, d, c, dist in every}
        ranked = sorted(dense, key=lambda r: (-dense_scores[r[:3]], r[2], r[0]))
        dense_ranks = {r[:3]: rank for rank, r in enumerate(ranked, 1)}
    lexical_scores: dict[tuple[str, str], lexical.LexicalScore] = {}
    lexical_ranks: dict[tuple[str, str, str], int] = {}
    if terms is not None:
        lexical_scores = {(h.batch_key, h.chunk_id): h for h in found}
        missing = [(b, c) for b, _, c in keys if (b, c) not in lexical_scores]
        lexical_scores.update(lexical.score_chunks(conn, terms, missing))
        lexical_ranks = {(h.batch_key, h.document_id, h.chunk_id): r
                         for r, h in enumerate(found, 1) if h.score > 0}  # fmt: skip
    for key in keys:
        hit = lexical_scores.get((key[0], key[2]))
        result.candidates.append(
            Candidate(
                *key,
                dense_score=dense_scores.get(key) if vector is not None else None,
                lexical_score=(hit.score if hit else 0.0) if terms is not None else None,
                matched_terms=hit.matched_terms if hit else (),
                dense_rank=dense_ranks.get(key),
                lexical_rank=lexical_ranks.get(key),
            )
        )


def _check_kind(search: object) -> None:
    if search not in SEARCH_KINDS:
        raise InputError(f"retrieval.search={search!r}: must be one of {', '.join(SEARCH_KINDS)}")


def ranked_candidates(
    pool: CandidatePool, lexical_weight: float = LEXICAL_WEIGHT
) -> list[tuple[Candidate, float]]:
    """The pool's candidates with the score that ranks them, best first (ties: chunk_id)."""
    found = pool.candidates
    if pool.search == "dense":
        scores = np.array([c.dense_score for c in found], dtype=np.float64)
    elif pool.search == "lexical":
        scores = np.array([c.lexical_score for c in found], dtype=np.float64)
    else:
        scores = fuse_scores([c.dense_score for c in found],
                             [c.lexical_score for c in found], lexical_weight)  # fmt: skip
    order = sorted(range(len(found)),
                   key=lambda i: (-scores[i], found[i].chunk_id, found[i].batch_key))  # fmt: skip
    if pool.search == "lexical":  # a chunk without any query lexeme is no lexical hit
        order = [i for i in order if scores[i] > 0]
    return [(found[i], float(scores[i])) for i in order]


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
) -> SearchResponse:
    """The top-`k` current chunks for `query` with their context, plus notes (e.g. truncation)
    and the time spent embedding and searching.

    `search`: "hybrid" (default) ranks the union of the dense and BM25 candidate pools by
    `fuse_scores` with `lexical_weight`; "dense" by the dense score alone (cosine with the chunk
    vector, re-scored by the best sentence: `sentence_weight`, 0 to turn off); "lexical" by BM25
    alone (`seams.storage.lexical`). Each hit carries both component scores and the query
    lexemes it contains. The query is embedded by the model the index was built with, and
    matched against the vectors of the mode it was built in, both read from the index's own rows
    (`index_target`; `mode` picks one of several modes the index may hold); `embedder.for_model`
    switches to the index's variant when settings changed since.

    `budget` (tokens): instead of k hits, the hits of the ranked pool (`pool_size(k)`
    candidates) in rank order until the budget is full, hits that overlap or touch in one
    document merged into one span (`response.context`; `seams.models.context_budget`: a hit that
    does not fit whole is skipped, the total never exceeds the budget). Tokens are counted by
    `count_tokens`, by default the embedder's tokenizer (`embedder.count_tokens`).
    """
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InputError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
    _check_kind(search)
    checked_lexical_weight(lexical_weight)
    if budget is not None:
        check_budget(budget)
        count_tokens = count_tokens or getattr(embedder, "count_tokens", None)
        if count_tokens is None:
            raise InputError("a token budget needs a token counter: pass count_tokens")
    pool = candidates(postgres, embedder, query, pool=pool_size(k), search=search, mode=mode,
                      sentence_weight=sentence_weight)  # fmt: skip
    target = pool.target
    response = SearchResponse(
        query=pool.query, k=k, mode=target.mode if target else (mode or ""),
        model_id=target.model_id if target else "", hits=[], notes=pool.notes,
        embed_ms=pool.embed_ms, candidates_scanned=pool.scanned, search=search,
        lexemes=pool.lexemes,
    )  # fmt: skip
    if target is None:
        return response
    started = time.perf_counter()
    ranked = ranked_candidates(pool, lexical_weight)
    wanted = ranked if budget is not None else ranked[:k]
    try:
        with postgres.connection() as conn:
            rows = _hits(conn, [(c.batch_key, c.document_id, c.chunk_id, float(position))
                                for position, (c, _) in enumerate(wanted)],
                         len(wanted), parent_chars) if wanted else []  # fmt: skip
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "searching the chunk index", exc) from exc
    for rank, row in enumerate(rows, 1):
        candidate, score = wanted[int(row[0])]
        response.hits.append(
            replace(
                _hit(rank, row), score=score, dense_score=candidate.dense_score,
                lexical_score=candidate.lexical_score, matched_terms=candidate.matched_terms,
                dense_rank=candidate.dense_rank, lexical_rank=candidate.lexical_rank,
            )
        )  # fmt: skip
    if budget is not None:
        response.context = pack_budget(
            [_budget_item(h) for h in response.hits],
            budget,
            count_tokens,  # type: ignore[arg-type]
        )
        kept = {rank for span in response.context.spans for rank in span.ranks}
        if not kept and response.hits:
            response.notes.append(
                f"no hit fits a budget of {budget} tokens: the best one alone needs more"
            )
        response.hits = [h for h in response.hits if h.rank in kept]
    response.search_ms = pool.search_ms + (time.perf_counter() - started) * 1000
    if len(response.hits) < k and budget is None and _other_targets(postgres, target):
        response.notes.append(
            f"the index also holds vectors of another mode or model than the newest batch's "
            f"({target.mode}, model {target.model_id[:12]}): `seams backfill` re-indexes every "
            "batch with the current settings"
        )
    return response


def _budget_item(hit: SearchHit) -> BudgetItem:
    context = hit.context
    return BudgetItem(
        rank=hit.rank, group=(hit.batch_key, hit.document_id), chunk_id=hit.chunk_id,
        start_char=hit.start_char, end_char=hit.end_char, text=hit.text,
        window_start=context.window_start, window_text=context.window_text,
    )  # fmt: skip


def index_target(postgres: ConnectionSource, *, mode: str | None = None) -> IndexTarget | None:
    """The mode, model and text search configuration of the newest indexed batch (batch keys sort
    by registration time), optionally among the rows of `mode`; None when nothing is indexed.
    One index probe."""
    query = sql.SQL(
        "SELECT mode, model_id, text_search_config FROM {} {} ORDER BY batch_key DESC LIMIT 1"
    ).format(
        schema.CHUNK_INDEX.identifier(),
        sql.SQL("WHERE mode = %(mode)s") if mode else sql.SQL(""),
    )
    try:
        with postgres.connection() as conn:
            row = conn.execute(query, {"mode": mode}).fetchone()
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "reading the chunk index", exc) from exc
    return IndexTarget(*row) if row else None


def _other_targets(postgres: ConnectionSource, target: IndexTarget) -> bool:
    """Whether some index rows were built in another mode or with another model."""
    query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE mode <> %s OR model_id <> %s)").format(
        schema.CHUNK_INDEX.identifier()
    )
    try:
        with postgres.connection() as conn:
            return bool(conn.execute(query, (target.mode, target.model_id)).fetchone()[0])
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "reading the chunk index", exc) from exc


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
    """Hits for an already-embedded query, and how many index entries were fetched for them."""
    checked_weight(sentence_weight)
    query_vector = np.asarray(vector, dtype=np.float32)
    fetch = pool_size(k)
    try:
        with postgres.connection() as conn:
            while True:
                nearest = _nearest(conn, query_vector, model_id, mode, fetch)
                if nearest and sentence_weight > 0:
                    nearest = _rescored(conn, query_vector, nearest, model_id, sentence_weight)
                rows = _hits(conn, nearest, k, parent_chars) if nearest else []
                if len(rows) >= k or len(nearest) < fetch or fetch >= MAX_FETCH:
                    break
                fetch = min(MAX_FETCH, fetch * 4)  # stale versions crowded the candidates
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "searching the chunk index", exc) from exc
    return [_hit(rank, row) for rank, row in enumerate(rows, 1)], len(nearest)


def _nearest(
    conn: psycopg.Connection[Any], vector: np.ndarray, model_id: str, mode: str, fetch: int
) -> list[tuple[str, str, str, float]]:
    """The `fetch` nearest index entries of (model, mode) by cosine distance, via HNSW.

    `ef_search` is raised to `fetch` (HNSW returns at most ef_search rows per scan) and
    iterative scanning lets the index keep going past rows the mode/model filter drops."""
    query = sql.SQL(
        "SELECT batch_key, document_id, chunk_id, embedding <=> %(q)s AS distance FROM {} "
        "WHERE mode = %(mode)s AND model_id = %(model)s ORDER BY embedding <=> %(q)s "
        "LIMIT %(fetch)s"
    ).format(schema.CHUNK_INDEX.identifier())
    with conn.transaction():
        conn.execute(
            "SELECT set_config('hnsw.ef_search', %s, true),"
            " set_config('hnsw.iterative_scan', 'relaxed_order', true)",
            (str(min(1000, max(MIN_FETCH, fetch))),),
        )
        params = {"q": vector, "mode": mode, "model": model_id, "fetch": fetch}
        return conn.execute(query, params, prepare=True).fetchall()


_CURRENT = """
SELECT n.pos
FROM unnest(%(batches)s::text[], %(docs)s::text[], %(ids)s::text[])
     WITH ORDINALITY AS n(batch_key, document_id, chunk_id, pos)
CROSS JOIN LATERAL (
    -- OFFSET 0: a per-candidate probe of the view (see _HITS)
    SELECT 1 FROM {current} AS c
    WHERE c.batch_key = n.batch_key AND c.document_id = n.document_id
      AND c.chunk_id = n.chunk_id
    OFFSET 0
) AS c
ORDER BY n.pos
"""


def _current_nearest(
    conn: psycopg.Connection[Any], vector: np.ndarray, target: IndexTarget, pool: int
) -> tuple[list[tuple[str, str, str, float]], int]:
    """The current chunks among the `pool` nearest chunk vectors, and how many index entries
    were fetched. Stale versions take places in the pool; the fetch widens only when they took
    more than half of it, so a search costs one ANN probe unless old versions crowd the index."""
    fetch = max(pool, MIN_FETCH)
    statement = sql.SQL(_CURRENT).format(
        current=sql.Identifier(schema.SCHEMA, schema.CURRENT_CHUNKS_VIEW)
    )
    while True:
        nearest = _nearest(conn, vector, target.model_id, target.mode, fetch)
        if not nearest:
            return [], 0
        batches, docs, ids, _ = (list(col) for col in zip(*nearest, strict=True))
        params = {"batches": batches, "docs": docs, "ids": ids}
        keep = [nearest[pos - 1] for (pos,) in conn.execute(statement, params, prepare=True)]
        if 2 * len(keep) >= pool or len(nearest) < fetch or fetch >= MAX_FETCH:
            return keep[:pool], len(nearest)
        fetch = min(MAX_FETCH, fetch * 4)


_DISTANCES = """
SELECT n.batch_key, n.document_id, n.chunk_id, i.embedding <=> %(q)s
FROM unnest(%(batches)s::text[], %(docs)s::text[], %(ids)s::text[])
     AS n(batch_key, document_id, chunk_id)
JOIN {index} AS i ON i.batch_key = n.batch_key AND i.document_id = n.document_id
                 AND i.chunk_id = n.chunk_id AND i.model_id = %(model)s AND i.mode = %(mode)s
"""


def _chunk_distances(
    conn: psycopg.Connection[Any],
    vector: np.ndarray,
    target: IndexTarget,
    keys: Sequence[tuple[str, str, str]],
) -> list[tuple[str, str, str, float]]:
    """Cosine distances of the given chunks' vectors (chunks without one of the target's mode
    and model get distance 1: cosine 0)."""
    if not keys:
        return []
    statement = sql.SQL(_DISTANCES).format(index=schema.CHUNK_INDEX.identifier())
    batches, docs, ids = (list(col) for col in zip(*keys, strict=True))
    params = {"q": vector, "batches": batches, "docs": docs, "ids": ids,
              "model": target.model_id, "mode": target.mode}  # fmt: skip
    found = {
        (b, d, c): float(dist)
        for b, d, c, dist in conn.execute(statement, params, prepare=True).fetchall()
    }
    return [(*key, found.get(key, 1.0)) for key in keys]


_BEST_SENTENCES = """
SELECT n.pos, max(1 - (s.embedding <=> %(q)s))
FROM unnest(%(batches)s::text[], %(docs)s::text[], %(ids)s::text[])
     WITH ORDINALITY AS n(batch_key, document_id, chunk_id, pos)
JOIN {chunks} AS c ON c.batch_key = n.batch_key AND c.document_id = n.document_id
                  AND c.chunk_id = n.chunk_id
JOIN {boundaries} AS s ON s.batch_key = c.batch_key AND s.document_id = c.document_id
                      AND s.start_char >= c.overlap_end AND s.start_char < c.end_char
                      AND s.end_char <= c.end_char
WHERE s.model_id = %(model)s AND s.embedding IS NOT NULL
GROUP BY n.pos
"""


def _rescored(
    conn: psycopg.Connection[Any],
    vector: np.ndarray,
    nearest: list[tuple[str, str, str, float]],
    model_id: str,
    sentence_weight: float,
) -> list[tuple[str, str, str, float]]:
    """`nearest` re-ordered by `sentence_rerank`, its distances replaced by 1 - the new score.

    The best sentence of every pooled chunk is one grouped query: pgvector computes the cosines
    next to the rows (no vectors travel), over the candidates lying in the chunk's core (its span
    without the overlap it repeats from the previous chunk) whose vectors come from the query's
    model (the `fast` preset's static vectors do not)."""
    query = sql.SQL(_BEST_SENTENCES).format(
        chunks=schema.CHUNKS.identifier(), boundaries=schema.SEMANTIC_BOUNDARIES.identifier()
    )
    batches, docs, ids, distances = (list(col) for col in zip(*nearest, strict=True))
    params = {"q": vector, "batches": batches, "docs": docs, "ids": ids, "model": model_id}
    best: list[float | None] = [None] * len(nearest)
    for pos, score in conn.execute(query, params, prepare=True).fetchall():
        best[pos - 1] = score
    order, scores = rerank_order([1.0 - d for d in distances], best, sentence_weight)
    return [(*nearest[i][:3], 1.0 - float(scores[i])) for i in order]


_HITS = """
WITH nearest AS (
    SELECT * FROM unnest(%(batches)s::text[], %(docs)s::text[], %(ids)s::text[],
                         %(distances)s::float8[]) AS n(batch_key, document_id, chunk_id, distance)
), hits AS (
    SELECT n.distance, c.batch_key, c.document_id, c.chunk_id, c.chunk_index, c.total_chunks,
           c.text, c.start_char, c.end_char, c.page_start, c.page_end, c.section, c.source_sha256
    FROM nearest AS n
    CROSS JOIN LATERAL (
        -- OFFSET 0 keeps this a per-candidate subquery, so the document_id condition reaches
        -- the view's newest-version lookup (an index probe) instead of a scan of every version.
        SELECT * FROM {current} AS c
        WHERE c.batch_key = n.batch_key AND c.document_id = n.document_id
          AND c.chunk_id = n.chunk_id
        OFFSET 0
    ) AS c
    ORDER BY n.distance, c.document_id, c.chunk_index
    LIMIT %(k)s
)
SELECT h.distance, h.batch_key, h.document_id, h.chunk_id, h.chunk_index, h.total_chunks,
       h.text, h.start_char, h.end_char, h.page_start, h.page_end, h.section,
       d.source_uri, e.title,
       p.parent_kind, p.start_char, p.end_char, p.first_chunk_index, p.last_chunk_index,
       p.chunk_count, w.text_start, w.text_end,
       substr(e.text, w.text_start + 1, w.text_end - w.text_start),
       prev.chunk_id, prev.chunk_index, prev.start_char, prev.end_char, prev.text,
       nxt.chunk_id, nxt.chunk_index, nxt.start_char, nxt.end_char, nxt.text,
       coalesce(prev.start_char, h.start_char), coalesce(nxt.end_char, h.end_char),
       substr(e.text, coalesce(prev.start_char, h.start_char) + 1,
              coalesce(nxt.end_char, h.end_char) - coalesce(prev.start_char, h.start_char))
FROM hits AS h
JOIN {documents} AS d ON d.batch_key = h.batch_key AND d.document_id = h.document_id
JOIN {extracted} AS e ON e.batch_key = h.batch_key AND e.document_id = h.document_id
CROSS JOIN LATERAL (
    SELECT * FROM {parents} AS p
    WHERE p.batch_key = h.batch_key AND p.document_id = h.document_id
      AND p.source_sha256 = h.source_sha256 AND p.section = h.section
    OFFSET 0  -- as above: aggregate only this document's chunks, not the whole table
) AS p
CROSS JOIN LATERAL (
    SELECT s AS text_start, least(p.end_char, s + %(cap)s) AS text_end
    FROM (SELECT CASE WHEN p.end_char - p.start_char <= %(cap)s THEN p.start_char
                      ELSE greatest(p.start_char, least(
                          h.start_char - greatest(0, (%(cap)s - (h.end_char - h.start_char)) / 2),
                          p.end_char - %(cap)s))
                 END AS s) AS bounds
) AS w
LEFT JOIN {chunks} AS prev ON prev.batch_key = h.batch_key AND prev.document_id = h.document_id
                          AND prev.chunk_index = h.chunk_index - 1
LEFT JOIN {chunks} AS nxt ON nxt.batch_key = h.batch_key AND nxt.document_id = h.document_id
                         AND nxt.chunk_index = h.chunk_index + 1
ORDER BY h.distance, h.document_id, h.chunk_index
"""


def _hits(
    conn: psycopg.Connection[Any], nearest: list[tuple[str, str, str, float]], k: int, cap: int
) -> list[tuple[Any, ...]]:
    """The k best of `nearest` that are current, joined with their document, parent and
    neighbours (one statement, one round trip)."""
    query = sql.SQL(_HITS).format(
        current=sql.Identifier(schema.SCHEMA, schema.CURRENT_CHUNKS_VIEW),
        documents=schema.BATCH_DOCUMENTS.identifier(),
        extracted=schema.EXTRACTED_TEXT.identifier(),
        parents=sql.Identifier(schema.SCHEMA, schema.CHUNK_PARENTS_VIEW),
        chunks=schema.CHUNKS.identifier(),
    )
    batches, docs, ids, distances = (list(col) for col in zip(*nearest, strict=True))
    params = {"batches": batches, "docs": docs, "ids": ids, "distances": distances,
              "k": k, "cap": max(1, cap)}  # fmt: skip
    # Prepared: planning this join costs more than running it (~4 ms vs ~2 ms at 100k chunks).
    return conn.execute(query, params, prepare=True).fetchall()


def _neighbour(values: tuple[Any, ...]) -> Neighbour | None:
    return None if values[0] is None else Neighbour(*values)


def _hit(rank: int, row: tuple[Any, ...]) -> SearchHit:
    (distance, batch_key, document_id, chunk_id, chunk_index, total_chunks, text, start, end,
     page_start, page_end, section, source_uri, title, parent_kind, p_start, p_end, p_first,
     p_last, p_count, text_start, text_end, parent_text) = row[:23]  # fmt: skip
    previous, following = _neighbour(row[23:28]), _neighbour(row[28:33])
    window_start, window_end, window_text = row[33:36]
    if parent_kind == "section":
        parent_title = section.rsplit(" > ", 1)[-1]
    else:
        parent_title = title or source_uri.rsplit("/", 1)[-1]
    parent = ParentContext(
        kind=parent_kind, section=section, title=parent_title, start_char=p_start,
        end_char=p_end, first_chunk_index=p_first, last_chunk_index=p_last,
        chunk_count=int(p_count), text_start=text_start, text_end=text_end,
        text=parent_text or "",
    )  # fmt: skip
    pages = (page_start, page_end) if page_start is not None else None
    return SearchHit(
        rank=rank, score=1.0 - float(distance), chunk_id=chunk_id, document_id=document_id,
        batch_key=batch_key, chunk_index=chunk_index, total_chunks=total_chunks,
        source_uri=source_uri, title=title, pages=pages, section=section, start_char=start,
        end_char=end, text=text,
        context=HitContext(parent, previous, following, window_start, window_end,
                           window_text or ""),
    )  # fmt: skip
