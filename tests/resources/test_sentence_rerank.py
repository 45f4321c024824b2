"""`seams.storage.search.sentence_rerank`: how `seams search` mixes a chunk's score with its best
sentence's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from seams.storage.search.sentence_rerank import SENTENCE_WEIGHT, rerank_order, reranked_scores


def test_mix_is_the_weighted_sum_and_chunks_without_sentences_keep_their_score() -> None:
    scores = reranked_scores([0.5, 0.4, 0.3], [0.9, None, float("nan")], 0.7)
    assert scores[0] == pytest.approx(0.3 * 0.5 + 0.7 * 0.9)
    assert scores[1] == pytest.approx(0.4) and scores[2] == pytest.approx(0.3)


def test_weights_zero_and_one_are_the_chunk_and_the_sentence_alone() -> None:
    chunk, best = [0.2, 0.6], [0.8, 0.1]
    assert reranked_scores(chunk, best, 0.0).tolist() == pytest.approx(chunk)
    assert reranked_scores(chunk, best, 1.0).tolist() == pytest.approx(best)


def test_a_chunk_holding_the_answer_sentence_overtakes_a_merely_related_one() -> None:
    # Chunk 0 is about the subject on average; chunk 1 holds the one sentence that answers.
    order, scores = rerank_order([0.62, 0.55], [0.64, 0.81])
    assert order.tolist() == [1, 0] and scores[1] > scores[0]
    assert rerank_order([0.62, 0.55], [0.64, 0.81], 0.0)[0].tolist() == [0, 1]


def test_ties_keep_the_pool_order() -> None:
    # A pool of 40 with three tied levels: numpy's default (unstable) sort reorders these.
    levels = [2, 1, 1, 0, 0, 0, 0, 0, 0, 2, 1, 2, 1, 1, 2, 2, 1, 1, 1, 2,
              0, 2, 2, 0, 1, 2, 1, 0, 2, 2, 2, 0, 0, 2, 0, 1, 0, 0, 1, 1]  # fmt: skip
    order, _ = rerank_order([level / 4 for level in levels], [None] * len(levels))
    expected = sorted(range(len(levels)), key=lambda i: -levels[i])  # Python's sort is stable
    assert order.tolist() == expected


@pytest.mark.parametrize("weight", [-0.1, 1.5, math.nan])
def test_a_weight_outside_zero_to_one_is_refused(weight: float) -> None:
    with pytest.raises(ValueError, match="sentence_weight"):
        reranked_scores([0.5], [0.5], weight)


def test_default_weight_is_the_settings_default() -> None:
    from seams.settings import RetrievalSettings

    assert RetrievalSettings().sentence_weight == SENTENCE_WEIGHT
    assert 0.0 < SENTENCE_WEIGHT < 1.0
    assert np.isfinite(reranked_scores([0.1], [0.2])).all()


@pytest.mark.parametrize("weight", [-0.1, 1.5, math.nan])
def test_search_refuses_a_bad_weight_with_an_input_error_before_touching_the_database(
    weight: float,
) -> None:
    from seams.errors import InputError
    from seams.storage.search import search_response

    class NoDatabase:  # any connection attempt would fail the test with AttributeError
        pass

    with pytest.raises(InputError, match=r"retrieval\.sentence_weight="):
        search_response(
            NoDatabase(),  # type: ignore[arg-type]
            NoDatabase(),  # type: ignore[arg-type]
            "queen bee", 5, sentence_weight=weight,
        )  # fmt: skip
