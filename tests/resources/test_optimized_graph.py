"""The optimized copy of the ONNX graph kept beside the model: the same vectors bit for bit, kept
once, made again when damaged, and never needed (a folder that cannot be written opens the
original)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from seams.models import optimized_graph
from seams.models.model_store import ModelManifest
from seams.models.onnx_runtime import load_runtime

TEXTS = [
    "Tides follow the moon.",
    "A longer sentence about the harbour, its cranes, and the ships that wait for the tide.",
    "",
    "Le Conseil d'État a rendu sa décision.",
]


@pytest.fixture()
def model(exported_model: ModelManifest, tmp_path: Path) -> Path:
    """A private copy of the export's graph and tokenizer: this test writes beside them."""
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        shutil.copy2(exported_model.directory / name, folder / name)
    return folder


def _embed(folder: Path, *, keep: bool) -> np.ndarray:
    runtime = load_runtime(folder / "model.onnx", folder / "tokenizer.json", cache=keep)
    return runtime.embed(TEXTS)


def _entries(folder: Path) -> list[Path]:
    return sorted((folder / optimized_graph.CACHE_DIR).glob("model.onnx-*"))


def test_the_copy_embeds_as_the_original_and_is_kept_once(model: Path) -> None:
    original = _embed(model, keep=False)
    assert not (model / optimized_graph.CACHE_DIR).exists()  # a one-off load keeps nothing

    first = _embed(model, keep=True)
    (entry,) = _entries(model)
    assert (entry / optimized_graph.GRAPH).stat().st_size < (model / "model.onnx").stat().st_size
    assert np.array_equal(first, original)

    written = (entry / optimized_graph.STAMPS).stat().st_mtime_ns
    assert optimized_graph.optimized_graph(model / "model.onnx", *_options()) == (
        entry / optimized_graph.GRAPH
    )
    assert (entry / optimized_graph.STAMPS).stat().st_mtime_ns == written  # reused, not rewritten


def test_a_damaged_copy_is_made_again_and_a_new_graph_replaces_the_old_copy(model: Path) -> None:
    source = model / "model.onnx"
    graph = optimized_graph.optimized_graph(source, *_options())
    stamps = json.loads((graph.parent / optimized_graph.STAMPS).read_text())
    graph.write_bytes(graph.read_bytes()[:100])  # truncated: its stamp no longer matches
    again = optimized_graph.optimized_graph(source, *_options())
    assert again == graph and json.loads((graph.parent / optimized_graph.STAMPS).read_text())
    assert json.loads((graph.parent / optimized_graph.STAMPS).read_text()) != stamps

    os.utime(source, ns=(1, 1))  # a re-export: another key, and the old copy goes
    newer = optimized_graph.optimized_graph(source, *_options())
    assert newer != graph and _entries(model) == [newer.parent]
    assert not [p for p in (model / optimized_graph.CACHE_DIR).iterdir() if p.name.startswith(".")]


def test_a_folder_that_cannot_keep_a_copy_opens_the_original(model: Path) -> None:
    (model / optimized_graph.CACHE_DIR).write_text("")  # a file where the folder would go
    source = model / "model.onnx"
    assert optimized_graph.optimized_graph(source, *_options()) == source
    assert _embed(model, keep=True).shape == (len(TEXTS), 384)


def _options():  # type: ignore[no-untyped-def]
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return options, ["CPUExecutionProvider"]
