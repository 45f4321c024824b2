"""Property tests: the chunking invariants over arbitrary Unicode text and random valid configs.

For every input: chunk texts are exact slices; every non-whitespace character lies in exactly one
chunk core; sizes respect max (unless flagged oversized, a single unsplittable candidate) and
min (unless flagged undersized, and then no neighbour could absorb it); ids are unique; the same
input gives the same output.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from chunking_doubles import fake_embed, word_counter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seams.chunking import ChunkingConfig, chunk_text, load_token_counter, segment

logging.getLogger("seams.chunking").setLevel(logging.ERROR)

SNIPPETS = [
    "Dr. Smith went home at 3 p.m. yesterday.",
    "The value is 3.14 today!",
    "Is it v1.2.3 or https://example.com/a.b?q=1?",
    "Write to someone@example.org, e.g. now.",
    "# Heading one",
    "## Sub heading",
    "- a list item\n  continued",
    "1. numbered item",
    "```\ncode line\n\nmore code\n```",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "    indented code",
    "これは日本語の文です。次の文！",
    "no punctuation at all in this fragment",
    "Wait... what? Yes.",
    '"Quoted." Then (bracket. inside.) more.',
    "x" * 120,
    "word " * 60,
    "---",
    "Title\n=====",
    "Ünïcödé façade naïve café — “quotes”.",
]
SEPARATORS = [" ", "\n", "\n\n", "\r\n", "\r\n\r\n", "\t", "", "  \n \n"]

structured_text = st.lists(
    st.tuples(st.sampled_from(SNIPPETS) | st.text(max_size=40), st.sampled_from(SEPARATORS)),
    max_size=30,
).map(lambda parts: "".join(p + s for p, s in parts))
any_text = st.text(max_size=300) | structured_text


@st.composite
def sizes(draw) -> dict[str, Any]:
    """A size unit and min <= target <= max in it, small enough that short texts get cut."""
    unit = draw(st.sampled_from(["tokens", "chars", "sentences"]))
    top = {"tokens": 120, "chars": 600, "sentences": 12}[unit]
    low = {"tokens": 4, "chars": 16, "sentences": 1}[unit]
    maximum = draw(st.integers(low, top))
    target = draw(st.integers(1, maximum))
    minimum = draw(st.integers(1, target))
    return {
        "size_unit": unit,
        "chunk_size_min": minimum,
        "chunk_size_target": target,
        "chunk_size_max": maximum,
    }


@st.composite
def configs(draw) -> ChunkingConfig:
    return ChunkingConfig(
        **draw(sizes()),
        overlap_tokens=draw(st.sampled_from([0, 0, 8, 40])),
        threshold_type=draw(
            st.sampled_from(["fixed", "percentile", "stddev", "interquartile", "gradient"])
        ),
        boundary_threshold=draw(st.floats(-1.0, 1.0)),
        window_mode=draw(st.sampled_from(["single", "pooled", "text"])),
        window_size=draw(st.integers(1, 5)),
        local_minima=draw(st.booleans()),
        min_sentence_length=draw(st.integers(1, 30)),
        max_candidate_chars=draw(st.integers(16, 400)),
        target_pull=draw(st.sampled_from([0.0, 0.3])),
        split_on_headings=draw(st.booleans()),
        indented_code=draw(st.booleans()),
        segmenter=draw(st.sampled_from(["optimal", "threshold"])),
    )


@pytest.fixture(scope="module")
def real_counter(minilm_tokenizer_json):
    return load_token_counter(minilm_tokenizer_json)


def core_size(chunk, config) -> int:
    if config.size_unit == "chars":
        return chunk.end_char - chunk.overlap_end
    return chunk.metadata["size"]


def check_invariants(text: str, chunks, config: ChunkingConfig, embedded: bool) -> None:
    ids = [c.chunk_id for c in chunks]
    assert len(set(ids)) == len(ids)
    position = 0
    for k, chunk in enumerate(chunks):
        assert chunk.text == text[chunk.start_char : chunk.end_char]
        assert chunk.chunk_index == k and chunk.total_chunks == len(chunks)
        assert chunk.overlap_start == chunk.start_char <= chunk.overlap_end < chunk.end_char
        # cores are ordered, disjoint, and only whitespace lies between them
        assert chunk.overlap_end >= position
        assert text[position : chunk.overlap_end].strip() == ""
        position = chunk.end_char
        if k:
            assert chunk.start_char >= chunks[k - 1].overlap_end  # overlap from the previous
        size = chunk.metadata["size"]
        if config.size_unit == "chars":
            assert size == len(chunk.text)
        elif config.size_unit == "sentences":
            assert size == chunk.sentence_count
        else:
            assert size == chunk.token_count
        if size > config.chunk_size_max:
            assert chunk.metadata["oversized"] and chunk.sentence_count == 1
        if size < config.chunk_size_min:
            assert chunk.metadata["undersized"]
        assert chunk.boundary_method == ("semantic" if embedded else "jaccard")
        assert chunk.cohesion is None or -1.0 <= chunk.cohesion <= 1.0
    assert text[position:].strip() == ""
    if not any(c.strip() for c in text):
        assert chunks == []


def check_undersized_could_not_merge(text, chunks, config: ChunkingConfig) -> None:
    """Without overlap: a flagged small chunk has no neighbour it could have merged into. With
    `split_on_headings` no merge crosses a heading that opens a section: a short section stands
    alone."""
    headings = {c.start_char for c in segment(text, config) if c.kind == "heading"}
    for k, chunk in enumerate(chunks):
        if not chunk.metadata["undersized"] or len(chunks) == 1:
            continue
        for j in (k - 1, k + 1):
            if 0 <= j < len(chunks):
                first, last = sorted((chunk, chunks[j]), key=lambda c: c.start_char)
                if config.split_on_headings and last.start_char in headings:
                    continue
                if config.size_unit == "chars":
                    union = last.end_char - first.start_char
                else:
                    union = core_size(chunk, config) + core_size(chunks[j], config)
                assert union > config.chunk_size_max


def check_chunk_text(text, config, use_embedder, token_counter) -> None:
    """`chunk_text` keeps every invariant on `text`, merges every undersized chunk it could
    (without overlap) and gives the same chunks again."""
    embed = fake_embed if use_embedder else None
    chunks = chunk_text(
        text, document_id="doc", config=config, embed=embed, token_counter=token_counter
    )
    check_invariants(text, chunks, config, use_embedder)
    if not config.overlap_tokens:
        check_undersized_could_not_merge(text, chunks, config)
    again = chunk_text(
        text, document_id="doc", config=config, embed=embed, token_counter=token_counter
    )
    assert again == chunks


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=any_text,
    config=configs(),
    use_embedder=st.booleans(),
    counter=st.sampled_from(["heuristic", "words", "tokenizer"]),
)
def test_chunking_invariants(text, config, use_embedder, counter, real_counter):
    token_counter = {"heuristic": None, "words": word_counter, "tokenizer": real_counter}[counter]
    check_chunk_text(text, config, use_embedder, token_counter)


@settings(max_examples=150, deadline=None)
@given(text=any_text, config=configs())
def test_candidates_are_exact_and_cover_all_text(text, config):
    candidates = segment(text, config)
    position = 0
    for number, c in enumerate(candidates):
        assert c.index == number
        assert position <= c.start_char < c.end_char
        assert text[position : c.start_char].strip() == ""
        body = c.text_of(text)
        assert body.strip() == body != ""
        position = c.end_char
    assert text[position:].strip() == ""


@st.composite
def fast_configs(draw) -> ChunkingConfig:
    """The `fast` preset with random sizes, unit, overlap and tokenizer (boundaries fixed)."""
    return ChunkingConfig.preset(
        "fast",
        **draw(sizes()),
        overlap_tokens=draw(st.sampled_from([0, 0, 8])),
        max_candidate_chars=draw(st.integers(16, 400)),
        tokenizer=draw(st.sampled_from(["model", "cl100k_base"])),
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=any_text,
    config=fast_configs(),
    use_embedder=st.booleans(),
    counter=st.sampled_from(["heuristic", "tokenizer"]),
)
def test_chunking_invariants_fast_preset(text, config, use_embedder, counter, real_counter):
    token_counter = {"heuristic": None, "tokenizer": real_counter}[counter]
    check_chunk_text(text, config, use_embedder, token_counter)


def test_a_short_section_after_a_short_paragraph_stands_alone() -> None:
    """The case the property first found: '#' opens a section, so '0' and '#' stay apart."""
    config = ChunkingConfig(chunk_size_min=2, chunk_size_target=2, chunk_size_max=4, cut_cost=1.0)
    check_chunk_text("0\n#", config, use_embedder=False, token_counter=None)
    chunks = chunk_text("0\n#", document_id="doc", config=config)
    assert [c.text for c in chunks] == ["0", "#"]
