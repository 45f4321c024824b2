"""Document extraction: each format's text and structure, page spans, and every bad-file case.

Fixtures are made here with the libraries (fpdf2 for PDFs, python-docx for DOCX), so what each
test feeds in is visible next to what it expects.
"""

from __future__ import annotations

import codecs
import io
import re
import zipfile

import pytest

from seams.chunking import ChunkingConfig, chunk_text, segment
from seams.extraction import MAX_BYTES, ExtractedDocument, detect_mime, extract_document

fpdf = pytest.importorskip("fpdf", reason="fpdf2 (dev extra) makes the test PDFs")
docx = pytest.importorskip("docx")
pypdf = pytest.importorskip("pypdf")

PAGE_TOPICS = {
    1: [
        "Cats sleep for most of the day in warm corners of the house.",
        "A cat grooms its fur with a rough tongue after every meal.",
        "Kittens learn to hunt by watching their mother stalk small prey.",
    ],
    2: [
        "Rockets burn liquid fuel with oxygen to lift payloads into orbit.",
        "The second stage of a rocket ignites after the first stage separates.",
        "Engineers test each rocket engine on a stand before any launch.",
    ],
    3: [
        "Gardens need rich soil, steady water and plenty of sunlight.",
        "A gardener plants tomatoes in spring after the last frost has passed.",
        "Compost feeds garden beds with nutrients from kitchen scraps.",
    ],
}


def pages_quoted(chunk_text: str) -> set[int]:
    """The pages whose sentences appear (even in part) in a chunk's text."""
    flat = " ".join(chunk_text.split())
    return {
        page
        for page, sentences in PAGE_TOPICS.items()
        if any(s in flat or flat in s for s in sentences)
    }


def make_pdf(pages: list[list[str]], title: str | None = None) -> bytes:
    """A PDF with one page per entry, each paragraph of the entry a `multi_cell`."""
    pdf = fpdf.FPDF()
    if title:
        pdf.set_title(title)
    pdf.set_font("Helvetica", size=11)
    for paragraphs in pages:
        pdf.add_page()
        for paragraph in paragraphs:
            pdf.multi_cell(0, 6, paragraph, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(4)
    return bytes(pdf.output())


def three_page_pdf() -> bytes:
    return make_pdf([[" ".join(PAGE_TOPICS[p])] for p in (1, 2, 3)], title="Three topics")


def page_text(doc: ExtractedDocument, page: int) -> str:
    [(start, end)] = [(s, e) for p, s, e in doc.page_spans or [] if p == page]
    return doc.text[start:end]


# --- plain text and Markdown -------------------------------------------------------------------
def test_utf8_markdown_keeps_its_text_and_title():
    source = "# Guide\n\nIntro paragraph.\n\n- one\n- two\n"
    doc = extract_document(source.encode(), "docs/guide.md")
    assert doc.error is None and doc.text == source
    assert doc.mime == "text/markdown" and doc.title == "Guide"
    assert doc.page_spans is None and doc.warnings == []


@pytest.mark.parametrize(
    ("content", "encoding"),
    [
        (codecs.BOM_UTF8 + "Grüße aus Köln.".encode(), "utf-8-sig"),
        ("Grüße aus Köln.".encode("utf-16"), "utf-16 (BOM)"),
        ("Grüße aus Köln.".encode("utf-16-le"), "utf-16-le (no BOM)"),
        ("Grüße aus Köln, schöne Straße, Bäckerei.".encode("cp1252"), "cp1252"),
        ("Grüße aus Köln: 5 € — très cher, déjà vu.".encode("cp1252"), "cp1252 (French)"),
    ],
)
def test_plain_text_in_any_encoding_decodes_to_the_same_str(content, encoding):
    doc = extract_document(content, "note.txt")
    assert doc.error is None, encoding
    assert doc.text.startswith("Grüße aus Köln"), (encoding, doc.text)
    assert doc.mime == "text/plain"


def test_utf8_with_a_corrupt_byte_stays_utf8_and_warns():
    content = "Größe: 5 µm — ok. Straße.".encode() + b"\xff" + b" Ende."
    doc = extract_document(content, "note.txt")
    assert doc.error is None
    assert doc.text == "Größe: 5 µm — ok. Straße.\ufffd Ende."
    assert len(doc.warnings) == 1 and "U+FFFD" in doc.warnings[0]


def test_nul_bytes_are_removed_with_a_warning():
    doc = extract_document(b"abc\x00def. More text here.", "nul.txt")
    assert doc.error is None
    assert doc.text == "abcdef. More text here."
    assert doc.warnings == ["1 NUL byte removed (not text, and PostgreSQL cannot store them)"]


def test_text_with_a_pdf_extension_is_read_as_text_with_a_warning():
    doc = extract_document(b"Just a note, not a PDF at all.", "report.pdf")
    assert doc.error is None and doc.mime == "text/plain"
    assert doc.text == "Just a note, not a PDF at all."
    assert "named .pdf" in doc.warnings[0]


# --- HTML --------------------------------------------------------------------------------------
PAGE = """<!DOCTYPE html>
<html><head><title>Release notes</title>
<style>body { color: red }</style><script>var tracking = "noise";</script></head>
<body>
<nav><a href="/">Home</a> | <a href="/docs">Docs</a></nav>
<header><p>Site banner text</p></header>
<main>
  <h1>Release 2.0</h1>
  <p>This release changes   the storage
     layer.<br>It is faster.</p>
  <h2>Upgrade steps</h2>
  <p>Follow these steps in order:</p>
  <ol><li>Stop the server.</li><li>Back up the <b>data</b> folder.
      <ul><li>Check the backup.</li></ul></li><li>Start the new version.</li></ol>
  <table>
    <thead><tr><th>Setting</th><th>Old</th><th>New</th></tr></thead>
    <tbody><tr><td>cache</td><td>64 MB</td><td>256 MB</td></tr>
    <tr><td>threads | cores</td><td colspan="2">auto</td></tr></tbody>
  </table>
  <pre><code class="language-bash">seams run --all
</code></pre>
  <div hidden>secret hidden text</div>
</main>
<footer>Copyright footer</footer>
</body></html>"""


def test_html_main_text_headings_lists_and_tables_without_noise():
    doc = extract_document(PAGE.encode(), "notes.html")
    assert doc.error is None and doc.mime == "text/html" and doc.title == "Release notes"
    expected = (
        "# Release 2.0\n\n"
        "This release changes the storage layer.\nIt is faster.\n\n"
        "## Upgrade steps\n\n"
        "Follow these steps in order:\n\n"
        "1. Stop the server.\n"
        "2. Back up the data folder.\n"
        "   - Check the backup.\n"
        "3. Start the new version.\n\n"
        "| Setting | Old | New |\n"
        "|---|---|---|\n"
        "| cache | 64 MB | 256 MB |\n"
        "| threads \\| cores | auto |  |\n\n"
        "```bash\nseams run --all\n```"
    )
    assert doc.text == expected
    for noise in ("tracking", "color: red", "Home", "banner", "footer", "secret"):
        assert noise not in doc.text


def test_html_table_is_one_table_candidate_and_the_list_follows_its_lead_in():
    doc = extract_document(PAGE.encode(), "notes.html")
    candidates = segment(doc.text)
    kinds = [c.kind for c in candidates]
    assert kinds.count("table") == 1
    [table] = [c for c in candidates if c.kind == "table"]
    assert table.text_of(doc.text).count("\n") == 3  # header, separator, two rows: intact
    lead = next(i for i, c in enumerate(candidates) if "steps in order" in c.text_of(doc.text))
    assert [c.kind for c in candidates[lead + 1 : lead + 4]] == ["list_item"] * 3
    assert candidates[lead].section == candidates[lead + 1].section == "Release 2.0 > Upgrade steps"


def test_html_is_detected_by_content_whatever_the_name():
    doc = extract_document(PAGE.encode(), "download.bin")
    assert doc.error is None and doc.mime == "text/html" and doc.text.startswith("# Release 2.0")
    assert detect_mime(b"  <html><body>x</body></html>") == "text/html"
    assert detect_mime(b"<p>fragment</p>", "page.htm") == "text/html"
    assert detect_mime(b"<p>fragment</p>", "page.txt") == "text/plain"


def test_html_honours_a_declared_legacy_charset():
    page = '<html><head><meta charset="windows-1252"></head><body><p>Café crème</p></body></html>'
    doc = extract_document(page.encode("cp1252"), "menu.html")
    assert doc.text == "Café crème"


# --- PDF ---------------------------------------------------------------------------------------
def test_pdf_pages_have_spans_that_map_to_their_own_text():
    doc = extract_document(three_page_pdf(), "topics.pdf")
    assert doc.error is None and doc.mime == "application/pdf" and doc.warnings == []
    assert doc.title == "Three topics"
    assert [p for p, _, _ in doc.page_spans] == [1, 2, 3]
    for page, sentences in PAGE_TOPICS.items():
        text = " ".join(page_text(doc, page).split())
        assert text == " ".join(sentences)
    starts = [s for _, s, _ in doc.page_spans]
    assert starts == sorted(starts) and doc.page_spans[-1][2] == len(doc.text)


def test_pdf_chunks_get_the_right_page_numbers():
    doc = extract_document(three_page_pdf(), "topics.pdf")
    config = ChunkingConfig(
        size_unit="chars", chunk_size_min=40, chunk_size_target=120, chunk_size_max=200
    )
    chunks = chunk_text(
        doc.text, document_id="topics", config=config, embed=None, page_spans=doc.page_spans
    )
    assert len(chunks) >= 3
    for chunk in chunks:
        pages = set(range(chunk.page_start, chunk.page_end + 1))
        assert pages == pages_quoted(chunk.text), chunk.text
    assert {c.page_start for c in chunks} == {1, 2, 3}


def test_a_sentence_running_over_a_page_edge_is_not_cut_there():
    doc = extract_document(
        make_pdf([["The committee met on Monday and decided that the budget"], ["would grow."]]),
        "split.pdf",
    )
    assert doc.text == "The committee met on Monday and decided that the budget\nwould grow."
    [sentence] = segment(doc.text)
    assert sentence.text_of(doc.text) == doc.text


def test_pdf_page_without_text_layer_is_reported():
    doc = extract_document(make_pdf([["Text on page one."], [], ["Text on page three."]]), "s.pdf")
    assert doc.error is None
    assert doc.page_spans[1][1] == doc.page_spans[1][2]  # page 2: empty span, numbering kept
    assert page_text(doc, 3) == "Text on page three."
    assert any("no text layer on pages 2" in w for w in doc.warnings)


def test_scanned_pdf_with_no_text_at_all_is_an_error():
    doc = extract_document(make_pdf([[], [], []]), "scan.pdf")
    assert doc.text == "" and doc.mime == "application/pdf"
    assert doc.error == (
        "scan.pdf: scanned PDF: no text layer on pages 1-3; run OCR first "
        "(e.g. `ocrmypdf in.pdf out.pdf`) and add the OCRed file"
    )


def _encrypt(content: bytes, user: str, owner: str, algorithm: str) -> bytes:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(content)))
    writer.encrypt(user_password=user, owner_password=owner, algorithm=algorithm)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_password_protected_pdf_is_a_clear_error():
    locked = _encrypt(three_page_pdf(), "secret", "owner", "RC4-128")
    doc = extract_document(locked, "locked.pdf")
    assert doc.text == ""
    assert doc.error.startswith("locked.pdf: encrypted PDF: it needs a password to open")


def test_pdf_protected_only_by_an_owner_password_is_read():
    pytest.importorskip("cryptography", reason="AES needs pypdf[crypto]")
    opened = extract_document(_encrypt(three_page_pdf(), "", "owner", "AES-256"), "p.pdf")
    assert opened.error is None and "Rockets burn" in opened.text


# --- DOCX --------------------------------------------------------------------------------------
def make_docx(build) -> bytes:
    document = docx.Document()
    build(document)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _report(document) -> None:
    document.core_properties.title = "Quarterly report"
    document.add_heading("Quarterly report", level=1)
    document.add_paragraph("Revenue grew in every region this quarter.")
    document.add_heading("Actions", level=2)
    document.add_paragraph("We will do three things next:")
    document.add_paragraph("Hire two engineers.", style="List Bullet")
    document.add_paragraph("Open the Berlin office.", style="List Bullet")
    document.add_paragraph("Review pricing with sales.", style="List Bullet 2")
    document.add_paragraph("First numbered.", style="List Number")
    document.add_paragraph("Second numbered.", style="List Number")
    table = document.add_table(rows=3, cols=3)
    for r, row in enumerate([["Region", "Q1", "Q2"], ["North", "10", "12"], ["South", "7", "9"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.add_paragraph("Closing remarks.")


def test_docx_headings_lists_and_tables_become_markdown():
    doc = extract_document(make_docx(_report), "report.docx")
    assert doc.error is None and doc.title == "Quarterly report"
    assert doc.mime == "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    assert doc.page_spans is None  # no page breaks in the file: no pages claimed
    assert doc.text == (
        "# Quarterly report\n\n"
        "Revenue grew in every region this quarter.\n\n"
        "## Actions\n\n"
        "We will do three things next:\n\n"
        "- Hire two engineers.\n"
        "- Open the Berlin office.\n"
        "  - Review pricing with sales.\n"
        "1. First numbered.\n"
        "2. Second numbered.\n\n"
        "| Region | Q1 | Q2 |\n|---|---|---|\n| North | 10 | 12 |\n| South | 7 | 9 |\n\n"
        "Closing remarks."
    )
    candidates = segment(doc.text)
    assert [c.kind for c in candidates].count("table") == 1
    lead = next(i for i, c in enumerate(candidates) if "three things" in c.text_of(doc.text))
    assert [c.kind for c in candidates[lead + 1 : lead + 7]] == ["list_item"] * 5 + ["table"]


def test_docx_list_stays_with_its_lead_in_sentence_in_one_chunk():
    doc = extract_document(make_docx(_report), "report.docx")
    chunks = chunk_text(doc.text, document_id="r", embed=None)
    [holder] = [c for c in chunks if "three things next" in c.text]
    assert "Hire two engineers." in holder.text and "Review pricing" in holder.text


def _paged(document) -> None:
    document.add_paragraph("Page one talks about cats.")
    document.add_page_break()
    document.add_paragraph("Page two talks about rockets.")
    paragraph = document.add_paragraph("Still page two. ")
    paragraph.add_run().add_break(docx.enum.text.WD_BREAK.PAGE)
    paragraph.add_run("Page three talks about gardens.")


def test_docx_page_breaks_give_page_spans():
    doc = extract_document(make_docx(_paged), "paged.docx")
    assert doc.error is None
    assert [p for p, _, _ in doc.page_spans] == [1, 2, 3]
    assert page_text(doc, 1) == "Page one talks about cats."
    assert page_text(doc, 2) == "Page two talks about rockets.\n\nStill page two."
    assert page_text(doc, 3) == "Page three talks about gardens."
    chunks = chunk_text(
        doc.text,
        document_id="p",
        config=ChunkingConfig(
            size_unit="chars", chunk_size_min=10, chunk_size_target=30, chunk_size_max=60
        ),
        page_spans=doc.page_spans,
    )
    for chunk in chunks:
        topics = {p for p, w in {1: "cats", 2: "rockets", 3: "gardens"}.items() if w in chunk.text}
        assert topics == set(range(chunk.page_start, chunk.page_end + 1)), chunk


def test_docx_prefers_word_rendered_page_breaks_over_explicit_ones():
    from docx.oxml import OxmlElement

    def build(document) -> None:
        _paged(document)  # explicit breaks: cats | rockets | gardens
        last = document.add_paragraph()
        last.add_run().add_break()  # a line break, not a page break
        last.add_run("A closing line.")
        for paragraph in document.paragraphs:  # Word's own layout: breaks elsewhere
            if paragraph.text.startswith(("Page two", "Still")):
                paragraph.runs[0]._r.insert(0, OxmlElement("w:lastRenderedPageBreak"))

    doc = extract_document(make_docx(build), "rendered.docx")
    assert [p for p, _, _ in doc.page_spans] == [1, 2, 3]
    assert page_text(doc, 1) == "Page one talks about cats."
    assert page_text(doc, 2) == "Page two talks about rockets."
    assert page_text(doc, 3) == (
        "Still page two. Page three talks about gardens.\n\nA closing line."
    )


def test_docx_word_numbering_without_list_styles_is_recognised():
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    def build(document) -> None:
        document.add_paragraph("Steps:")
        for text in ("Plug it in.", "Switch it on."):
            paragraph = document.add_paragraph(text, style="List Number")
            ppr = paragraph._p.get_or_add_pPr()
            ppr.remove(ppr.find(qn("w:pStyle")))  # only numPr left, as many editors write it
            numpr = OxmlElement("w:numPr")
            for tag, value in (("w:ilvl", "0"), ("w:numId", _number_id(document))):
                element = OxmlElement(tag)
                element.set(qn("w:val"), value)
                numpr.append(element)
            ppr.append(numpr)

    doc = extract_document(make_docx(build), "steps.docx")
    assert doc.text == "Steps:\n\n1. Plug it in.\n2. Switch it on."


def _number_id(document) -> str:
    """The numId the default template's "List Number" style uses."""
    from docx.oxml.ns import qn

    style = document.styles["List Number"]
    return style.element.pPr.find(qn("w:numPr")).find(qn("w:numId")).get(qn("w:val"))


def test_html_without_main_drops_page_chrome_and_reads_layout_tables_as_text():
    page = (
        "<html><body><header>Logo and menu</header>"
        "<table><tr><td><p>First paragraph of the story.</p><p>Second one.</p></td></tr></table>"
        "<aside>Related links</aside><footer>Imprint</footer></body></html>"
    )
    doc = extract_document(page.encode(), "story.html")
    assert doc.text == "First paragraph of the story.\n\nSecond one."
    assert doc.title == "First paragraph of the story."


# --- bad files ---------------------------------------------------------------------------------
def _zip(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        (b"", "empty.pdf", r"^empty\.pdf: empty file \(0 bytes\)"),
        (b"   \n\t\n", "blank.txt", r"^blank\.txt: empty document \(no text in it\)"),
        (b"%PDF-1.7\n" + b"\x13\x37garbage" * 50, "broken.pdf", r"corrupt or unreadable PDF"),
        (b"PK\x03\x04" + b"\x00" * 100, "broken.docx", r"corrupt zip container"),
        (_zip({"word/document.xml": b"<not-xml"}), "bad.docx", r"corrupt or unreadable DOCX"),
        (_zip({"xl/workbook.xml": b"<x/>"}), "sheet.docx", r"Excel workbook"),
        (_zip({"a.txt": b"hi"}), "files.zip", r"a zip archive, not a DOCX"),
        (bytes(range(256)) * 40, "random.txt", r"binary content, not text"),
        (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, "photo.pdf", r"PNG image; run OCR"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600, "old.doc", r"legacy Office file"),
        (b"{\\rtf1\\ansi hello}", "memo.rtf", r"RTF is not supported"),
    ],
)
def test_bad_files_give_a_clear_error_and_no_text(content, name, message):
    doc = extract_document(content, f"file:///inbox/{name}")
    assert doc.text == ""
    assert doc.error is not None and re.search(message, doc.error), doc.error
    assert doc.error.startswith(name)


def test_mis_encoded_text_is_an_error_not_mojibake():
    doc = extract_document(b"Title: " + bytes(range(128, 256)) * 3, "garbled.txt")
    assert doc.text == "" and doc.error.startswith("garbled.txt: mis-encoded text:")


@pytest.mark.parametrize("good", ["Grüße ", "Grüße " * 40])
def test_undecodable_utf8_beyond_repair_is_an_error(good):
    content = good.encode() + b"\xc3\x28\xa0\xa1\xe2\x28\xa1\xf0\x28\x8c\xbc\xff" * 30
    doc = extract_document(content, "broken.txt")
    assert doc.text == "" and doc.error.startswith("broken.txt: mis-encoded text:"), doc


def test_huge_file_is_refused_by_size_before_any_parsing(monkeypatch):
    import seams.extraction.pdf as pdf_module

    def explode(*_args, **_kwargs):
        raise AssertionError("a parser was called")

    monkeypatch.setattr(pdf_module, "extract_pdf", explode)
    content = b"%PDF-1.7\n" + b"\0" * (MAX_BYTES + 1 - 9)
    doc = extract_document(content, "s3://bucket/huge.pdf")
    assert doc.text == "" and doc.mime == "application/pdf"
    assert doc.error == (
        "huge.pdf: file too large (100.0 MiB), over the limit extraction.file_bytes_max = "
        "100.0 MiB; split it into smaller documents, or raise extraction.file_bytes_max in "
        "seams.yaml if the document is genuine"
    )


def test_truncated_pdf_never_raises():
    content = three_page_pdf()
    for cut in (10, len(content) // 3, len(content) // 2, len(content) - 40):
        doc = extract_document(content[:cut], "cut.pdf")
        assert isinstance(doc, ExtractedDocument)
        assert (doc.error is None) == bool(doc.text)


def test_a_bug_in_an_extractor_becomes_a_per_document_error(monkeypatch):
    import seams.extraction as extraction

    monkeypatch.setattr(extraction, "extract_plain", lambda *a: 1 / 0)
    doc = extract_document(b"hello", "x.txt")
    assert doc.text == "" and "extraction failed unexpectedly (ZeroDivisionError" in doc.error
