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
    from onnx import TensorProto, helper, numpy_helper

    config = bert_config(folder)
    weights = read_safetensors(folder / "model.safetensors")
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    eps = float(config.get("layer_norm_eps", 1e-12))
    nodes: list[onnx.NodeProto] = []
    initializers: list[onnx.TensorProto] = []

    def weight(name: str, transpose: bool = False) -> str:
        """An initializer of the tensor `name` (a Linear weight transposed for MatMul)."""
        array = weights[prefix + name]
        array = np.ascontiguousarray(array.T if transpose else array)
        initializers.append(numpy_helper.from_array(array, name))
        return name

    def constant(name: str, value: np.ndarray) -> str:
        initializers.append(numpy_helper.from_array(value, name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def linear(x: str, module: str, out: str) -> str:
        product = node("MatMul", [x, weight(f"{module}.weight", transpose=True)], f"{out}/mm")
        return node("Add", [product, weight(f"{module}.bias")], out)

    def layer_norm(x: str, module: str, out: str) -> str:
        scale, bias = weight(f"{module}.weight"), weight(f"{module}.bias")
        return node("LayerNormalization", [x, scale, bias], out, axis=-1, epsilon=eps)

    # Embeddings: word + position + token type, then a layer norm.
    words = node("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], "words")
    shape = node("Shape", ["input_ids"], "ids_shape")
    length = node("Gather", [shape, constant("one_index", np.array(1, np.int64))], "length")
    positions = node(
        "Range",
        [constant("zero", np.array(0, np.int64)), length, constant("step", np.array(1, np.int64))],
        "positions",
    )
    placed = node("Gather", [weight("embeddings.position_embeddings.weight"), positions], "placed")
    types = node(
        "Gather", [weight("embeddings.token_type_embeddings.weight"), "token_type_ids"], "types"
    )
    summed = node("Add", [node("Add", [words, placed], "words_placed"), types], "embedded")
    x = layer_norm(summed, "embeddings.LayerNorm", "embeddings")

    # The additive attention mask: 0 where attended, float32's lowest where padded (as BERT's).
    mask = node("Cast", ["attention_mask"], "mask", to=TensorProto.FLOAT)
    lowest = constant("lowest", np.array(np.finfo(np.float32).min, np.float32))
    hidden_mask = node(
        "Mul",
        [node("Sub", [constant("one", np.array(1, np.float32)), mask], "unmasked"), lowest],
        "mask_bias",
    )
    mask_bias = node(
        "Unsqueeze", [hidden_mask, constant("mask_axes", np.array([1, 2], np.int64))], "mask_4d"
    )
    split = constant("split_heads", np.array([0, 0, heads, hidden // heads], np.int64))
    merge = constant("merge_heads", np.array([0, 0, hidden], np.int64))
    scale = constant("scale", np.array(1 / math.sqrt(hidden // heads), np.float32))
    half, root2 = (
        constant("half", np.array(0.5, np.float32)),
        constant("root2", np.array(math.sqrt(2), np.float32)),
    )

    one = constant("one_f", np.array(1, np.float32))

    def heads_of(x: str, at: str, tag: str, name: str, perm: list[int]) -> str:
        """The `name` projection of `x`, split into heads: [batch, heads, ...] by `perm`."""
        projected = linear(x, f"{at}.attention.self.{name}", f"{tag}/{name}")
        shaped = node("Reshape", [projected, split], f"{tag}/{name}/heads")
        return node("Transpose", [shaped], f"{tag}/{name}/t", perm=perm)

    def encoder_layer(x: str, i: int) -> str:
        """Layer `i` on `x`: self-attention, add & norm, GELU (erf) feed-forward, add & norm."""
        at, tag = f"encoder.layer.{i}", f"l{i}"
        q = heads_of(x, at, tag, "query", [0, 2, 1, 3])
        k = heads_of(x, at, tag, "key", [0, 2, 3, 1])
        v = heads_of(x, at, tag, "value", [0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], f"{tag}/qk"), scale], f"{tag}/scaled")
        masked = node("Add", [scores, mask_bias], f"{tag}/masked")
        probs = node("Softmax", [masked], f"{tag}/p", axis=-1)
        weighted = node("MatMul", [probs, v], f"{tag}/pv")
        context = node("Transpose", [weighted], f"{tag}/ctx", perm=[0, 2, 1, 3])
        merged = node("Reshape", [context, merge], f"{tag}/merged")
        attended = linear(merged, f"{at}.attention.output.dense", f"{tag}/attn_out")
        residual = node("Add", [attended, x], f"{tag}/res1")
        x1 = layer_norm(residual, f"{at}.attention.output.LayerNorm", f"{tag}/ln1")
        inner = linear(x1, f"{at}.intermediate.dense", f"{tag}/inner")
        erf = node("Erf", [node("Div", [inner, root2], f"{tag}/scaled_inner")], f"{tag}/erf")
        halved = node("Mul", [inner, half], f"{tag}/half")
        gelu = node("Mul", [halved, node("Add", [erf, one], f"{tag}/erf1")], f"{tag}/gelu")
        output = linear(gelu, f"{at}.output.dense", f"{tag}/out")
        residual = node("Add", [output, x1], f"{tag}/res2")
        return layer_norm(residual, f"{at}.output.LayerNorm", f"{tag}/ln2")

    for i in range(int(config["num_hidden_layers"])):
        x = encoder_layer(x, i)

    nodes.append(helper.make_node("Identity", [x], [OUTPUT_NAME], name=OUTPUT_NAME))
    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        nodes,
        "bert_encoder",
        [helper.make_tensor_value_info(name, TensorProto.INT64, dims) for name in INPUT_NAMES],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, [*dims, hidden])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8  # what onnxruntime >= 1.20 reads
    onnx.checker.check_model(model)
    out.write_bytes(model.SerializeToString())
