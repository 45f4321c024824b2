"""Turn a source file's bytes into text the chunker reads, or a per-document error.

Extraction never raises for a bad document: it returns an `ExtractedDocument` with `error` set
(and empty text), so one corrupt file never stops the rest of its batch.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

MAX_BYTES = 100 * 1024 * 1024
_BINARY_SAMPLE = 8192
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f]")
_MD_TITLE = re.compile(r"^\s{0,3}#\s+(.+?)\s*#*\s*$", re.MULTILINE)
_TEXT_SUFFIXES = {".txt", ".text", ".md", ".markdown", ".rst", ".csv", ".log", ""}


@dataclass(frozen=True)
class ExtractedDocument:
    text: str
    mime: str
    title: str | None = None
    page_spans: list[tuple[int, int]] | None = None
    error: str | None = None


def _name(source_uri: str) -> str:
    return PurePosixPath(unquote(urlsplit(source_uri).path)).name


def _failed(mime: str, error: str) -> ExtractedDocument:
    return ExtractedDocument(text="", mime=mime, error=error)


def decode_text(content: bytes) -> tuple[str, str]:
    """Decode bytes of unknown encoding: BOMs first, then UTF-8, then a detector, then cp1252.

    Returns (text, encoding). NUL characters, which PostgreSQL text cannot hold, become U+FFFD
    so offsets stay one character per character.
    """
    for bom, encoding in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF32_LE, "utf-32"),
        (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if content.startswith(bom):
            return content.decode(encoding, errors="replace").replace("\x00", "\ufffd"), encoding
    try:
        text, encoding = content.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = _decode_legacy(content)
    return text.replace("\x00", "\ufffd"), encoding


def _decode_legacy(content: bytes) -> tuple[str, str]:
    try:
        from charset_normalizer import from_bytes

        best = from_bytes(content[: 1 << 20]).best()
        if best is not None and best.encoding:
            return content.decode(best.encoding, errors="replace"), best.encoding
    except ImportError:  # pragma: no cover - optional
        pass
    return content.decode("cp1252", errors="replace"), "cp1252"


def looks_binary(content: bytes) -> bool:
    """Many control characters in the head of the file: an image, archive or executable."""
    sample = content[:_BINARY_SAMPLE]
    if not sample:
        return False
    if sample.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    controls = len(_CONTROL.findall(sample.decode("latin-1")))
    return controls / len(sample) > 0.05


def extract_document(content: bytes, source_uri: str) -> ExtractedDocument:
    """Extract plain text or Markdown (by extension and content); anything else is an error."""
    name = _name(source_uri)
    suffix = PurePosixPath(name).suffix.lower()
    mime = "text/markdown" if suffix in {".md", ".markdown"} else "text/plain"
    if len(content) > MAX_BYTES:
        return _failed(mime, f"{name}: {len(content)} bytes is over the {MAX_BYTES} byte limit")
    if looks_binary(content):
        return _failed(
            "application/octet-stream",
            f"{name}: binary content (not text); supported here: plain text and Markdown",
        )
    if suffix not in _TEXT_SUFFIXES:
        return _failed(mime, f"{name}: unsupported file type {suffix!r}")
    text, _encoding = decode_text(content)
    title = None
    if mime == "text/markdown" and (match := _MD_TITLE.search(text)):
        title = match.group(1)
    elif text.strip():
        title = text.strip().splitlines()[0][:200]
    return ExtractedDocument(text=text, mime=mime, title=title)
