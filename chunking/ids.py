"""Chunk ids: deterministic, namespaced by document, unique within a document.

`chunk_id = sha256(f"{document_id}:{normalised text}")`, hex. A document that repeats a chunk's
text verbatim (boilerplate, a repeated table header) would get the same id twice, so the n-th
occurrence (n >= 2) of a normalised text hashes `f"{document_id}:{n}:{normalised text}"`; the
first occurrence keeps the plain form, so ids do not shift when a later repeat appears.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Sequence


def normalise_text(text: str) -> str:
    """The form of a chunk's text that its id hashes: Unicode NFC, every whitespace run collapsed
    to one space, stripped. Case and punctuation are kept: they are content."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def chunk_id(document_id: str, text: str, occurrence: int = 1) -> str:
    """The id of the `occurrence`-th (1-based) chunk with this normalised text in the document."""
    if occurrence < 1:
        raise ValueError(f"occurrence must be >= 1, got {occurrence}")
    return _digest(document_id, normalise_text(text), occurrence)


def assign_chunk_ids(document_id: str, texts: Iterable[str]) -> list[str]:
    """Ids for a document's chunk texts in order, numbering repeats of the same normalised text."""
    return assign_normalised_ids(document_id, (normalise_text(text) for text in texts))


def assign_normalised_ids(document_id: str, normalised_texts: Iterable[str]) -> list[str]:
    """`assign_chunk_ids` for texts already in `normalise_text` form (a caller that has split
    the texts into words for another reason joins them instead of normalising again)."""
    seen: dict[str, int] = {}
    ids = []
    for normalised in normalised_texts:
        occurrence = seen.get(normalised, 0) + 1
        seen[normalised] = occurrence
        ids.append(_digest(document_id, normalised, occurrence))
    return ids


def assign_split_ids(
    document_id: str, texts: Sequence[str], words: Sequence[list[str]]
) -> list[str]:
    """`assign_chunk_ids` for texts a caller has already split into `words`: NFC leaves ASCII
    and text already in NFC as it is, so its normal form is its words joined."""
    normalised = [
        " ".join(w) if t.isascii() or unicodedata.is_normalized("NFC", t) else normalise_text(t)
        for t, w in zip(texts, words, strict=True)
    ]
    return assign_normalised_ids(document_id, normalised)


def _digest(document_id: str, normalised: str, occurrence: int) -> str:
    payload = (
        f"{document_id}:{normalised}"
        if occurrence == 1
        else f"{document_id}:{occurrence}:{normalised}"
    )
    # surrogatepass: a lone surrogate in extracted text must not make hashing crash.
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()
