"""A search pinned to one model (`search_response(..., model_id=...)`, `candidates`): with two
models' vectors in `seams.chunk_index` (a 384-d model's batch beside a 96-d model's, written as
the pipeline writes them), each model's search answers with its own chunks only, in its vectors'
exact cosine order; without a model, the newest batch's model answers, as before; a model with
nothing indexed says what to run. And one reading of the index (`read_search`) answers every
fusion weight and budget exactly as `search_response` does (real PostgreSQL + pgvector).

The query vectors are hand-made, as the index's are: the oracle is numpy's exact cosine.
"""

from __future__ import annotations

import numpy as np
import pytest

from seams.errors import InputError
from seams.resources.postgres import PostgresResource
from seams.storage.search import (
    SearchKind,
    SearchReading,
    SearchResponse,
    packed_contexts,
    ranked_response,
    read_search,
    search_response,
)
from seams.storage.search.evaluation import narrowed
from tests.storage.test_vector_indexes import (
    DIMENSIONS,
    MODE,
    PACKAGED,
    SMALL,
    exact_order,
    publish,
    unit_vectors,
)
from tests.support.search_probes import candidate_pool

BATCHES = {PACKAGED: "b1", SMALL: "b2"}  # b2 registered last: the newest batch


class FixedQueries:
    """A query embedder whose every query, for model `m`, is `queries[m]`: what the index's
    hand-made vectors are searched with. `for_model` refuses a model it has no vector for, as
    the real embedder refuses one it cannot run."""

    def __init__(self, queries: dict[str, np.ndarray], model_id: str) -> None:
        self._queries = queries
        self._model_id = model_id

    @property
    def model_id(self) -> str:
        return self._model_id

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._queries[self._model_id]] * len(texts))

    embed_queries = embed

    def for_model(self, model_id: str) -> FixedQueries:
        if model_id not in self._queries:
            raise InputError(f"no query vector for model {model_id!r}")
        return FixedQueries(self._queries, model_id)


@pytest.fixture
def two_models(postgres: PostgresResource) -> dict[str, np.ndarray]:
    """Two published batches of 60 chunks, b1 indexed by the 384-d model, b2 by the 96-d one;
    each model's vectors, by model."""
    vectors = {m: unit_vectors(60, d, seed=3 + d) for m, d in DIMENSIONS.items()}
    for model_id, values in vectors.items():  # b2 beside b1: two models published
        publish(postgres, BATCHES[model_id], model_id, values, beside=model_id == SMALL)
    return vectors


QUERIES = {m: unit_vectors(1, d, seed=7)[0] for m, d in DIMENSIONS.items()}


@pytest.mark.parametrize("model_id", [PACKAGED, SMALL])
def test_a_search_pinned_to_a_model_answers_with_that_models_chunks_only(
    postgres: PostgresResource, two_models: dict[str, np.ndarray], model_id: str
) -> None:
    embedder = FixedQueries(QUERIES, SMALL)  # the settings' model is the newest batch's
    expected = exact_order(two_models[model_id], QUERIES[model_id])
    response = search_response(
        postgres, embedder, "what is nearest", 10, search="dense", model_id=model_id
    )
    assert (response.model_id, response.mode) == (model_id, MODE)
    assert response.notes == []
    assert {h.batch_key for h in response.hits} == {BATCHES[model_id]}
    assert [int(h.chunk_id[1:]) for h in response.hits] == expected[:10]
    cosines = two_models[model_id].astype(np.float64) @ QUERIES[model_id].astype(np.float64)
    assert np.allclose([h.dense_score for h in response.hits], cosines[expected[:10]], atol=1e-6)

    pool = candidate_pool(postgres, embedder, "what is nearest", search="dense", model_id=model_id)
    assert pool.target is not None and pool.target.model_id == model_id
    assert {e.batch_key for e in pool.entries} == {BATCHES[model_id]}
    assert len(pool.entries) == 40


def test_without_a_model_the_newest_batchs_model_answers_as_before(
    postgres: PostgresResource, two_models: dict[str, np.ndarray]
) -> None:
    embedder = FixedQueries(QUERIES, PACKAGED)
    response = search_response(postgres, embedder, "what is nearest", 5, search="dense")
    assert response.model_id == SMALL
    assert {h.batch_key for h in response.hits} == {BATCHES[SMALL]}
    assert [int(h.chunk_id[1:]) for h in response.hits] == exact_order(
        two_models[SMALL], QUERIES[SMALL]
    )[:5]


def test_a_model_with_nothing_indexed_says_what_to_run_in_one_line(
    postgres: PostgresResource, two_models: dict[str, np.ndarray]
) -> None:
    embedder = FixedQueries(QUERIES, PACKAGED)
    response = search_response(postgres, embedder, "what is nearest", 5, model_id="f" * 64)
    assert (response.hits, response.model_id, response.context) == ([], "", None)
    assert response.notes == [
        "nothing is indexed with model ffffffffffff: `seams backfill` re-indexes every batch "
        "with the current settings' model"
    ]
    response = search_response(postgres, embedder, "what", 5, model_id=SMALL, mode="late")
    assert response.notes == [
        "nothing is indexed in mode 'late' yet: run `seams run` (or materialize chunk_index) first"
    ]


def test_a_model_asked_of_an_empty_index_says_to_run_first(postgres: PostgresResource) -> None:
    response = search_response(
        postgres, FixedQueries(QUERIES, SMALL), "what", 5, model_id=SMALL, budget=100,
        count_tokens=lambda texts: [len(t.split()) for t in texts],
    )  # fmt: skip
    assert response.hits == []
    assert response.notes == [
        "nothing is indexed yet: run `seams run` (or materialize chunk_index) first"
    ]


@pytest.mark.parametrize("search", ["dense", "lexical"])
def test_a_hybrid_reading_narrowed_answers_as_a_dense_or_lexical_reading_does(
    postgres: PostgresResource, two_models: dict[str, np.ndarray], search: SearchKind
) -> None:
    """`seams eval` reads the index once per question, hybrid, and takes the dense and the
    lexical search's readings from it (`narrowed`): their answers are those of their own
    readings, hit for hit and span for span, at every budget."""
    embedder = FixedQueries(QUERIES, SMALL)
    for query in ("chunk 7 of b1-doc-1", "doc-2 chunk 30", "what is nearest"):
        hybrid = read_search(postgres, embedder, query, 5, search="hybrid")
        own = read_search(postgres, embedder, query, 5, search=search)
        derived = narrowed(hybrid, search)
        assert set(derived.rows) == set(own.rows), (query, search)
        for budget in (None, 12, 40):
            options = {"budget": budget, "count_tokens": words}
            expected = _answer(ranked_response(own, 5, **options))
            answer = _answer(ranked_response(derived, 5, **options))
            expected.pop("notes"), answer.pop("notes")
            assert answer == expected, (query, search, budget)


def _answer(response: SearchResponse) -> dict[str, object]:
    out = response.to_dict()
    return {key: value for key, value in out.items() if not key.endswith("_ms")}


def words(texts: list[str]) -> list[int]:
    return [len(text.split()) for text in texts]


@pytest.mark.parametrize("search", ["hybrid", "dense", "lexical"])
def test_one_reading_answers_every_weight_and_budget_as_search_response_does(
    postgres: PostgresResource, two_models: dict[str, np.ndarray], search: SearchKind
) -> None:
    """`seams eval` reads once and answers many weights and budgets with `ranked_response`;
    each answer is `search_response`'s for the same options, hit for hit, span for span, and
    `packed_contexts` packs all of them at once as `ranked_response` packs each one."""
    embedder = FixedQueries(QUERIES, SMALL)
    query = "chunk 7 of b1-doc-1"  # BM25 finds b1's chunks, the vectors b2's: both sides count
    for model_id in (None, PACKAGED):
        reading = read_search(postgres, embedder, query, 5, search=search, model_id=model_id)
        assert len(reading.rows) == len(reading.pool.entries) > 5
        for weight in (0.0, 0.5, 1.0):
            for budget in (None, 12, 40):
                options = {"lexical_weight": weight, "budget": budget, "count_tokens": words}
                expected = search_response(
                    postgres, embedder, query, 5, search=search, model_id=model_id, **options
                )
                assert expected.hits, (search, model_id, weight, budget)
                answer = ranked_response(reading, 5, **options)
                assert _answer(answer) == _answer(expected), (search, model_id, weight, budget)
        weights = (0.0, 0.5, 1.0)
        packed = packed_contexts(reading, (12, 40), lexical_weights=weights, count_tokens=words)
        for weight in weights:
            for budget in (12, 40):
                options = {"lexical_weight": weight, "budget": budget, "count_tokens": words}
                expected_context = ranked_response(reading, 5, **options).context
                assert packed[weight][budget] == expected_context, (search, model_id, weight)
    narrow = search_response(postgres, embedder, query, 1, search=search)
    assert len(narrow.hits) == 1
    with pytest.raises(ValueError, match="read it with read_search"):
        # a reading of fewer candidates than a budget ranks cannot answer it
        thin = SearchReading(reading.pool, None, rows=dict(list(reading.rows.items())[:1]))
        ranked_response(thin, 5, budget=40, count_tokens=words, passages=False)
