"""Candidates: one test per segmentation rule, plus the exact-offset contract."""

from __future__ import annotations

import pytest
from chunking_doubles import word_counter

from seams.chunking import ChunkingConfig, candidate_texts, segment
from tests.support.invariants import check_exact

LOOSE = ChunkingConfig(min_sentence_length=1)


def texts(text: str, config: ChunkingConfig = LOOSE, counter=None) -> list[str]:
    return candidate_texts(text, check_exact(text, segment(text, config, counter)))


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t \r\n", "\u2003\u3000"])
def test_empty_and_whitespace_only_give_no_candidates(text):
    assert segment(text, LOOSE) == []


def test_plain_sentences():
    assert texts("One sentence here. Another one! A question? Last") == [
        "One sentence here.",
        "Another one!",
        "A question?",
        "Last",
    ]


@pytest.mark.parametrize(
    "sentence",
    [
        "Dr. Smith met Mr. Jones and Mrs. Brown at St. Mary's church.",
        "Bring fruit, e.g. apples, i.e. something sweet, etc. and more.",
        "He moved to the U.S. Army base in Washington.",
        "See Fig. 3 and No. 5 on p. 12 of the report.",
        "The author J. R. R. Tolkien wrote it.",
        "Pi is about 3.14159 and version v1.2.3 fixed it.",
        "Visit https://example.com/docs/v2.0/index.html?page=1.5 for details.",
        "Write to first.last@example.co.uk about the results.",
        "It was good... maybe too good.",
        "Wait… what happened there?",
        'He said "Stop. Now." and walked away.',
        "The result (see the appendix. It is long.) was clear.",
        "It costs $4.50 at 3 p.m. today.",
    ],
)
def test_sentence_rules_keep_these_whole(sentence):
    assert texts(sentence) == [sentence]


def test_sentence_ends_after_closing_quote_and_bracket():
    assert texts('"Stop." Then he left. (It was late.) Next day came.') == [
        '"Stop."',
        "Then he left.",
        "(It was late.)",
        "Next day came.",
    ]


def test_etc_ends_a_sentence_before_a_capital():
    assert texts("We bought apples, pears, etc. The shop closed.") == [
        "We bought apples, pears, etc.",
        "The shop closed.",
    ]


def test_extra_abbreviations_from_config():
    text = "We met in Bldg. Seven today. It was warm."
    assert texts(text) == ["We met in Bldg.", "Seven today.", "It was warm."]
    config = LOOSE.with_overrides(extra_abbreviations=("Bldg.",))
    assert texts(text, config) == ["We met in Bldg. Seven today.", "It was warm."]


def test_hard_wrapped_lines_are_not_sentence_ends():
    text = "The quick brown fox\njumps over the lazy\ndog. Then it runs\naway."
    assert texts(text) == ["The quick brown fox\njumps over the lazy\ndog.", "Then it runs\naway."]


def test_blank_line_ends_paragraph_and_sentence():
    text = "First paragraph without a stop\n\nSecond paragraph here"
    cands = segment(text, LOOSE)
    assert candidate_texts(text, cands) == [
        "First paragraph without a stop",
        "Second paragraph here",
    ]
    assert cands[0].paragraph != cands[1].paragraph


def test_crlf_text():
    text = "# Title\r\n\r\nFirst line\r\ncontinues here. Second one.\r\n\r\nNew para."
    cands = check_exact(text, segment(text, LOOSE))
    assert candidate_texts(text, cands) == [
        "# Title",
        "First line\r\ncontinues here.",
        "Second one.",
        "New para.",
    ]
    assert cands[0].kind == "heading"
    assert cands[-1].paragraph > cands[-2].paragraph


def test_short_sentences_join_a_neighbour_never_dropped():
    text = "Yes. I agree with every word of that. Ok."
    config = ChunkingConfig(min_sentence_length=12)
    assert texts(text, config) == ["Yes. I agree with every word of that. Ok."]
    assert texts(text, LOOSE) == ["Yes.", "I agree with every word of that.", "Ok."]


def test_cjk_sentences_end_at_full_stops_without_spaces():
    text = "これは最初の文です。これは二番目の文です！三番目はどうですか？"
    assert texts(text) == ["これは最初の文です。", "これは二番目の文です！", "三番目はどうですか？"]


def test_text_without_punctuation_becomes_length_bounded_fragments():
    words = " ".join(f"word{i}" for i in range(300))
    config = ChunkingConfig(chunk_size_min=5, chunk_size_target=40, chunk_size_max=50)
    cands = check_exact(words, segment(words, config, word_counter))
    assert len(cands) >= 6
    assert all(c.kind == "fragment" and c.split for c in cands)
    assert all(c.token_count <= 50 for c in cands)


def test_cjk_without_punctuation_splits_between_characters():
    text = "漢字" * 400  # no spaces, no punctuation
    config = ChunkingConfig(chunk_size_min=10, chunk_size_target=80, chunk_size_max=100)
    cands = check_exact(text, segment(text, config))  # heuristic: one token per CJK character
    assert len(cands) == 8
    assert all(c.token_count <= 100 and c.split for c in cands)


def test_long_sentence_prefers_clause_punctuation():
    clause = "this clause has exactly eight words in it"
    text = ", ".join([clause] * 6) + "."
    config = ChunkingConfig(chunk_size_min=5, chunk_size_target=15, chunk_size_max=20)
    cands = segment(text, config, word_counter)
    pieces = candidate_texts(text, cands)
    assert all(p.endswith((",", ".")) for p in pieces)
    assert all(c.token_count <= 20 for c in cands)


def test_max_candidate_chars_bounds_every_unit():
    text = "a" * 5000
    cands = check_exact(text, segment(text, ChunkingConfig(max_candidate_chars=1000)))
    assert [c.end_char - c.start_char for c in cands] == [1000] * 5


def test_markdown_headings_record_the_section_path():
    text = (
        "# Guide\n\nIntro text.\n\n## Setup\n\nInstall it.\n\n"
        "### Linux\n\nUse apt.\n\n# FAQ\n\nAsk."
    )
    cands = segment(text, LOOSE)
    by_text = {c.text_of(text): c for c in cands}
    assert by_text["# Guide"].kind == "heading"
    assert by_text["Intro text."].section == "Guide"
    assert by_text["Install it."].section == "Guide > Setup"
    assert by_text["Use apt."].section == "Guide > Setup > Linux"
    assert by_text["Ask."].section == "FAQ"


def test_setext_headings():
    text = "Title\n=====\n\nBody text here.\n\nPart two\n--------\n\nMore text."
    cands = segment(text, LOOSE)
    assert [c.kind for c in cands] == ["heading", "sentence", "heading", "sentence"]
    assert cands[-1].section == "Title > Part two"


def test_hashtag_is_not_a_heading():
    assert [c.kind for c in segment("#hashtag is trending today.", LOOSE)] == ["sentence"]


def test_list_items_are_atomic_units_with_continuations():
    text = (
        "Steps:\n\n- Open the box. Take out the parts.\n  Keep the screws.\n"
        "- Build it.\n1. First\n2) Second"
    )
    cands = segment(text, LOOSE)
    assert candidate_texts(text, cands) == [
        "Steps:",
        "- Open the box. Take out the parts.\n  Keep the screws.",
        "- Build it.",
        "1. First",
        "2) Second",
    ]
    assert [c.kind for c in cands[1:]] == ["list_item"] * 4


@pytest.mark.parametrize(
    ("block", "kind"),
    [
        # a fence with blank lines and hashes inside: no paragraph, heading or sentence end
        ("```python\nx = 1.5\n\n# not a heading. Nor a sentence end.\ny = 2\n```", "code"),
        ("| name | size |\n|------|------|\n| a | 1 |\n| b | 2 |", "table"),
    ],
)
def test_fenced_code_and_tables_are_atomic(block: str, kind: str) -> None:
    text = f"Before it.\n\n{block}\n\nAfter it."
    cands = segment(text, LOOSE)
    assert candidate_texts(text, cands) == ["Before it.", block, "After it."]
    assert cands[1].kind == kind
    assert cands[2].section == ""


def test_unclosed_fence_runs_to_the_end():
    text = "Intro.\n\n~~~\ncode line\nmore code"
    assert [c.kind for c in segment(text, LOOSE)] == ["sentence", "code"]


def test_indented_code_block():
    text = "Run this:\n\n    make build\n    make test\n\nThen relax."
    cands = segment(text, LOOSE)
    assert [c.kind for c in cands] == ["lead_in", "code", "sentence"]  # "Run this:" leads in
    assert cands[1].text_of(text) == "make build\n    make test"
    off = LOOSE.with_overrides(indented_code=False)
    assert "code" not in [c.kind for c in segment(text, off)]


def test_indented_first_line_of_a_paragraph_is_prose():
    text = "Intro.\n\n    It was a dark night. The rain\nfell hard."
    assert [c.kind for c in segment(text, LOOSE)] == ["sentence", "sentence", "sentence"]


def test_pipe_table_without_outer_pipes():
    table = "name | size\n--- | ---\na | 1\nb | 2"
    cands = segment(f"{table}\n\nAfter.", LOOSE)
    assert cands[0].kind == "table" and cands[0].end_char == len(table)


def test_large_table_splits_by_rows_recording_the_header():
    header = "| id | description |\n|----|-------------|"
    rows = [f"| {i} | row number {i} describes item {i} |" for i in range(40)]
    text = "\n".join([header, *rows])
    config = ChunkingConfig(chunk_size_min=5, chunk_size_target=40, chunk_size_max=60)
    cands = check_exact(text, segment(text, config, word_counter))
    assert len(cands) > 1 and all(c.kind == "table" and c.split for c in cands)
    assert cands[0].text_of(text).startswith(header)
    for c in cands[1:]:
        assert text[c.header_start : c.header_end] == header
        assert c.text_of(text).startswith("| ")  # whole rows
        assert c.token_count <= 60


def test_large_code_block_splits_by_lines():
    lines = [f"value_{i} = compute({i}, {i + 1})  # step {i}" for i in range(60)]
    code = "```\n" + "\n".join(lines) + "\n```"
    config = ChunkingConfig(chunk_size_min=5, chunk_size_target=40, chunk_size_max=50)
    cands = check_exact(code, segment(code, config, word_counter))
    assert len(cands) > 1 and all(c.kind == "code" for c in cands)
    for c in cands:
        assert c.token_count <= 50
        assert code[c.end_char : c.end_char + 1] in ("", "\n")  # ends at a line end


def test_structure_detection_can_be_switched_off():
    text = "# Title\n\n- item one\n- item two\n\n| a | b |\n| 1 | 2 |"
    flat = ChunkingConfig(
        min_sentence_length=1, detect_headings=False, detect_lists=False, detect_tables=False
    )
    assert {c.kind for c in segment(text, flat)} == {"sentence"}


def test_thematic_break_is_its_own_unit():
    text = "Above.\n\n---\n\nBelow."
    assert [c.kind for c in segment(text, LOOSE)] == ["sentence", "rule", "sentence"]


def test_token_counts_come_from_the_counter():
    cands = segment("One two three. Four five.", LOOSE, word_counter)
    assert [c.token_count for c in cands] == [3, 2]


def test_counter_must_answer_one_count_per_text():
    from seams.chunking import ConfigError

    with pytest.raises(ConfigError, match="one count per text"):
        segment("A sentence. Another.", LOOSE, lambda texts: [1])
