"""The ONNX embedding runtime: onnxruntime, `tokenizers` and numpy, no Dagster, no torch.

It reproduces sentence-transformers' all-MiniLM-L6-v2 pipeline (tokenize, truncate to 256
tokens, encode, mean-pool over the attention mask, L2-normalise) on the ONNX export made by
`seams.models.model_export`. Two things make it faster than `encode` on CPU (figures on the
benchmarks page, "Components"): batches are formed from inputs sorted by token count, so padding
is minimal, and batches stay small.

Inputs longer than the model's window are, by default, not truncated: their word pieces are cut
into near-equal windows that each fit the window, every window is encoded, and the text's
embedding is the mean of all windows' token embeddings (see `_pool`). `long_text="truncate"`
gives sentence-transformers' behaviour instead.

A session is loaded once per process and shared (`load_runtime`): Dagster builds resources for
every run, and loading costs ~0.3 s and 90 MB. `seams.models.embedders.OnnxEmbedder` (and the
pipeline's resource over it) runs it; the exporter and late chunking use the runtime directly.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from seams.errors import EmbeddingError
from seams.models.model_store import EXPORT_HINT

log = logging.getLogger(__name__)

CUDA_PROVIDER = "CUDAExecutionProvider"
CPU_PROVIDER = "CPUExecutionProvider"
CLS_ID, SEP_ID, PAD_ID = 101, 102, 0
MAX_POSITIONS = 512  # BERT position embeddings; the model was trained on 256
SPECIAL_TOKENS = 2  # [CLS] and [SEP] around every window

LongText = Literal["mean_of_windows", "truncate"]


def select_providers(available: Sequence[str] | None = None) -> list[str]:
    """CUDA first when this onnxruntime build has it, CPU always as the fallback."""
    if available is None:
        available = ort.get_available_providers()
    return [CUDA_PROVIDER, CPU_PROVIDER] if CUDA_PROVIDER in available else [CPU_PROVIDER]


def split_windows(ids: Sequence[int], width: int) -> list[Sequence[int]]:
    """Cut word-piece ids into the fewest near-equal contiguous windows of <= `width` ids.

    Near-equal (rather than full windows plus a stub) so that no window is a handful of
    tokens with too little context to mean much. An empty input is one empty window: it still
    embeds, as [CLS] [SEP].
    """
    if width < 1:
        raise ValueError("width must be >= 1")
    count = max(1, math.ceil(len(ids) / width))
    bounds = [round(i * len(ids) / count) for i in range(count + 1)]
    return [ids[bounds[i] : bounds[i + 1]] for i in range(count)]


@dataclass
class _Pieces:
    """Model inputs for one `embed` call: each piece is one window of one text."""

    owner: np.ndarray  # (p,) index of the text each piece belongs to
    ids: list[Sequence[int]]  # word-piece ids without special tokens

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(p) + SPECIAL_TOKENS for p in self.ids), np.int64, len(self.ids))


class EmbeddingRuntime:
    """A loaded model: one onnxruntime session and its tokenizer. Safe to share across threads.

    The pure machinery behind `OnnxEmbedder`, also used by the exporter to measure an int8
    graph against fp32 without a Dagster resource.
    """

    def __init__(self, session: ort.InferenceSession, tokenizer: Tokenizer, dims: int) -> None:
        self.session = session
        self.tokenizer = tokenizer
        self.dims = dims
        self._input_names = {i.name for i in session.get_inputs()}

    @property
    def providers(self) -> list[str]:
        """The providers the session actually runs on (after any fallback)."""
        return list(self.session.get_providers())

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Word-piece ids of each text, without [CLS]/[SEP] and without truncation."""
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [enc.ids for enc in encodings]

    def embed(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        max_tokens: int = 256,
        long_text: LongText = "mean_of_windows",
    ) -> np.ndarray:
        """(n, dims) float32 unit vectors for already-validated `texts`."""
        if not texts:
            return np.zeros((0, self.dims), np.float32)
        pieces = self._pieces(self.token_ids(texts), max_tokens - SPECIAL_TOKENS, long_text)
        sums = self._encode_sums(pieces, batch_size)
        return _pool(sums, pieces, len(texts))

    @staticmethod
    def _pieces(ids: list[list[int]], width: int, long_text: LongText) -> _Pieces:
        owner: list[int] = []
        windows: list[Sequence[int]] = []
        truncate = long_text == "truncate"
        for index, text_ids in enumerate(ids):
            parts = [text_ids[:width]] if truncate else split_windows(text_ids, width)
            owner.extend([index] * len(parts))
            windows.extend(parts)
        return _Pieces(owner=np.asarray(owner, np.int64), ids=windows)

    def _encode_sums(self, pieces: _Pieces, batch_size: int) -> np.ndarray:
        """Sum of last-layer token vectors over the mask, per piece, in length-sorted batches.

        Sorting by token count (stable, so equal inputs batch the same way every time) keeps
        padding near zero; results are scattered back to each piece's original position.
        """
        lengths = pieces.lengths
        order = np.argsort(lengths, kind="stable")
        sums = np.empty((len(pieces.ids), self.dims), np.float32)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            input_ids, mask = _pad([pieces.ids[i] for i in batch], int(lengths[batch].max()))
            hidden = self._run(input_ids, mask)
            # (b, 1, L) @ (b, L, d): the masked sum as one batched matmul, no (b, L, d) temporary.
            sums[batch] = np.matmul(mask[:, None, :].astype(np.float32), hidden)[:, 0, :]
        return sums

    def _run(self, input_ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        try:
            (hidden,) = self.session.run(None, feed)[:1]
        except Exception as exc:  # onnxruntime raises its own pybind exception types
            raise EmbeddingError(
                f"onnxruntime inference failed on a batch of shape {input_ids.shape}: {exc}"
            ) from exc
        return hidden


def _pad(rows: list[Sequence[int]], length: int) -> tuple[np.ndarray, np.ndarray]:
    """[CLS] ids [SEP] then [PAD]s, as int64 ids and attention mask of shape (b, length)."""
    input_ids = np.full((len(rows), length), PAD_ID, np.int64)
    mask = np.zeros((len(rows), length), np.int64)
    for r, ids in enumerate(rows):
        n = len(ids)
        input_ids[r, 0] = CLS_ID
        input_ids[r, 1 : n + 1] = ids
        input_ids[r, n + 1] = SEP_ID
        mask[r, : n + 2] = 1
    return input_ids, mask


def _pool(sums: np.ndarray, pieces: _Pieces, n_texts: int) -> np.ndarray:
    """Mean over every token of a text (across all its windows), then L2-normalise.

    For a text in one window this is exactly sentence-transformers' mean pooling. For a long
    text it is the token-count-weighted mean of the windows' *un-normalised* mean vectors, i.e.
    the mean pooling the model would do if it could read the whole text at once; averaging
    normalised window vectors instead would give a 10-token tail the weight of a full window.
    """
    counts = pieces.lengths.astype(np.float32)
    if len(pieces.ids) == n_texts:  # no long text: skip the scatter
        means = sums / counts[:, None]
    else:
        totals = np.zeros((n_texts, sums.shape[1]), np.float32)
        np.add.at(totals, pieces.owner, sums)
        means = totals / np.bincount(pieces.owner, counts, n_texts).astype(np.float32)[:, None]
    norms = np.linalg.norm(means, axis=1, keepdims=True)
    if not np.isfinite(means).all() or (norms == 0).any():
        raise EmbeddingError("the model produced non-finite or zero embeddings")
    return (means / norms).astype(np.float32, copy=False)


_runtimes: dict[tuple[object, ...], EmbeddingRuntime] = {}
_runtimes_lock = threading.Lock()


def load_runtime(
    model_path: Path,
    tokenizer_path: Path,
    *,
    intra_op_threads: int = 0,
    providers: Sequence[str] | None = None,
    dims: int = 384,
    cache: bool = True,
) -> EmbeddingRuntime:
    """Load (or reuse) the session for `model_path`, keyed by the file's identity and threads.

    The key includes the file's size and mtime, so a re-export in the same process is picked
    up rather than served stale from the cache.
    """
    providers = list(providers) if providers is not None else select_providers()
    try:
        st = model_path.stat()
    except OSError as exc:
        raise EmbeddingError(
            f"cannot read the model file {model_path}: {exc}; {EXPORT_HINT}."
        ) from exc
    key = (str(model_path.resolve()), st.st_size, st.st_mtime_ns, intra_op_threads, *providers)
    with _runtimes_lock:
        if cache and key in _runtimes:
            return _runtimes[key]
        runtime = EmbeddingRuntime(
            _open_session(model_path, intra_op_threads, providers),
            _open_tokenizer(tokenizer_path),
            dims,
        )
        if cache:
            _runtimes[key] = runtime
        return runtime


def clear_runtime_cache() -> None:
    """Forget loaded sessions (tests; or to free memory in a long-lived process)."""
    with _runtimes_lock:
        _runtimes.clear()


def _open_session(path: Path, threads: int, providers: list[str]) -> ort.InferenceSession:
    """Open the ONNX session; if a GPU provider fails to initialise, retry on CPU alone."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # onnxruntime's provider-fallback warnings go to our log
    try:
        return ort.InferenceSession(str(path), options, providers=providers)
    except Exception as exc:
        if providers != [CPU_PROVIDER]:
            log.warning("onnxruntime could not start %s (%s); falling back to CPU", providers, exc)
            return _open_session(path, threads, [CPU_PROVIDER])
        raise EmbeddingError(
            f"onnxruntime cannot load the model file {path} ({exc}); it may be corrupt: "
            f"{EXPORT_HINT}."
        ) from exc


def _open_tokenizer(path: Path) -> Tokenizer:
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:
        raise EmbeddingError(f"cannot load the tokenizer {path} ({exc}); {EXPORT_HINT}.") from exc
    # The packaged file truncates and pads to 128; windows and padding are done here instead.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer
