"""`seams eval`'s run against the index: a questions file's sources found among the current
documents, then every question searched as `seams search --budget B` searches it.

Per question the index is read once (`engine.read_search`: the candidate pool, every
candidate's hit row and its sentences' raw scores). A hybrid pool is the union of the dense and
the BM25 best chunks, each scored by both, so the dense and the lexical search's readings are
parts of the hybrid one (`narrowed`) and need no reading of their own. Every `lexical_weight`
and every budget is then answered from each reading in memory by `engine.packed_contexts`,
which packs as `ranked_response` (the function `search_response` answers with) does, doing
once per reading what no weight changes, and the packed context is scored by
`budget_recall.context_recall`; token counts are remembered per text, since the same passages
recur across readings. The figures are those of `seams search` by construction. The next
questions are read in threads while the current one is scored (`read_ahead`): a reading mostly
waits for the database and the query model.

All answers must come from the publication the sources were read from: a `seams run` that
publishes meanwhile would mix two states of the corpus, so the run stops and says so.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import numpy as np
import psycopg
from psycopg import sql

from seams.errors import InputError, StorageError
from seams.storage import schema
from seams.storage.connections import ConnectionSource, connection_lost
from seams.storage.search.budget_recall import (
    EvalQuestion,
    check_spans,
    context_recall,
    locate_answer,
    matching_paths,
)
from seams.storage.search.context_budget import TokenCounter
from seams.storage.search.engine import packed_contexts, read_search
from seams.storage.search.query import QueryEmbedder, SearchKind
from seams.storage.search.reading import SearchReading
from seams.storage.search.snapshot import published_snapshot

T = TypeVar("T")
R = TypeVar("R")

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
    lexical_weight: float = 0.0
    """The current `lexical_weight`: hybrid's `packed` contexts are this weight's."""
    packed: dict[str, dict[int, list[list[tuple[str, int, int]]]]] = field(default_factory=dict)
    """Per way of ranking (hybrid at the current `lexical_weight`), per budget: each question's
    packed context as (document_id, start, end) spans, to show what a miss got instead."""

    def figures(self, search: str, lexical_weight: float) -> dict[int, list[float]]:
        """Per budget, each question's recall for one way of ranking: `search` as
        `retrieval.search` names it, hybrid at `lexical_weight`. A `KeyError` when the run did
        not measure it (see `evaluate`'s `kinds` and `weights`)."""
        if search == "hybrid":
            return self.by_weight[float(lexical_weight)]
        return self.by_search[search]


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


def located(
    questions: Sequence[EvalQuestion], sources: dict[str, SourceDocument], name: str
) -> list[EvalQuestion]:
    """`questions` with each `answer` quote located in its source's text (`locate_answer`):
    every question then has its spans."""
    return [locate_answer(q, sources[q.source].text, name) for q in questions]


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
        return self._remembered("document", texts, self._embedder.embed)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._remembered("query", texts, self._embedder.embed_queries)

    def _remembered(
        self, role: str, texts: list[str], embed: Callable[[list[str]], np.ndarray]
    ) -> np.ndarray:
        key = (self._embedder.model_id, role, tuple(texts))
        if key not in self._vectors:
            self._vectors[key] = np.array(embed(texts))
        return self._vectors[key].copy()

    def for_model(self, model_id: str) -> RememberedQueries:
        return RememberedQueries(self._embedder.for_model(model_id), self._vectors)


def one_thread(embedder: QueryEmbedder) -> QueryEmbedder:
    """`embedder` running each call on one onnxruntime thread, when it can (`with_changes`):
    the readers embed one short query each, in parallel (`read_ahead`), and a pool of threads
    per call would mostly wait and spin, taking the cores the readers and the database need.
    The vectors are the same: the threads share out a call's work, not its sums."""
    with_changes = getattr(embedder, "with_changes", None)
    return embedder if with_changes is None else with_changes(intra_op_threads=1)


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
    kinds: Sequence[SearchKind] = KINDS,
) -> Evaluation:
    """Every question, per budget: hybrid at each of `weights` (which must hold the current
    `lexical_weight`), dense and lexical, with the settings' `sentence_weight`, as
    `search_response` ranks and packs them. `published_seq`: the publication `sources` were
    read at; an answer from another one stops the run (`StorageError`).

    `kinds`: the ways of ranking to measure (default all three). Each costs one reading of the
    index per question, most of a run's cost, so a caller that needs only the current settings'
    figure (the `retrieval_eval` asset) names just `retrieval.search`; `weights` count only
    when "hybrid" is among them."""
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown or not kinds:
        raise ValueError(f"kinds must be some of {', '.join(KINDS)}, got {list(kinds)!r}")
    if "hybrid" in kinds and lexical_weight not in weights:
        raise ValueError("the current lexical_weight must be among the weights")
    measured = [kind for kind in KINDS if kind in kinds]
    result = Evaluation(
        tuple(budgets), published_seq=published_seq, lexical_weight=float(lexical_weight)
    )
    remembered = RememberedQueries(one_thread(embedder))
    count_tokens = remembered_counts(count_tokens)
    if "hybrid" in measured:
        for weight in weights:
            result.by_weight[float(weight)] = {b: [] for b in budgets}
    for kind in measured:
        if kind != "hybrid":
            result.by_search[kind] = {b: [] for b in budgets}
        result.packed[kind] = {b: [] for b in budgets}

    def read(question: EvalQuestion) -> dict[SearchKind, SearchReading]:
        return _readings(postgres, remembered, question.question, measured, sentence_weight)

    for done, (question, readings) in enumerate(read_ahead(read, questions)):
        document = sources[question.source]
        for kind, reading in readings.items():
            _same_publication(result.published_seq, reading.pool.published_seq)
            kind_weights = weights if kind == "hybrid" else (lexical_weight,)
            packed = _contexts(reading, kind_weights, budgets, count_tokens)
            for weight, contexts in zip(kind_weights, packed, strict=True):
                target = result.by_weight[weight] if kind == "hybrid" else result.by_search[kind]
                for budget, context in zip(budgets, contexts, strict=True):
                    target[budget].append(
                        context_recall(context, document.document_id, question.spans)
                    )
                    if weight == lexical_weight:
                        result.packed[kind][budget].append(context)
        if progress is not None:
            progress(done + 1, len(questions))
    return result


def _readings(
    postgres: ConnectionSource,
    embedder: QueryEmbedder,
    query: str,
    kinds: Sequence[SearchKind],
    sentence_weight: float,
) -> dict[SearchKind, SearchReading]:
    """Per way of ranking, in `kinds`' order, the reading its search of `query` gets: with
    "hybrid" among them, one hybrid reading `narrowed` to each (a search that answered as
    another kind answers each alike), else one reading per kind."""

    def read(search: SearchKind) -> SearchReading:
        return read_search(
            postgres, embedder, query, EVAL_K, search=search, sentence_weight=sentence_weight
        )

    if "hybrid" not in kinds:
        return {kind: read(kind) for kind in kinds}
    hybrid = read("hybrid")
    if hybrid.pool.kind != "hybrid":
        return dict.fromkeys(kinds, hybrid)
    return {kind: narrowed(hybrid, kind) for kind in kinds}


READ_AHEAD = 2
"""Questions read at once while one is scored: a reading mostly waits for the database and the
query model, so two in flight keep both busy (one connection each)."""


def read_ahead(
    read: Callable[[T], R], things: Sequence[T], ahead: int = READ_AHEAD
) -> Iterator[tuple[T, R]]:
    """Each of `things` with `read(thing)`, in order, the next `ahead` read in threads while
    the caller works on the current one: a reading mostly waits for the database and the query
    model, which then overlaps the scoring of the one before. An error of `read` is raised
    where its thing's turn comes."""
    if not things:
        return
    with ThreadPoolExecutor(max_workers=ahead, thread_name_prefix="seams-eval-read") as reader:
        pending = deque(reader.submit(read, thing) for thing in things[:ahead])
        for position, thing in enumerate(things):
            current = pending.popleft().result()
            if position + ahead < len(things):
                pending.append(reader.submit(read, things[position + ahead]))
            yield thing, current


def narrowed(reading: SearchReading, kind: SearchKind) -> SearchReading:
    """The reading a `kind` search of the same query gets, taken from a hybrid `reading`.

    A hybrid pool is the union of the dense top `pool` (the entries with a `dense_rank`) and the
    BM25 top `pool` (those with a `lexical_rank`; the rest of the BM25 side scores 0 and ranks
    nothing), read in one snapshot with every entry's hit row and sentences. A dense pool is its
    dense side without BM25 scores, a lexical pool its BM25 side without cosines; the sentences'
    other score weighs 0 in a dense or lexical answer (`weighing`). So
    `ranked_response(narrowed(r, kind), ...)` answers as a reading of a `kind` search does (its
    notes aside: a dense answer keeps the hybrid search's notes about BM25)."""
    if kind == "hybrid":
        return reading
    pool = reading.pool
    if pool.kind != "hybrid":
        raise ValueError(f"a {pool.kind} reading holds no {kind} reading")
    dense = kind == "dense"
    entries = [
        replace(e, lexical_score=None, matched_terms=(), lexical_rank=None, lexical_group=None)
        if dense
        else replace(e, dense_score=None, dense_rank=None)
        for e in pool.entries
        if (e.dense_rank if dense else e.lexical_rank) is not None
    ]
    keys = {(e.batch_key, e.document_id, e.chunk_id) for e in entries}
    narrow = replace(
        pool,
        kind=kind,
        entries=tuple(entries),
        lexemes=() if dense else pool.lexemes,
        terms=() if dense else pool.terms,
        scanned=pool.scanned if dense else 0,
    )
    sentences = None
    if reading.sentences is not None:
        sentences = {k: v for k, v in reading.sentences.items() if k in keys}
    return replace(
        reading,
        pool=narrow,
        rows={k: v for k, v in reading.rows.items() if k in keys},
        sentences=sentences,
    )


def remembered_counts(count_tokens: TokenCounter) -> TokenCounter:
    """`count_tokens` remembering each text's count: an evaluation packs the same passages
    again at every weight and budget."""
    seen: dict[str, int] = {}

    def counted(texts: list[str]) -> list[int]:
        if len(texts) == 1 and texts[0] in seen:
            return [seen[texts[0]]]
        missing = [t for t in dict.fromkeys(texts) if t not in seen]
        if missing:
            seen.update(zip(missing, count_tokens(missing), strict=True))
        return [seen[t] for t in texts]

    return counted


def _same_publication(expected: int | None, seen: int | None) -> None:
    if seen != expected:
        raise StorageError(
            f"the index changed while evaluating (publication {expected}, now {seen}): run the "
            "evaluation again once the run that published is done"
        )


def _contexts(
    reading: SearchReading,
    lexical_weights: Sequence[float],
    budgets: Sequence[int],
    count_tokens: TokenCounter,
) -> list[list[list[tuple[str, int, int]]]]:
    """Per weight, per budget, the (document_id, start, end) spans `seams search --budget` packs
    for the reading (`engine.packed_contexts`: `ranked_response`'s contexts, from one reading)."""
    packed = packed_contexts(
        reading, budgets, lexical_weights=lexical_weights, count_tokens=count_tokens
    )
    return [
        [
            [(s.document_id, s.start_char, s.end_char) for s in context.spans] if context else []
            for context in (packed[weight][b] for b in budgets)
        ]
        for weight in lexical_weights
    ]
