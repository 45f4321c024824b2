"""Token counters: the exact tokenizer counter (word-memoised) and the heuristic."""

from __future__ import annotations

import pytest
from chunking_doubles import CATS, ROCKETS

from seams.chunking import ConfigError, HeuristicTokenCounter, load_token_counter
from seams.chunking.tokens import (
    HEURISTIC_COUNTER_NAME,
    UNSAFE_FOR_WORD_CACHE,
    counter_name,
    has_unsafe_characters,
)

SAMPLES = [
    "",
    "Hello, world!",
    "Internationalization of photosynthesis-driven bioreactors, v1.2.3 (beta).",
    "Ünïcödé façade naïve café — “quotes” and ‘single’ ones…",
    "混合テキスト with 中文字符 and 한국어 텍스트.",
    "tabs\tand\nnew\r\nlines  and\u00a0non-breaking\u2009thin spaces",
    "control\x01chars\x1fjoined\u200bzero-width\ufeffbom",
    *CATS,
    *ROCKETS,
]
#: Longer than WordPiece's max word length: the tokenizer says one [UNK]; the counter counts it
#: one token per character instead (tests/reliability/test_honest_sizes.py).
OVER_LONG_WORD = "x" * 150


def test_tokenizer_counter_matches_the_tokenizer_exactly(minilm_tokenizer_json):
    counter = load_token_counter(minilm_tokenizer_json)
    reference = counter._tokenizer  # the same tokenizer, asked text by text
    expected = [len(reference.encode(t, add_special_tokens=False).ids) for t in SAMPLES]
    assert counter(SAMPLES) == expected
    assert counter(SAMPLES) == expected  # second call from the word cache
    counter.clear_cache()
    assert counter(list(reversed(SAMPLES))) == list(reversed(expected))
    assert reference.encode(OVER_LONG_WORD, add_special_tokens=False).tokens == ["[UNK]"]
    assert counter([OVER_LONG_WORD, f"a {OVER_LONG_WORD} b"]) == [150, 152]


def test_tokenizer_counter_is_not_truncated(minilm_tokenizer_json):
    # MiniLM's tokenizer.json truncates at 128 tokens; counting must not.
    counter = load_token_counter(minilm_tokenizer_json)
    assert counter([" ".join(["word"] * 500)]) == [500]


def test_tokenizer_counter_name_identifies_the_file(minilm_tokenizer_json):
    counter = load_token_counter(minilm_tokenizer_json)
    assert counter.name.startswith("tokenizer:") and len(counter.name) == len("tokenizer:") + 16
    assert counter_name(counter) == counter.name
    assert counter_name(None) == HEURISTIC_COUNTER_NAME
    assert counter_name(lambda texts: [0] * len(texts)).endswith("<lambda>")


def test_missing_tokenizer_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"tokenizer\.json"):
        load_token_counter(tmp_path / "missing.json")


def test_heuristic_over_estimates_wordpiece_on_prose(minilm_tokenizer_json):
    exact = load_token_counter(minilm_tokenizer_json)
    heuristic = HeuristicTokenCounter()
    prose = [*CATS, *ROCKETS, SAMPLES[2]]
    for got, real in zip(heuristic(prose), exact(prose), strict=True):
        assert got >= real
    assert sum(heuristic(prose)) <= 2 * sum(exact(prose))  # conservative, not absurd


def test_heuristic_counts_cjk_per_character():
    assert HeuristicTokenCounter()(["漢字かな", ""]) == [4, 0]


def test_unsafe_characters_shortcut_agrees_with_the_pattern():
    """The ASCII shortcut (controls other than tab and newline) and the pattern agree on every
    ASCII character, alone and in text, and on non-ASCII text (which takes the pattern)."""
    samples = ["", "plain words. And more\n\nlines\twith tabs", "caf\u00e9 na\u00efve"]
    samples += [c for c in map(chr, range(128))]
    samples += [f"word {chr(c)} word\n" for c in range(128)]
    samples += ["no\u00a0break", "soft\u00adhyphen", "\u2028line", "\ufeffbom", "\x85next"]
    for text in samples:
        assert has_unsafe_characters(text) == (UNSAFE_FOR_WORD_CACHE.search(text) is not None), (
            repr(text)
        )
