"""Similarities across gaps (window modes) and boundary detection (every threshold type)."""

from __future__ import annotations

import numpy as np
import pytest
from chunking_doubles import fake_embed

from seams.chunking import (
    ChunkingConfig,
    detect_boundaries,
    embedding_texts,
    gap_similarities,
    jaccard_similarities,
    segment,
    window_texts,
)
from seams.chunking.segment import Candidate


def sentences(n: int, kinds: dict[int, str] | None = None) -> list[Candidate]:
    kinds = kinds or {}
    return [Candidate(i, 10 * i, 10 * i + 5, kinds.get(i, "sentence"), "", 5, 0) for i in range(n)]


def verdicts(sims, config, kinds=None, **kw) -> list[int]:
    bounds = detect_boundaries(np.array(sims), sentences(len(sims) + 1, kinds), config, **kw)
    assert [b.index for b in bounds] == list(range(1, len(sims) + 1))
    return [b.index for b in bounds if b.is_boundary]


SIMS = [0.9, 0.2, 0.8, 0.85, 0.1, 0.7, 0.75, 0.6, 0.9]


def test_fixed_threshold():
    config = ChunkingConfig(threshold_type="fixed", boundary_threshold=0.5)
    assert verdicts(SIMS, config) == [2, 5]
    bounds = detect_boundaries(np.array(SIMS), sentences(10), config)
    assert all(b.threshold == 0.5 for b in bounds)
    assert {b.reason for b in bounds if b.is_boundary} == {"semantic"}
    assert {b.reason for b in bounds if not b.is_boundary} == {None}


def test_local_minima_filter():
    sims = [0.9, 0.3, 0.2, 0.9]  # 0.3 is below the threshold but not a local minimum
    config = ChunkingConfig(threshold_type="fixed", boundary_threshold=0.5)
    assert verdicts(sims, config) == [3]
    assert verdicts(sims, config.with_overrides(local_minima=False)) == [2, 3]


def test_percentile_is_combined_with_the_fixed_threshold_by_taking_the_lower():
    p30 = float(np.percentile(SIMS, 30))
    config = ChunkingConfig(threshold_type="percentile", percentile=30.0, local_minima=False)
    bounds = detect_boundaries(np.array(SIMS), sentences(10), config)
    assert bounds[0].threshold == pytest.approx(p30)
    assert [b.index for b in bounds if b.is_boundary] == [
        i + 1 for i, s in enumerate(SIMS) if s < p30
    ]
    capped = config.with_overrides(boundary_threshold=0.15)
    assert verdicts(SIMS, capped) == [5]


def test_stddev_threshold():
    sims = np.array(SIMS)
    config = ChunkingConfig(threshold_type="stddev", stddev_factor=1.0, local_minima=False)
    expected = sims.mean() - sims.std()
    bounds = detect_boundaries(sims, sentences(10), config)
    assert bounds[0].threshold == pytest.approx(expected)
    assert [b.index for b in bounds if b.is_boundary] == [
        i + 1 for i, s in enumerate(SIMS) if s < expected
    ]


def test_interquartile_threshold():
    sims = np.array(SIMS)
    q1, q3 = np.percentile(sims, [25, 75])
    config = ChunkingConfig(threshold_type="interquartile", iqr_factor=0.5, local_minima=False)
    bounds = detect_boundaries(sims, sentences(10), config)
    assert bounds[0].threshold == pytest.approx(q1 - 0.5 * (q3 - q1))
    assert verdicts(SIMS, config) == [2, 5]


def test_gradient_threshold_finds_sharp_valleys_not_slow_declines():
    # A gentle V down to 0.6 and back, then a sharp dip to 0.4: both are local minima below
    # 0.65, but only the sharp one is deep within a window of two gaps.
    sims = [0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.9, 0.4, 0.9]
    fixed = ChunkingConfig(threshold_type="fixed", boundary_threshold=0.65)
    assert verdicts(sims, fixed) == [7, 15]
    config = ChunkingConfig(threshold_type="gradient", gradient_percentile=95.0, window_size=2)
    assert verdicts(sims, config) == [15]
    flat = ChunkingConfig(threshold_type="gradient")
    assert verdicts([0.5] * 8, flat) == []


def test_headings_are_structural_boundaries_and_stick_to_what_follows():
    kinds = {3: "heading", 6: "heading", 7: "heading"}  # 6 and 7: a heading right under another
    sims = [0.9] * 9
    config = ChunkingConfig(threshold_type="fixed", boundary_threshold=0.5)
    bounds = detect_boundaries(np.array(sims), sentences(10, kinds), config)
    structural = [b.index for b in bounds if b.reason == "structural"]
    assert structural == [3, 6]
    # the gap right after a heading is never a boundary, however dissimilar
    low = [0.9, 0.9, 0.9, 0.0, 0.9, 0.9, 0.9, 0.0, 0.9]
    assert 4 not in verdicts(low, config, kinds)
    assert verdicts(sims, config.with_overrides(split_on_headings=False), kinds) == []


def test_lexical_method_reports_fallback_and_ignores_absolute_thresholds():
    config = ChunkingConfig(threshold_type="fixed", boundary_threshold=-1.0, percentile=20.0)
    bounds = detect_boundaries(np.array(SIMS), sentences(10), config, method="jaccard")
    assert [b.index for b in bounds if b.is_boundary] == [2, 5]
    assert {b.reason for b in bounds if b.is_boundary} == {"fallback"}


def test_similarities_must_match_the_gaps():
    with pytest.raises(ValueError, match="one per candidate gap"):
        detect_boundaries(np.array([0.5, 0.5]), sentences(2), ChunkingConfig())
    assert detect_boundaries(np.zeros(0), sentences(1), ChunkingConfig()) == []


def unit(rows) -> np.ndarray:
    array = np.array(rows, dtype=np.float32)
    return array / np.linalg.norm(array, axis=1, keepdims=True)


def test_single_window_is_the_cosine_of_neighbours():
    vectors = unit([[1, 0], [1, 1], [0, 1]])
    sims = gap_similarities(vectors, 3, ChunkingConfig(window_mode="single"))
    assert sims == pytest.approx([np.sqrt(0.5), np.sqrt(0.5)], abs=1e-6)


def test_pooled_window_compares_means_of_each_side():
    rng = np.random.default_rng(0)
    vectors = unit(rng.normal(size=(7, 5)))
    config = ChunkingConfig(window_mode="pooled", window_size=2)
    sims = gap_similarities(vectors, 7, config)
    for gap in range(1, 7):
        k = min(2, gap, 7 - gap)  # symmetric near the edges
        left = vectors[gap - k : gap].mean(axis=0)
        right = vectors[gap : gap + k].mean(axis=0)
        expected = left @ right / np.linalg.norm(left) / np.linalg.norm(right)
        assert sims[gap - 1] == pytest.approx(expected, abs=1e-5)


def test_text_windows_are_embedded_once_each():
    text = "A one. B two. C three. D four."
    cands = segment(text, ChunkingConfig(min_sentence_length=1))
    assert window_texts(text, cands, 2) == [
        "A one.",
        "A one. B two.",
        "B two. C three.",
        "C three. D four.",
        "D four.",
    ]
    config = ChunkingConfig(window_mode="text", window_size=2, min_sentence_length=1)
    vectors = fake_embed(embedding_texts(text, cands, config))
    sims = gap_similarities(vectors, len(cands), config)
    # gap 2 compares the window ending at "B two." with the one starting at "C three."
    left, right = vectors[1], vectors[3]
    assert sims[1] == pytest.approx(float(left @ right), abs=1e-5)


def test_table_continuations_are_embedded_with_their_header():
    header = "| k | v |\n|---|---|"
    text = header + "\n" + "\n".join(f"| {i} | value {i} |" for i in range(30))
    config = ChunkingConfig(chunk_size_min=5, chunk_size_target=20, chunk_size_max=30)
    cands = segment(text, config)
    embedded = embedding_texts(text, cands, config)
    assert all(t.startswith(header) for t in embedded)
    assert embedded[1] != cands[1].text_of(text)


def test_jaccard_similarity_reflects_word_overlap():
    text = "Cats purr softly. Cats purr loudly. Rockets launch fast."
    config = ChunkingConfig(window_mode="single", min_sentence_length=1)
    cands = segment(text, config)
    sims = jaccard_similarities(text, cands, config)
    assert sims[0] == pytest.approx(2 / 4)  # {cats, purr, softly} vs {cats, purr, loudly}
    assert sims[1] == 0.0
