"""Every invalid setting is rejected when it is loaded, with a message that names the field.

The cases are generated from the models themselves (`model_fields`: bounds, literals, types), so
a field added later is covered without editing this file; hand-written cases cover the
relations between fields and the file-level mistakes (bad YAML, a list at the top level).
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from annotated_types import Ge, Le
from pydantic import BaseModel

from seams.chunking import ChunkingConfig
from seams.errors import ConfigError
from seams.settings import (
    ChunkingSettings,
    EmbedderSettings,
    InboxSettings,
    SeamsSettings,
    load_settings,
)


def invalid_values(model: type[BaseModel], name: str) -> list[Any]:
    """Values that must be rejected for field `name` of `model`, derived from its declaration."""
    field = model.model_fields[name]
    annotation = field.annotation
    origin = typing.get_origin(annotation)
    values: list[Any] = [] if annotation == dict[str, Any] else [{"nested": "mapping"}]
    if origin is typing.Literal:
        values += ["no-such-choice", 1]
    elif annotation is bool:
        values += ["maybe", 2, [True]]
    elif annotation in (int, float):
        values += ["many", [1], True]  # YAML `yes`/`true` is not a number
        for bound in field.metadata:
            if isinstance(bound, Ge):
                values.append(bound.ge - (1 if annotation is int else 0.001))
            if isinstance(bound, Le):
                values.append(bound.le + (1 if annotation is int else 0.001))
        if annotation is int:
            values.append(1.5)
        else:
            values += [float("nan"), float("inf")]
    elif origin is tuple:
        values += [5, [1, 2]]
    elif annotation is str or annotation == (str | None):
        values += [5, ["a"]]
    elif annotation is dict[str, Any]:
        values += ["not a mapping", [1]]
    return values


def _cases(model: type[BaseModel]) -> list[tuple[str, Any]]:
    return [(name, value) for name in model.model_fields for value in invalid_values(model, name)]


@pytest.mark.parametrize(("field", "value"), _cases(ChunkingConfig), ids=repr)
def test_every_invalid_chunking_config_value_names_its_field(field: str, value: Any) -> None:
    with pytest.raises(ConfigError) as info:
        ChunkingConfig(**{field: value})
    assert field in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        # Only sizes given together conflict: one alone moves the defaults (ChunkingConfig).
        (
            {"chunk_size_min": 300, "chunk_size_target": 200},
            ["chunk_size_target", "chunk_size_min"],
        ),
        (
            {"chunk_size_max": 100, "chunk_size_target": 200},
            ["chunk_size_target", "chunk_size_max"],
        ),
        ({"overlap_tokens": 10, "overlap_ratio": 0.1}, ["overlap_tokens", "overlap_ratio"]),
        ({"extra_abbreviations": ("two words",)}, ["extra_abbreviations"]),
        ({"extra_abbreviations": ("",)}, ["extra_abbreviations"]),
        ({"no_such_field": 1}, ["no_such_field"]),
    ],
)
def test_invalid_relations_between_chunking_fields_name_them(
    overrides: dict[str, Any], names: list[str]
) -> None:
    with pytest.raises(ConfigError) as info:
        ChunkingConfig(**overrides)
    assert all(name in str(info.value) for name in names), str(info.value)


def test_an_unknown_preset_names_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"preset: unknown preset 'no-such-preset'.*default"):
        ChunkingConfig.preset("no-such-preset")


# --- seams.yaml ------------------------------------------------------------------------------

SECTIONS: dict[str, type[BaseModel]] = {
    "chunking": ChunkingSettings,
    "embedder": EmbedderSettings,
    "inbox": InboxSettings,
}


def _settings_cases() -> list[tuple[str, dict[str, Any], str]]:
    cases = []
    for section, model in SECTIONS.items():
        for name, value in _cases(model):
            # Named with its section: `batch_size=True` alone does not say where it is.
            qualified = f"{section}.{name}"
            cases.append((f"{qualified}={value!r}", {section: {name: value}}, qualified))
        cases.append((f"{section}.unknown", {section: {"colour": "blue"}}, f"{section}.colour"))
        cases.append((f"{section} not a mapping", {section: [1, 2]}, section))
    for name, value in _cases(ChunkingConfig):
        document = {"chunking": {"overrides": {name: value}}}
        cases.append((f"chunking.overrides.{name}={value!r}", document, name))
    cases += [
        ("unknown section", {"chunker": {}}, "chunker"),
        (
            "misspelt field",
            {"retrieval": {"lexical_wieght": 0.5}},
            "retrieval.lexical_wieght: no such field; did you mean lexical_weight?",
        ),
        ("unknown preset", {"chunking": {"preset": "no-such-preset"}}, "preset"),
        (
            "relation",
            {"chunking": {"overrides": {"chunk_size_min": 999, "chunk_size_max": 254}}},
            "chunk_size_min",
        ),
        ("variant", {"embedder": {"variant": "fp16"}}, "embedder.variant"),
        ("cron", {"inbox": {"seal_cron": "every hour"}}, "inbox.seal_cron='every hour'"),
        ("cron fields", {"inbox": {"seal_cron": "0 * * *"}}, "inbox.seal_cron"),
    ]
    return cases


@pytest.mark.parametrize(
    ("document", "field"),
    [pytest.param(doc, field, id=case) for case, doc, field in _settings_cases()],
)
def test_every_invalid_seams_yaml_value_is_rejected_at_load_naming_the_field(
    tmp_path: Path, document: dict[str, Any], field: str
) -> None:
    path = tmp_path / "seams.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    message = str(info.value)
    assert str(path) in message and field in message, message
    assert "\n" not in message.strip() or "Traceback" not in message


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("chunking: [unclosed\n", "not valid YAML"),
        ("- a list\n- not a mapping\n", "expected a mapping"),
        ("\xff\xfe".encode("latin-1").decode("latin-1"), "not valid YAML"),
    ],
)
def test_a_broken_settings_file_names_the_file(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "seams.yaml"
    path.write_bytes(text.encode("latin-1") if text.startswith("\xff") else text.encode())
    with pytest.raises(ConfigError, match=why) as info:
        load_settings(path)
    assert str(path) in str(info.value)


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)
"""Nine levels of nine aliases: 9**9 (387 million) strings once expanded."""


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (BOMB, "not valid YAML at line 2, column 8: alias *a is not allowed in settings"),
        (
            "collections:\n  docs:\n    source: /a\n  docs:\n    source: /b\n",
            "not valid YAML at line 4, column 3: duplicate key 'docs' (first at line 2): keep one",
        ),
        (
            "retrieval:\n  mode: text\nchunking: {}\nretrieval:\n  mode: late\n",
            "not valid YAML at line 4, column 1: duplicate key 'retrieval' (first at line 1)",
        ),
    ],
    ids=["alias-bomb", "duplicate-collection", "duplicate-block"],
)
def test_aliases_and_duplicate_keys_are_refused_in_one_line(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "seams.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {says}") and "\n" not in message, message


def test_the_shipped_settings_and_the_defaults_load(tmp_path: Path) -> None:
    assert isinstance(load_settings(), SeamsSettings)
    empty = tmp_path / "seams.yaml"
    empty.write_text("", encoding="utf-8")
    assert load_settings(empty) == SeamsSettings()


def test_a_missing_settings_file_named_by_the_environment_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nope.yaml"
    monkeypatch.setenv("SEAMS_CONFIG", str(missing))
    with pytest.raises(ConfigError, match="SEAMS_CONFIG"):
        load_settings()
