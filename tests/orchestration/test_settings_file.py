"""`seams eval --apply` changes one value of a seams.yaml: the rest of the file (comments
included) stays as it was, and what it writes always loads."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from seams.errors import ConfigError
from seams.orchestration.settings_file import set_value, write_value
from seams.paths import packaged_default
from seams.settings import load_settings

PACKAGED = packaged_default("seams.yaml").read_text(encoding="utf-8")


def _changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    old, new = before.splitlines(), after.splitlines()
    assert len(old) == len(new)
    return [(a, b) for a, b in zip(old, new, strict=True) if a != b]


def test_the_packaged_settings_keep_every_other_line_and_the_comment() -> None:
    edited = set_value(PACKAGED, "retrieval", "lexical_weight", 0.4)
    assert edited.kept_comments
    ((old, new),) = _changed_lines(PACKAGED, edited.text)
    assert old.startswith("  lexical_weight: 0.75   # BM25's share")
    assert new == old.replace("0.75", "0.4 ")  # the comment stays in its column
    assert yaml.safe_load(edited.text)["retrieval"]["lexical_weight"] == 0.4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The key missing from the section: added at its end, at the section's indentation.
        (
            "retrieval:\n    search: hybrid  # a comment\n    # more\nexecution: {}\n",
            "retrieval:\n    search: hybrid  # a comment\n    # more\n    lexical_weight: 0.3\n"
            "execution: {}\n",
        ),
        # No retrieval section at all: one appended.
        (
            "# mine\nembedder:\n  variant: int8",
            "# mine\nembedder:\n  variant: int8\nretrieval:\n  lexical_weight: 0.3\n",
        ),
        ("", "retrieval:\n  lexical_weight: 0.3\n"),
        # A nested key of the same name elsewhere is left alone.
        (
            "chunking:\n  overrides:\n    lexical_weight: 1\nretrieval:\n  lexical_weight: 1\n",
            "chunking:\n  overrides:\n    lexical_weight: 1\nretrieval:\n  lexical_weight: 0.3\n",
        ),
        # A value without a comment, and Windows line ends kept.
        ("retrieval:\r\n  lexical_weight: 0.9\r\n", "retrieval:\r\n  lexical_weight: 0.3\r\n"),
    ],
)
def test_the_value_is_edited_in_place(text: str, expected: str) -> None:
    edited = set_value(text, "retrieval", "lexical_weight", 0.3)
    assert edited.text == expected
    assert edited.kept_comments


def test_a_flow_mapping_is_rewritten_from_its_content() -> None:
    text = "# gone\nretrieval: {search: lexical, lexical_weight: 0.9}\nembedder: {variant: int8}\n"
    edited = set_value(text, "retrieval", "lexical_weight", 0.25)
    assert not edited.kept_comments
    assert yaml.safe_load(edited.text) == {
        "retrieval": {"search": "lexical", "lexical_weight": 0.25},
        "embedder": {"variant": "int8"},
    }


def test_text_that_is_no_mapping_is_refused() -> None:
    with pytest.raises(ConfigError, match="expected a mapping"):
        set_value("- a\n- b\n", "retrieval", "lexical_weight", 0.3)
    with pytest.raises(ConfigError, match="not valid YAML"):
        set_value("retrieval: [\n", "retrieval", "lexical_weight", 0.3)


def test_write_value_creates_a_file_that_loads_and_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "seams.yaml"
    write_value(target, "retrieval", "lexical_weight", 0.55, initial=PACKAGED)
    assert load_settings(target).retrieval.lexical_weight == 0.55
    assert len(_changed_lines(PACKAGED, target.read_text(encoding="utf-8"))) == 1

    target.chmod(0o640)
    write_value(target, "retrieval", "lexical_weight", 0.6)
    assert load_settings(target).retrieval.lexical_weight == 0.6
    assert target.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["seams.yaml"]  # no temporary file left


def test_a_file_that_would_not_load_is_left_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "seams.yaml"
    broken = "embedder:\n  variant: fp16\n"  # invalid already: the write must not hide it
    target.write_text(broken, encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        write_value(target, "retrieval", "lexical_weight", 0.5)
    assert str(error.value).startswith(f"{target}: embedder.variant='fp16'")
    assert target.read_text(encoding="utf-8") == broken
    assert [p.name for p in tmp_path.iterdir()] == ["seams.yaml"]
