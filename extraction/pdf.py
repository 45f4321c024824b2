"""PDF: the text layer of each page, with exact page spans.

pypdf (pure Python, no system libraries) in its plain mode: text in content-stream order, which
is the order producers (Word, LaTeX, browsers) write it, so multi-column pages read column by
column rather than across. pdfplumber gave the same text far slower, and pypdfium2's extra speed
would cost a native wheel for time the chunker's embedding dwarfs anyway.

A page without a text layer (a scanned image, or blank) is reported in `warnings`; a PDF where no
page has one is an error that says to run OCR. An encrypted PDF opens when it needs no password
(owner-password-only "protected" files); otherwise it is an error that says so.
"""

from __future__ import annotations

import io

from seams.extraction.document import (
    MIME_PDF,
    ExtractedDocument,
    PagedText,
    clean,
    failed,
    first_line_title,
    page_ranges,
    short_title,
    tidy_lines,
    unreadable,
)
from seams.extraction.limits import Budget, ExtractionLimits
from seams.logs import quieted

_MID_SENTENCE_END = frozenset(",;-–—")


def extract_pdf(content: bytes, name: str, budget: Budget | None = None) -> ExtractedDocument:
    """Text of every page, pages joined by a blank line (or a line break mid-sentence); `budget`
    is checked per page."""
    budget = budget or Budget(ExtractionLimits())
    from pypdf import PasswordType, PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError

    try:
        # pypdf warns per object of a broken file: the outcome is reported instead.
        with quieted("pypdf"):
            reader = PdfReader(io.BytesIO(content), strict=False)
    except Exception as exc:
        return _corrupt(name, exc)
    if reader.is_encrypted:
        try:
            opened = reader.decrypt("")
        except DependencyError as exc:
            return failed(
                MIME_PDF,
                f"{name}: encrypted PDF: its encryption needs the 'cryptography' package "
                f"({exc}); install pypdf[crypto] or remove the protection and add it again",
            )
        except Exception as exc:
            return _corrupt(name, exc)
        if opened == PasswordType.NOT_DECRYPTED:
            return failed(
                MIME_PDF,
                f"{name}: encrypted PDF: it needs a password to open; remove the password "
                "(e.g. `qpdf --decrypt --password=... in.pdf out.pdf`) and add it again",
            )
    try:
        with quieted("pypdf"):
            pages = list(reader.pages)
    except FileNotDecryptedError as exc:  # pragma: no cover - decrypt("") said it worked
        return failed(MIME_PDF, f"{name}: encrypted PDF: {exc}; remove the password first")
    except Exception as exc:
        return _corrupt(name, exc)
    if not pages:
        return failed(MIME_PDF, f"{name}: the PDF has no pages; check the file is complete")

    warnings: list[str] = []
    paged = PagedText()
    empty: list[int] = []
    for number, page in enumerate(pages, start=1):
        budget.check()
        try:
            with quieted("pypdf"):
                raw = page.extract_text() or ""
        except Exception as exc:
            warnings.append(f"page {number}: text could not be read ({type(exc).__name__}: {exc})")
            raw = ""
        text = clean(tidy_lines(raw))
        budget.add_chars(len(text) + 2)
        if not text:
            empty.append(number)
        paged.add_page(number, text, _separator(paged.last_char, text))

    if len(empty) == len(pages):
        return failed(
            MIME_PDF,
            f"{name}: scanned PDF: no text layer on pages {page_ranges(empty)}; run OCR first "
            "(e.g. `ocrmypdf in.pdf out.pdf`) and add the OCRed file",
            warnings,
        )
    if empty:
        warnings.append(
            f"no text layer on pages {page_ranges(empty)} (scanned images or blank pages); "
            "run OCR on the file to include them"
        )
    text = paged.text()
    title = _metadata_title(reader) or first_line_title(text)
    return ExtractedDocument(
        text=text, mime=MIME_PDF, title=title, page_spans=paged.spans, warnings=warnings
    )


def _separator(previous_last: str, next_text: str) -> str:
    """A line break where a sentence runs on to the next page, else a paragraph break.

    A blank line would make the segmenter end the sentence at the page edge; a single line break
    is just a wrapped line to it.
    """
    if not next_text or not previous_last:
        return "\n\n"
    runs_on = previous_last.isalpha() or previous_last in _MID_SENTENCE_END
    return "\n" if runs_on and next_text[0].islower() else "\n\n"


def _metadata_title(reader: object) -> str | None:
    try:
        metadata = reader.metadata  # type: ignore[attr-defined]
        return short_title(metadata.title) if metadata is not None else None
    except Exception:
        return None


def _corrupt(name: str, exc: Exception) -> ExtractedDocument:
    remedy = "re-export or repair it (e.g. `qpdf in.pdf out.pdf`) and add it again"
    return unreadable(MIME_PDF, "PDF", name, exc, remedy)
