"""Plain text and Markdown: decode bytes of unknown encoding into `str`, character for character.

The text is kept exactly as decoded, except NUL bytes, which are removed with a warning (never
content, and PostgreSQL cannot store them; UTF-16/32 files keep theirs, they are part of the
characters). Lone surrogates become U+FFFD, one character each. So what the chunker sees is the
file and offsets mean the same thing everywhere downstream.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, replace

from seams.errors import counted
from seams.extraction.document import (
    MIME_MARKDOWN,
    ExtractedDocument,
    clean,
    failed,
    first_line_title,
)
from seams.extraction.limits import Budget, ExtractionLimits

_BINARY_SAMPLE = 8192
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f]")
_UNREADABLE = re.compile(r"[\ufffd\x00-\x08\x0e-\x1f]")
_MD_TITLE = re.compile(r"^\s{0,3}#\s+(.+?)\s*#*\s*$", re.MULTILINE)
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_LEGACY_SAMPLE = 1 << 20
# More undecodable or control characters than this share: not text in any encoding we tried.
_MAX_UNREADABLE_SHARE = 0.10
# UTF-8 with corrupt bytes, not a legacy code page: at least one valid multi-byte sequence of a
# common kind (legacy text almost never forms one) and invalid sequences in at most this share of
# the bytes (a UTF-8 file with 1.2 % corrupt bytes must not be read as cp1250).
_UTF8_MAX_INVALID_SHARE = 0.02
_REPLACEMENT_UTF8 = "\ufffd".encode()


@dataclass(frozen=True)
class Decoded:
    """Text decoded from bytes: the encoding used and how many characters became U+FFFD.

    `plausible` is False when no encoding fitted and cp1252 was used as a last resort: the bytes
    are mis-encoded text or binary, and the text is likely garbage. `nul_removed` counts the NUL
    bytes taken out before decoding (8-bit encodings only).
    """

    text: str
    encoding: str
    replaced: int
    plausible: bool = True
    nul_removed: int = 0


def decode_text(content: bytes) -> Decoded:
    """Decode bytes of unknown encoding: BOM, UTF-16 without BOM, UTF-8, a detector, cp1252.

    NUL bytes of 8-bit text are removed first (counted in `nul_removed`), so a few of them can
    neither make the file look mis-encoded nor reach the database. UTF-8 with a few corrupt bytes
    stays UTF-8 (bad bytes become U+FFFD) rather than being re-read as a legacy code page, which
    would garble every correct multi-byte character (`Café` -> `CafĂŠ`).
    """
    for bom, encoding in _BOMS:
        if content.startswith(bom):
            return _decode(content, encoding)
    utf16 = _bomless_utf16(content)
    if utf16:
        return _decode(content, utf16)
    nuls = content.count(0)
    if nuls:
        content = content.replace(b"\x00", b"")
    try:
        return Decoded(content.decode("utf-8"), "utf-8", 0, nul_removed=nuls)
    except UnicodeDecodeError:
        pass
    as_utf8 = _decode(content, "utf-8")
    chosen = as_utf8 if _mostly_utf8(content, as_utf8) else _decode_legacy(content)
    return replace(chosen, nul_removed=nuls)


def _mostly_utf8(content: bytes, as_utf8: Decoded) -> bool:
    """Whether bytes that are not valid UTF-8 are still UTF-8 text with some corruption.

    Checked before any legacy guess: more valid multi-byte characters than invalid sequences, or
    invalid sequences in at most `_UTF8_MAX_INVALID_SHARE` of the bytes beside at least one valid
    character of a common kind. Legacy text forms a valid pair only by accident, an accented
    capital or `ß` before a quote or dash (cp1252 `ß“` is UTF-8 U+07D3, an NKo letter): those
    land in U+0250-U+07FF, which is why only Latin letters and symbols (U+00A0-U+024F) and
    characters of three or four bytes count as evidence.
    """
    invalid = as_utf8.replaced - content.count(_REPLACEMENT_UTF8)  # U+FFFD of the text itself
    non_ascii = [ch for ch in as_utf8.text if ch > "\x7f" and ch != "\ufffd"]
    if len(non_ascii) > invalid:
        return True
    common = any("\u00a0" <= ch <= "\u024f" or ch >= "\u0800" for ch in non_ascii)
    return common and invalid <= _UTF8_MAX_INVALID_SHARE * len(content)


def _decode(content: bytes, encoding: str) -> Decoded:
    text = content.decode(encoding, errors="replace")
    return Decoded(text, encoding, text.count("\ufffd"))


def _bomless_utf16(content: bytes) -> str | None:
    """UTF-16 without a BOM: NUL in nearly every other byte (Latin-script text), one side only."""
    sample = content[:_BINARY_SAMPLE]
    half = len(sample) // 2
    if half < 4:
        return None
    even = sample[0 : 2 * half : 2].count(0) / half
    odd = sample[1 : 2 * half : 2].count(0) / half
    if odd > 0.4 and even < 0.05:
        return "utf-16-le"
    if even > 0.4 and odd < 0.05:
        return "utf-16-be"
    return None


def _decode_legacy(content: bytes) -> Decoded:
    """charset-normalizer's least chaotic reading; among equally clean ones cp1252 (on short
    text the detector cannot tell Western code pages apart, and cp1252 is the common one)."""
    from charset_normalizer import from_bytes

    matches = list(from_bytes(content[:_LEGACY_SAMPLE]))
    if not matches:
        fallback = _decode(content, "cp1252")
        return Decoded(fallback.text, fallback.encoding, fallback.replaced, plausible=False)
    cleanest = min(m.chaos for m in matches)
    tied = [m.encoding for m in matches if m.chaos <= cleanest]
    encoding = "cp1252" if "cp1252" in tied else tied[0]
    return _decode(content, encoding)


def looks_binary(content: bytes) -> bool:
    """Many control characters in the head of the file: an image, archive or executable."""
    sample = content[:_BINARY_SAMPLE]
    if not sample or sample.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    if _bomless_utf16(sample):
        return False
    controls = len(_CONTROL.findall(sample.decode("latin-1")))
    return controls / len(sample) > 0.05


def nul_warning(count: int) -> list[str]:
    """The per-document warning for removed NUL bytes (none when there were none)."""
    if not count:
        return []
    return [f"{counted(count, 'NUL byte')} removed (not text, and PostgreSQL cannot store them)"]


def extract_plain(
    content: bytes, name: str, mime: str, budget: Budget | None = None
) -> ExtractedDocument:
    """Plain text or Markdown (`mime` decides only the title rule and the recorded type)."""
    budget = budget or Budget(ExtractionLimits())
    decoded = decode_text(content)
    budget.check()
    if not decoded.plausible:
        return failed(
            mime,
            f"{name}: mis-encoded text: no character encoding fits its bytes; save it as UTF-8 "
            "text and add it again",
        )
    text = decoded.text
    unreadable = len(_UNREADABLE.findall(text))
    if text and unreadable / len(text) > _MAX_UNREADABLE_SHARE:
        return failed(
            mime,
            f"{name}: mis-encoded text: {unreadable} of {len(text)} characters are undecodable "
            f"as {decoded.encoding} or control codes; save it as UTF-8 text or in a supported "
            "format (PDF, DOCX, HTML)",
        )
    warnings = nul_warning(decoded.nul_removed)
    if decoded.replaced:
        warnings.append(
            f"{decoded.replaced} undecodable byte sequence(s) replaced with U+FFFD "
            f"(read as {decoded.encoding}); re-save the file as UTF-8 to keep them"
        )
    text = clean(text)
    title = None
    if mime == MIME_MARKDOWN and (match := _MD_TITLE.search(text)):
        title = match.group(1)[:200]
    else:
        title = first_line_title(text)
    return ExtractedDocument(text=text, mime=mime, title=title, warnings=warnings)
