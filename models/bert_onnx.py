"""The ONNX graph of a BERT-family encoder, written from its safetensors with `onnx` and numpy.

A BERT encoder (the packaged all-MiniLM-L6-v2 among them) is a fixed graph: embeddings, then N
identical layers of self-attention and a GELU feed-forward block, each closed by a layer norm.
Writing that graph directly from the weights needs neither torch nor transformers, so the
packaged model reaches ONNX on a base install. The graph takes the inputs and gives the output
`torch.onnx.export` of the Hugging Face model does (`input_ids`, `attention_mask`,
`token_type_ids` -> `last_hidden_state`), so the rest of Seams cannot tell the two apart.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from seams.errors import ConfigError

OPSET = 17  # LayerNormalization is a standard operator from 17 on
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "last_hidden_state"
SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a `.safetensors` file (8-byte little-endian header length, a JSON header
    of names, dtypes, shapes and byte offsets, then the raw data), as float32/int64 arrays."""
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    data = memoryview(raw)[8 + length :]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = SAFETENSORS_DTYPES.get(entry["dtype"])
        if dtype is None:
            raise ConfigError(f"{path}: tensor {name} is {entry['dtype']}, not F32, F16 or I64")
        start, end = entry["data_offsets"]
        array = np.frombuffer(data[start:end], dtype=dtype).reshape(entry["shape"])
        tensors[name] = array.astype(np.float32) if dtype == np.float16 else array
    return tensors


def bert_config(folder: Path) -> dict[str, Any]:
    """The folder's `config.json`, checked to describe an encoder this module can write: a BERT
    with absolute positions and exact (erf) GELU."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    kind = (config.get("model_type"), config.get("position_embedding_type", "absolute"))
    act = config.get("hidden_act")
    if kind != ("bert", "absolute") or act != "gelu":
        raise ConfigError(
            f"{folder}: model_type {kind[0]!r}, positions {kind[1]!r}, activation {act!r}: "
            "only BERT with absolute positions and gelu is written without torch; export it "
            "with the export extra (pip install 'seams-chunking[export]')"
        )
    return config


def write_bert_onnx(folder: Path, out: Path) -> None:
    """Write the ONNX graph of the BERT encoder in `folder` (config.json + model.safetensors)
    to `out`, fp32, with dynamic batch and sequence axes."""
    import onnx
    from onnx import TensorProto, helper

    config = bert_config(folder)
    weights = read_safetensors(folder / "model.safetensors")
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    graph = _Graph(weights, prefix, float(config.get("layer_norm_eps", 1e-12)))
    x = _embeddings(graph)
    attention = _attention_inputs(graph, hidden, heads)
    for i in range(int(config["num_hidden_layers"])):
        x = _encoder_layer(graph, x, i, attention)

    graph.nodes.append(helper.make_node("Identity", [x], [OUTPUT_NAME], name=OUTPUT_NAME))
    dims = ["batch", "sequence"]
    model = helper.make_model(
        helper.make_graph(
            graph.nodes,
            "bert_encoder",
            [helper.make_tensor_value_info(name, TensorProto.INT64, dims) for name in INPUT_NAMES],
            [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, [*dims, hidden])],
            graph.initializers,
        ),
        opset_imports=[helper.make_opsetid("", OPSET)],
    )
    model.ir_version = 8  # what onnxruntime >= 1.20 reads
    onnx.checker.check_model(model)
    out.write_bytes(model.SerializeToString())


class _Graph:
    """The nodes and initializers written so far, in the order they are added: that order is
    part of the file's bytes, and so of the model id every install must agree on."""

    def __init__(self, weights: dict[str, np.ndarray], prefix: str, eps: float) -> None:
        self.weights, self.prefix, self.eps = weights, prefix, eps
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []

    def weight(self, name: str, transpose: bool = False) -> str:
        """An initializer of the tensor `name` (a Linear weight transposed for MatMul)."""
        from onnx import numpy_helper

        array = self.weights[self.prefix + name]
        array = np.ascontiguousarray(array.T if transpose else array)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def constant(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def node(self, op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        from onnx import helper

        self.nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def linear(self, x: str, module: str, out: str) -> str:
        weight = self.weight(f"{module}.weight", transpose=True)
        product = self.node("MatMul", [x, weight], f"{out}/mm")
        return self.node("Add", [product, self.weight(f"{module}.bias")], out)

    def layer_norm(self, x: str, module: str, out: str) -> str:
        scale, bias = self.weight(f"{module}.weight"), self.weight(f"{module}.bias")
        return self.node("LayerNormalization", [x, scale, bias], out, axis=-1, epsilon=self.eps)


def _embeddings(g: _Graph) -> str:
    """Word + position + token type embeddings, then a layer norm: the first layer's input."""
    words = g.node("Gather", [g.weight("embeddings.word_embeddings.weight"), "input_ids"], "words")
    shape = g.node("Shape", ["input_ids"], "ids_shape")
    length = g.node("Gather", [shape, g.constant("one_index", np.array(1, np.int64))], "length")
    positions = g.node(
        "Range",
        [
            g.constant("zero", np.array(0, np.int64)),
            length,
            g.constant("step", np.array(1, np.int64)),
        ],
        "positions",
    )
    placed = g.node(
        "Gather", [g.weight("embeddings.position_embeddings.weight"), positions], "placed"
    )
    types = g.node(
        "Gather", [g.weight("embeddings.token_type_embeddings.weight"), "token_type_ids"], "types"
    )
    summed = g.node("Add", [g.node("Add", [words, placed], "words_placed"), types], "embedded")
    return g.layer_norm(summed, "embeddings.LayerNorm", "embeddings")


@dataclass(frozen=True)
class _Attention:
    """What every layer shares: the additive mask, head shapes, and the scalars of attention
    and GELU."""

    mask_bias: str
    split: str
    merge: str
    scale: str
    half: str
    root2: str
    one: str


def _attention_inputs(g: _Graph, hidden: int, heads: int) -> _Attention:
    """The shared inputs of every layer, written once. The mask is additive: 0 where attended,
    float32's lowest where padded (as BERT's)."""
    from onnx import TensorProto

    mask = g.node("Cast", ["attention_mask"], "mask", to=TensorProto.FLOAT)
    lowest = g.constant("lowest", np.array(np.finfo(np.float32).min, np.float32))
    hidden_mask = g.node(
        "Mul",
        [g.node("Sub", [g.constant("one", np.array(1, np.float32)), mask], "unmasked"), lowest],
        "mask_bias",
    )
    mask_bias = g.node(
        "Unsqueeze", [hidden_mask, g.constant("mask_axes", np.array([1, 2], np.int64))], "mask_4d"
    )
    split = g.constant("split_heads", np.array([0, 0, heads, hidden // heads], np.int64))
    merge = g.constant("merge_heads", np.array([0, 0, hidden], np.int64))
    scale = g.constant("scale", np.array(1 / math.sqrt(hidden // heads), np.float32))
    half = g.constant("half", np.array(0.5, np.float32))
    root2 = g.constant("root2", np.array(math.sqrt(2), np.float32))
    one = g.constant("one_f", np.array(1, np.float32))
    return _Attention(mask_bias, split, merge, scale, half, root2, one)


def _heads_of(g: _Graph, x: str, at: str, tag: str, name: str, split: str, perm: list[int]) -> str:
    """The `name` projection of `x`, split into heads: [batch, heads, ...] by `perm`."""
    projected = g.linear(x, f"{at}.attention.self.{name}", f"{tag}/{name}")
    shaped = g.node("Reshape", [projected, split], f"{tag}/{name}/heads")
    return g.node("Transpose", [shaped], f"{tag}/{name}/t", perm=perm)


def _encoder_layer(g: _Graph, x: str, i: int, a: _Attention) -> str:
    """Layer `i` on `x`: self-attention, add & norm, GELU (erf) feed-forward, add & norm."""
    at, tag = f"encoder.layer.{i}", f"l{i}"
    q = _heads_of(g, x, at, tag, "query", a.split, [0, 2, 1, 3])
    k = _heads_of(g, x, at, tag, "key", a.split, [0, 2, 3, 1])
    v = _heads_of(g, x, at, tag, "value", a.split, [0, 2, 1, 3])
    scores = g.node("Mul", [g.node("MatMul", [q, k], f"{tag}/qk"), a.scale], f"{tag}/scaled")
    masked = g.node("Add", [scores, a.mask_bias], f"{tag}/masked")
    probs = g.node("Softmax", [masked], f"{tag}/p", axis=-1)
    weighted = g.node("MatMul", [probs, v], f"{tag}/pv")
    context = g.node("Transpose", [weighted], f"{tag}/ctx", perm=[0, 2, 1, 3])
    merged = g.node("Reshape", [context, a.merge], f"{tag}/merged")
    attended = g.linear(merged, f"{at}.attention.output.dense", f"{tag}/attn_out")
    residual = g.node("Add", [attended, x], f"{tag}/res1")
    x1 = g.layer_norm(residual, f"{at}.attention.output.LayerNorm", f"{tag}/ln1")
    inner = g.linear(x1, f"{at}.intermediate.dense", f"{tag}/inner")
    erf = g.node("Erf", [g.node("Div", [inner, a.root2], f"{tag}/scaled_inner")], f"{tag}/erf")
    halved = g.node("Mul", [inner, a.half], f"{tag}/half")
    gelu = g.node("Mul", [halved, g.node("Add", [erf, a.one], f"{tag}/erf1")], f"{tag}/gelu")
    output = g.linear(gelu, f"{at}.output.dense", f"{tag}/out")
    residual = g.node("Add", [output, x1], f"{tag}/res2")
    return g.layer_norm(residual, f"{at}.output.LayerNorm", f"{tag}/ln2")
