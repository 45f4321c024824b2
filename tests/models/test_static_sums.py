"""The static model's per-text sums are numpy's `np.add.reduceat` bit for bit.

`StaticRuntime` sums each text's word (or token) rows with its own arrangement of whole-row numpy
additions instead of `np.add.reduceat`, which is slow over axis 0. The static model's vectors,
and so the `fast` preset's boundaries and chunk ids, depend on the exact float bits, so these
tests compare bytes, not closeness: against `reduceat` on tables made to expose any change in
the order of additions (magnitudes spread over many orders, signed zeros), for run lengths on
both sides of numpy's pairwise-summation thresholds (8, 16, 128, 256, ...), and end to end
against an embedding computed the way the runtime did with `reduceat`.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from tokenizers import Tokenizer

from seams.models.model_export import packaged_model_dir
from seams.models.model_store import TOKENIZER_FILE
from seams.models.static_runtime import StaticRuntime, _segment_sums


def reduceat_sums(table: np.ndarray, flat: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The reference: one gather and `np.add.reduceat` over the non-empty runs."""
    sums = np.zeros((lengths.size, table.shape[1]), np.float32)
    filled = lengths > 0
    if flat.size:
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[filled]
        sums[filled] = np.add.reduceat(table[flat], starts, axis=0)
    return sums


def awkward_table(rng: np.random.Generator, rows: int, dims: int) -> np.ndarray:
    """Values over ~20 orders of magnitude (so any reordering of additions changes the rounding),
    with +0.0 and -0.0 sprinkled in and a few rows of -0.0 only."""
    scale = np.exp(rng.standard_normal((rows, dims)) * 4)
    table = (rng.standard_normal((rows, dims)) * scale).astype(np.float32)
    table[rng.random((rows, dims)) < 0.05] = 0.0
    table[rng.random((rows, dims)) < 0.05] = -0.0
    table[:3] = -0.0
    return table


LENGTHS = [0, 1, 2, 7, 8, 9, 15, 16, 17, 23, 64, 127, 128, 129, 130, 136, 137, 255, 256, 257]
LENGTHS += [300, 513, 1000, 1029]


@pytest.mark.parametrize("seed", range(6))
def test_segment_sums_are_reduceat_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    table = awkward_table(rng, 400, 24)
    lengths = np.array(
        [*LENGTHS, *rng.integers(0, 160, 60), *rng.integers(0, 12, 60)], dtype=np.int64
    )
    rng.shuffle(lengths)
    # Half the seeds draw rows from the signed-zero rows only (sums of zeros keep their sign).
    high = 400 if seed % 2 else 4
    flat = rng.integers(0, high, int(lengths.sum())).astype(np.int64)
    ours = _segment_sums(table, flat, lengths, table.shape[1])
    expected = reduceat_sums(table, flat, lengths)
    assert ours.dtype == np.float32 and ours.shape == expected.shape
    assert ours.tobytes() == expected.tobytes()


def test_segment_sums_of_nothing() -> None:
    table = np.ones((3, 4), np.float32)
    empty = np.zeros(0, np.int64)
    assert _segment_sums(table, empty, empty, 4).shape == (0, 4)
    none_filled = _segment_sums(table, empty, np.zeros(3, np.int64), 4)
    assert none_filled.tobytes() == np.zeros((3, 4), np.float32).tobytes()


@pytest.fixture(scope="module")
def runtime() -> StaticRuntime:
    tokenizer = Tokenizer.from_file(str(packaged_model_dir() / TOKENIZER_FILE))
    vocab_size = len(json.loads(tokenizer.to_str())["model"]["vocab"])
    matrix = awkward_table(np.random.default_rng(11), vocab_size, 32)
    return StaticRuntime(matrix, tokenizer)


def reference_embed(runtime: StaticRuntime, texts: list[str]) -> np.ndarray:
    """How the runtime embedded with `reduceat`: per-word token sums, then per-text word sums
    (texts the word cache may not split are summed over their tokens whole)."""
    from seams.chunking.tokens import UNSAFE_FOR_WORD_CACHE

    def token_sums(items: list[str]) -> np.ndarray:
        ids = runtime.token_ids(items)
        lengths = np.array([len(i) for i in ids], np.int64)
        flat = np.array([t for row in ids for t in row], np.int64)
        return reduceat_sums(runtime.matrix, flat, lengths)

    splits = [None if UNSAFE_FOR_WORD_CACHE.search(t) else t.split() for t in texts]
    words = sorted({w for ws in splits if ws is not None for w in ws})
    word_sums, row = token_sums(words), {w: i for i, w in enumerate(words)}
    lengths = np.array([0 if ws is None else len(ws) for ws in splits], np.int64)
    flat = np.array([row[w] for ws in splits if ws is not None for w in ws], np.int64)
    sums = reduceat_sums(word_sums, flat, lengths)
    whole = [i for i, ws in enumerate(splits) if ws is None]
    if whole:
        sums[whole] = token_sums([texts[i] for i in whole])
    norms = np.sqrt(np.einsum("ij,ij->i", sums, sums))
    empty = norms == 0
    sums[empty, 0] = 1.0
    norms[empty] = 1.0
    return sums / norms[:, None]


def test_static_embeddings_are_the_reduceat_embeddings_bit_for_bit(
    runtime: StaticRuntime,
) -> None:
    rng = np.random.default_rng(3)
    vocabulary = [
        "the",
        "of",
        "a",
        "model",
        "sums",
        "rows",
        "word",
        "piece",
        "tokenisation",
        "unbelievably",
        "café",
        "2024",
        ",",
        ".",
    ]
    texts = [
        " ".join(rng.choice(vocabulary, int(n)))
        for n in [*rng.integers(0, 40, 80), 8, 9, 128, 129, 400]
    ]
    texts += ["", "🙂", "Ünïcödé façade naïve café", "A much longer text " * 200, "x" * 300]
    # Characters where str.split and the tokenizer may disagree: those texts are summed whole.
    texts += ["a non\u00a0breaking space", "zero\u200bwidth joiner", "soft\u00adhyphen " * 20]
    ours = runtime.embed(texts)
    assert ours.tobytes() == reference_embed(runtime, texts).tobytes()
    # Warm word cache, other batch: the same bits.
    assert runtime.embed(texts[::-1]).tobytes() == ours[::-1].tobytes()
