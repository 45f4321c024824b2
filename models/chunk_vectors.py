"""One retrieval embedding per chunk, three ways (the `chunk_index` asset's modes).

- "text": embed the chunk's own text (`OnnxEmbedder.embed`: a text longer than the model's
  window is the mean of its windows' token vectors). Every token is read a second time, once
  per chunk; the embedding cache makes reruns free.
- "pooled": the token-weighted mean of the chunk's candidate (sentence) embeddings, which the
  pipeline already computed for boundary detection: free, but each sentence was read alone.
- "late" (late chunking, Jina AI 2024): run the model over the *document* in windows
  of the model's size with overlap, keep its per-token output (`last_hidden_state`), and mean-
  pool the tokens inside each chunk's span. Each token is read once (plus the overlap), in the
  context of its neighbours across the chunk's edges, and each token's vector comes from the
  window in which it sits most centrally.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from seams.errors import ConfigError, EmbeddingError
from seams.models.model_folder import DenseLayer, VectorRecipe
from seams.models.onnx_runtime import EmbeddingRuntime

RetrievalMode = Literal["text", "pooled", "late"]
RETRIEVAL_MODES: tuple[RetrievalMode, ...] = ("text", "pooled", "late")

LATE_OVERLAP_TOKENS = 64
"""Tokens shared by consecutive late-chunking windows: each token is then owned by the window
where it has at least 32 tokens of context on both sides (except at the document's edges)."""

Span = tuple[int, int]


def late_cache_model_id(model_id: str, window_tokens: int, overlap_tokens: int) -> str:
    """The embedding-cache `model_id` of late vectors: everything that changes them is in it."""
    return f"{model_id}/late-w{window_tokens}-o{overlap_tokens}"


def late_cache_keys(text: str, spans: Sequence[Span]) -> list[str]:
    """Cache keys of a document's late vectors: the document's sha256 plus each span.

    The document is hashed once (a key per chunk holding the whole text would hash a long
    document once per chunk)."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return [f"late:{digest}:{start}:{end}" for start, end in spans]


# --- pooled ----------------------------------------------------------------------------------


def pooled_vectors(
    chunk_spans: Sequence[Span],
    candidate_spans: Sequence[Span],
    candidate_weights: Sequence[float],
    candidate_vectors: np.ndarray,
) -> np.ndarray:
    """Unit vectors: per chunk, the weighted mean of the candidates lying inside its span.

    Weights are token counts, so a long sentence counts like its tokens would in mean pooling.
    Candidates are in document order; a chunk that contains no whole candidate (impossible for
    chunks made by `chunking`, which cut only between candidates) takes the candidates it
    overlaps.
    """
    vectors = np.asarray(candidate_vectors, dtype=np.float32)
    starts = np.fromiter((s for s, _ in candidate_spans), np.int64, len(candidate_spans))
    ends = np.fromiter((e for _, e in candidate_spans), np.int64, len(candidate_spans))
    weights = np.maximum(np.asarray(candidate_weights, dtype=np.float32), 1.0)
    out = np.empty((len(chunk_spans), vectors.shape[1]), np.float32)
    for row, (start, end) in enumerate(chunk_spans):
        first = int(np.searchsorted(starts, start, side="left"))
        stop = int(np.searchsorted(ends, end, side="right"))
        if stop <= first:  # no whole candidate inside: take the ones it overlaps
            first = int(np.searchsorted(ends, start, side="right"))
            stop = max(int(np.searchsorted(starts, end, side="left")), first + 1)
        out[row] = weights[first:stop] @ vectors[first:stop]
    return _unit(out)


# --- late chunking -----------------------------------------------------------------------------


@dataclass
class _Document:
    """One document's tokens, its chunks' token ranges and their running sums."""

    ids: list[int]
    chunk_first: np.ndarray  # (m,) first token of each chunk
    chunk_stop: np.ndarray  # (m,) one past the last token
    sums: np.ndarray  # (m, d)
    counts: np.ndarray  # (m,)


@dataclass(frozen=True)
class _Window:
    document: int
    start: int  # first token of the window in the document
    owned_start: int  # tokens [owned_start, owned_stop) take their vectors from this window
    owned_stop: int

    def length(self, documents: list[_Document], width: int) -> int:
        return min(width, len(documents[self.document].ids) - self.start)


def window_starts(n_tokens: int, width: int, overlap: int) -> list[int]:
    """Starts of the fewest windows of `width` tokens, overlapping by >= `overlap`, that cover
    `n_tokens`, spread evenly (so no window is a stub)."""
    if n_tokens <= width:
        return [0]
    step = max(1, width - overlap)
    count = math.ceil((n_tokens - width) / step) + 1
    return [round(j * (n_tokens - width) / (count - 1)) for j in range(count)]


def _windows(document: int, n_tokens: int, width: int, overlap: int) -> list[_Window]:
    starts = window_starts(n_tokens, width, overlap)
    # Token t belongs to the window where it is most central: cut each overlap in its middle.
    cuts = [0] + [(starts[j] + starts[j - 1] + width) // 2 for j in range(1, len(starts))]
    cuts.append(n_tokens)
    return [_Window(document, s, cuts[j], cuts[j + 1]) for j, s in enumerate(starts)]


def token_ranges(offsets: Sequence[tuple[int, int]], spans: Sequence[Span]) -> np.ndarray:
    """(m, 2) token index ranges [first, stop) of the tokens overlapping each char span.

    A span that covers no token (e.g. only characters the tokenizer drops) gets the nearest
    token, so every chunk has a vector."""
    n = len(offsets)
    tok_starts = np.fromiter((a for a, _ in offsets), np.int64, n)
    tok_ends = np.fromiter((b for _, b in offsets), np.int64, n)
    out = np.empty((len(spans), 2), np.int64)
    for row, (start, end) in enumerate(spans):
        first = int(np.searchsorted(tok_ends, start, side="right"))
        stop = int(np.searchsorted(tok_starts, end, side="left"))
        if stop <= first:
            first = min(first, n - 1)
            stop = first + 1
        out[row] = (first, stop)
    return out


def check_late_model(runtime: EmbeddingRuntime, document_prompt: str = "") -> None:
    """Late chunking mean-pools the transformer's token vectors inside each chunk: right for a
    model that mean-pools and has nothing after pooling but normalisation, and no document
    prompt. Any other model is refused with a ConfigError saying what to use instead, rather
    than indexed with vectors its queries would not meet."""
    problem = late_model_problem(runtime.recipe, document_prompt)
    if problem:
        raise ConfigError(
            f"retrieval.mode: late cannot run this retrieval model: {problem}; "
            "use mode text (or pooled)"
        )


def late_model_problem(recipe: VectorRecipe, document_prompt: str = "") -> str | None:
    """Why a model with `recipe` and `document_prompt` cannot be late-chunked (None: it can);
    read from a model folder's files, it lets settings be refused before any run."""
    if recipe.pooling != ("mean",):
        return f"it pools by {' + '.join(recipe.pooling)}, not by mean"
    if any(isinstance(step, DenseLayer) for step in recipe.steps):
        return "it has Dense layers after pooling"
    if document_prompt:
        return f"it has a document prompt ({document_prompt!r})"
    return None


def late_vectors(
    runtime: EmbeddingRuntime,
    documents: Sequence[tuple[str, Sequence[Span]]],
    *,
    max_tokens: int = 256,
    overlap_tokens: int = LATE_OVERLAP_TOKENS,
    batch_size: int = 32,
) -> list[np.ndarray]:
    """Late-chunked unit vectors: for each (text, chunk spans), an (m, d) array in span order.

    Spans are character offsets into the text, in document order (they may overlap). Windows of
    all documents are encoded together in length-sorted batches, as `OnnxEmbedder` does. Each
    window is framed by the tokenizer's own special tokens (`[CLS] … [SEP]`, `<s> … </s>`, an
    end token or none), as `OnnxEmbedder` frames a text.
    """
    check_late_model(runtime)
    specials = runtime.frame.size
    width = max_tokens - specials
    if width < 1 or not 0 <= overlap_tokens < width:
        raise EmbeddingError(
            f"late chunking needs 0 <= overlap_tokens < max_tokens - {specials}, got overlap "
            f"{overlap_tokens} and max_tokens {max_tokens}"
        )
    texts = [text for text, _ in documents]
    encodings = runtime.tokenizer.encode_batch(texts, add_special_tokens=False) if texts else []
    docs: list[_Document] = []
    windows: list[_Window] = []
    for number, ((_, spans), encoding) in enumerate(zip(documents, encodings, strict=True)):
        ids = list(encoding.ids)
        if not ids:  # nothing the tokenizer keeps: every chunk is [CLS] [SEP]
            ids, offsets = [], [(0, 0)]
        else:
            offsets = encoding.offsets
        ranges = token_ranges(offsets, spans) if spans else np.zeros((0, 2), np.int64)
        docs.append(
            _Document(
                ids=ids,
                chunk_first=ranges[:, 0],
                chunk_stop=ranges[:, 1],
                sums=np.zeros((len(spans), runtime.dims), np.float64),
                counts=np.zeros(len(spans), np.int64),
            )
        )
        if ids:
            windows.extend(_windows(number, len(ids), width, overlap_tokens))
    order = sorted(windows, key=lambda w: w.length(docs, width))
    for begin in range(0, len(order), batch_size):
        batch = order[begin : begin + batch_size]
        rows = [docs[w.document].ids[w.start : w.start + width] for w in batch]
        hidden = _encode_tokens(runtime, rows)
        for window, states in zip(batch, hidden, strict=True):
            _accumulate(docs[window.document], window, states)
    return [_finish(doc, runtime) for doc in docs]


def _encode_tokens(runtime: EmbeddingRuntime, rows: list[list[int]]) -> list[np.ndarray]:
    """Last-layer vectors of each row's own tokens (without the special tokens around them),
    one (len, d) per row."""
    lead = len(runtime.frame.prefix)
    try:
        hidden = runtime.token_states(rows)
    except EmbeddingError as exc:
        raise EmbeddingError(f"late chunking: {exc}") from exc
    return [hidden[r, lead : lead + len(ids)] for r, ids in enumerate(rows)]


def _accumulate(doc: _Document, window: _Window, states: np.ndarray) -> None:
    """Add the tokens this window owns to the sums of the chunks they fall in."""
    lo, hi = window.owned_start, window.owned_stop
    if hi <= lo:
        return
    owned = states[lo - window.start : hi - window.start].astype(np.float64)
    prefix = np.zeros((len(owned) + 1, owned.shape[1]), np.float64)
    np.cumsum(owned, axis=0, out=prefix[1:])
    first = int(np.searchsorted(doc.chunk_stop, lo, side="right"))
    stop = int(np.searchsorted(doc.chunk_first, hi, side="left"))
    for c in range(first, stop):
        a, b = max(int(doc.chunk_first[c]), lo), min(int(doc.chunk_stop[c]), hi)
        if b > a:
            doc.sums[c] += prefix[b - lo] - prefix[a - lo]
            doc.counts[c] += b - a


def _finish(doc: _Document, runtime: EmbeddingRuntime) -> np.ndarray:
    if not doc.ids:
        return np.repeat(runtime.embed([""]), len(doc.counts), axis=0)
    if (doc.counts == 0).any():  # cannot happen: every token is owned by exactly one window
        raise EmbeddingError("late chunking left a chunk without tokens")
    return _unit((doc.sums / doc.counts[:, None]).astype(np.float32))


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if not np.isfinite(vectors).all() or (norms == 0).any():
        raise EmbeddingError("chunk embeddings came out non-finite or zero")
    return (vectors / norms).astype(np.float32, copy=False)
