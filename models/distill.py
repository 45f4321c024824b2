"""The static boundary model: all-MiniLM-L6-v2 distilled offline with model2vec, and its manifest.

`distill_static_model` runs `model2vec.distill` over the packaged all-MiniLM-L6-v2 (the same
weights `seams.models.model_export` exports to ONNX): one forward pass per vocabulary token, PCA to
256 dimensions, Zipf/SIF weighting, float16, with no hub access (the source is a local folder and
`HF_HUB_OFFLINE=1`). It writes `<data dir>/models/all-MiniLM-L6-v2-static/`: `embeddings.npy`
(row i = the static vector of MiniLM token id i, so the embedder needs only MiniLM's tokenizer
and a numpy lookup; tokens model2vec does not embed and [UNK] are zero rows), `tokenizer.json`
(MiniLM's, truncation off) and, last, `manifest.json` (`model_id` = the sha256 of
`embeddings.npy`, the source model, parameters, tool versions, a fidelity measurement against
model2vec's own `encode`, every file's sha256).

Reproducible: the same versions give byte-identical folders (no timestamps; model2vec, pinned in
the `export` extra, does a deterministic PCA; CPU only). Publishing is atomic (a staging folder
renamed into place), as for the ONNX export. model2vec, torch and transformers are imported
inside `distill_static_model` only, so the embedder's hot path never loads them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from seams.environment import keep_hub_offline
from seams.errors import EmbeddingError
from seams.models.model_store import (
    EMBEDDINGS_FILE,
    MODEL_NAME,
    SOURCE_PACKAGE,
    STATIC_MODEL_NAME,
    TOKENIZER_FILE,
    StaticManifest,
    default_static_dir,
    existing_manifest,
    file_sha256,
    installed_version,
    load_static_manifest,
)

log = logging.getLogger(__name__)

SOURCE_MODEL_ID = f"sentence-transformers/{MODEL_NAME}"

#: Everything that shapes the distilled bytes besides the tool versions. Pinned rather than left
#: to model2vec's defaults, which have changed between releases.
DISTILL_PARAMS: dict[str, Any] = {
    "pca_dims": 256,
    "sif_coefficient": 1e-4,
    "token_remove_pattern": r"\[unused\d+\]",
    "quantize_to": "float16",
    "pooling": "mean",
    "vocabulary": None,
    "device": "cpu",
}
STATIC_MIN_COSINE = 0.999
"""The stored model must reproduce model2vec's own `encode` at least this closely (cosine)."""

_VERSIONED = ("model2vec", "skeletoken", "torch", "transformers", "tokenizers", "numpy")


def distill_static_model(
    target_dir: Path | str | None = None, *, force: bool = False
) -> StaticManifest:
    """Distil the packaged all-MiniLM-L6-v2 into a static model at `target_dir` (offline).

    Idempotent: a verified folder made from the same source version, model2vec version and
    parameters is reused (`distilled_now=False`); `force=True` distils again. Needs the `export`
    extra (model2vec[distill], torch, transformers); raises `EmbeddingError` if it is missing or
    if the result fails the fidelity check.
    """
    from seams.models.atomic_folder import exclusive_build
    from seams.models.model_export import packaged_model_dir

    target = Path(target_dir) if target_dir is not None else default_static_dir()
    source = packaged_model_dir()
    source_info = _source_info(source)

    def reusable() -> StaticManifest | None:
        existing = None if force else _reusable(target, source_info)
        if existing is not None:
            log.info("static model at %s is up to date (model_id %s)", target, existing.model_id)
        return existing

    if (existing := reusable()) is not None:
        return existing
    with exclusive_build(target) as staging:
        if (existing := reusable()) is not None:  # finished by another process meanwhile
            return existing
        with _printed_output_logged():
            manifest = _build(source, source_info, staging)
    log.info("distilled %s to %s (model_id %s)", STATIC_MODEL_NAME, target, manifest.model_id)
    return replace(manifest, directory=target, distilled_now=True)


def _source_info(source: Path) -> dict[str, str]:
    from seams.models.packaged_model import packaged_version

    return {
        "model": SOURCE_MODEL_ID,
        "package": SOURCE_PACKAGE,
        "version": packaged_version(),
        "weights_sha256": file_sha256(source / "model.safetensors"),
    }


def _reusable(target: Path, source_info: dict[str, str]) -> StaticManifest | None:
    manifest = existing_manifest(target, load_static_manifest, "distilling again")
    if manifest is None:
        return None
    wanted_m2v = installed_version("model2vec")
    if (
        manifest.source != source_info
        or manifest.distill != DISTILL_PARAMS
        or manifest.versions.get("model2vec") != wanted_m2v
    ):
        log.info("distilling again: the source, the parameters or model2vec changed")
        return None
    return manifest


def _build(source: Path, source_info: dict[str, str], staging: Path) -> StaticManifest:
    """Distil, re-index by MiniLM token id, check fidelity, write files and manifest (last)."""
    static = _distill(source)
    from tokenizers import Tokenizer

    from seams.models.model_export import write_tokenizer

    write_tokenizer(source / TOKENIZER_FILE, staging / TOKENIZER_FILE)
    tokenizer = Tokenizer.from_file(str(staging / TOKENIZER_FILE))
    matrix = _by_model_ids(static, tokenizer)
    np.save(staging / EMBEDDINGS_FILE, matrix, allow_pickle=False)
    fidelity = _fidelity(static, staging)
    if fidelity["min_cosine"] < STATIC_MIN_COSINE:
        raise EmbeddingError(
            f"the distilled static model does not reproduce model2vec's encode (min cosine "
            f"{fidelity['min_cosine']} < {STATIC_MIN_COSINE}); check the model2vec version."
        )
    files = {
        name: file_sha256(staging / name) for name in sorted((EMBEDDINGS_FILE, TOKENIZER_FILE))
    }
    manifest = StaticManifest(
        directory=staging,
        model_id=files[EMBEDDINGS_FILE],
        dims=int(matrix.shape[1]),
        vocab_size=int(matrix.shape[0]),
        source=source_info,
        distill=dict(DISTILL_PARAMS),
        versions={name: installed_version(name) for name in _VERSIONED},
        fidelity=fidelity,
        files=files,
    )
    manifest.write()
    return manifest


def _distill(source: Path) -> Any:
    """model2vec's `distill` on the local folder, offline, deterministic, quietly."""
    keep_hub_offline(override=True)  # read by huggingface_hub at import: set it first
    try:
        import torch
        import transformers
        from model2vec.distill import distill
    except ImportError as exc:
        raise EmbeddingError(
            f"distilling the static model needs model2vec[distill], torch and transformers "
            f"({exc}); install the export extra (`pip install 'seams-chunking[export]'`), "
            "or copy an existing distilled folder into place."
        ) from exc
    transformers.logging.set_verbosity_error()
    params = {k: v for k, v in DISTILL_PARAMS.items() if k != "vocabulary"}
    with _deterministic_torch(torch), _quiet():
        return distill(
            str(source),
            vocabulary=DISTILL_PARAMS["vocabulary"],
            trust_remote_code=False,  # a folder's own Python never runs
            **params,
        )


@contextlib.contextmanager
def _deterministic_torch(torch: Any):  # type: ignore[no-untyped-def]
    """Deterministic kernels and a fixed seed for the forward passes; restored afterwards."""
    was = torch.are_deterministic_algorithms_enabled()
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was)


@contextlib.contextmanager
def _quiet():  # type: ignore[no-untyped-def]
    """model2vec and skeletoken log progress at INFO and print a tqdm bar; keep logs short."""
    loggers = [logging.getLogger(name) for name in ("model2vec", "skeletoken")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels, strict=True):
                logger.setLevel(level)


@contextlib.contextmanager
def _printed_output_logged() -> Iterator[None]:
    """What the libraries print themselves while distilling goes to this module's debug log, not
    the user's terminal. Rust's tokenizers writes straight to file descriptor 1 ("The
    OrderedVocab you are attempting to save contains holes ...": model2vec drops MiniLM's unused
    tokens on purpose), which no Python-level redirect sees, so descriptors 1 and 2 are
    redirected for the duration. Failures still surface: they are raised, not printed."""
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as sink:
        saved = (os.dup(1), os.dup(2))
        try:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, original in zip((1, 2), saved, strict=True):
                os.dup2(original, fd)
                os.close(original)
            sink.seek(0)
            for line in sink.read().decode("utf-8", "replace").splitlines():
                if line.strip():
                    log.debug("distillation printed: %s", line)


def _by_model_ids(static: Any, tokenizer: Any) -> np.ndarray:
    """The distilled vectors as rows indexed by MiniLM's token ids (zero rows for the rest).

    model2vec rebuilds the vocabulary (dropping [unused] and special tokens), so its ids differ
    from MiniLM's; mapping by token string lets the embedder use MiniLM's tokenizer directly.
    """
    vectors = np.asarray(static.embedding)
    if vectors.ndim != 2 or getattr(static, "token_mapping", None) is not None:
        raise EmbeddingError("unexpected static model layout (vocabulary quantization is off)")
    distilled = static.tokenizer.get_vocab()
    vocab = tokenizer.get_vocab()
    matrix = np.zeros((len(vocab), vectors.shape[1]), dtype=np.float16)
    for token, model_id in vocab.items():
        row = distilled.get(token)
        if row is not None:
            matrix[model_id] = vectors[row]
    unk = tokenizer.token_to_id("[UNK]")
    if unk is not None:
        matrix[unk] = 0  # model2vec removes unknown tokens before pooling
    return matrix


def _fidelity(static: Any, staging: Path) -> dict[str, Any]:
    """Cosine between the stored model (our lookup) and model2vec's `encode`, on varied text."""
    from seams.models.fidelity import fidelity_sentences
    from seams.models.static_runtime import load_static_runtime

    sentences = [s for s in fidelity_sentences() if static.tokenize([s])[0]]
    ours = load_static_runtime(staging / EMBEDDINGS_FILE, staging / TOKENIZER_FILE, cache=False)
    got = ours.embed(sentences)
    reference = np.asarray(static.encode(sentences, max_length=None), dtype=np.float32)
    reference /= np.linalg.norm(reference, axis=1, keepdims=True)
    cosines = np.einsum("nd,nd->n", got, reference)
    return {
        "reference": "model2vec StaticModel.encode",
        "sentences": len(sentences),
        "min_cosine": round(float(cosines.min()), 5),
        "mean_cosine": round(float(cosines.mean()), 6),
    }
