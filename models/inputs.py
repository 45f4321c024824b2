"""What every embedder accepts: a list of str (checked before any model work)."""

from __future__ import annotations

from collections.abc import Sequence

from seams.errors import InputError


def check_texts(texts: object) -> None:
    """Raise `InputError` naming the bad item unless `texts` is a sequence of str (not a str)."""
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise InputError(f"texts must be a list of str, got {type(texts).__name__}")
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(f"texts[{index}] is {type(text).__name__}, not str")
