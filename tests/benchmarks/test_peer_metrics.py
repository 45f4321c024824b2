"""The metrics `python -m benchmarks` scores every chunker with (no peer library needed).

A wrong metric would silently rank the chunkers wrong, so each one is checked on outputs whose
right answer is obvious: a chunker that collapses whitespace, drops text, cuts inside a sentence,
or returns random ids.
"""

from __future__ import annotations

import itertools
import json
import re

import pytest

from benchmarks import correctness, report, texts
from benchmarks.correctness import Piece, Source
from benchmarks.topic_shift import pk_windowdiff

TEXT = (
    "Dr. Ada Novak wrote the tool. It runs at 3.5 s per batch, e.g. on one\n"
    "core; wrapped lines stay one sentence.\n\n"
    "## Setup\n\n"
    "- install it\n- run it. Twice\n\n"
    "```python\nx = 1\n\ny = 2\n```\n\n"
    "The end is near! Is it? Yes."
)


def words_as_tokens(batch: list[str]) -> list[int]:
    return [len(t.split()) + 2 for t in batch]


def slices(text: str, cuts: list[int]) -> list[Piece]:
    bounds = [0, *cuts, len(text)]
    return [Piece(text[a:b], a, b, f"id{a}") for a, b in itertools.pairwise(bounds)]


def test_reference_units_follow_sentences_lists_headings_and_code() -> None:
    units = [TEXT[a:b] for a, b in correctness.reference_units(TEXT)]
    assert units == [
        "Dr. Ada Novak wrote the tool.",
        "It runs at 3.5 s per batch, e.g. on one\ncore; wrapped lines stay one sentence.",
        "## Setup",
        "- install it",
        "- run it. Twice",
        "```python\nx = 1\n\ny = 2\n```",
        "The end is near!",
        "Is it?",
        "Yes.",
    ]


def test_exact_slices_at_sentence_ends_score_perfectly() -> None:
    cut = TEXT.index("## Setup")
    result = correctness.score(TEXT, [slices(TEXT, [cut])] * 2, words_as_tokens)
    assert result["exact_slices"] == 1.0
    assert result["text_lost"] == 0.0
    assert result["sentences_broken"] == 0.0
    assert result["offsets_correct"] == 1.0
    assert result["deterministic_texts"] and result["deterministic_ids"]


def test_whitespace_collapsing_chunks_are_found_but_not_exact() -> None:
    cut = TEXT.index("## Setup")
    collapsed = [Piece(" ".join(p.text.split())) for p in slices(TEXT, [cut])]
    result = correctness.score(TEXT, [collapsed, collapsed], words_as_tokens)
    assert result["same_up_to_whitespace"] == 1.0
    assert result["exact_slices"] == 0.0
    assert result["text_lost"] == 0.0
    assert result["offsets_correct"] is None
    assert result["deterministic_ids"] is None


def test_trimmed_chunks_that_keep_their_inner_whitespace_are_exact() -> None:
    pieces = [Piece(p.text.strip()) for p in slices(TEXT, [TEXT.index("## Setup")])]
    assert correctness.score(TEXT, [pieces, pieces], words_as_tokens)["exact_slices"] == 1.0


def test_dropped_text_is_counted_as_lost() -> None:
    keep = TEXT[: TEXT.index("## Setup")]
    result = correctness.score(TEXT, [[Piece(keep)]] * 2, words_as_tokens)
    lost = len("".join(TEXT[len(keep) :].split())) / len("".join(TEXT.split()))
    assert result["text_lost"] == pytest.approx(lost)


def test_a_cut_inside_a_sentence_or_code_block_is_a_break() -> None:
    inside_sentence = TEXT.index("wrote the tool")
    inside_code = TEXT.index("y = 2")
    result = correctness.score(
        TEXT, [slices(TEXT, [inside_sentence, inside_code])] * 2, words_as_tokens
    )
    assert result["broken"] == 2
    assert result["sentences_broken"] == pytest.approx(2 / 9)


def test_a_unit_longer_than_the_window_is_not_held_against_a_chunker() -> None:
    long = "word " * 300 + "end."
    result = correctness.score(long, [slices(long, [500])] * 2, words_as_tokens)
    assert result["units_too_long"] == 1
    assert result["sentences_broken"] == 0.0


def test_chunks_over_the_model_window_are_counted() -> None:
    pieces = slices(TEXT, [TEXT.index("## Setup")])
    result = correctness.score(TEXT, [pieces] * 2, lambda b: [300 if "Dr." in t else 10 for t in b])
    assert result["over_window"] == 0.5


def test_random_ids_fail_the_determinism_check() -> None:
    first = [Piece("Dr. Ada Novak wrote the tool.", id="a")]
    second = [Piece("Dr. Ada Novak wrote the tool.", id="b")]
    result = correctness.score(TEXT, [first, second], words_as_tokens)
    assert result["deterministic_texts"] is True
    assert result["deterministic_ids"] is False


def test_changed_text_is_not_found_and_covers_nothing() -> None:
    pieces = [Piece("Something the source never said.")]
    result = correctness.score(TEXT, [pieces, pieces], words_as_tokens)
    assert result["same_up_to_whitespace"] == 0.0
    assert result["text_lost"] == 1.0


def test_align_finds_overlapping_chunks_in_order() -> None:
    source = Source("one two three four")
    placements = correctness.align(source, [Piece("one two three"), Piece("three four")])
    assert [(p.start, p.end, p.exact) for p in placements] == [(0, 13, True), (8, 18, True)]


def test_pk_and_windowdiff_are_zero_for_the_reference_and_high_for_no_boundaries() -> None:
    assert pk_windowdiff(1000, [250, 500, 750], [250, 500, 750]) == (0.0, 0.0)
    pk, wd = pk_windowdiff(1000, [250, 500, 750], [])
    assert pk > 0.4 and wd > 0.4


@pytest.mark.parametrize("kind", texts.KINDS)
def test_benchmark_texts_are_deterministic_and_the_size_asked_for(kind: str) -> None:
    text = texts.build(kind, 3000)
    assert text == texts.build(kind, 3000)
    assert 3000 <= len(text.split()) < 6000
    if kind == "hard_wrapped":
        assert max(len(line) for line in text.splitlines()) <= 80
    if kind == "technical":
        assert text.count("```") >= 4


def speed_row(wall: float, cpu: float, **extra: float) -> dict:
    return {
        "median_wall_s": wall,
        "median_cpu_s": cpu,
        "s_per_10k_words": 2 * wall,
        "x_encode_wall": wall,
        "correctness": correctness.score(TEXT, [slices(TEXT, [])] * 2, words_as_tokens),
        **extra,
    }


def test_report_renders_every_section_and_marks_missed_targets(tmp_path) -> None:
    rows = {
        "encode": speed_row(1.0, 1.0),
        "seams": speed_row(0.9, 0.9, x_langchain_wall=0.45, x_chonkie_wall=0.4),
        "langchain": speed_row(2.0, 2.0),
        "chonkie": speed_row(2.0, 3.0),
    }
    speed = {
        "texts": {"prose": {"words": 5000, "rows": rows}},
        "systems": {name: {"label": name.title(), "settings": ""} for name in rows},
        "rounds": 3,
        "threads": 1,
    }
    pk = {"seams": 0.05, "langchain": 0.3}
    boundaries = {
        "docs_per_split": 40,
        "topics": 36,
        "rows": [
            {"system": k.title(), "key": k, "split": "test", "pk": v, "windowdiff": v,
             "chunks_per_doc": 6.0, "passages_per_doc": 6.0}
            for k, v in pk.items()
        ],
    }  # fmt: skip
    (tmp_path / "retrieval.json").write_text(
        json.dumps({"results": [{"system": "seams", "recall@5": 0.8}]}), encoding="utf-8"
    )
    page = report.render(
        {
            "date": "2026-01-01 00:00 UTC",
            "machine": {"cpus": 2, "platform": "Linux", "python": "3.11", "versions": {}},
            "command": "python -m benchmarks",
            "seconds": 600,
            "speed": speed,
            "boundaries": boundaries,
        },
        tmp_path,
    )
    for heading in ("### Speed", "### Correctness", "### Boundary quality", "### Retrieval"):
        assert heading in page
    assert "Fast mode" not in page  # no fast_mode.json in the folder
    assert re.search(r"<= 0.5x Langchain's: 0.45x wall, 0.45x CPU .* — met\.", page)
    assert re.search(r"<= 0.35x Chonkie's: 0.45x wall, 0.30x CPU .*met on CPU time only", page)
    assert "Seams 0.050, best peer 0.300 — met" in page
