"""The static boundary model's runtime: numpy lookups over MiniLM's tokenizer, no Dagster.

A text's embedding is the mean of its tokens' static vectors (the model distilled by
`seams.models.distill`), L2-normalised: what model2vec's `StaticModel.encode` computes, without
model2vec, torch or onnxruntime. The vectors are stored by MiniLM token id, so the tokenizer is
the one the chunker already counts with.

Why numpy and not an ONNX graph of the same Gather + mean: the arithmetic is one gather and one
segmented sum; tokenizing costs far more than that, and onnxruntime would add a session and per-call
overhead for nothing. So tokenizing is what is saved: MiniLM's tokenizer never joins across
whitespace (the property `chunking.tokens.TokenizerCounter` relies on), so a text's token vectors
are the union of its words' token vectors, and each distinct word is tokenized and summed once per
process. Texts with characters where `str.split` and the tokenizer may disagree about word
boundaries are tokenized whole. There is no window: long texts average all their tokens.

`seams.models.embedders.StaticEmbedder` (and the pipeline's resource over it) runs it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from itertools import chain
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from seams.chunking.tokens import UNSAFE_FOR_WORD_CACHE, has_unsafe_characters, is_word_additive
from seams.errors import EmbeddingError
from seams.models.model_store import EXPORT_HINT


class StaticRuntime:
    """A loaded static model: a float32 (vocab, dims) matrix and MiniLM's tokenizer.

    Texts whose tokens are all unknown to the model (an empty string, emoji only) have no
    direction of their own; they embed as a fixed unit vector (the first axis, the model's
    largest principal component) so that every row is a valid unit vector.
    """

    def __init__(self, matrix: np.ndarray, tokenizer: Tokenizer, max_words: int = 500_000):
        self.matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        self.dims = int(self.matrix.shape[1])
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self.tokenizer = tokenizer
        self._encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
        self.word_cached = is_word_additive(json.loads(tokenizer.to_str()))
        self._max_words = max_words
        self._lock = threading.Lock()
        self._word_row: dict[str, int] = {}
        self._word_sums = np.zeros((1024, self.dims), np.float32)

    def clear_cache(self) -> None:
        """Forget the per-word sums (memory, or a cold-start measurement)."""
        with self._lock:
            self._word_row = {}

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Word-piece ids of each text, without [CLS]/[SEP] and without truncation."""
        return [e.ids for e in self._encode(list(texts), add_special_tokens=False)]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dims) float32 unit rows."""
        n = len(texts)
        if n == 0:
            return np.zeros((0, self.dims), np.float32)
        if not self.word_cached:
            return self._normalise(self._token_sums(texts))
        # One search over all texts finds whether any holds an unsafe character (usually none).
        unsafe = UNSAFE_FOR_WORD_CACHE.search
        if not has_unsafe_characters("\n".join(texts)):
            splits: list[list[str] | None] = [t.split() for t in texts]
        else:
            splits = [None if unsafe(t) else t.split() for t in texts]
        lengths = np.fromiter((0 if ws is None else len(ws) for ws in splits), np.int64, n)
        words = list(chain.from_iterable(ws for ws in splits if ws is not None))
        with self._lock:
            try:
                flat = np.fromiter(map(self._word_row.__getitem__, words), np.int64, len(words))
            except KeyError:  # words not seen yet: tokenize and sum them first
                self._add_words(set(words))
                flat = np.fromiter(map(self._word_row.__getitem__, words), np.int64, len(words))
            sums = _segment_sums(self._word_sums, flat, lengths, self.dims)
        whole = [i for i, ws in enumerate(splits) if ws is None]
        if whole:
            sums[whole] = self._token_sums([texts[i] for i in whole])
        return self._normalise(sums)

    def _add_words(self, words: set[str]) -> None:
        """Tokenize and sum the words not seen yet (caller holds the lock)."""
        missing = sorted(w for w in words if w not in self._word_row)
        if not missing:
            return
        if len(self._word_row) + len(missing) > self._max_words:
            self._word_row = {}
            missing = sorted(words)
        sums = self._token_sums(missing)
        start = len(self._word_row)
        needed = start + len(missing)
        if needed > self._word_sums.shape[0]:
            grown = np.zeros((max(needed, 2 * self._word_sums.shape[0]), self.dims), np.float32)
            grown[:start] = self._word_sums[:start]
            self._word_sums = grown
        self._word_sums[start:needed] = sums
        self._word_row.update(zip(missing, range(start, needed), strict=True))

    def _token_sums(self, texts: Sequence[str]) -> np.ndarray:
        """Sum of each text's token vectors, tokenizing the texts whole."""
        lists = self.token_ids(texts)
        lengths = np.fromiter(map(len, lists), np.int64, len(lists))
        flat = np.fromiter(chain.from_iterable(lists), np.int64, int(lengths.sum()))
        return _segment_sums(self.matrix, flat, lengths, self.dims)

    def _normalise(self, sums: np.ndarray) -> np.ndarray:
        norms = np.sqrt(np.einsum("ij,ij->i", sums, sums))
        empty = norms == 0
        sums[empty, 0] = 1.0
        norms[empty] = 1.0
        if not np.isfinite(sums).all():
            raise EmbeddingError("the static model produced non-finite embeddings")
        return sums / norms[:, None]


def _segment_sums(
    table: np.ndarray, flat: np.ndarray, lengths: np.ndarray, dims: int
) -> np.ndarray:
    """Row sums `table[flat[s:s + n]].sum(0)` of the consecutive runs of `lengths`, bit for bit
    what `np.add.reduceat(table[flat], starts, axis=0)` gives (the model id and every vector
    depend on those bits), several times faster.

    Why not reduceat itself: over axis 0 it runs one strided inner loop per (run, column), which
    is slow; its result is each run's first row plus numpy's pairwise sum of the rest (see
    `_pairwise_sums`). That order is reproduced here with whole-row numpy operations over all
    runs at once, gathering rows in cache-sized steps.
    """
    n = lengths.size
    sums = np.zeros((n, dims), np.float32)
    filled = np.flatnonzero(lengths)
    if filled.size:
        starts = (np.cumsum(lengths) - lengths)[filled]
        firsts = _gather(table, flat[starts])
        rest = lengths[filled] - 1
        more = np.flatnonzero(rest)
        if more.size:
            firsts[more] += _pairwise_sums(table, flat, starts[more] + 1, rest[more], dims)
        sums[filled] = firsts
    return sums


#: numpy's pairwise summation sums runs up to this long with 8 accumulators, longer ones halved.
_PAIRWISE_BLOCK = 128
_NEGATIVE_ZERO = np.float32(-0.0)


def _gather(table: np.ndarray, rows: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """`table[rows]` (rows are valid: "clip" only spares numpy's buffered bounds check)."""
    return np.take(table, rows, axis=0, out=out, mode="clip")


def _pairwise_sums(
    table: np.ndarray, flat: np.ndarray, starts: np.ndarray, counts: np.ndarray, dims: int
) -> np.ndarray:
    """For every i, numpy's float32 `pairwise_sum` of the rows `table[flat[s:s + c]]` (s, c =
    starts[i], counts[i] >= 1), column-wise and in numpy's exact order of additions:

    - c <= 128: eight accumulators take rows 0-7, then add rows 8-15, 16-23, ... (whole blocks
      of eight); they are combined as ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) (-0.0
      when c < 8), and the last c % 8 rows are added one by one;
    - c > 128: the sum of the first half (rounded down to a multiple of 8) plus that of the rest.

    Runs are sorted by their number of blocks (then of trailing rows), so that each step is one
    gather and one add over a prefix of them.
    """
    k = starts.size
    if k == 0:
        return np.zeros((0, dims), np.float32)
    big = counts > _PAIRWISE_BLOCK
    if big.any():
        sums = np.empty((k, dims), np.float32)
        big_starts, big_counts = starts[big], counts[big]
        half = big_counts // 2
        half -= half % 8
        left = _pairwise_sums(table, flat, big_starts, half, dims)
        left += _pairwise_sums(table, flat, big_starts + half, big_counts - half, dims)
        sums[big] = left
        small = ~big
        sums[small] = _pairwise_sums(table, flat, starts[small], counts[small], dims)
        return sums
    blocks = counts >> 3
    sums = np.full((k, dims), _NEGATIVE_ZERO, np.float32)
    order = np.argsort(-blocks, kind="stable")
    sorted_blocks = blocks[order]
    blocked = int(np.count_nonzero(sorted_blocks))
    if blocked:
        order, sorted_blocks = order[:blocked], sorted_blocks[:blocked]
        block_starts = starts[order]
        lanes = np.arange(8)[:, None]
        acc = _gather(table, flat[block_starts + lanes])  # (8 lanes, runs, dims)
        scratch = np.empty_like(acc).reshape(-1)
        for block in range(1, int(sorted_blocks[0])):
            c = int(np.count_nonzero(sorted_blocks > block))
            part = scratch[: 8 * c * dims].reshape(8, c, dims)
            _gather(table, flat[block_starts[:c] + 8 * block + lanes], out=part)
            np.add(acc[:, :c], part, out=acc[:, :c])
        acc[0] += acc[1]
        acc[2] += acc[3]
        acc[4] += acc[5]
        acc[6] += acc[7]
        acc[0] += acc[2]
        acc[4] += acc[6]
        acc[0] += acc[4]
        sums[order] = acc[0]
    trailing = counts & 7
    order = np.argsort(-trailing, kind="stable")
    sorted_trailing = trailing[order]
    if sorted_trailing[0]:
        tails = (starts + 8 * blocks)[order]
        acc = _gather(sums, order)
        part = np.empty_like(acc)
        for row in range(int(sorted_trailing[0])):
            c = int(np.count_nonzero(sorted_trailing > row))
            _gather(table, flat[tails[:c] + row], out=part[:c])
            acc[:c] += part[:c]
        sums[order] = acc
    return sums


_runtimes: dict[tuple[object, ...], StaticRuntime] = {}
_lock = threading.Lock()


def load_static_runtime(
    embeddings_path: Path, tokenizer_path: Path, *, cache: bool = True
) -> StaticRuntime:
    """Load (or reuse, keyed by the files' identity) the matrix and tokenizer."""
    try:
        st = embeddings_path.stat()
    except OSError as exc:
        raise EmbeddingError(
            f"cannot read the static model {embeddings_path}: {exc}; {EXPORT_HINT}."
        ) from exc
    key = (str(embeddings_path.resolve()), st.st_size, st.st_mtime_ns, str(tokenizer_path))
    with _lock:
        if cache and key in _runtimes:
            return _runtimes[key]
        try:
            matrix = np.load(embeddings_path, allow_pickle=False)
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
        except Exception as exc:
            raise EmbeddingError(
                f"cannot load the static model in {embeddings_path.parent} ({exc}); {EXPORT_HINT}."
            ) from exc
        if matrix.ndim != 2 or matrix.shape[0] < tokenizer.get_vocab_size():
            raise EmbeddingError(
                f"{embeddings_path} has shape {matrix.shape}, which does not cover the "
                f"tokenizer's {tokenizer.get_vocab_size()} ids; {EXPORT_HINT}."
            )
        runtime = StaticRuntime(matrix, tokenizer)
        if cache:
            _runtimes[key] = runtime
        return runtime


def clear_static_cache() -> None:
    """Forget loaded static models (tests; or to free memory)."""
    with _lock:
        _runtimes.clear()
