"""The ONNX embedding runtime: onnxruntime, `tokenizers` and numpy, no Dagster, no torch.

It reproduces a sentence-transformers model's pipeline (prompt, tokenize with the tokenizer's
own special tokens, truncate to the model's window, encode, pool, Dense layers, L2-normalise) on
an ONNX graph of its transformer: the export made by `seams.models.model_export`, or a folder's
own `model.onnx`. What happens after the transformer is the folder's `VectorRecipe`; the
default, all-MiniLM-L6-v2's, is mean pooling and normalisation.

Two things make it faster than `encode` on CPU:
batches are formed from inputs sorted by token count, so padding is minimal, and batches stay
small.

Inputs longer than the model's window are, by default, not truncated: their word pieces are cut
into near-equal windows that each fit the window, every window is encoded, and the text's
embedding is the mean of all windows' token embeddings (see `_mean`). `long_text="truncate"`
gives sentence-transformers' behaviour instead.

A session is loaded once per process and shared (`load_runtime`): Dagster builds resources for
every run, and loading costs time and memory. `seams.models.embedders.OnnxEmbedder` (and the
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

from seams.errors import ConfigError, EmbeddingError
from seams.models.model_folder import DenseLayer, VectorRecipe
from seams.models.model_store import EXPORT_HINT
from seams.models.optimized_graph import optimized_graph

log = logging.getLogger(__name__)

CUDA_PROVIDER = "CUDAExecutionProvider"
CPU_PROVIDER = "CPUExecutionProvider"
CLS_ID, SEP_ID, PAD_ID = 101, 102, 0  # all-MiniLM-L6-v2's; other models read theirs
MAX_POSITIONS = 512  # BERT position embeddings; the model was trained on 256
SPECIAL_TOKENS = 2  # [CLS] and [SEP] around every window of all-MiniLM-L6-v2
HIDDEN_OUTPUTS = ("last_hidden_state", "token_embeddings")
_PROBES = ("a", "the", "0", "x")

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


@dataclass(frozen=True)
class SpecialFrame:
    """The special tokens a tokenizer's post-processor puts around one sequence, and its pad id.

    Read from `tokenizer.json` (BERT's [CLS] ... [SEP], XLM-R's <s> ... </s>, an end-of-text
    token after a BPE sequence, or nothing), so no model's ids are hard-coded here.
    """

    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    pad_id: int

    @property
    def size(self) -> int:
        return len(self.prefix) + len(self.suffix)


def special_frame(tokenizer: Tokenizer) -> SpecialFrame:
    """Post-process a one-word encoding and see what the post-processor added on each side."""
    for probe in _PROBES:
        plain = tokenizer.encode(probe, add_special_tokens=False)
        if not plain.ids:
            continue
        full = tokenizer.post_process(plain).ids
        n = len(plain.ids)
        for start in range(len(full) - n + 1):
            if full[start : start + n] == plain.ids:
                return SpecialFrame(
                    tuple(full[:start]), tuple(full[start + n :]), _pad_id(tokenizer)
                )
    raise EmbeddingError("cannot find where the tokenizer's post-processor puts its text")


def _pad_id(tokenizer: Tokenizer) -> int:
    """The tokenizer's padding id if it records one, else its pad token's id, else 0 (padded
    positions are masked out, so the id only has to exist)."""
    padding = tokenizer.padding
    if padding and padding.get("pad_id") is not None:
        return int(padding["pad_id"])
    for token in ("[PAD]", "<pad>", "<|pad|>", "<|endoftext|>"):
        if (token_id := tokenizer.token_to_id(token)) is not None:
            return token_id
    return 0


@dataclass
class _Pieces:
    """Model inputs for one `embed` call: each piece is one window of one text."""

    owner: np.ndarray  # (p,) index of the text each piece belongs to
    ids: list[Sequence[int]]  # token ids without special tokens
    specials: int = SPECIAL_TOKENS

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(p) + self.specials for p in self.ids), np.int64, len(self.ids))


class EmbeddingRuntime:
    """A loaded model: one onnxruntime session, its tokenizer and the recipe that turns token
    vectors into one vector per text. Safe to share across threads.

    The pure machinery behind `OnnxEmbedder`, also used by the exporter to measure an int8
    graph against fp32 without a Dagster resource.
    """

    def __init__(
        self,
        session: ort.InferenceSession,
        tokenizer: Tokenizer,
        dims: int,
        recipe: VectorRecipe | None = None,
        dense: dict[str, tuple[np.ndarray, np.ndarray | None]] | None = None,
    ) -> None:
        self.session = session
        self.tokenizer = tokenizer
        self.dims = dims
        self.recipe = recipe or VectorRecipe()
        self.frame = special_frame(tokenizer)
        self._dense = dense or {}
        self._input_names = {i.name for i in session.get_inputs()}
        self._output = _hidden_output(session)

    @property
    def providers(self) -> list[str]:
        """The providers the session actually runs on (after any fallback)."""
        return list(self.session.get_providers())

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, without special tokens and without truncation."""
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [enc.ids for enc in encodings]

    def embed(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        max_tokens: int = 256,
        long_text: LongText = "mean_of_windows",
        prompt: str = "",
    ) -> np.ndarray:
        """(n, dims) float32 unit vectors for already-validated `texts`, each read as
        `prompt + text` (the prompt starts every window of a long text)."""
        if not texts:
            return np.zeros((0, self.dims), np.float32)
        if prompt and not self.recipe.include_prompt:
            raise ConfigError(
                "this model pools without its prompt tokens (include_prompt: false), which "
                "Seams does not run; set the prompts to empty strings or use another model"
            )
        if self.recipe.do_lower_case:
            texts, prompt = [t.lower() for t in texts], prompt.lower()
        width = max_tokens - self.frame.size
        if width < 1:
            raise ConfigError(
                f"max_tokens {max_tokens} leaves no room beside the model's "
                f"{self.frame.size} special tokens"
            )
        if prompt:
            ids, lead = self._prompted_ids(texts, prompt)
        else:
            ids, lead = self.token_ids(texts), []
        pieces = self._pieces(ids, width, long_text, lead)
        pieces.specials = self.frame.size
        features = self._encode(pieces, batch_size)
        return self._finish(features, pieces, len(texts))

    def _prompted_ids(self, texts: Sequence[str], prompt: str) -> tuple[list[list[int]], list[int]]:
        """Ids of `prompt + text`, tokenized together as sentence-transformers does, and the
        prompt's own ids when they lead every text's ids (so long texts repeat them per window)."""
        ids = self.token_ids([prompt + t for t in texts])
        lead = self.token_ids([prompt])[0]
        if all(row[: len(lead)] == lead for row in ids):
            return [row[len(lead) :] for row in ids], lead
        return ids, []

    @staticmethod
    def _pieces(
        ids: list[list[int]], width: int, long_text: LongText, lead: Sequence[int] = ()
    ) -> _Pieces:
        owner: list[int] = []
        windows: list[Sequence[int]] = []
        truncate = long_text == "truncate"
        lead = list(lead)
        room = max(1, width - len(lead))
        for index, text_ids in enumerate(ids):
            if not lead:
                parts = [text_ids[:width]] if truncate else split_windows(text_ids, width)
            elif truncate or len(text_ids) <= room:
                parts = [(lead + list(text_ids))[:width]]
            else:
                parts = [lead + list(part) for part in split_windows(text_ids, room)]
            owner.extend([index] * len(parts))
            windows.extend(parts)
        return _Pieces(owner=np.asarray(owner, np.int64), ids=windows)

    def _encode(self, pieces: _Pieces, batch_size: int) -> dict[str, np.ndarray]:
        """Per piece and pooling mode, the pooled last-layer vectors, in length-sorted batches.

        Sorting by token count (stable, so equal inputs batch the same way every time) keeps
        padding near zero; results are scattered back to each piece's original position. Mean
        pooling keeps the masked *sum* (divided once all of a text's windows are in).
        """
        lengths = pieces.lengths
        order = np.argsort(lengths, kind="stable")
        modes = self.recipe.pooling
        width = None
        out: dict[str, np.ndarray] = {}
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            input_ids, mask = self._pad([pieces.ids[i] for i in batch], int(lengths[batch].max()))
            hidden = self._run(input_ids, mask)
            if width is None:
                width = hidden.shape[-1]
                out = {m: np.empty((len(pieces.ids), width), np.float32) for m in modes}
            if "mean" in modes or "mean_sqrt_len" in modes:
                # (b, 1, L) @ (b, L, d): the masked sum as one matmul, no (b, L, d) temporary.
                sums = np.matmul(mask[:, None, :].astype(np.float32), hidden)[:, 0, :]
                for mode in ("mean", "mean_sqrt_len"):
                    if mode in out:
                        out[mode][batch] = sums
            if "cls" in out:
                out["cls"][batch] = hidden[:, 0, :]
            if "lasttoken" in out:
                out["lasttoken"][batch] = hidden[np.arange(len(batch)), lengths[batch] - 1, :]
            if "max" in out:
                masked = np.where(mask[:, :, None].astype(bool), hidden, np.float32(-1e9))
                out["max"][batch] = masked.max(axis=1)
        return out

    def _finish(self, features: dict[str, np.ndarray], pieces: _Pieces, n: int) -> np.ndarray:
        """Pool each text over its windows, concatenate the modes, run the Dense/Normalize steps
        and return unit rows."""
        if self.recipe.pooling == ("mean",):  # the packaged model's path, kept bit-for-bit
            vectors = _mean(features["mean"], pieces, n)
        else:
            parts = [_combine(mode, features[mode], pieces, n) for mode in self.recipe.pooling]
            vectors = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
        normalised = False
        for step in self.recipe.steps:
            if isinstance(step, DenseLayer):
                vectors = _dense(vectors, *self._dense[step.name], step.activation)
                normalised = False
            else:
                vectors = _normalise(vectors)
                normalised = True
        return vectors if normalised else _normalise(vectors)

    def token_states(self, rows: list[Sequence[int]]) -> np.ndarray:
        """The transformer's last-layer vectors (b, length, d) of `rows` (ids without special
        tokens), each framed by the tokenizer's special tokens and padded: what late chunking
        pools. A row's own tokens start at `len(self.frame.prefix)`."""
        length = max((len(r) for r in rows), default=0) + self.frame.size
        return self._run(*self._pad(rows, length))

    def _pad(self, rows: list[Sequence[int]], length: int) -> tuple[np.ndarray, np.ndarray]:
        """prefix ids suffix then pad ids, as int64 ids and attention mask of shape (b, length)."""
        frame = self.frame
        if frame.prefix == (CLS_ID,) and frame.suffix == (SEP_ID,) and frame.pad_id == PAD_ID:
            return _pad(rows, length)
        input_ids = np.full((len(rows), length), frame.pad_id, np.int64)
        mask = np.zeros((len(rows), length), np.int64)
        for r, ids in enumerate(rows):
            row = [*frame.prefix, *ids, *frame.suffix]
            input_ids[r, : len(row)] = row
            mask[r, : len(row)] = 1
        return input_ids, mask

    def _run(self, input_ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        if "position_ids" in self._input_names:
            feed["position_ids"] = np.broadcast_to(
                np.arange(input_ids.shape[1], dtype=np.int64), input_ids.shape
            ).copy()
        try:
            (hidden,) = self.session.run(self._output, feed)[:1]
        except Exception as exc:  # onnxruntime raises its own pybind exception types
            raise EmbeddingError(
                f"onnxruntime inference failed on a batch of shape {input_ids.shape}: {exc}"
            ) from exc
        return hidden


def _hidden_output(session: ort.InferenceSession) -> list[str] | None:
    """Which output to ask for: None (the first, as exported here) when the first output is
    per-token, else `last_hidden_state`/`token_embeddings` or the first output with three axes
    (an export that also returns a pooled vector, or puts it first)."""
    get_outputs = getattr(session, "get_outputs", None)
    outputs = get_outputs() if get_outputs is not None else []
    if not outputs:
        return None
    names = [o.name for o in outputs]
    if names[0] in HIDDEN_OUTPUTS:
        return None
    for name in HIDDEN_OUTPUTS:
        if name in names:
            return [name]
    for output in outputs:
        if len(output.shape or ()) == 3:
            return [output.name]
    raise EmbeddingError(
        f"the ONNX graph has no per-token output (looked for {', '.join(HIDDEN_OUTPUTS)} or any "
        f"output of shape (batch, sequence, hidden); it has {names}): export the transformer's "
        "last_hidden_state"
    )


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


def _mean(sums: np.ndarray, pieces: _Pieces, n_texts: int) -> np.ndarray:
    """Mean over every token of a text (across all its windows).

    For a text in one window this is exactly sentence-transformers' mean pooling. For a long
    text it is the token-count-weighted mean of the windows' *un-normalised* mean vectors, i.e.
    the mean pooling the model would do if it could read the whole text at once; averaging
    normalised window vectors instead would give a 10-token tail the weight of a full window.
    """
    counts = pieces.lengths.astype(np.float32)
    if len(pieces.ids) == n_texts:  # no long text: skip the scatter
        return sums / counts[:, None]
    totals = np.zeros((n_texts, sums.shape[1]), np.float32)
    np.add.at(totals, pieces.owner, sums)
    return totals / np.bincount(pieces.owner, counts, n_texts).astype(np.float32)[:, None]


def _combine(mode: str, values: np.ndarray, pieces: _Pieces, n_texts: int) -> np.ndarray:
    """One pooling mode over a text's windows: mean pooling over all its tokens, max over all
    its tokens, and a window-level vector (CLS, last token) averaged over its windows."""
    if mode == "mean":
        return _mean(values, pieces, n_texts)
    if mode == "mean_sqrt_len":
        totals = np.zeros((n_texts, values.shape[1]), np.float32)
        np.add.at(totals, pieces.owner, values)
        counts = np.bincount(pieces.owner, pieces.lengths.astype(np.float32), n_texts)
        return totals / np.sqrt(counts).astype(np.float32)[:, None]
    if len(pieces.ids) == n_texts:
        return values
    if mode == "max":
        out = np.full((n_texts, values.shape[1]), -np.inf, np.float32)
        np.maximum.at(out, pieces.owner, values)
        return out
    totals = np.zeros((n_texts, values.shape[1]), np.float32)
    np.add.at(totals, pieces.owner, values)
    return totals / np.bincount(pieces.owner, None, n_texts).astype(np.float32)[:, None]


def _dense(
    vectors: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, activation: str
) -> np.ndarray:
    out = vectors @ weight.T
    if bias is not None:
        out = out + bias
    if activation == "tanh":
        out = np.tanh(out)
    elif activation == "relu":
        out = np.maximum(out, 0)
    elif activation == "sigmoid":
        out = 1 / (1 + np.exp(-out))
    elif activation == "gelu":
        from math import erf, sqrt

        out = 0.5 * out * (1 + np.vectorize(erf)(out / sqrt(2)))
    return out.astype(np.float32, copy=False)


def _normalise(vectors: np.ndarray) -> np.ndarray:
    """L2-normalise rows, or an `EmbeddingError` for a non-finite or zero vector."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if not np.isfinite(vectors).all() or (norms == 0).any():
        raise EmbeddingError("the model produced non-finite or zero embeddings")
    return (vectors / norms).astype(np.float32, copy=False)


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
    recipe: VectorRecipe | None = None,
) -> EmbeddingRuntime:
    """Load (or reuse) the session for `model_path`, keyed by the file's identity, threads and
    recipe. Dense weights (`<name>.weight.npy`, `<name>.bias.npy`) are read from beside it.

    The key includes the file's size and mtime, so a re-export in the same process is picked
    up rather than served stale from the cache. `cache=False` (a one-off load, as the exporter's
    int8 check) keeps neither the session nor an optimized copy of the graph on disk.
    """
    recipe = recipe or VectorRecipe()
    providers = list(providers) if providers is not None else select_providers()
    try:
        st = model_path.stat()
    except OSError as exc:
        raise EmbeddingError(
            f"cannot read the model file {model_path}: {exc}; {EXPORT_HINT}."
        ) from exc
    key = (
        str(model_path.resolve()),
        str(tokenizer_path.resolve()),
        st.st_size,
        st.st_mtime_ns,
        intra_op_threads,
        repr(recipe.to_dict()),
        *providers,
    )
    with _runtimes_lock:
        if cache and key in _runtimes:
            return _runtimes[key]
        runtime = EmbeddingRuntime(
            _open_session(model_path, intra_op_threads, providers, keep_optimized=cache),
            _open_tokenizer(tokenizer_path),
            dims,
            recipe,
            _load_dense(model_path.parent, recipe),
        )
        if cache:
            _runtimes[key] = runtime
        return runtime


def clear_runtime_cache() -> None:
    """Forget loaded sessions (tests; or to free memory in a long-lived process)."""
    with _runtimes_lock:
        _runtimes.clear()


def _open_session(
    path: Path, threads: int, providers: list[str], *, keep_optimized: bool = False
) -> ort.InferenceSession:
    """Open the ONNX session; if a GPU provider fails to initialise, retry on CPU alone.

    `keep_optimized` (on CPU): open the optimized copy kept beside the graph
    (`seams.models.optimized_graph`, saved on first use), which computes the same and opens at
    a third of the cost; any failure there opens the original."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # onnxruntime's provider-fallback warnings go to our log
    if keep_optimized and providers == [CPU_PROVIDER]:
        graph = optimized_graph(path, options, providers)
        if graph != path:
            try:
                return ort.InferenceSession(str(graph), options, providers=providers)
            except Exception as exc:  # a damaged copy: the original still opens
                log.debug("cannot open the optimized copy %s (%s)", graph, exc)
    try:
        return ort.InferenceSession(str(path), options, providers=providers)
    except Exception as exc:
        if providers != [CPU_PROVIDER]:
            log.warning("onnxruntime could not start %s (%s); falling back to CPU", providers, exc)
            return _open_session(path, threads, [CPU_PROVIDER], keep_optimized=keep_optimized)
        raise EmbeddingError(
            f"onnxruntime cannot load the model file {path} ({exc}); it may be corrupt: "
            f"{EXPORT_HINT}."
        ) from exc


def _load_dense(
    folder: Path, recipe: VectorRecipe
) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """The Dense layers' weights an export keeps as .npy files beside the graph."""
    out: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    for layer in recipe.dense_layers:
        try:
            weight = np.load(folder / f"{layer.name}.weight.npy", allow_pickle=False)
            bias = (
                np.load(folder / f"{layer.name}.bias.npy", allow_pickle=False)
                if layer.bias
                else None
            )
        except (OSError, ValueError) as exc:
            raise EmbeddingError(
                f"cannot read the Dense layer {layer.name} in {folder} ({exc}); {EXPORT_HINT}."
            ) from exc
        if weight.shape != (layer.out_features, layer.in_features):
            raise EmbeddingError(
                f"the Dense layer {layer.name} in {folder} has shape {weight.shape}, not "
                f"({layer.out_features}, {layer.in_features}); {EXPORT_HINT}."
            )
        out[layer.name] = (weight.astype(np.float32), bias)
    return out


def _open_tokenizer(path: Path) -> Tokenizer:
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:
        raise EmbeddingError(f"cannot load the tokenizer {path} ({exc}); {EXPORT_HINT}.") from exc
    # The packaged file truncates and pads to 128; windows and padding are done here instead.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer
