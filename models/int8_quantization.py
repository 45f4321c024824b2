"""The int8 copy of an exported ONNX graph, kept only when its vectors stay close to fp32.

onnxruntime's dynamic quantizer is imported inside `quantize_int8`: importing this module costs
nothing.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import numpy as np

from seams.logs import quieted
from seams.models.fidelity import fidelity_sentences

log = logging.getLogger(__name__)

INT8_MIN_COSINE = 0.99
"""An int8 graph ships only if every fidelity sentence keeps at least this cosine to fp32."""

INT8_QUANTIZATION: dict[str, Any] = {
    "method": "onnxruntime.quantization.quantize_dynamic",
    "weight_type": "QInt8",
    "per_channel": True,
    "reduce_range": True,
    # Which linear layers get int8 weights: see `_int8_nodes` and the measurements in its doc.
    "quantized": "attention output projections; q/k/v of layers 0-1; feed-forward of layers 4-5",
}


def _int8_nodes(fp32_path: Path) -> list[str]:
    """The MatMul nodes whose weights are quantized: the ones int8 barely hurts.

    Quantizing every linear layer falls below the fidelity bar (`INT8_MIN_COSINE`); the
    feed-forward layers of the early blocks each cost a little min cosine and the losses
    compound, while the attention output projections cost almost nothing. This subset stays
    above the bar, at the price of most of int8's speed-up (the speed lives in the feed-forward
    layers).
    """
    import onnx

    graph = onnx.load(str(fp32_path), load_external_data=False).graph
    return [
        node.name
        for node in graph.node
        if node.op_type == "MatMul" and _INT8_NODE.search(node.name)
    ]


_INT8_NODE = re.compile(
    # The same layers under the names of a torch trace and of `bert_onnx`'s graph.
    r"layer\.\d+/attention/output/dense/MatMul$|^l\d+/attn_out/mm$"
    r"|layer\.[01]/attention/self/(query|key|value)/MatMul$|^l[01]/(query|key|value)/mm$"
    r"|layer\.5/intermediate/dense/MatMul$|^l5/inner/mm$"
    r"|layer\.[45]/output/dense/MatMul$|^l[45]/out/mm$"
)


def quantize_int8(fp32: Path, int8: Path, tokenizer: Path) -> dict[str, Any]:
    """Quantize the `fp32` graph into `int8` and measure it against fp32 on the fidelity
    sentences (both run with `tokenizer`); `kept` says whether it clears the bar."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # quantize_dynamic logs a pre-processing hint on the root logger at WARNING.
    with quieted(None):
        quantize_dynamic(
            str(fp32),
            str(int8),
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=True,
            nodes_to_quantize=_int8_nodes(fp32),
        )
    sentences = fidelity_sentences()
    cosines = _cosines(tokenizer, fp32, int8, sentences)
    evaluation = {
        "kept": bool(cosines.min() >= INT8_MIN_COSINE),
        "min_cosine": round(float(cosines.min()), 5),
        "mean_cosine": round(float(cosines.mean()), 5),
        "threshold": INT8_MIN_COSINE,
        "sentences": len(sentences),
        "quantization": INT8_QUANTIZATION,
    }
    log.info(
        "int8 variant: min cosine %.4f, mean %.5f vs fp32 -> %s",
        evaluation["min_cosine"],
        evaluation["mean_cosine"],
        "kept" if evaluation["kept"] else "rejected",
    )
    return evaluation


def _cosines(tokenizer: Path, reference: Path, candidate: Path, texts: list[str]) -> np.ndarray:
    from seams.models.onnx_runtime import load_runtime

    ref = load_runtime(reference, tokenizer, cache=False).embed(texts)
    got = load_runtime(candidate, tokenizer, cache=False).embed(texts)
    return np.einsum("nd,nd->n", ref, got)
