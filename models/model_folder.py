"""What a sentence-transformers model folder says about its vectors, read from its files.

A model folder (a sentence-transformers save, or an ONNX export that kept its configuration)
decides how a text becomes a vector: the window (`max_seq_length`), the pooling of the token
vectors (mean, CLS, last token, max, mean/sqrt(len)), any `Dense` projections after pooling,
whether a `Normalize` module follows, a lower-casing step, and the prompts the model was trained
with (`config_sentence_transformers.json`: `prompts`, `default_prompt_name`). `VectorRecipe` holds
all of it; `read_recipe` reads it from the folder and never assumes a value the folder does not
give, except where sentence-transformers itself has the same default.

Standard library only: the embedder's hot path imports this module.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from seams.errors import ConfigError

MODULES_FILE = "modules.json"
ST_CONFIG_FILE = "config_sentence_transformers.json"
SBERT_CONFIG_FILE = "sentence_bert_config.json"

POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len", "lasttoken")
"""Pooling modes Seams runs, in the order sentence-transformers concatenates them."""

DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")
"""Prompt names sentence-transformers' `encode_document` looks for, in its order."""

ACTIVATIONS = {
    "torch.nn.modules.linear.Identity": "identity",
    "torch.nn.modules.activation.Tanh": "tanh",
    "torch.nn.modules.activation.ReLU": "relu",
    "torch.nn.modules.activation.Sigmoid": "sigmoid",
    "torch.nn.modules.activation.GELU": "gelu",
}

_UNBOUNDED = 100_000  # transformers' "no limit" model_max_length is ~1e30


@dataclass(frozen=True)
class DenseLayer:
    """A `Dense` module after pooling: `activation(x @ weight.T + bias)`; weights live in the
    export as `<name>.weight.npy` (and `<name>.bias.npy` when `bias`)."""

    name: str
    in_features: int
    out_features: int
    bias: bool
    activation: str


@dataclass(frozen=True)
class VectorRecipe:
    """Everything after the transformer that makes a model's vectors, plus its window.

    The default instance is all-MiniLM-L6-v2's recipe (mean pooling, normalised, no prompts,
    256 tokens): a manifest written before these fields existed reads back as exactly that.
    """

    pooling: tuple[str, ...] = ("mean",)
    steps: tuple[DenseLayer | str, ...] = ("normalize",)
    """Post-pooling steps in module order: `DenseLayer`s and the string "normalize"."""
    max_seq_length: int = 256
    max_positions: int = 512
    do_lower_case: bool = False
    include_prompt: bool = True
    prompts: dict[str, str] = field(default_factory=dict)
    default_prompt_name: str | None = None

    @property
    def dims(self) -> int | None:
        """Output width when a Dense layer sets it (else the transformer's hidden size)."""
        dense = [s for s in self.steps if isinstance(s, DenseLayer)]
        return dense[-1].out_features if dense else None

    @property
    def dense_layers(self) -> list[DenseLayer]:
        return [s for s in self.steps if isinstance(s, DenseLayer)]

    @property
    def is_default(self) -> bool:
        """True for the packaged model's recipe: its provenance ids stay the graph's sha256."""
        return self == VectorRecipe()

    def query_prompt(self) -> str:
        """The prompt sentence-transformers' `encode_query` uses: `prompts["query"]`, else the
        default prompt, else none."""
        if "query" in self.prompts:
            return self.prompts["query"]
        return self._default_prompt()

    def document_prompt(self) -> str:
        """The prompt `encode_document` uses: "document", "passage" or "corpus", else the
        default prompt, else none."""
        for name in DOCUMENT_PROMPT_NAMES:
            if name in self.prompts:
                return self.prompts[name]
        return self._default_prompt()

    def prompt(self, name: str) -> str:
        """The stored prompt called `name`, or a `ConfigError` listing the stored ones."""
        try:
            return self.prompts[name]
        except KeyError:
            raise ConfigError(
                f"the model has no prompt named {name!r}; it stores {sorted(self.prompts)}"
            ) from None

    def _default_prompt(self) -> str:
        if self.default_prompt_name is None:
            return ""
        return self.prompts.get(self.default_prompt_name, "")

    def fingerprint(self, document_prompt: str) -> str:
        """sha256 of what turns the transformer's output into an index vector (provenance)."""
        data = asdict(self) | {"document_prompt": document_prompt}
        data.pop("prompts")
        data.pop("default_prompt_name")
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {
            "pooling": list(self.pooling),
            "steps": [s if isinstance(s, str) else asdict(s) for s in self.steps],
            "max_seq_length": self.max_seq_length,
            "max_positions": self.max_positions,
            "do_lower_case": self.do_lower_case,
            "include_prompt": self.include_prompt,
            "prompts": dict(self.prompts),
            "default_prompt_name": self.default_prompt_name,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> VectorRecipe:
        """The recipe a manifest records; `None` (a manifest from before recipes) is MiniLM's."""
        if data is None:
            return cls()
        return cls(
            pooling=tuple(str(p) for p in data["pooling"]),
            steps=tuple(s if isinstance(s, str) else DenseLayer(**s) for s in data["steps"]),
            max_seq_length=int(data["max_seq_length"]),
            max_positions=int(data["max_positions"]),
            do_lower_case=bool(data["do_lower_case"]),
            include_prompt=bool(data["include_prompt"]),
            prompts={str(k): str(v) for k, v in data["prompts"].items()},
            default_prompt_name=data.get("default_prompt_name"),
        )


@dataclass(frozen=True)
class FolderModules:
    """Where a sentence-transformers folder keeps its parts."""

    transformer: Path
    """The folder of the Hugging Face model and its tokenizer (modules.json's Transformer)."""
    dense: dict[str, Path]
    """Each Dense layer's name -> its folder (config.json + weights)."""


def is_sentence_transformers_folder(folder: Path) -> bool:
    return (folder / MODULES_FILE).is_file()


def read_modules(folder: Path) -> tuple[FolderModules, VectorRecipe]:
    """Read a sentence-transformers folder: the transformer's path and the vector recipe.

    Raises:
        ConfigError: a module Seams cannot run (named), or a file that is missing or unreadable.
    """
    entries = _json(folder / MODULES_FILE)
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{folder / MODULES_FILE} lists no modules")
    transformer: Path | None = None
    pooling: tuple[str, ...] | None = None
    include_prompt = True
    steps: list[DenseLayer | str] = []
    dense_paths: dict[str, Path] = {}
    for entry in sorted(entries, key=lambda e: int(e.get("idx", 0))):
        kind = str(entry.get("type", "")).rsplit(".", 1)[-1]
        path = folder / str(entry.get("path", ""))
        if kind == "Transformer" and transformer is None:
            transformer = path
        elif kind == "Pooling" and pooling is None and transformer is not None:
            pooling, include_prompt = _pooling(path / "config.json")
        elif kind == "Dense" and pooling is not None:
            name = f"dense-{entry.get('idx', len(steps))}"
            steps.append(_dense(name, path / "config.json"))
            dense_paths[name] = path
        elif kind == "Normalize" and pooling is not None:
            steps.append("normalize")
        elif kind in ("Dropout",):
            continue  # inactive at inference
        else:
            raise ConfigError(
                f"{folder / MODULES_FILE}: the module {entry.get('type')!r} at position "
                f"{entry.get('idx')} is not supported (Seams runs Transformer, Pooling, Dense and "
                "Normalize folders); export the model yourself to model.onnx + tokenizer.json"
            )
    if transformer is None or pooling is None:
        raise ConfigError(
            f"{folder / MODULES_FILE} needs a Transformer module followed by a Pooling module"
        )
    recipe = read_transformer_settings(transformer, folder) | {
        "pooling": pooling,
        "steps": tuple(steps),
        "include_prompt": include_prompt,
    }
    return FolderModules(transformer, dense_paths), VectorRecipe(**recipe)


def read_transformer_settings(transformer: Path, root: Path) -> dict[str, Any]:
    """Window, positions, lower-casing (from the transformer's folder) and prompts (from the
    root's `config_sentence_transformers.json`), as `VectorRecipe` keyword arguments.

    The window is `max_seq_length` from `sentence_bert_config.json` (sentence-transformers up to
    5), else the tokenizer's `model_max_length` (where version 6 keeps it), else the model's
    position count; never more than the positions the model has.
    """
    sbert = _json_or_empty(transformer / SBERT_CONFIG_FILE) or _json_or_empty(
        root / SBERT_CONFIG_FILE
    )
    tokenizer_config = _json_or_empty(transformer / "tokenizer_config.json")
    model_config = _json_or_empty(transformer / "config.json")
    positions = int(model_config.get("max_position_embeddings") or 0)
    window = sbert.get("max_seq_length") or tokenizer_config.get("model_max_length")
    if window is None or int(window) >= _UNBOUNDED:
        window = positions
    if not window:
        raise ConfigError(
            f"{transformer} gives no window: set max_seq_length in {SBERT_CONFIG_FILE} or "
            "max_position_embeddings in config.json"
        )
    window = int(window)
    if positions and model_config.get("model_type") in ("roberta", "xlm-roberta", "camembert"):
        positions -= 2  # RoBERTa's positions start after the padding index
    st_config = _json_or_empty(root / ST_CONFIG_FILE)
    prompts = st_config.get("prompts") or {}
    return {
        "max_seq_length": min(window, positions) if positions else window,
        "max_positions": positions or window,
        "do_lower_case": bool(sbert.get("do_lower_case", False)),
        "prompts": {str(k): str(v) for k, v in prompts.items()},
        "default_prompt_name": st_config.get("default_prompt_name"),
    }


def plain_recipe(folder: Path) -> VectorRecipe:
    """The recipe of a folder holding only `model.onnx` + `tokenizer.json` (plus whatever
    configuration it kept): read from its modules when it has them, else a `ConfigError`, since
    pooling cannot be guessed."""
    if is_sentence_transformers_folder(folder):
        return read_modules(folder)[1]
    pooling_config = folder / "1_Pooling" / "config.json"
    if not pooling_config.is_file():
        raise ConfigError(
            f"{folder} holds an ONNX model but no pooling configuration: add the model's "
            f"{MODULES_FILE} and 1_Pooling/config.json from its sentence-transformers folder"
        )
    pooling, include_prompt = _pooling(pooling_config)
    return VectorRecipe(
        **read_transformer_settings(folder, folder),
        pooling=pooling,
        steps=(),
        include_prompt=include_prompt,
    )


def _pooling(path: Path) -> tuple[tuple[str, ...], bool]:
    """Pooling modes from a Pooling config: sentence-transformers 6's `pooling_mode` (a name or
    list) or the older `pooling_mode_*_token(s)` flags."""
    config = _json(path)
    include_prompt = bool(config.get("include_prompt", True))
    if "pooling_mode" in config:
        raw = config["pooling_mode"]
        modes = [raw] if isinstance(raw, str) else list(raw)
    else:
        flags = {
            "cls": "pooling_mode_cls_token",
            "max": "pooling_mode_max_tokens",
            "mean": "pooling_mode_mean_tokens",
            "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
            "weightedmean": "pooling_mode_weightedmean_tokens",
            "lasttoken": "pooling_mode_lasttoken",
        }
        modes = [mode for mode, key in flags.items() if config.get(key)]
    modes = ["mean_sqrt_len" if m == "mean_sqrt_len_tokens" else m for m in modes]
    unknown = [m for m in modes if m not in POOLING_MODES]
    if unknown or not modes:
        raise ConfigError(
            f"{path}: pooling {unknown or 'none'} is not supported; Seams pools by "
            f"{', '.join(POOLING_MODES)}"
        )
    return tuple(m for m in POOLING_MODES if m in modes), include_prompt


def _dense(name: str, path: Path) -> DenseLayer:
    config = _json(path)
    activation = str(config.get("activation_function", "torch.nn.modules.activation.Tanh"))
    if activation not in ACTIVATIONS:
        raise ConfigError(
            f"{path}: activation {activation!r} is not supported; Seams runs "
            f"{', '.join(sorted(ACTIVATIONS))}"
        )
    return DenseLayer(
        name=name,
        in_features=int(config["in_features"]),
        out_features=int(config["out_features"]),
        bias=bool(config.get("bias", True)),
        activation=ACTIVATIONS[activation],
    )


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"the model file {path} is missing") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"the model file {path} is unreadable ({exc})") from exc


def _json_or_empty(path: Path) -> dict[str, Any]:
    return _json(path) if path.is_file() else {}
