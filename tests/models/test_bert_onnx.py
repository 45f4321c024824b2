"""The packaged model reaches ONNX without torch: `seams.models.bert_onnx` writes the BERT graph
from the safetensors, and its embeddings are sentence-transformers' own."""

from __future__ import annotations

import json
import os
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from seams.errors import ConfigError
from seams.models.bert_onnx import bert_config, read_safetensors
from seams.models.embedders import OnnxEmbedder
from seams.models.fidelity import fidelity_sentences
from seams.models.model_export import export_model, packaged_model_dir
from seams.models.model_store import ModelManifest


def test_safetensors_are_read_without_torch(tmp_path: Path) -> None:
    weight = np.arange(6, dtype=np.float32).reshape(2, 3)
    ids = np.array([[0, 1, 2]], dtype=np.int64)
    half = np.array([0.5, -2.0], dtype=np.float16)
    header = {
        "__metadata__": {"format": "pt"},
        "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
        "ids": {"dtype": "I64", "shape": [1, 3], "data_offsets": [24, 48]},
        "half": {"dtype": "F16", "shape": [2], "data_offsets": [48, 52]},
    }
    encoded = json.dumps(header).encode()
    path = tmp_path / "model.safetensors"
    data = weight.tobytes() + ids.tobytes() + half.tobytes()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + data)
    read = read_safetensors(path)
    assert np.array_equal(read["w"], weight) and np.array_equal(read["ids"], ids)
    assert read["half"].dtype == np.float32 and read["half"].tolist() == [0.5, -2.0]


def test_an_encoder_it_cannot_write_is_named_with_the_way_out(tmp_path: Path) -> None:
    config = {"model_type": "gpt2", "hidden_act": "gelu_new"}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"model_type 'gpt2'.*export extra"):
        bert_config(tmp_path)


@pytest.mark.export
@pytest.mark.slow  # sentence-transformers' reference on torch: half a minute here
def test_the_packaged_model_exported_without_torch_embeds_as_sentence_transformers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(packaged_model_dir()), device="cpu")
    texts = fidelity_sentences(60)
    theirs = reference.encode(texts, normalize_embeddings=True)
    # No torch, no transformers from here on: an import of either fails.
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "transformers", None)
    manifest = export_model(tmp_path / "model", quantize=False)
    assert manifest.versions["writer"] == "seams.models.bert_onnx"
    assert "torch" not in manifest.versions
    ours = OnnxEmbedder(model_dir=str(manifest.directory)).embed(texts)
    cosines = np.einsum("nd,nd->n", ours, theirs)
    assert cosines.min() >= 0.9999, texts[int(cosines.argmin())]


@pytest.mark.export
def test_the_packaged_model_is_the_same_graph_with_or_without_torch(
    exported_model: ModelManifest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Machines sharing a database agree on the model id whatever each one installed."""
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "transformers", None)
    lean = export_model(tmp_path / "model", quantize=False)
    assert exported_model.versions["writer"] == lean.versions["writer"] == "seams.models.bert_onnx"
    assert lean.model_id == exported_model.model_id


@pytest.mark.export
def test_the_int8_copy_of_the_written_graph_quantizes_the_chosen_layers_and_is_kept(
    exported_model: ModelManifest,
) -> None:
    from seams.models.int8_quantization import _int8_nodes

    fp32 = exported_model.directory / exported_model.variants["fp32"].file
    assert len(_int8_nodes(fp32)) == 15  # 6 attention outputs, 6 of q/k/v, 3 feed-forward
    assert exported_model.int8_evaluation is not None and exported_model.int8_evaluation["kept"]
    assert "int8" in exported_model.variants
