"""Model tooling below the Dagster resources: manifests and runtimes on the hot path
(`model_store`, `onnx_runtime`, `static_runtime`, `chunk_vectors`), and the offline makers of the
model files (`model_export`: ONNX export, with `int8_quantization`, the `fidelity` sentences and
`atomic_folder` publishing; `distill`: the static boundary model), which import torch,
sentence-transformers or model2vec only inside their functions."""
