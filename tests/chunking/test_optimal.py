"""The optimal segmenter: topic cuts found globally, size cuts only where a cap forces them."""

from __future__ import annotations

import itertools

import numpy as np
from chunking_doubles import CATS, ROCKETS, fake_embed, topic_text, word_counter

from seams.chunking import ChunkingConfig, chunk_text
from seams.chunking.optimal import SizeLimits, centred_units, optimal_cuts
from seams.chunking.segment import Candidate

UNBOUNDED = ChunkingConfig(chunk_size_min=1, chunk_size_target=None, chunk_size_max=None)


def chunks_of(text: str, config: ChunkingConfig):
    return chunk_text(
        text, document_id="d", config=config, embed=fake_embed, token_counter=word_counter
    )


def topics(*sizes: int, dims: int = 16, noise: float = 0.1, seed: int = 7) -> np.ndarray:
    """Unit rows: `sizes[k]` noisy copies of topic k's direction, in order."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, size in enumerate(sizes):
        direction = np.zeros(dims)
        direction[k] = 1.0
        rows += [direction + noise * rng.standard_normal(dims) for _ in range(size)]
    array = np.array(rows)
    return array / np.linalg.norm(array, axis=1, keepdims=True)


def candidates(tokens: list[int], kinds: dict[int, str] | None = None) -> list[Candidate]:
    out, pos = [], 0
    for i, count in enumerate(tokens):
        kind = (kinds or {}).get(i, "sentence")
        out.append(Candidate(i, pos, pos + 10, kind, "", count, 0))
        pos += 11
    return out


def cut(vectors: np.ndarray, cands: list[Candidate], config: ChunkingConfig):
    limits = SizeLimits.of(cands, config.size_unit)
    return optimal_cuts(centred_units(vectors), limits, np.zeros(len(cands) + 1), config)


def test_unbounded_finds_every_topic_and_nothing_else():
    vectors = topics(5, 7, 4, 6)
    found = cut(vectors, candidates([10] * 22), UNBOUNDED)
    assert found.topic == [5, 12, 16]
    assert found.size == []


def test_a_size_cap_splits_inside_topics_and_never_moves_a_topic_cut():
    vectors = topics(8, 8)
    config = ChunkingConfig(chunk_size_min=20, chunk_size_target=40, chunk_size_max=50)
    found = cut(vectors, candidates([10] * 16), config)
    assert found.topic == [8]
    assert found.size and all(c not in (0, 8, 16) for c in found.size)
    edges = [0, *found.all, 16]
    assert all(20 <= (b - a) * 10 <= 50 for a, b in itertools.pairwise(edges))


def test_minimum_size_is_kept_where_a_segmentation_allows_it():
    vectors = topics(1, 9)  # a one-candidate topic would be a 10-token chunk
    config = UNBOUNDED.with_overrides(chunk_size_min=25)
    assert cut(vectors, candidates([10] * 10), config).all == []
    assert cut(vectors, candidates([10] * 10), UNBOUNDED).all == [1]


def test_headings_open_chunks_and_are_never_cut_from_what_follows():
    vectors = topics(12)  # one topic: only structure can cut
    kinds = {0: "heading", 6: "heading"}
    chunks = chunk_text(
        "# A\n\n" + " ".join(CATS[:5]) + "\n\n# B\n\n" + " ".join(CATS[:5]),
        document_id="d",
        config=UNBOUNDED,
        embed=fake_embed,
        token_counter=word_counter,
    )
    assert [c.text.splitlines()[0] for c in chunks] == ["# A", "# B"]
    assert [c.metadata["boundary_reason"] for c in chunks] == ["document_start", "structural"]
    found = cut(vectors, candidates([10] * 12, kinds), UNBOUNDED)
    assert 1 not in found.all and 7 not in found.all


def test_chunk_text_cuts_the_topic_seam_and_labels_reasons():
    chunks = chunks_of(topic_text(), UNBOUNDED)
    assert [c.text for c in chunks] == [" ".join(CATS), " ".join(ROCKETS)]
    assert chunks[1].metadata["boundary_reason"] == "semantic"
    capped = ChunkingConfig(chunk_size_min=10, chunk_size_target=40, chunk_size_max=45)
    reasons = [c.metadata["boundary_reason"] for c in chunks_of(topic_text(), capped)]
    assert reasons.count("semantic") == 1 and "size" in reasons
    assert all(c.metadata["size"] <= 45 for c in chunks_of(topic_text(), capped))


def test_character_cap_bounds_text_the_tokenizer_reads_as_few_tokens():
    config = ChunkingConfig(chunk_chars_max=500)
    chunks = chunk_text("x" * 20_000, document_id="d", config=config, embed=fake_embed)
    assert max(c.end_char - c.start_char for c in chunks) <= 500
    assert "".join(c.text for c in chunks) == "x" * 20_000


def test_two_megabytes_without_a_space_stay_under_the_default_character_cap():
    text = "x" * 2_000_000  # issue 19: once 11 chunks of 102k-248k characters, "51-124 tokens"
    chunks = chunk_text(text, document_id="run.txt", embed=fake_embed)
    cap = ChunkingConfig().effective_chars_max()
    assert cap is not None and max(c.end_char - c.start_char for c in chunks) <= cap
    assert "".join(c.text[c.overlap_end - c.start_char :] for c in chunks) == text


def test_default_character_cap_follows_the_size_cap():
    assert ChunkingConfig().effective_chars_max() == 32 * 254
    assert ChunkingConfig(chunk_size_max=None, chunk_size_target=None).effective_chars_max() is None
    assert ChunkingConfig(size_unit="chars", chunk_size_max=900).effective_chars_max() == 900


def test_same_input_same_cuts():
    vectors = topics(4, 4, 4, noise=0.5)
    first = cut(vectors, candidates([10] * 12), UNBOUNDED)
    assert all(cut(vectors, candidates([10] * 12), UNBOUNDED) == first for _ in range(3))
