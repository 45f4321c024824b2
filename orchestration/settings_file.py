"""Changing one value of a `seams.yaml` in place, the rest of the file (comments, order, spacing)
kept, and never leaving a file that does not load.

`seams eval --apply` writes `retrieval.lexical_weight` this way. The value's line is edited as
text (its comment stays where it was); only when the file's shape leaves no such line to edit
(`retrieval` written as a flow mapping, say) is the file rewritten from its parsed content, which
drops its comments. Either way the new text must parse to the old settings with only that value
changed and load with `load_settings` before it replaces the file, in one rename.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from seams.errors import ConfigError
from seams.settings import load_settings

_TOP_KEY = re.compile(r"^(?P<key>[A-Za-z_][\w-]*)\s*:(?P<rest>.*)$")
_CHILD = re.compile(
    r"^(?P<indent>[ ]+)(?P<key>[A-Za-z_][\w-]*)\s*:(?P<value>[^#]*?)(?P<gap>\s*)(?P<comment>#.*)?$"
)


@dataclass(frozen=True)
class Edited:
    text: str
    kept_comments: bool
    """False when the file had to be rewritten from its parsed content."""


def set_value(text: str, section: str, key: str, value: float) -> Edited:
    """`text` (a seams.yaml) with `section.key` set to `value`. A `ConfigError` when the text is
    not a YAML mapping."""
    try:
        before = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(before, dict):
        raise ConfigError("expected a mapping at the top level")
    wanted = _with(before, section, key, value)
    edited = _edit_lines(text, section, key, _scalar(value))
    if edited is not None:
        try:
            if (yaml.safe_load(edited) or {}) == wanted:
                return Edited(edited, kept_comments=True)
        except yaml.YAMLError:
            pass
    return Edited(yaml.safe_dump(wanted, sort_keys=False), kept_comments=False)


def write_value(path: Path, section: str, key: str, value: float, *, initial: str = "") -> Edited:
    """Set `section.key` to `value` in the seams.yaml at `path` (when missing, created from the
    text `initial`), checked with `load_settings` first, replaced in one rename."""
    text = path.read_text(encoding="utf-8") if path.exists() else initial
    edited = set_value(text, section, key, value)
    folder = path.parent
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    temporary = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(edited.text)
        if path.exists():
            os.chmod(temporary, path.stat().st_mode & 0o7777)
        try:
            load_settings(temporary)
        except ConfigError as exc:  # named after the file the user knows, not the temporary
            raise ConfigError(str(exc).replace(str(temporary), str(path))) from None
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return edited


def _scalar(value: float) -> str:
    return format(float(value), "g")


def _with(data: dict[Any, Any], section: str, key: str, value: float) -> dict[Any, Any]:
    out = dict(data)
    inner = out.get(section)
    out[section] = {**(inner if isinstance(inner, dict) else {}), key: float(value)}
    return out


def _edit_lines(text: str, section: str, key: str, scalar: str) -> str | None:
    """The text with the value edited on its line (or a line added to the section, or the
    section added at the end); None when the section is not a block mapping."""
    lines = text.splitlines(keepends=True)
    start = None
    for number, line in enumerate(lines):
        match = _TOP_KEY.match(line)
        if match and match["key"] == section:
            rest = match["rest"].strip()
            if rest and not rest.startswith("#"):
                return None  # `retrieval: {...}` or a scalar: no block to edit
            start = number
    if start is None:
        tail = "" if not text or text.endswith("\n") else "\n"
        return f"{text}{tail}{section}:\n  {key}: {scalar}\n"
    end = len(lines)
    for number in range(start + 1, len(lines)):
        line = lines[number]
        if line.strip() and not line[0].isspace() and not line.lstrip().startswith("#"):
            end = number
            break
    indent = None
    last = start
    for number in range(start + 1, end):
        line = lines[number].rstrip("\r\n")
        if not line.strip():
            continue
        last = number
        match = _CHILD.match(line)
        if match is None:
            continue
        if indent is None:
            indent = match["indent"]
        if match["indent"] == indent and match["key"] == key:
            newline = lines[number][len(line) :]
            lines[number] = _replaced(match, scalar) + newline
            return "".join(lines)
    if not lines[last].endswith("\n"):
        lines[last] += "\n"
    lines.insert(last + 1, f"{indent or '  '}{key}: {scalar}\n")
    return "".join(lines)


def _replaced(match: re.Match[str], scalar: str) -> str:
    """The child line with its value replaced, its comment kept at the same column when the new
    value leaves room."""
    head = f"{match['indent']}{match['key']}: {scalar}"
    if not match["comment"]:
        return head
    column = match.start("comment")
    gap = max(1, column - len(head)) if match["gap"] else 1
    return f"{head}{' ' * gap}{match['comment']}"
