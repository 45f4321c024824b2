"""`_Search._split_short` against the dynamic programme it mirrors.

`split_to_fit` splits every over-cap topic of at most `_BLOCK` candidates with
`_split_short`, which batches the arithmetic of `_Search.run(first, stop, evidence,
cost=PIECE_COST, capped=True)` over many topics and claims the very same scores, bit for bit.
Any difference moves a size cut, so the two must give identical cuts on every input: random
vectors, token counts, evidence, caps (tokens and characters), minimum, target pull and window.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seams.chunking import ChunkingConfig
from seams.chunking.optimal import PIECE_COST, SizeLimits, _Search, centred_units


@st.composite
def problems(draw) -> tuple[_Search, list[tuple[int, int]], np.ndarray]:
    """A document's candidates (vectors, token counts, characters), a config, the topics to
    split (consecutive [first, stop) ranges) and the size level's evidence."""
    n = draw(st.integers(2, 70))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    dims = draw(st.sampled_from([3, 8, 16]))
    vectors = rng.standard_normal((n, dims))
    shape = draw(st.sampled_from(["random", "rounded", "one direction"]))
    if shape == "rounded":  # repeated directions
        vectors = np.round(vectors)
    elif shape == "one direction":  # every chunk explains nothing: ties between equal splits
        vectors = np.ones((n, dims))
    tokens = rng.integers(0, 25, n) if draw(st.booleans()) else rng.integers(1, 25, n)
    lengths = tokens * 5 + rng.integers(1, 9, n)
    starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])).astype(np.int64)
    ends = (starts + lengths).astype(np.int64)
    unit = draw(st.sampled_from(["tokens", "sentences"]))
    prefix = (
        np.arange(n + 1, dtype=np.int64)
        if unit == "sentences"
        else np.concatenate(([0], np.cumsum(tokens))).astype(np.int64)
    )
    top = 12 if unit == "sentences" else 120
    maximum = draw(st.integers(1, top))
    target = draw(st.integers(1, maximum))
    config = ChunkingConfig(
        size_unit=unit,
        chunk_size_max=maximum,
        chunk_size_target=target,
        chunk_size_min=draw(st.integers(1, target)),
        target_weight=draw(st.sampled_from([0.0, 0.0, 0.5, 3.0])),
        chunk_chars_max=draw(st.sampled_from([None, None, 64, 400])),
        max_chunk_candidates=draw(st.sampled_from([4, 16, 256])),
    )
    units = centred_units(vectors, draw(st.sampled_from([0.0, 0.9])))
    search = _Search(units, SizeLimits(prefix, starts, ends, unit), config)
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=6)))
    bounds = [0, *cuts, n]
    runs = list(itertools.pairwise(bounds))
    evidence = rng.standard_normal(n + 1) * draw(st.sampled_from([0.0, 1.0, 100.0]))
    return search, runs, evidence


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_split_short_gives_the_cuts_of_the_dynamic_programme(
    problem: tuple[_Search, list[tuple[int, int]], np.ndarray],
) -> None:
    search, runs, evidence = problem
    expected = [search.run(a, b, evidence, cost=PIECE_COST, capped=True) for a, b in runs]
    assert search._split_short(runs, evidence) == expected


def test_split_to_fit_joins_them_in_order() -> None:
    """`split_to_fit` hands every short topic to `_split_short` and keeps the topics' order."""
    rng = np.random.default_rng(3)
    n = 40
    units = centred_units(rng.standard_normal((n, 8)))
    starts = np.arange(n, dtype=np.int64) * 10
    limits = SizeLimits(np.arange(n + 1, dtype=np.int64), starts, starts + 9, "sentences")
    search = _Search(units, limits, ChunkingConfig(size_unit="sentences", chunk_size_max=4))
    runs = [(0, 13), (13, 20), (20, 40)]
    evidence = rng.standard_normal(n + 1)
    cuts = search.split_to_fit(runs, evidence)
    assert cuts == [c for part in search._split_short(runs, evidence) for c in part]
    assert cuts and all(a < b for a, b in itertools.pairwise(cuts))
