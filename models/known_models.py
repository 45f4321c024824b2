"""Which model made an index, and how to embed queries with it again.

A chunk index records only its model's id (a hash of what makes its vectors). A query must be
embedded by that same model, also while a backfill builds the next model's index and search
still answers from the previous one, whose model the settings may no longer name. So every model
that builds an index is remembered, by id, in `<models dir>/indexed-models.json`: its folder, its
variant, window and prompts, everything `OnnxEmbedder` needs to embed a query as that index
expects. `embedder_for` turns an id back into an embedder; `model_folder_kind` and
`folder_recipe` read a folder without running or exporting its model.

Standard library and the model store only: no onnxruntime, no torch.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from seams.errors import ConfigError, EmbeddingError, SeamsError
from seams.models.model_store import MANIFEST_FILE, ONNX_LOCATIONS, TOKENIZER_FILE

if TYPE_CHECKING:
    from seams.models.embedders import OnnxEmbedder
    from seams.models.model_folder import VectorRecipe

REGISTRY_FILE = "indexed-models.json"
REGISTRY_FORMAT = 1
_lock = threading.Lock()


@dataclass(frozen=True)
class KnownModel:
    """What rebuilds the embedder whose vectors carry `model_id` (prompts resolved, so a later
    change of the folder's defaults cannot change what its queries get)."""

    model_id: str
    model_dir: str
    variant: str
    max_tokens: int | None
    query_prompt: str
    document_prompt: str

    @classmethod
    def of(cls, embedder: OnnxEmbedder) -> KnownModel:
        """The record of `embedder` as it is configured now."""
        manifest = embedder.manifest
        return cls(
            model_id=embedder.model_id,
            model_dir=str(embedder.resolved_model_dir().resolve()),
            variant=embedder.variant,
            max_tokens=embedder.max_tokens,
            query_prompt=embedder.resolved_query_prompt(manifest),
            document_prompt=embedder.resolved_document_prompt(manifest),
        )


def registry_path(models_dir: Path) -> Path:
    return models_dir / REGISTRY_FILE


def recalled_models(models_dir: Path) -> list[KnownModel]:
    """The models remembered under `models_dir`, newest first; an unreadable record reads as
    none (it only lets search reach an older index, never decides what is built)."""
    try:
        data = json.loads(registry_path(models_dir).read_text(encoding="utf-8"))
        if data.get("format") != REGISTRY_FORMAT:
            return []
        return [KnownModel(**entry) for entry in data["models"]]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return []


def remember_model(embedder: OnnxEmbedder, models_dir: Path) -> KnownModel:
    """Record `embedder` under `models_dir` (idempotent; the file is replaced atomically, so a
    reader never sees half of it)."""
    known = KnownModel.of(embedder)
    with _lock:
        models = [m for m in recalled_models(models_dir) if m.model_id != known.model_id]
        models_dir.mkdir(parents=True, exist_ok=True)
        payload = {"format": REGISTRY_FORMAT, "models": [asdict(known), *map(asdict, models)]}
        handle, temporary = tempfile.mkstemp(dir=models_dir, prefix=".indexed-models-")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(payload, out, indent=2, sort_keys=True)
            os.replace(temporary, registry_path(models_dir))
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    return known


def embedder_for(model_id: str, current: OnnxEmbedder) -> OnnxEmbedder:
    """An embedder whose vectors carry `model_id`, for embedding queries against an index of
    that model: `current` itself, another exported variant of its folder, a model remembered in
    its models folder (`remember_model`), or the packaged model's variants; `current`'s batch
    size and threads. EmbeddingError when none is (the index needs a backfill)."""
    if current.model_id == model_id:
        return current
    tried: list[str] = []
    candidates = [current, *_packaged(current)]
    for base in candidates:
        try:
            manifest = base.manifest
        except SeamsError:
            continue
        tried.append(str(manifest.directory))
        for name in manifest.variants:
            if base._model_id(manifest, name) == model_id:
                return base.with_changes(variant=name)
    for known in recalled_models(current.resolved_models_dir()):
        if known.model_id != model_id:
            continue
        embedder = current.with_changes(
            model_dir=known.model_dir,
            variant=known.variant,
            max_tokens=known.max_tokens,
            query_prompt=known.query_prompt,
            document_prompt=known.document_prompt,
        )
        try:
            if embedder.model_id == model_id:  # the folder still holds that model
                return embedder
        except SeamsError:
            pass
        tried.append(known.model_dir)
    raise EmbeddingError(
        f"the chunk index was built with model {model_id[:12]}, which none of the known models "
        f"makes ({', '.join(tried) or 'none readable'}): run `seams backfill` to re-index with "
        f"the current one ({current.model_id[:12]})"
    )


def _packaged(current: OnnxEmbedder) -> list[OnnxEmbedder]:
    """The packaged model beside `current`'s models folder, when `current` runs another one."""
    packaged = current.resolved_models_dir() / "all-MiniLM-L6-v2"
    if current.resolved_model_dir().resolve() == packaged.resolve():
        return []
    return [
        current.with_changes(
            model_dir=str(packaged), max_tokens=None, query_prompt=None, document_prompt=None
        )
    ]


# --- identity for code versions ---------------------------------------------------------------


def model_folder_kind(folder: Path) -> str:
    """ "export" (a Seams export), "onnx" (its own graph and tokenizer) or "sentence-transformers"
    (to be exported once); ConfigError naming the folder when it is none of them."""
    from seams.models.model_folder import is_sentence_transformers_folder

    if not folder.is_dir():
        raise ConfigError(
            f"{folder} is not a folder: give a sentence-transformers model folder, one with "
            f"model.onnx and {TOKENIZER_FILE}, or a Seams export"
        )
    if (folder / MANIFEST_FILE).is_file():
        return "export"
    if (folder / TOKENIZER_FILE).is_file() and any((folder / p).is_file() for p in ONNX_LOCATIONS):
        return "onnx"
    if is_sentence_transformers_folder(folder):
        return "sentence-transformers"
    raise ConfigError(
        f"{folder} holds no embedding model: expected modules.json (sentence-transformers), "
        f"model.onnx with {TOKENIZER_FILE}, or {MANIFEST_FILE} (a Seams export)"
    )


WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
"""Where a transformer's weights may be (a `.bin` is read with `weights_only`: no code runs)."""


def check_model_folder(folder: Path) -> str:
    """`model_folder_kind`, and every file the model will need read now rather than at its
    first use: a sentence-transformers folder's modules (transformer, pooling, window), its
    `config.json` and weights, and the tokenizer of either kind. A ConfigError of one line
    naming the file otherwise."""
    kind = model_folder_kind(folder)
    if kind == "export":
        return kind  # its manifest's checksums are verified where it is loaded
    if kind == "sentence-transformers":
        folder_recipe(folder)  # modules.json, the pooling and the window, each file named
        transformer = read_modules_path(folder)
        config = transformer / "config.json"
        if not config.is_file():
            raise ConfigError(f"{config} is missing: the folder holds no transformer to export")
        if not any((transformer / w).is_file() for w in WEIGHT_FILES):
            raise ConfigError(
                f"{transformer / WEIGHT_FILES[0]} is missing: the folder holds no weights of its "
                "transformer (save the model with `SentenceTransformer.save`)"
            )
        tokenizer = transformer / TOKENIZER_FILE
    else:
        tokenizer = folder / TOKENIZER_FILE
    _check_tokenizer(tokenizer)
    return kind


def read_modules_path(folder: Path) -> Path:
    """The folder of a sentence-transformers model's Transformer module."""
    from seams.models.model_folder import read_modules

    return read_modules(folder)[0].transformer


def _check_tokenizer(path: Path) -> None:
    """`path` is a tokenizer the `tokenizers` library reads (what the embedder loads)."""
    from tokenizers import Tokenizer

    if not path.is_file():
        raise ConfigError(
            f"{path} is missing: Seams needs the fast tokenizer's {TOKENIZER_FILE} (save the "
            "tokenizer with transformers' PreTrainedTokenizerFast)"
        )
    try:
        Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for any bad file
        reason = " ".join(str(exc).split())[:200]
        raise ConfigError(
            f"{path}: not a tokenizer Seams can read ({reason}): save it again with "
            "transformers' PreTrainedTokenizerFast"
        ) from None


def folder_recipe(folder: Path) -> VectorRecipe:
    """How the model in `folder` makes vectors (pooling, Dense layers, prompts), read from its
    files without loading or exporting it: settings are checked against it when they load."""
    from seams.models.model_folder import plain_recipe, read_modules
    from seams.models.model_store import load_manifest

    kind = model_folder_kind(folder)
    if kind == "export":
        return load_manifest(folder, verify=False).recipe
    if kind == "onnx":
        return plain_recipe(folder)
    return read_modules(folder)[1]
