"""Turn a source file's bytes into text the chunker reads, or a per-document error (contract).

`extract_document(content, source_uri)` decides the format from the content (magic bytes), not
the name: `%PDF-` is a PDF, a zip with `word/document.xml` is a DOCX, markup that opens with
`<!doctype html>`/`<html>` is HTML, anything else that decodes is plain text (Markdown by name).
A name that disagrees with the content only adds a warning.

Extraction never raises for a bad document: it returns an `ExtractedDocument` with `error` set
(and empty text) that names the file and says what to do, so one corrupt file never stops the
rest of its batch. The same holds for a document over one of the caller's `ExtractionLimits`
(zip bombs, absurd sizes, a wall-clock budget): it fails alone, quickly, naming the limit.
HTML and DOCX come out as Markdown-flavoured text (headings, list items, pipe
tables) because that is the structure `chunking.segment` keeps intact; PDF text carries page
spans that give chunks their `page_start`/`page_end`.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from seams.extraction.containers import check_zip
from seams.extraction.document import (
    MIME_DOCX,
    MIME_HTML,
    MIME_MARKDOWN,
    MIME_PDF,
    MIME_TEXT,
    MIME_UNKNOWN,
    ExtractedDocument,
    failed,
)
from seams.extraction.limits import Budget, ExtractionLimits, LimitExceeded, size_text
from seams.extraction.text import decode_text, extract_plain, looks_binary

__all__ = [
    "MAX_BYTES",
    "ExtractedDocument",
    "ExtractionLimits",
    "decode_text",
    "detect_mime",
    "extract_document",
    "looks_binary",
]

MAX_BYTES = ExtractionLimits().file_bytes_max
_MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdown", ".mkd"}
_HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
_SUFFIX_MIME = {
    ".pdf": MIME_PDF,
    ".docx": MIME_DOCX,
    **dict.fromkeys(_HTML_SUFFIXES, MIME_HTML),
    **dict.fromkeys(_MARKDOWN_SUFFIXES, MIME_MARKDOWN),
}
_HTML_START = re.compile(
    rb"^(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html)\b", re.I | re.S
)
_PDF_HEADER = re.compile(rb"%PDF-\d")
_HTML_TAG = re.compile(rb"<(?:html|head|body)[\s>]", re.I)
# Formats recognised only to say clearly what they are and what to do instead.
_KNOWN_BINARY = (
    (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
        "a legacy Office file (.doc/.xls/.ppt) or a password-"
        "protected Office file; remove the password or save it as .docx",
    ),
    (b"\x89PNG", "a PNG image; run OCR and add the text or an OCRed PDF"),
    (b"\xff\xd8\xff", "a JPEG image; run OCR and add the text or an OCRed PDF"),
    (b"GIF8", "a GIF image; images hold no text to extract"),
    (b"II*\x00", "a TIFF image; run OCR and add the text or an OCRed PDF"),
    (b"MM\x00*", "a TIFF image; run OCR and add the text or an OCRed PDF"),
    (b"\x1f\x8b", "a gzip archive; unpack it and add the documents inside"),
    (b"7z\xbc\xaf", "a 7-Zip archive; unpack it and add the documents inside"),
    (b"\x7fELF", "an executable; not a document"),
    (b"MZ", "a Windows executable; not a document"),
)
_OTHER_ZIPS = (
    ("xl/workbook.xml", "an Excel workbook (.xlsx); export the sheets as CSV or PDF"),
    ("ppt/presentation.xml", "a PowerPoint file (.pptx); export it as PDF"),
    ("content.xml", "an OpenDocument file; save it as .docx or PDF"),
)


def extract_document(
    content: bytes, source_uri: str, limits: ExtractionLimits | None = None
) -> ExtractedDocument:
    """Extract one document (contract). Never raises: a bad file, or one over `limits` (default:
    `ExtractionLimits()`), gives `error` and no text."""
    name = _name(source_uri)
    budget = Budget(limits or ExtractionLimits())
    try:
        return _extract(bytes(content), name, budget)
    except LimitExceeded as exc:
        return failed(
            _SUFFIX_MIME.get(PurePosixPath(name).suffix.lower(), MIME_UNKNOWN), f"{name}: {exc}"
        )
    except Exception as exc:  # the last guard of the contract; a bug, not a bad file
        return failed(
            _SUFFIX_MIME.get(PurePosixPath(name).suffix.lower(), MIME_UNKNOWN),
            f"{name}: extraction failed unexpectedly ({type(exc).__name__}: {exc}); "
            "report this file to the Seams maintainers",
        )


def detect_mime(content: bytes, name: str = "") -> str:
    """The MIME type this module reads `content` as (content first, the name's suffix second)."""
    head = content[:1024]
    pdf = _PDF_HEADER.search(head)
    # The header may follow junk (the spec allows 1 KB of it), but not text: a note *about*
    # PDFs is still a note.
    if pdf and (not head[: pdf.start()].strip() or looks_binary(head[: pdf.start()])):
        return MIME_PDF
    if content.startswith(b"PK\x03\x04"):
        return MIME_DOCX if _zip_member(content, "word/document.xml") else "application/zip"
    stripped = _strip_bom(head).lstrip()
    suffix = PurePosixPath(name).suffix.lower()
    if _HTML_START.match(stripped) or (stripped.startswith(b"<") and _HTML_TAG.search(head)):
        return MIME_HTML
    if suffix in _HTML_SUFFIXES and stripped.startswith(b"<"):
        return MIME_HTML
    return MIME_MARKDOWN if suffix in _MARKDOWN_SUFFIXES else MIME_TEXT


def _extract(content: bytes, name: str, budget: Budget) -> ExtractedDocument:
    suffix = PurePosixPath(name).suffix.lower()
    if not content:
        return failed(
            _SUFFIX_MIME.get(suffix, MIME_UNKNOWN),
            f"{name}: empty file (0 bytes); nothing to extract, check the upload or remove it",
        )
    limits = budget.limits
    if len(content) > limits.file_bytes_max:
        raise LimitExceeded(
            "file_bytes_max",
            f"file too large ({size_text(len(content))})",
            size_text(limits.file_bytes_max),
            "split it into smaller documents",
        )
    if content.startswith(b"PK\x03\x04"):
        check_zip(content, limits)  # before anything (even the MIME probe) decompresses
    mime = detect_mime(content, name)
    if mime == "application/zip":
        return failed(mime, f"{name}: {_zip_kind(content)}")
    if mime in {MIME_TEXT, MIME_MARKDOWN}:
        if content.startswith(b"{\\rtf"):
            return failed(
                "application/rtf", f"{name}: RTF is not supported; save it as .docx or PDF"
            )
        if looks_binary(content):
            for magic, what in _KNOWN_BINARY:
                if content.startswith(magic):
                    return failed(MIME_UNKNOWN, f"{name}: not a supported document: {what}")
            return failed(
                MIME_UNKNOWN,
                f"{name}: binary content, not text; supported formats are plain text, "
                "Markdown, HTML, PDF and DOCX",
            )
    try:
        document = _read(content, name, mime, budget)
        budget.check_chars(len(document.text))
    except LimitExceeded as exc:
        return failed(mime, f"{name}: {exc}")
    if document.error is None and not document.text.strip():
        return failed(
            document.mime,
            f"{name}: empty document (no text in it); check the file has content",
            document.warnings,
        )
    expected = _SUFFIX_MIME.get(suffix)
    mismatch = expected and {expected, document.mime} - {MIME_TEXT, MIME_MARKDOWN}
    if document.error is None and mismatch and expected != document.mime:
        note = f"named {suffix} but the content is {document.mime}; read as {document.mime}"
        document.warnings.insert(0, note)
    return document


def _read(content: bytes, name: str, mime: str, budget: Budget) -> ExtractedDocument:
    if mime == MIME_PDF:
        from seams.extraction.pdf import extract_pdf

        return extract_pdf(content, name, budget)
    if mime == MIME_DOCX:
        from seams.extraction.docx import extract_docx

        return extract_docx(content, name, budget)
    if mime == MIME_HTML:
        from seams.extraction.html import extract_html

        return extract_html(content, name, budget)
    return extract_plain(content, name, mime, budget)


def _name(source_uri: str) -> str:
    """The file name of a path or URI, for messages ("report.pdf"); the URI if it has none."""
    try:
        name = PurePosixPath(unquote(urlsplit(source_uri).path)).name
    except (TypeError, ValueError):
        name = ""
    return name or str(source_uri) or "document"


def _strip_bom(head: bytes) -> bytes:
    for bom in (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff"):
        if head.startswith(bom):
            return head[len(bom) :]
    return head


def _zip_member(content: bytes, member: str) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            return member in archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return False


def _zip_kind(content: bytes) -> str:
    """What a zip that is not a DOCX is, and what to do with it."""
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        return (
            f"corrupt zip container ({exc}); if it is a DOCX, open and re-save it in Word or "
            "LibreOffice and add it again"
        )
    for member, what in _OTHER_ZIPS:
        if member in names:
            return f"not a supported document: {what}"
    return "a zip archive, not a DOCX (no word/document.xml); unpack it and add the documents"
