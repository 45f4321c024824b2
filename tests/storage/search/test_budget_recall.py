"""`seams eval`'s arithmetic without a database: the questions file, recall of reference spans
inside a packed context (recomputed by hand), which indexed file a source names, the weight grid,
the folds and the cross-validated choice of `lexical_weight`."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seams.errors import InputError
from seams.storage.search.budget_recall import (
    EvalQuestion,
    check_spans,
    context_recall,
    cross_validate,
    halves,
    locate_answer,
    matching_paths,
    mean,
    merge_spans,
    parse_questions,
    weight_grid,
)


def _line(**record: object) -> str:
    return json.dumps(record)


# --- the questions file --------------------------------------------------------------------------
def test_a_questions_file_parses_with_blank_lines_and_extra_fields() -> None:
    lines = [
        _line(question="Who?", source="a.md", spans=[[3, 9], [20, 25]], id="q1"),
        "",
        "   ",
        _line(question="When?", source="docs/b.txt", spans=[[0, 1]]),
    ]
    assert parse_questions(lines, "q.jsonl") == [
        EvalQuestion(1, "Who?", "a.md", ((3, 9), (20, 25))),
        EvalQuestion(4, "When?", "docs/b.txt", ((0, 1),)),
    ]


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('{"question": "Who?", "source": "a.md", "spans": [[1, 2]]', "line 2: not valid JSON"),
        ('["Who?", "a.md"]', "line 2: expected a JSON object"),
        ('{"question": "Who?", "spans": [[1, 2]]}', "line 2: missing 'source'"),
        ('{"source": "a.md"}', "line 2: missing 'question', 'answer'"),
        ('{"question": "Who?", "source": "a.md", "answer": ""}', "'answer' must be a non-empty"),
        (
            '{"question": "Who?", "source": "a.md", "answer": "x", "spans": [[1, 2]]}',
            "give 'answer' or 'spans', not both",
        ),
        ('{"question": "  ", "source": "a.md", "spans": [[1, 2]]}', "'question' must be a non-emp"),
        ('{"question": "Who?", "source": 3, "spans": [[1, 2]]}', "'source' must be a non-empty"),
        ('{"question": "W\\u0000", "source": "a.md", "spans": [[1, 2]]}', "a NUL character"),
        ('{"question": "Who?", "source": "a.md", "spans": []}', "'spans' must be a non-empty list"),
        ('{"question": "Who?", "source": "a.md", "spans": [1, 2]}', "span 1 is not a pair"),
        (
            '{"question": "Who?", "source": "a.md", "spans": [[1.5, 2]]}',
            "is not a pair of integers",
        ),
        ('{"question": "Who?", "source": "a.md", "spans": [[true, 2]]}', "is not a pair of integ"),
        (
            '{"question": "Who?", "source": "a.md", "spans": [[5, 5]]}',
            "[5, 5] is empty or reversed",
        ),
        ('{"question": "Who?", "source": "a.md", "spans": [[-1, 5]]}', "[-1, 5] is empty or rever"),
    ],
)
def test_a_bad_line_is_one_error_naming_the_file_and_the_line(line: str, says: str) -> None:
    good = _line(question="Why?", source="a.md", spans=[[0, 4]])
    with pytest.raises(InputError) as error:
        parse_questions([good, line], "q.jsonl")
    assert str(error.value).startswith("q.jsonl, line 2: ")
    assert says in str(error.value)
    assert "\n" not in str(error.value)


def test_a_file_without_questions_says_what_a_line_looks_like() -> None:
    with pytest.raises(InputError, match=r'^q.jsonl: no questions in it: .*"answer"'):
        parse_questions(["", "  "], "q.jsonl")


def test_spans_must_lie_inside_the_extracted_text() -> None:
    question = EvalQuestion(7, "Who?", "a.md", ((0, 4), (8, 11)))
    check_spans(question, "x" * 11, "q.jsonl")  # ends exactly at the end: inside
    with pytest.raises(InputError, match=r"^q.jsonl, line 7: span \[8, 11\] lies outside a.md, "):
        check_spans(question, "x" * 10, "q.jsonl")


# --- recall --------------------------------------------------------------------------------------
def test_recall_of_a_small_case_computed_by_hand() -> None:
    # The reference: 10-20 and 15-30 overlap, so 10-30, 20 characters, count once.
    reference = [(10, 20), (15, 30)]
    context = [
        ("doc-a", 0, 12),  # 10-12: 2 characters
        ("doc-a", 25, 40),  # 25-30: 5 characters
        ("doc-a", 26, 28),  # inside the previous span: nothing new
        ("doc-b", 10, 30),  # another document: nothing
    ]
    assert context_recall(context, "doc-a", reference) == pytest.approx(7 / 20)
    assert context_recall([], "doc-a", reference) == 0.0
    assert context_recall([("doc-a", 0, 100)], "doc-a", reference) == 1.0
    # Two questions at 0.35 and 1.0: the figure is their mean.
    assert mean([7 / 20, 1.0]) == pytest.approx(0.675)


def test_merge_spans_joins_overlapping_and_touching_spans() -> None:
    assert merge_spans([(5, 8), (0, 2), (2, 3), (7, 10), (12, 12)]) == [(0, 3), (5, 10)]


_SPANS = st.lists(
    st.tuples(st.integers(0, 60), st.integers(1, 20)).map(lambda p: (p[0], p[0] + p[1])),
    max_size=6,
)


@given(reference=_SPANS.filter(bool), mine=_SPANS, theirs=_SPANS)
def test_recall_is_the_share_of_reference_characters_given(
    reference: list[tuple[int, int]], mine: list[tuple[int, int]], theirs: list[tuple[int, int]]
) -> None:
    wanted = {i for a, b in reference for i in range(a, b)}
    given_chars = {i for a, b in mine for i in range(a, b)}
    context = [("doc", a, b) for a, b in mine] + [("other", a, b) for a, b in theirs]
    share = context_recall(context, "doc", reference)
    assert share == pytest.approx(len(wanted & given_chars) / len(wanted))
    assert 0.0 <= share <= 1.0
    # Giving more text never lowers it.
    assert context_recall([*context, ("doc", 0, 5)], "doc", reference) >= share - 1e-12


# --- which indexed file a source names -----------------------------------------------------------
PATHS = ["/data/docs/notes.md", "/data/old/notes.md", "/data/docs/a b.txt", "/srv/report.md"]


@pytest.mark.parametrize(
    ("source", "cwd", "found"),
    [
        ("/srv/report.md", "/", [3]),  # absolute: that file
        ("/srv/other.md", "/", []),
        ("report.md", "/anywhere", [3]),  # a bare name: the one file of that name
        ("notes.md", "/anywhere", [0, 1]),  # two of that name: ambiguous
        ("docs/notes.md", "/anywhere", [0]),  # more of the path tells them apart
        ("./notes.md", "/data/old", [1]),  # relative to the working folder first
        ("../docs/notes.md", "/data/old", [0]),
        ("../nowhere/notes.md", "/data/old", []),  # `..` never falls back to a suffix
        ("a b.txt", "/", [2]),
        ("es.md", "/", []),  # a suffix is whole path components, not characters
    ],
)
def test_a_source_names_an_indexed_file_by_path_or_name(
    source: str, cwd: str, found: list[int]
) -> None:
    assert matching_paths(source, PATHS, cwd) == found


# --- weights and cross-validation ----------------------------------------------------------------
def test_the_weight_grid_spans_zero_to_one_and_holds_the_current_weight() -> None:
    assert weight_grid(0.75) == (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0)
    assert weight_grid(0.5) == (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    assert weight_grid(0.5, step=0.25) == (0.0, 0.25, 0.5, 0.75, 1.0)


def test_halves_alternate_with_few_sources_and_keep_sources_together_with_many() -> None:
    assert halves(["a.md"] * 5) == ((0, 2, 4), (1, 3))
    sources = ["a", "a", "a", "b", "c", "c", "d", "e"]
    first, second = halves(sources)
    # a (3) -> first; b (1) -> second; c (2) -> second; d (1) -> first; e (1) -> second.
    assert (first, second) == ((0, 1, 2, 6), (3, 4, 5, 7))
    with pytest.raises(InputError, match="at least 2 questions"):
        halves(["a"])


@given(st.lists(st.sampled_from("abcdefg"), min_size=2, max_size=30))
def test_halves_split_every_question_once_and_neither_is_empty(sources: list[str]) -> None:
    first, second = halves(sources)
    assert sorted(first + second) == list(range(len(sources)))
    assert first and second
    if len(set(sources)) >= 4:  # no source on both sides
        assert not {sources[i] for i in first} & {sources[i] for i in second}


def test_cross_validation_of_a_small_case_computed_by_hand() -> None:
    # Four questions of one file: the halves alternate, A = {0, 2}, B = {1, 3}.
    scores = {
        0.0: [0.0, 1.0, 0.0, 0.5],
        0.5: [1.0, 0.0, 1.0, 0.5],  # the current weight
        1.0: [1.0, 1.0, 0.5, 1.0],
    }
    choice = cross_validate(scores, ["a.md"] * 4, current=0.5)
    # On A: 0.0 -> 0.0, 0.5 -> 1.0, 1.0 -> 0.75: picks 0.5; on B it scores (0 + 0.5) / 2.
    # On B: 0.0 -> 0.75, 0.5 -> 0.25, 1.0 -> 1.0: picks 1.0; on A it scores (1 + 0.5) / 2.
    (on_a, on_b) = choice.folds
    assert (on_a.weight, on_a.score, on_a.current_score) == (0.5, 0.25, 0.25)
    assert (on_b.weight, on_b.score, on_b.current_score) == (1.0, 0.75, 1.0)
    assert (on_a.picked_on, on_a.scored_on) == (2, 2)
    # Held out, each question at the weight picked on the other half: 1, 0, 0.5, 0.5.
    assert choice.held_out == pytest.approx(0.5)
    assert choice.current_score == pytest.approx(0.625)
    # Over all four: 0.0 -> 0.375, 0.5 -> 0.625, 1.0 -> 0.875.
    assert (choice.weight, choice.score) == (1.0, pytest.approx(0.875))
    # 1.0 looks best on the questions that chose it, but loses held out: keep 0.5.
    assert choice.gain == pytest.approx(-0.125)
    assert not choice.change
    assert not choice.by_source


def test_a_weight_that_wins_held_out_replaces_the_current_one() -> None:
    scores = {0.2: [0.2, 0.4, 0.3, 0.1], 0.8: [0.9, 0.8, 0.7, 0.9]}
    choice = cross_validate(scores, ["a", "b", "a", "b"], current=0.2)
    assert [f.weight for f in choice.folds] == [0.8, 0.8]
    assert choice.held_out == pytest.approx(0.825)
    assert choice.current_score == pytest.approx(0.25)
    assert choice.change and choice.weight == 0.8


def test_ties_go_to_the_weight_nearest_the_current_one() -> None:
    scores = {0.0: [1.0, 1.0], 0.6: [1.0, 1.0], 0.7: [1.0, 1.0], 1.0: [1.0, 1.0]}
    choice = cross_validate(scores, ["a", "a"], current=0.7)
    assert choice.weight == 0.7 and not choice.change
    assert [f.weight for f in choice.folds] == [0.7, 0.7]


@given(
    st.lists(st.lists(st.floats(0, 1), min_size=6, max_size=6), min_size=2, max_size=5),
    st.lists(st.sampled_from("abcde"), min_size=6, max_size=6),
)
def test_held_out_never_beats_the_best_weight_per_question(
    table: list[list[float]], sources: list[str]
) -> None:
    weights = [round(i / (len(table) - 1), 6) for i in range(len(table))]
    scores = dict(zip(weights, table, strict=True))
    choice = cross_validate(scores, sources, current=weights[0])
    ceiling = mean(max(column) for column in zip(*table, strict=True))
    assert choice.held_out <= ceiling + 1e-9
    assert choice.score >= choice.current_score - 1e-12  # the best over all is at least current
    assert choice.change <= (choice.held_out > choice.current_score)


# --- what a run measures -------------------------------------------------------------------------
def test_a_run_measures_only_the_kinds_asked_for() -> None:
    from seams.storage.search.evaluation import evaluate

    options = {"budgets": [250], "weights": [0.75], "lexical_weight": 0.75,
               "sentence_weight": 0.7, "count_tokens": len}  # fmt: skip
    # No questions: nothing is read, so no index is needed to see what the run would measure.
    only_dense = evaluate(None, None, [], {}, kinds=("dense",), **options)  # type: ignore[arg-type]
    assert only_dense.by_weight == {} and list(only_dense.by_search) == ["dense"]
    assert only_dense.figures("dense", 0.75) == {250: []}
    with pytest.raises(KeyError):
        only_dense.figures("hybrid", 0.75)
    every = evaluate(None, None, [], {}, **options)  # type: ignore[arg-type]
    assert list(every.by_weight) == [0.75] and list(every.by_search) == ["dense", "lexical"]
    assert every.figures("hybrid", 0.75) == {250: []}
    with pytest.raises(ValueError, match="kinds"):
        evaluate(None, None, [], {}, kinds=("bm25",), **options)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lexical_weight"):
        evaluate(None, None, [], {}, **{**options, "weights": [0.5]})  # type: ignore[arg-type]
    # Without hybrid the weights do not matter.
    evaluate(None, None, [], {}, kinds=("lexical",), **{**options, "weights": []})  # type: ignore[arg-type]


def test_readings_come_in_order_the_next_read_while_the_current_one_is_scored() -> None:
    import threading

    from seams.storage.search.evaluation import read_ahead

    second_read = threading.Event()

    def read(n: int) -> int:
        if n == 2:
            second_read.set()
        if n == 4:
            raise ValueError("no reading of 4")
        return n * 10

    seen = []
    with pytest.raises(ValueError, match="no reading of 4"):
        for n, reading in read_ahead(read, [1, 2, 3, 4, 5]):
            if n == 1:  # the second question is read while the first one is scored
                assert second_read.wait(timeout=60)
            seen.append((n, reading))
    assert seen == [(1, 10), (2, 20), (3, 30)]  # an error comes at its question's turn
    assert list(read_ahead(read, [])) == []


def test_an_answer_quote_is_located_once_across_line_breaks() -> None:
    text = "Rolling back.\nRun release rollback\n  --to previous to undo a deploy. Done."
    (question,) = parse_questions(
        [_line(question="How?", source="a.md", answer="release rollback --to previous")], "q"
    )
    located = locate_answer(question, text, "q.jsonl")
    start, end = located.spans[0]
    assert text[start:end] == "release rollback\n  --to previous"


@pytest.mark.parametrize(
    ("answer", "says"),
    [("roll forward", "is not in a.md"), ("Done", "is in a.md 2 times: quote more")],
)
def test_an_answer_not_found_or_found_twice_is_one_line(answer: str, says: str) -> None:
    text = "Done. Run release rollback. Done."
    (question,) = parse_questions([_line(question="How?", source="a.md", answer=answer)], "q")
    with pytest.raises(InputError) as error:
        locate_answer(question, text, "q.jsonl")
    assert str(error.value).startswith("q.jsonl, line 1: the answer ")
    assert says in str(error.value) and "\n" not in str(error.value)
