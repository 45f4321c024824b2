"""Similarities across candidate gaps from embeddings (stage 2).

Gap `i` (1 <= i < n) lies between candidate i-1 and candidate i. Window modes:

- "single": cosine of the two neighbouring candidates' embeddings.
- "pooled" (default): cosine of the mean embedding of `window_size` candidates on each side of
  the gap (fewer, equally many on both sides, near the document's edges). Each candidate is
  embedded once and pooled afterwards, which costs nothing extra and finds topic shifts far more
  reliably than "single".
- "text": re-embeds the text of the windows themselves (classic sliding windows). Costs about
  `window_size` times the tokens; kept as an option for comparison.

`embedding_texts` says what to embed for a config; `gap_similarities` turns those vectors into
one similarity per gap; `candidate_vectors` gives one vector per candidate (for cohesion).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from seams.chunking.config import ChunkingConfig
from seams.chunking.segment import Candidate

#: Gaps whose pooled windows are compared at once (bounds the temporaries to a few MB).
_GAP_BLOCK = 4096


def embedding_texts(
    text: str, candidates: Sequence[Candidate], config: ChunkingConfig
) -> list[str]:
    """The texts to embed for `candidates` under `config` (one call to the embedder).

    Candidates' own texts for "single"/"pooled" (a table piece after the first is prefixed with
    its table's header so its embedding knows the columns); window texts for "text" mode.
    """
    if config.window_mode == "text":
        return window_texts(text, candidates, config.window_size)
    texts = []
    for c in candidates:
        body = text[c.start_char : c.end_char]
        if c.header_start is not None and c.header_end is not None:
            body = text[c.header_start : c.header_end] + "\n" + body
        texts.append(body)
    return texts


def window_texts(text: str, candidates: Sequence[Candidate], window_size: int) -> list[str]:
    """Texts of the windows [k, k+w) for k = -(w-1) .. n-1, clipped to the document (n+w-1).

    Window k+w-1 in this list is the forward window starting at candidate k; window i-1 is the
    backward window ending at candidate i-1. Each distinct window is listed (and embedded) once.
    """
    n = len(candidates)
    w = window_size
    out = []
    for k in range(-(w - 1), n):
        first, last = max(0, k), min(n, k + w) - 1
        out.append(text[candidates[first].start_char : candidates[last].end_char])
    return out


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    array = np.asarray(vectors, dtype=np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", array, array))[:, None]
    return array / np.where(norms > 0, norms, np.float32(1.0))


def prefix_sums(rows: np.ndarray, dtype: type[np.floating] = np.float64) -> np.ndarray:
    """(m+1, d) prefix sums of `rows` in `dtype`, the first row zero: exactly
    `np.cumsum(rows, axis=0, dtype=dtype)` below a zero row (the same additions in the same
    order), done row by row, which is several times faster than numpy's cumsum down the
    columns of a C-ordered array."""
    out = np.empty((rows.shape[0] + 1, *rows.shape[1:]), dtype=dtype)
    out[0] = 0
    out[1:] = rows
    views = list(out[1:])  # row views made once: the loop then costs one addition per row
    before = views[0] if views else None
    for row in views[1:]:
        row += before  # row + before == before + row, bit for bit
        before = row
    return out


def _cosines(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity, 0 where a row is zero."""
    dots = np.einsum("ij,ij->i", left, right)
    norms = np.sqrt(np.einsum("ij,ij->i", left, left) * np.einsum("ij,ij->i", right, right))
    cosines = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
    return np.clip(cosines.astype(np.float64), -1.0, 1.0)


def gap_similarities(vectors: np.ndarray, n_candidates: int, config: ChunkingConfig) -> np.ndarray:
    """One cosine similarity per gap (length n-1), from the vectors `embedding_texts` asked for.

    Vectors need not be normalised (cosines are computed), but unit rows are what pooling
    assumes: each candidate then weighs the same in its window's mean.
    """
    n = n_candidates
    if n < 2:
        return np.zeros(0, dtype=np.float64)
    array = np.asarray(vectors, dtype=np.float32)
    w = config.window_size
    if config.window_mode == "text":
        # backward window ending at candidate i-1 vs forward window starting at candidate i
        return _cosines(array[0 : n - 1], array[w : w + n - 1])
    if config.window_mode == "single" or w == 1:
        return _cosines(array[:-1], array[1:])
    cumulative = prefix_sums(array, np.float32)
    out = np.empty(n - 1, dtype=np.float64)
    # In blocks of gaps, so the temporaries stay small however long the document is.
    for start in range(1, n, _GAP_BLOCK):
        gaps = np.arange(start, min(start + _GAP_BLOCK, n))
        # Symmetric windows: near the document's edges both sides shrink together, so a gap is
        # never judged by one candidate against four (means of more vectors are more similar to
        # anything, which made edge gaps look like boundaries).
        k = np.minimum(np.minimum(gaps, n - gaps), w)
        left = cumulative[gaps] - cumulative[gaps - k]
        right = cumulative[gaps + k] - cumulative[gaps]
        out[gaps - 1] = _cosines(left, right)
    return out


def candidate_vectors(vectors: np.ndarray, n_candidates: int, config: ChunkingConfig) -> np.ndarray:
    """One vector per candidate: the embeddings themselves, or in "text" mode the forward
    window starting at each candidate."""
    array = np.asarray(vectors, dtype=np.float32)
    if config.window_mode == "text":
        w = config.window_size
        return array[w - 1 : w - 1 + n_candidates]
    return array


def expected_rows(n_candidates: int, config: ChunkingConfig) -> int:
    """How many vectors `embedding_texts` produces for n candidates."""
    if config.window_mode == "text":
        return n_candidates + config.window_size - 1 if n_candidates else 0
    return n_candidates
