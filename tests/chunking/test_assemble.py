"""Assembly: boundaries first, then only the cuts that min/max force; overlap; offsets; cohesion."""

from __future__ import annotations

import numpy as np
import pytest
from chunking_doubles import fake_embed, word_counter

from seams.chunking import (
    ChunkingConfig,
    assemble_chunks,
    detect_boundaries,
    plan_segments,
    segment,
)
from seams.chunking.segment import Candidate

# Ten-word sentences make token sizes obvious with the word counter.
SENTENCE = "W{0} a b c d e f g h end."


def ten_word_text(n: int) -> str:
    return " ".join(SENTENCE.format(i) for i in range(n))


def fixed_config(**kw) -> ChunkingConfig:
    base = {"threshold_type": "fixed", "boundary_threshold": 0.5, "min_sentence_length": 1}
    return ChunkingConfig(**{**base, **kw})


def chunks_for(text: str, sims: list[float], config: ChunkingConfig, **kw):
    """Chunks with hand-made gap similarities (one per gap)."""
    cands = segment(text, config, word_counter)
    assert len(sims) == len(cands) - 1
    bounds = detect_boundaries(np.array(sims, dtype=float), cands, config)
    return cands, assemble_chunks(text, cands, bounds, config, document_id="doc", **kw)


def two_topic_chunks(text: str, **sizes):
    """`text` (twelve sentences) chunked with one topic shift, after the sixth sentence, and
    sizes 20 / 60 / `chunk_size_max` tokens plus the overlap in `sizes`."""
    config = fixed_config(chunk_size_min=20, chunk_size_target=60, **sizes)
    return chunks_for(text, [0.9] * 5 + [0.1] + [0.9] * 5, config)


def core_spans(chunks):
    return [(c.overlap_end, c.end_char) for c in chunks]


def test_semantic_boundary_is_kept_when_sizes_allow():
    text = ten_word_text(8)
    sims = [0.9, 0.9, 0.9, 0.1, 0.9, 0.9, 0.9]
    config = fixed_config(chunk_size_min=20, chunk_size_target=40, chunk_size_max=60)
    cands, chunks = chunks_for(text, sims, config)
    assert [c.sentence_count for c in chunks] == [4, 4]
    assert chunks[1].start_char == cands[4].start_char
    assert chunks[1].metadata["boundary_reason"] == "semantic"
    assert chunks[0].metadata["boundary_reason"] == "document_start"


def test_max_forces_a_cut_at_the_weakest_gap():
    text = ten_word_text(8)
    sims = [0.9, 0.8, 0.9, 0.9, 0.7, 0.95, 0.9]  # no semantic boundary below 0.5
    config = fixed_config(chunk_size_min=20, chunk_size_target=40, chunk_size_max=50)
    _, chunks = chunks_for(text, sims, config)
    # 80 words must split; the weakest gap leaving both sides >= min is gap 5 (0.7)
    assert [c.sentence_count for c in chunks] == [5, 3]
    assert chunks[1].metadata["boundary_reason"] == "size"
    assert all(c.token_count <= 50 for c in chunks)


def test_min_drops_a_boundary_merging_into_the_more_similar_neighbour():
    text = ten_word_text(9)
    # a boundary isolates candidate 4 (10 words < min 20); it is more similar to the right
    sims = [0.9, 0.9, 0.9, 0.1, 0.2, 0.9, 0.9, 0.9]
    config = fixed_config(
        chunk_size_min=20, chunk_size_target=40, chunk_size_max=60, local_minima=False
    )
    _, chunks = chunks_for(text, sims, config)
    assert [c.sentence_count for c in chunks] == [4, 5]
    assert all(not c.metadata["undersized"] for c in chunks)


def test_small_tail_merges_into_the_previous_chunk():
    text = ten_word_text(7)
    sims = [0.9, 0.9, 0.9, 0.9, 0.9, 0.1]  # the last sentence alone would be a tiny tail
    config = fixed_config(chunk_size_min=20, chunk_size_target=60, chunk_size_max=80)
    _, chunks = chunks_for(text, sims, config)
    assert [c.sentence_count for c in chunks] == [7]


def test_tail_that_cannot_merge_moves_the_cut_instead():
    text = ten_word_text(7)
    sims = [0.9, 0.9, 0.9, 0.9, 0.9, 0.1]
    config = fixed_config(chunk_size_min=20, chunk_size_target=50, chunk_size_max=60)
    _, chunks = chunks_for(text, sims, config)
    sizes = [c.token_count for c in chunks]
    assert sum(sizes) == 70 and all(20 <= s <= 60 for s in sizes)
    assert chunks[1].metadata["boundary_reason"] == "size"


def test_undersized_chunk_is_flagged_when_nothing_can_absorb_it():
    text = ten_word_text(13)
    sims = [0.9] * 5 + [0.0] + [0.9] * 6
    config = fixed_config(chunk_size_min=60, chunk_size_target=60, chunk_size_max=60)
    _, chunks = chunks_for(text, sims, config)
    assert all(c.token_count <= 60 for c in chunks)
    small = [c for c in chunks if c.token_count < 60]
    assert small and all(c.metadata["undersized"] for c in small)


def test_short_document_is_one_chunk_and_empty_is_none():
    config = fixed_config(chunk_size_min=50, chunk_size_target=100, chunk_size_max=200)
    text = "Just one short sentence. And another."
    cands = segment(text, config, word_counter)
    bounds = detect_boundaries(np.array([0.0]), cands, config)
    (chunk,) = assemble_chunks(text, cands, bounds, config, document_id="d")
    assert chunk.text == text and chunk.metadata["undersized"]
    assert chunk.chunk_index == 0 and chunk.total_chunks == 1
    assert assemble_chunks("", [], [], config, document_id="d") == []
    assert plan_segments([], [], config) == []


def test_oversized_single_word_is_split_between_characters_and_flagged():
    word = "x" * 250
    text = f"Short intro here. {word} Short outro here."
    config = ChunkingConfig(
        size_unit="chars",
        chunk_size_min=10,
        chunk_size_target=80,
        chunk_size_max=100,
        min_sentence_length=1,
    )
    cands = segment(text, config)
    bounds = detect_boundaries(np.zeros(len(cands) - 1), cands, config)
    chunks = assemble_chunks(text, cands, bounds, config, document_id="d")
    assert all(len(c.text) <= 100 for c in chunks)
    assert any(c.metadata["split_sentence"] for c in chunks)
    assert "".join(c.text for c in chunks).replace(" ", "") == text.replace(" ", "")


def test_sentences_unit_counts_candidates():
    text = ten_word_text(10)
    config = fixed_config(
        size_unit="sentences", chunk_size_min=2, chunk_size_target=3, chunk_size_max=4
    )
    _, chunks = chunks_for(text, [0.9] * 9, config)
    assert all(2 <= c.sentence_count <= 4 for c in chunks)
    assert all(c.metadata["size"] == c.sentence_count for c in chunks)


def test_chars_unit_measures_the_whole_span():
    text = ten_word_text(10)
    config = fixed_config(
        size_unit="chars", chunk_size_min=40, chunk_size_target=100, chunk_size_max=120
    )
    _, chunks = chunks_for(text, [0.9] * 9, config)
    assert all(40 <= len(c.text) <= 120 for c in chunks)
    assert all(c.metadata["size"] == len(c.text) for c in chunks)


def test_overlap_takes_whole_sentences_from_the_previous_chunk():
    text = ten_word_text(12)
    cands, chunks = two_topic_chunks(text, chunk_size_max=100, overlap_tokens=25)
    first, second = chunks
    assert second.overlap_start == second.start_char == cands[4].start_char  # two sentences
    assert second.overlap_end == cands[6].start_char
    assert second.metadata["overlap_candidates"] == 2
    assert second.text == text[second.start_char : second.end_char]
    assert second.token_count == 80 and second.sentence_count == 8
    assert first.overlap_start == first.overlap_end == first.start_char
    # cores partition the candidates
    assert core_spans(chunks) == [
        (cands[0].start_char, cands[5].end_char),
        (cands[6].start_char, cands[11].end_char),
    ]


def test_overlap_never_pushes_a_chunk_over_max():
    _, chunks = two_topic_chunks(ten_word_text(12), chunk_size_max=65, overlap_tokens=25)
    assert all(c.token_count <= 65 for c in chunks)
    assert chunks[1].metadata["overlap_candidates"] == 0


def test_overlap_ratio_is_relative_to_the_previous_chunk():
    _, chunks = two_topic_chunks(ten_word_text(12), chunk_size_max=100, overlap_ratio=0.2)
    assert chunks[1].metadata["overlap_candidates"] == 1  # 20 % of 60 tokens = 12 >= 10


def test_no_overlap_across_a_heading():
    text = "# One\n\n" + ten_word_text(5) + "\n\n# Two\n\n" + ten_word_text(5)
    config = fixed_config(
        chunk_size_min=20, chunk_size_target=60, chunk_size_max=100, overlap_tokens=30
    )
    cands = segment(text, config, word_counter)
    bounds = detect_boundaries(np.full(len(cands) - 1, 0.9), cands, config)
    chunks = assemble_chunks(text, cands, bounds, config, document_id="d")
    assert [c.text.splitlines()[0] for c in chunks] == ["# One", "# Two"]
    assert chunks[1].metadata["boundary_reason"] == "structural"
    assert chunks[1].overlap_end == chunks[1].start_char
    assert chunks[1].section == "Two"


def test_a_lone_heading_is_never_left_behind():
    text = ten_word_text(5) + "\n\n## Next\n\n" + ten_word_text(5)
    config = fixed_config(chunk_size_min=20, chunk_size_target=40, chunk_size_max=60)
    cands = segment(text, config, word_counter)
    sims = np.full(len(cands) - 1, 0.9)
    sims[5] = 0.0  # a strong semantic cut right after the heading
    chunks = assemble_chunks(
        text, cands, detect_boundaries(sims, cands, config), config, document_id="d"
    )
    assert all(not c.text.rstrip().endswith("## Next") for c in chunks)


def test_cohesion_is_the_mean_pairwise_similarity():
    text = ten_word_text(6) + " Totally unrelated words appear here now."
    config = fixed_config(chunk_size_min=1, chunk_size_target=100, chunk_size_max=200)
    cands = segment(text, config, word_counter)
    vectors = fake_embed([c.text_of(text) for c in cands])
    bounds = detect_boundaries(np.full(len(cands) - 1, 0.9), cands, config)
    (chunk,) = assemble_chunks(text, cands, bounds, config, document_id="d", embeddings=vectors)
    sims = vectors @ vectors.T
    m = len(cands)
    expected = (sims.sum() - np.trace(sims)) / (m * (m - 1))
    assert chunk.cohesion == pytest.approx(float(expected), abs=1e-5)
    single = assemble_chunks(
        "One.",
        [Candidate(0, 0, 4, "sentence", "", 1, 0)],
        [],
        config,
        document_id="d",
        embeddings=np.ones((1, 3)),
    )
    assert single[0].cohesion is None


def test_pages_from_page_spans():
    text = ten_word_text(6)
    config = fixed_config(chunk_size_min=10, chunk_size_target=30, chunk_size_max=30)
    cands = segment(text, config, word_counter)
    middle = cands[3].start_char
    pages = [(1, 0, middle), (2, middle, len(text))]
    bounds = detect_boundaries(np.full(5, 0.9), cands, config)
    chunks = assemble_chunks(text, cands, bounds, config, document_id="d", page_spans=pages)
    assert [(c.page_start, c.page_end) for c in chunks] == [(1, 1), (2, 2)]
    no_pages = assemble_chunks(text, cands, bounds, config, document_id="d")
    assert {(c.page_start, c.page_end) for c in no_pages} == {(None, None)}


def test_boundaries_must_match_candidates():
    config = fixed_config()
    cands = segment(ten_word_text(3), config, word_counter)
    with pytest.raises(ValueError, match="one per gap"):
        plan_segments(cands, [], config)


def test_chunk_fields_and_to_dict():
    text = ten_word_text(4)
    config = fixed_config(chunk_size_min=5, chunk_size_target=100, chunk_size_max=200)
    cands = segment(text, config, word_counter)
    bounds = detect_boundaries(np.full(3, 0.9), cands, config)
    (chunk,) = assemble_chunks(
        text,
        cands,
        bounds,
        config,
        document_id="d",
        boundary_method="jaccard",
        token_counter_name="words",
    )
    row = chunk.to_dict()
    assert row["strategy"] == "context_aware" and row["boundary_method"] == "jaccard"
    assert row["metadata"]["token_counter"] == "words"
    assert row["token_count"] == 40 and row["sentence_count"] == 4
    assert set(row) >= {
        "chunk_id",
        "document_id",
        "chunk_index",
        "total_chunks",
        "text",
        "start_char",
        "end_char",
        "overlap_start",
        "overlap_end",
        "section",
        "page_start",
        "page_end",
        "cohesion",
    }
