"""A stand-in static model in the distiller's format, for tests that only need one to load and
run (real distillation takes tens of seconds; the tests that need the real model distil it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from seams.models.distill import DISTILL_PARAMS
from seams.models.model_store import EMBEDDINGS_FILE, TOKENIZER_FILE, StaticManifest, file_sha256


def write_tiny_static_model(folder: Path, tokenizer_json: Path, dims: int = 16) -> None:
    """A static model folder in the distiller's format (random rows over MiniLM's vocabulary):
    real distillation takes minutes here, and a snippet only needs the model to load and run."""
    folder.mkdir(parents=True)
    shutil.copyfile(tokenizer_json, folder / TOKENIZER_FILE)
    vocab = json.loads(tokenizer_json.read_text(encoding="utf-8"))["model"]["vocab"]
    matrix = np.random.default_rng(7).standard_normal((len(vocab), dims)).astype(np.float16)
    np.save(folder / EMBEDDINGS_FILE, matrix, allow_pickle=False)
    files = {name: file_sha256(folder / name) for name in (EMBEDDINGS_FILE, TOKENIZER_FILE)}
    StaticManifest(
        directory=folder,
        model_id=files[EMBEDDINGS_FILE],
        dims=dims,
        vocab_size=len(vocab),
        source={"model": "test: random rows"},
        distill=dict(DISTILL_PARAMS),
        versions={},
        fidelity={},
        files=files,
    ).write()
