"""A stand-in static model in the distiller's format, for tests that only need one to load and
run (real distillation takes tens of seconds; the tests that need the real model distil it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from seams.models.distill import DISTILL_PARAMS
from seams.models.model_store import EMBEDDINGS_FILE, TOKENIZER_FILE, StaticManifest, file_sha256


def write_tiny_static_model(
    folder: Path,
    tokenizer_json: Path,
    dims: int = 16,
    *,
    seed: int = 7,
    unknown_id: int | None = None,
) -> StaticManifest:
    """A static model folder in the distiller's format (random rows over MiniLM's vocabulary):
    real distillation takes minutes here, and a snippet only needs the model to load and run.

    `tokenizer_json` is copied in unless it is already the folder's; `unknown_id`'s row is
    zeroed, as the distiller leaves the unknown token's."""
    folder.mkdir(parents=True, exist_ok=True)
    if tokenizer_json != folder / TOKENIZER_FILE:
        shutil.copyfile(tokenizer_json, folder / TOKENIZER_FILE)
    vocab = json.loads(tokenizer_json.read_text(encoding="utf-8"))["model"]["vocab"]
    matrix = np.random.default_rng(seed).standard_normal((len(vocab), dims)).astype(np.float16)
    if unknown_id is not None:
        matrix[unknown_id] = 0
    np.save(folder / EMBEDDINGS_FILE, matrix, allow_pickle=False)
    files = {name: file_sha256(folder / name) for name in (EMBEDDINGS_FILE, TOKENIZER_FILE)}
    manifest = StaticManifest(
        directory=folder,
        model_id=files[EMBEDDINGS_FILE],
        dims=dims,
        vocab_size=len(vocab),
        source={"model": "test: random rows"},
        distill=dict(DISTILL_PARAMS),
        versions={},
        fidelity={},
        files=files,
    )
    manifest.write()
    return manifest
