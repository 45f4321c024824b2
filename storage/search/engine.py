"""Search over the current chunks, the readers' entry points: `search_response` answers a text
query; `read_search` reads what a search reads once, and `ranked_response` (or, for many budgets
at once, `packed_contexts`) answers that reading at any fusion weight and budget in memory
(`seams eval`).

One direction: the options become one validated `SearchRequest`; in one published snapshot
(`snapshot.search_snapshot`) the pool is read complete (`pool.read_pool`), ranked once
(`pool.ranked_entries`), and the entries the answer needs are read (`reading.read_entries`);
the answer is then built from those rows in memory (`_answer`), each hit once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from seams.storage.connections import ConnectionSource
from seams.storage.search.context_budget import (
    BudgetItem,
    KnownText,
    PackedContext,
    Sentence,
    TokenCounter,
    best_passage,
    check_budget,
    pack_budget,
    pack_passages,
)
from seams.storage.search.dense import other_targets
from seams.storage.search.fusion import LEXICAL_WEIGHT, check_lexical_weight, normalised
from seams.storage.search.hit_context import HitRow, hit_from_row
from seams.storage.search.hits import SearchHit, SearchResponse
from seams.storage.search.pool import RankedEntry, ranked_entries, read_pool
from seams.storage.search.query import QueryEmbedder, SearchKind
from seams.storage.search.reading import SearchReading, read_entries
from seams.storage.search.request import (
    PARENT_CHARS,
    SearchRequest,
    check_k,
    check_token_counter,
)
from seams.storage.search.sentence_rerank import SENTENCE_WEIGHT
from seams.storage.search.snapshot import search_snapshot
from seams.storage.search.weighing import Weighing


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
    entries) packed into the budget (`response.context`; `context_budget`): passages by
    default, whole hits with `passages=False`; what overlaps or touches in one document is one
    span, and the total never exceeds the budget. Tokens are counted by `count_tokens`, by
    default the embedder's tokenizer (`embedder.count_tokens`).

    `passages` (default): each hit's sentences are scored by the same fused lexical + dense
    evidence (`weighing`); with a budget each hit contributes whole sentences around its
    best one (`context_budget.pack_passages`), so more distinct evidence fits, and every hit
    given says which part of it was (`passage_start`, `passage_end`); without a budget the hits
    stay whole chunks with their best passage marked (`context_budget.best_passage`). False:
    whole hits only, and no passage.

    It reads the pool, ranks it once, reads only the entries its answer can use (the top `k`
    at this weight, or the whole ranked pool with a budget), and answers from that reading as
    `ranked_response` answers `read_search` readings.
    """
    if budget is not None and count_tokens is None:  # the embedder's tokenizer by default
        count_tokens = getattr(embedder, "count_tokens", None)
    request = SearchRequest.of(
        query, k, search=search, lexical_weight=lexical_weight, sentence_weight=sentence_weight,
        mode=mode, model_id=model_id, parent_chars=parent_chars, budget=budget,
        count_tokens=count_tokens, passages=passages, collections=collections,
    )  # fmt: skip
    with search_snapshot(postgres) as snapshot:
        pool = read_pool(snapshot, embedder, request)
        ranked = ranked_entries(pool, request.lexical_weight)
        wanted = ranked if request.budget is not None else ranked[: request.k]
        reading = read_entries(
            snapshot.conn, pool, [r.entry for r in wanted], mode=request.mode,
            parent_chars=request.parent_chars, passages=request.passages,
        )  # fmt: skip
        if pool.target is not None and request.budget is None and reading.visible < request.k:
            reading = replace(reading, others=other_targets(snapshot.conn, pool.target))
    return _answer(
        reading, ranked, request.k, request.lexical_weight, request.budget, request.count_tokens,
        request.passages,
    )  # fmt: skip


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
    options), with the rows and sentences of every entry, all in one snapshot:
    `ranked_response(reading, k, ...)` is then `search_response`'s answer at any
    `lexical_weight` and budget, without reading the index again."""
    request = SearchRequest.of(
        query, k, search=search, sentence_weight=sentence_weight, mode=mode, model_id=model_id,
        parent_chars=parent_chars, passages=passages, collections=collections,
    )  # fmt: skip
    with search_snapshot(postgres) as snapshot:
        pool = read_pool(snapshot, embedder, request)
        reading = read_entries(
            snapshot.conn, pool, pool.entries, mode=mode, parent_chars=parent_chars,
            passages=passages,
        )  # fmt: skip
        if pool.target is not None:
            reading = replace(reading, others=other_targets(snapshot.conn, pool.target))
    return reading


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
    (`ranked_entries`), the top `k` visible entries (or, with a budget, all of them in rank
    order) as hits with both component scores, each hit's sentences weighed by the search's
    evidence rule (`weighing`) and its best passage marked, and with a budget the hits
    packed (`context_budget`). `search_response` answers the same way, so a reading answered
    here at any weight and budget is exactly what `seams search` gives for it.

    A `ValueError` when the reading lacks what the answer needs (the rows of an entry it
    ranks, or the sentences when `passages`): read it with `read_search`."""
    check_k(k)
    check_lexical_weight(lexical_weight)
    if budget is not None:
        check_budget(budget)
        count_tokens = check_token_counter(count_tokens)
    ranked = ranked_entries(reading.pool, lexical_weight)
    return _answer(reading, ranked, k, lexical_weight, budget, count_tokens, passages)


def packed_contexts(
    reading: SearchReading,
    budgets: Sequence[int],
    *,
    lexical_weights: Sequence[float] = (LEXICAL_WEIGHT,),
    count_tokens: TokenCounter | None = None,
) -> dict[float, dict[int, PackedContext | None]]:
    """Per weight of `lexical_weights`, per budget: `ranked_response(reading, k,
    lexical_weight=W, budget=B, count_tokens=...).context` (passages, any k: a budget ranks the
    whole pool), for every weight and budget from one reading, as `seams eval` scores them.

    A budget's answer holds every visible entry, whatever the weight, so what does not depend
    on it is done once: the hits' sentences scaled and joined (`Weighing`), the known text and
    the token count of each stretch tried (`KnownText`); each weight ranks, weighs and packs."""
    for weight in lexical_weights:
        check_lexical_weight(weight)
    for budget in budgets:
        check_budget(budget)
    count_tokens = check_token_counter(count_tokens)
    out: dict[float, dict[int, PackedContext | None]] = {}
    weighing: Weighing | None = None
    known: KnownText | None = None
    for weight in lexical_weights:
        if reading.pool.target is None:
            out[weight] = dict.fromkeys(budgets)
            continue
        chosen = _visible(reading, ranked_entries(reading.pool, weight), None)
        rows = [row for _, row in chosen]
        if weighing is None or weighing.keys != frozenset(row.key for row in rows):
            weighing, known = Weighing(reading, rows), None
        items = _budget_items(chosen, weighing.sentences(rows, weight))
        known = known or KnownText(items, count_tokens)
        out[weight] = {
            budget: pack_passages(items, budget, count_tokens, known=known) for budget in budgets
        }
    return out


Chosen = tuple[RankedEntry, HitRow]
"""A ranked entry the answer gives, with its hit row."""


def _answer(
    reading: SearchReading,
    ranked: list[RankedEntry],
    k: int,
    lexical_weight: float,
    budget: int | None,
    count_tokens: TokenCounter | None,
    passages: bool,
) -> SearchResponse:
    """The answer from `reading` ranked as `ranked` (the pool at `lexical_weight`): the top `k`
    visible entries, or with a `budget` all of them packed into it, each built into its hit
    once, with its passage (the best one, or with a budget the part given)."""
    pool = reading.pool
    response = SearchResponse(
        query=pool.query,
        k=k,
        mode=pool.target.mode if pool.target else (reading.mode or ""),
        model_id=pool.target.model_id if pool.target else "",
        hits=[],
        notes=list(pool.notes),
        embed_ms=pool.embed_ms,
        pool_scanned=pool.scanned,
        search=pool.kind,
        lexemes=pool.lexemes,
        published_seq=pool.published_seq,
        collections=pool.collections,
    )
    if pool.target is None:
        return response
    started = time.perf_counter()
    chosen = _visible(reading, ranked, None if budget is not None else k)
    sentences: list[tuple[Sentence, ...]] = [() for _ in chosen]
    if passages and chosen:
        rows = [row for _, row in chosen]
        sentences = Weighing(reading, rows).sentences(rows, lexical_weight)
    if budget is None:
        spans = [_best_span(found) for found in sentences]
    else:
        pack = pack_passages if passages else pack_budget
        response.context = pack(_budget_items(chosen, sentences), budget, count_tokens)  # type: ignore[arg-type]
        given = response.context.passages if passages else {}
        spans = [given.get(rank, (None, None)) for rank in range(1, len(chosen) + 1)]
    response.hits = [
        _hit(rank, chosen_one, span, pool.published_seq)
        for rank, (chosen_one, span) in enumerate(zip(chosen, spans, strict=True), 1)
    ]
    if response.context is not None:
        _keep_given(response, budget)  # type: ignore[arg-type]
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


_ENTRY_SCORES = ("dense_score", "lexical_score", "matched_terms", "dense_rank", "lexical_rank")
"""What a hit takes from its pool entry: every signal's score and rank."""


def _hit(
    rank: int, chosen: Chosen, span: tuple[int | None, int | None], published_seq: int | None
) -> SearchHit:
    """The hit at `rank`: its row with the score that ranked it, every signal's score and
    rank, and its passage's `span` in the source."""
    (entry, score), row = chosen
    scores = {name: getattr(entry, name) for name in _ENTRY_SCORES}
    start, end = span
    return hit_from_row(
        rank, row, score, published_seq=published_seq, passage_start=start, passage_end=end,
        **scores,
    )  # fmt: skip


def _best_span(sentences: tuple[Sentence, ...]) -> tuple[int | None, int | None]:
    """The source span of a hit's best passage (`best_passage`); (None, None) without one."""
    marked = best_passage(sentences)
    if not marked:
        return None, None
    return sentences[marked[0]].start, sentences[marked[1]].end


def _keep_given(response: SearchResponse, budget: int) -> None:
    """Only the hits the packed context gives stay, with a note when not even the best fits."""
    assert response.context is not None
    kept = {rank for span in response.context.spans for rank in span.ranks}
    if not kept and response.hits:
        response.notes.append(
            f"no hit fits a budget of {budget} tokens: the best one alone needs more"
        )
    response.hits = [h for h in response.hits if h.rank in kept]


def _visible(reading: SearchReading, ranked: list[RankedEntry], k: int | None) -> list[Chosen]:
    """The first `k` of `ranked` (None: all) that are visible, with their hit row: one that is
    not gives its rank to the next."""
    out = []
    for ranked_entry in ranked if k is None else ranked[:k]:
        key = ranked_entry.entry.key
        if key not in reading.rows:
            raise ValueError(f"the reading lacks candidate {key}: read it with read_search")
        row = reading.rows[key]
        if row is not None:
            out.append((ranked_entry, row))
    return out


def _budget_items(chosen: list[Chosen], sentences: list[tuple[Sentence, ...]]) -> list[BudgetItem]:
    """The chosen hits as the packer sees them, in rank order, each valued by its score scaled
    over the answer."""
    values = normalised([entry.score for entry, _ in chosen])
    given = zip(chosen, sentences, values, strict=True)
    return [
        BudgetItem(
            rank=rank,
            group=(row.batch_key, row.document_id),
            chunk_id=row.chunk_id,
            start_char=row.start_char,
            end_char=row.end_char,
            text=row.text,
            window_start=row.window_start,
            window_text=row.window_text or "",
            sentences=found,
            value=float(value),
        )
        for rank, ((_, row), found, value) in enumerate(given, 1)
    ]
