"""The static boundary model's runtime: numpy lookups over MiniLM's tokenizer, no Dagster.

A text's embedding is the mean of its tokens' static vectors (the model distilled by
`seams.models.distill`), L2-normalised: what model2vec's `StaticModel.encode` computes, without
model2vec, torch or onnxruntime. The vectors are stored by MiniLM token id, so the tokenizer is
the one the chunker already counts with.

Why numpy and not an ONNX graph of the same Gather + mean: the arithmetic is one gather and one
segmented sum (~2 ms per 10k words); tokenizing costs far more than that (~100 ms per 10k words
on one busy core), and onnxruntime would add a session and per-call overhead for nothing. So
tokenizing is what is saved: MiniLM's tokenizer never joins across whitespace (the property
`chunking.tokens.TokenizerCounter` relies on), so a text's token vectors are the union of its
words' token vectors, and each distinct word is tokenized and summed once per process. Texts
with characters where `str.split` and the tokenizer may disagree about word boundaries are
tokenized whole. There is no window: long texts average all their tokens.

`seams.models.embedders.StaticEmbedder` (and the pipeline's resource over it) runs it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from seams.chunking.tokens import UNSAFE_FOR_WORD_CACHE, is_word_additive
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
        unsafe = UNSAFE_FOR_WORD_CACHE.search
        splits = [None if unsafe(t) else t.split() for t in texts]
        with self._lock:
            self._add_words({w for ws in splits if ws is not None for w in ws})
            rows = self._word_row
            lists = [[] if ws is None else [rows[w] for w in ws] for ws in splits]
            sums = _segment_sums(self._word_sums, lists, self.dims)
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
        return _segment_sums(self.matrix, self.token_ids(texts), self.dims)

    def _normalise(self, sums: np.ndarray) -> np.ndarray:
        norms = np.sqrt(np.einsum("ij,ij->i", sums, sums))
        empty = norms == 0
        sums[empty, 0] = 1.0
        norms[empty] = 1.0
        if not np.isfinite(sums).all():
            raise EmbeddingError("the static model produced non-finite embeddings")
        return sums / norms[:, None]


def _segment_sums(table: np.ndarray, lists: list[list[int]], dims: int) -> np.ndarray:
    """Row sums `table[lists[i]].sum(0)` for every i, as one gather and one segmented sum."""
    n = len(lists)
    lengths = np.fromiter((len(i) for i in lists), np.int64, n)
    flat = np.fromiter((t for row in lists for t in row), np.int64, int(lengths.sum()))
    sums = np.zeros((n, dims), np.float32)
    filled = lengths > 0
    if flat.size:
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[filled]
        sums[filled] = np.add.reduceat(table[flat], starts, axis=0)
    return sums


_runtimes: dict[tuple[object, ...], StaticRuntime] = {}
_lock = threading.Lock()


def load_static_runtime(
    embeddings_path: Path, tokenizer_path: Path, *, cache: bool = True
) -> StaticRuntime:
    """Load (or reuse, keyed by the files' identity) the matrix and tokenizer; ~0.1 s."""
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
