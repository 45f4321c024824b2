"""`seams eval`'s run against the index: a questions file's sources found among the current
documents, then every question searched as `seams search --budget B` searches it.

Per question and way of ranking (hybrid, dense, lexical) the candidate pool, the hits' rows and
their sentences' raw scores are read once, by the search package's own functions
(`candidates`, `hit_rows`, `sentence_rows`); every `lexical_weight` and every budget is then
ranked, weighed and packed from them in memory, exactly as `search_response` does for one
(`ranked_candidates`, `sentence_evidence`, `normalised`, `context_budget.pack_passages`), and the
packed context scored by `budget_recall.context_recall`. Reading once instead of once per weight
and budget makes a run some thirty times cheaper; so that "exactly" stays true, the first
question's contexts at the current settings are also asked of `search_response` itself, and a
difference stops the run.

All answers must come from the publication the sources were read from: a `seams run` that
publishes meanwhile would mix two states of the corpus, so the run stops and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import numpy as np
import psycopg
from psycopg import sql

from seams.errors import InputError, SeamsError, StorageError
from seams.storage import schema
from seams.storage.connections import ConnectionSource, connection_lost
from seams.storage.search import lexical
from seams.storage.search.budget_recall import (
    EvalQuestion,
    check_spans,
    context_recall,
    matching_paths,
)
from seams.storage.search.context_budget import (
    BudgetItem,
    Sentence,
    TokenCounter,
    pack_passages,
)
from seams.storage.search.engine import PARENT_CHARS, candidates, search_response
from seams.storage.search.fusion import normalised
from seams.storage.search.hit_context import hit_from_row, hit_rows, sentence_rows
from seams.storage.search.pool import CandidatePool, pool_size, ranked_candidates
from seams.storage.search.query import QueryEmbedder, SearchKind
from seams.storage.search.sentence_rerank import sentence_evidence
from seams.storage.search.snapshot import published_snapshot

EVAL_K = 5
"""The `-k` of `seams search` (its default): with a budget, the ranked pool of a top-5 search
fills the context."""


@dataclass(frozen=True)
class SourceDocument:
    """The current version of a file that questions name."""

    batch_key: str
    document_id: str
    path: str
    """The file's absolute path, as it was registered."""
    text: str
    """Its extracted text, which the questions' spans index."""


@dataclass
class Evaluation:
    """Per way of ranking, per budget: each question's recall, in the file's order."""

    budgets: tuple[int, ...]
    by_search: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    """"dense" and "lexical" (hybrid is `by_weight`)."""
    by_weight: dict[float, dict[int, list[float]]] = field(default_factory=dict)
    """Hybrid search at each `lexical_weight`."""
    published_seq: int | None = None
    """The publication every answer read."""


def source_path(uri: str) -> str:
    """The decoded path of a registered file's `file://` URI."""
    return unquote(urlsplit(uri).path)


def indexed_sources(
    postgres: ConnectionSource,
    questions: Sequence[EvalQuestion],
    name: str,
    cwd: str,
    run_command: str = "seams run",
) -> tuple[dict[str, SourceDocument], int | None]:
    """Each distinct source of `questions` as the current document it names
    (`budget_recall.matching_paths`), with its extracted text, and the publication they were
    read at. An `InputError` naming the line for a source that no current document matches or
    that matches several, and for spans outside the source's text (`check_spans`)."""
    query = sql.SQL(
        "SELECT d.batch_key, d.document_id, d.generation, b.source_uri FROM {current} AS d "
        "JOIN {manifest} AS b ON b.batch_key = d.batch_key AND b.document_id = d.document_id "
        "ORDER BY b.source_uri"
    ).format(
        current=schema.CURRENT_DOCUMENTS.identifier(), manifest=schema.BATCH_DOCUMENTS.identifier()
    )
    text_query = sql.SQL(
        "SELECT text FROM {extracted} WHERE batch_key = %s AND document_id = %s "
        "AND generation <= %s ORDER BY generation DESC LIMIT 1"
    ).format(extracted=schema.EXTRACTED_TEXT.identifier())
    found: dict[str, SourceDocument] = {}
    try:
        with postgres.connection() as conn, published_snapshot(conn) as snapshot:
            current = conn.execute(query).fetchall()
            paths = [source_path(row[3]) for row in current]
            for question in questions:
                if question.source in found:
                    continue
                matches = matching_paths(question.source, paths, cwd)
                if not matches:
                    raise InputError(
                        f"{name}, line {question.line}: {question.source} is not indexed (no "
                        f"current document has that name or path): `{run_command} PATH` it "
                        "first, PATH the file or its folder"
                    )
                if len(matches) > 1:
                    some = ", ".join(paths[i] for i in matches[:3])
                    raise InputError(
                        f"{name}, line {question.line}: {question.source} names "
                        f"{len(matches)} indexed files ({some}{', ...' if len(matches) > 3 else ''}"
                        "): give more of its path"
                    )
                batch_key, document_id, generation, _ = current[matches[0]]
                row = conn.execute(text_query, (batch_key, document_id, generation)).fetchone()
                text = row[0] if row is not None and row[0] is not None else ""
                found[question.source] = SourceDocument(
                    batch_key, document_id, paths[matches[0]], text
                )
            published = snapshot.published_seq
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "reading the indexed documents", exc) from exc
    for question in questions:
        check_spans(question, found[question.source].text, name)
    return found, published


class RememberedQueries:
    """A query embedder that embeds each text once per model: `seams eval` searches every
    question several times, and each search would embed it again to the same vector."""

    def __init__(self, embedder: QueryEmbedder, vectors: dict[Any, np.ndarray] | None = None):
        self._embedder = embedder
        self._vectors = {} if vectors is None else vectors

    @property
    def model_id(self) -> str:
        return self._embedder.model_id

    def embed(self, texts: list[str]) -> np.ndarray:
        key = (self._embedder.model_id, tuple(texts))
        if key not in self._vectors:
            self._vectors[key] = np.array(self._embedder.embed(texts))
        return self._vectors[key].copy()

    def for_model(self, model_id: str) -> RememberedQueries:
        return RememberedQueries(self._embedder.for_model(model_id), self._vectors)


@dataclass
class Answer:
    """What one search kind reads for one question, whatever the weight and the budget: the
    candidate pool, each visible candidate's hit row, and each hit's sentences with their raw
    dense and lexical scores (`hit_context.sentence_rows`)."""

    kind: SearchKind
    pool: CandidatePool
    rows: dict[tuple[str, str], tuple[Any, ...]]
    """(batch_key, chunk_id) -> its `hit_rows` row."""
    sentences: dict[tuple[str, str], list[tuple[int, int, float | None, float]]]
    published_seq: int | None

    def context(
        self, lexical_weight: float, budgets: Sequence[int], count_tokens: TokenCounter
    ) -> dict[int, list[tuple[str, int, int]]]:
        """Per budget, the (document_id, start, end) spans `search_response` packs at this
        weight, in its order (see the module doc)."""
        ranked = ranked_candidates(self.pool, lexical_weight)
        hits, scores = [], []
        for entry, score in ranked:
            row = self.rows.get((entry.batch_key, entry.chunk_id))
            if row is not None:  # the engine's rows: the visible ones, ranked 1.. in order
                hits.append(hit_from_row(len(hits) + 1, row))
                scores.append(score)
        found = [self.sentences[(h.batch_key, h.chunk_id)] for h in hits]
        flat = [row for per_hit in found for row in per_hit]
        weight = {"dense": 0.0, "lexical": 1.0}.get(self.kind, lexical_weight)
        evidence = sentence_evidence([r[2] for r in flat], [r[3] for r in flat], weight)
        values = normalised(scores)
        items, position = [], 0
        for hit, per_hit, value in zip(hits, found, values, strict=True):
            marks = evidence[position : position + len(per_hit)]
            position += len(per_hit)
            items.append(
                BudgetItem(
                    rank=hit.rank,
                    group=(hit.batch_key, hit.document_id),
                    chunk_id=hit.chunk_id,
                    start_char=hit.start_char,
                    end_char=hit.end_char,
                    text=hit.text,
                    window_start=hit.context.window_start,
                    window_text=hit.context.window_text,
                    sentences=tuple(
                        Sentence(r[0], r[1], float(e)) for r, e in zip(per_hit, marks, strict=True)
                    ),
                    value=float(value),
                )
            )
        out = {}
        for budget in budgets:
            packed = pack_passages(items, budget, count_tokens) if items else None
            spans = packed.spans if packed is not None else []
            out[budget] = [(s.document_id, s.start_char, s.end_char) for s in spans]
        return out


def read_answer(
    postgres: ConnectionSource,
    embedder: QueryEmbedder,
    query: str,
    kind: SearchKind,
    sentence_weight: float,
) -> Answer:
    """The pool of a top-`EVAL_K` search of `query` (`candidates`, as `search_response` builds
    it), then, in one snapshot, the rows of all its candidates and their sentences."""
    pool = candidates(
        postgres, embedder, query, pool=pool_size(EVAL_K), search=kind,
        sentence_weight=sentence_weight,
    )  # fmt: skip
    answer = Answer(kind, pool, {}, {}, pool.published_seq)
    target = pool.target
    if target is None or not pool.candidates:
        return answer
    keys = [
        (e.batch_key, e.document_id, e.chunk_id, float(i)) for i, e in enumerate(pool.candidates)
    ]
    try:
        with postgres.connection() as conn, published_snapshot(conn) as snapshot:
            if snapshot.published_seq != pool.published_seq:
                answer.published_seq = snapshot.published_seq
                return answer
            rows = hit_rows(conn, keys, len(keys), PARENT_CHARS)
            hits = [hit_from_row(i + 1, row) for i, row in enumerate(rows)]
            terms = None
            if kind != "dense":
                terms = lexical.query_terms(conn, target.text_search_config, pool.query)
            vector = None
            if kind != "lexical":
                vector = embedder.for_model(target.model_id).embed([pool.query])[0]
                vector = np.asarray(vector, dtype=np.float32)
            per_hit = sentence_rows(
                conn,
                hits,
                vector=vector,
                model_id=target.model_id,
                config=terms.config if terms else None,
                lexemes=terms.lexemes if terms else (),
                idf=terms.idf if terms else (),
            )
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "searching the chunk index", exc) from exc
    for hit, row, found in zip(hits, rows, per_hit, strict=True):
        answer.rows[(hit.batch_key, hit.chunk_id)] = row
        answer.sentences[(hit.batch_key, hit.chunk_id)] = found
    return answer


Progress = Callable[[int, int], None]
"""Called with (questions done, questions in all) as the run goes."""

KINDS: tuple[SearchKind, ...] = ("hybrid", "dense", "lexical")


def evaluate(
    postgres: ConnectionSource,
    embedder: QueryEmbedder,
    questions: Sequence[EvalQuestion],
    sources: dict[str, SourceDocument],
    *,
    budgets: Sequence[int],
    weights: Sequence[float],
    lexical_weight: float,
    sentence_weight: float,
    count_tokens: TokenCounter,
    published_seq: int | None = None,
    progress: Progress | None = None,
) -> Evaluation:
    """Every question, per budget: hybrid at each of `weights` (which must hold the current
    `lexical_weight`), dense and lexical, with the settings' `sentence_weight`, as
    `search_response` ranks and packs them. `published_seq`: the publication `sources` were
    read at; an answer from another one stops the run (`StorageError`)."""
    if lexical_weight not in weights:
        raise ValueError("the current lexical_weight must be among the weights")
    result = Evaluation(tuple(budgets), published_seq=published_seq)
    remembered = RememberedQueries(embedder)
    for weight in weights:
        result.by_weight[float(weight)] = {b: [] for b in budgets}
    for kind in KINDS[1:]:
        result.by_search[kind] = {b: [] for b in budgets}
    for done, question in enumerate(questions):
        document = sources[question.source]
        for kind in KINDS:
            answer = read_answer(postgres, remembered, question.question, kind, sentence_weight)
            _same_publication(result.published_seq, answer.published_seq)
            for weight in weights if kind == "hybrid" else (lexical_weight,):
                contexts = answer.context(weight, budgets, count_tokens)
                if done == 0 and weight == lexical_weight:
                    _check_against_search(
                        postgres, remembered, question.question, kind, lexical_weight,
                        sentence_weight, contexts, count_tokens, result.published_seq,
                    )  # fmt: skip
                target = result.by_weight[weight] if kind == "hybrid" else result.by_search[kind]
                for budget, context in contexts.items():
                    target[budget].append(
                        context_recall(context, document.document_id, question.spans)
                    )
        if progress is not None:
            progress(done + 1, len(questions))
    return result


def _same_publication(expected: int | None, seen: int | None) -> None:
    if seen != expected:
        raise StorageError(
            f"the index changed while evaluating (publication {expected}, now {seen}): run the "
            "evaluation again once the run that published is done"
        )


def _check_against_search(
    postgres: ConnectionSource,
    embedder: QueryEmbedder,
    query: str,
    kind: SearchKind,
    lexical_weight: float,
    sentence_weight: float,
    contexts: dict[int, list[tuple[str, int, int]]],
    count_tokens: TokenCounter,
    published_seq: int | None,
) -> None:
    """`search_response`'s own packed context must be what the evaluation computed."""
    for budget, context in contexts.items():
        response = search_response(
            postgres, embedder, query, EVAL_K, search=kind, lexical_weight=lexical_weight,
            sentence_weight=sentence_weight, budget=budget, count_tokens=count_tokens,
        )  # fmt: skip
        _same_publication(published_seq, response.published_seq)
        spans = response.context.spans if response.context is not None else []
        if [(s.document_id, s.start_char, s.end_char) for s in spans] != context:
            raise SeamsError(
                f"the evaluation packs a different context than `seams search --search {kind} "
                f"--budget {budget}` for {query!r}: the evaluation is out of step with the "
                "search, and its figures would be wrong (a bug: please report it)"
            )
