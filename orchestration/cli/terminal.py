"""What a command prints: progress lines, and text from documents made safe for a terminal.

Documents, file names and queries are other people's text: an ESC[2J in a PDF would clear the
user's screen, an OSC 52 write their clipboard, an OSC 0 retitle their window. Everything a
command prints that came from outside passes `printable`, which shows every C0 and C1 control
character (and DEL) as a visible escape instead of sending it to the terminal.
"""

from __future__ import annotations

import re

_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_JSON_UNESCAPED_CONTROLS = re.compile("[\x7f-\x9f]")


def printable(text: str, *, keep: str = "") -> str:
    """`text` with each control character written as an escape (`\\x1b`, `\\n`, `\\x9b`), except
    those in `keep` (say "\\n" for text whose lines are the layout)."""

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep:
            return char
        return _NAMED.get(char) or f"\\x{ord(char):02x}"

    return _CONTROLS.sub(escape, text)


def printable_json(text: str) -> str:
    """JSON text (from `json.dumps(..., ensure_ascii=False)`, which escapes only C0 controls)
    with DEL and the C1 controls escaped too (`\\u009b`): the same JSON value, safe to print."""
    return _JSON_UNESCAPED_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def say(message: str) -> None:
    """One progress line on stdout, flushed at once (a long run reports as it goes); it may
    name a file, so its control characters are escaped."""
    print(f"seams: {printable(message)}", flush=True)
