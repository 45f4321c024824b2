"""One document over a limit fails alone, at once, naming the limit; nothing else notices
(issue 19: zip bombs, a 55 MB-XML DOCX, 1,000-level HTML, mostly-UTF-8 text, NUL bytes).

Every hostile input is made here: the zip bomb is a real, valid zip (CRCs right) whose
`word/document.xml` inflates to 1.07 GiB from 4.3 MiB, built by compressing a 1 MiB block once
and repeating the compressed segment (each ends in a full flush, so it stands alone).
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path
from urllib.parse import unquote, urlsplit

import dagster as dg
import docx as python_docx
import pytest

from seams.errors import ConfigError
from seams.extraction import ExtractionLimits, extract_document
from seams.extraction.containers import declared_directory
from seams.extraction.html_depth import MAX_DEPTH
from seams.orchestration import runner
from tests.support.databases import rows
from tests.support.samples import SHORT_DOC, run_path

PARAGRAPH = (
    b"<w:p><w:r><w:t>" + b"all work and no play makes jack a dull boy " * 20 + b"</w:t></w:r></w:p>"
)
BLOCK = PARAGRAPH * (2**20 // len(PARAGRAPH))  # ~1 MiB of body XML
CONTENT_TYPES = (
    b'<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/'
    b'package/2006/content-types"><Default Extension="rels" ContentType="application/'
    b'vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType='
    b'"application/xml"/><Override PartName="/word/document.xml" ContentType="application/'
    b'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
)
RELS = (
    b'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats'
    b'.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.'
    b'openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
    b'Target="word/document.xml"/></Relationships>'
)
DOCUMENT_HEAD = (
    b'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.'
    b'org/wordprocessingml/2006/main"><w:body>'
)
DOCUMENT_TAIL = b"</w:body></w:document>"


def _deflated(parts: list[tuple[bytes, int]]) -> tuple[bytes, int, int]:
    """(raw deflate data, crc32, size) of the concatenation of `part * copies` for each part,
    compressing each part once and repeating its fully flushed segment."""
    data, crc, size = [], 0, 0
    for part, copies in parts:
        compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
        segment = compressor.compress(part) + compressor.flush(zlib.Z_FULL_FLUSH)
        data.append(segment * copies)
        for _ in range(copies):
            crc = zlib.crc32(part, crc)
        size += len(part) * copies
    data.append(zlib.compressobj(9, zlib.DEFLATED, -15).flush(zlib.Z_FINISH))
    return b"".join(data), crc, size


def _zip(members: list[tuple[str, tuple[bytes, int, int]]]) -> bytes:
    """A zip of deflated members, written by hand (zipfile would compress the whole size)."""
    out, central = io.BytesIO(), []
    for name, (data, crc, size) in members:
        offset, encoded = out.tell(), name.encode()
        sizes = (crc, len(data), size, len(encoded))
        out.write(struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0, *sizes, 0))
        out.write(encoded + data)
        header = struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0, *sizes,
                             0, 0, 0, 0, 0, offset)  # fmt: skip
        central.append(header + encoded)
    directory = b"".join(central)
    start = out.tell()
    out.write(directory)
    count = len(central)
    out.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, count, count, len(directory), start, 0))
    return out.getvalue()


def docx_with_body_of(mebibytes: int) -> bytes:
    """A valid DOCX whose body XML is `mebibytes` MiB of repeated paragraphs."""
    body = _deflated([(DOCUMENT_HEAD, 1), (BLOCK, mebibytes), (DOCUMENT_TAIL, 1)])
    return _zip([
        ("[Content_Types].xml", _deflated([(CONTENT_TYPES, 1)])),
        ("_rels/.rels", _deflated([(RELS, 1)])),
        ("word/document.xml", body),
    ])  # fmt: skip


def small_docx(text: str) -> bytes:
    document = python_docx.Document()
    document.add_heading("A small report", level=1)
    document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def deep_html(levels: int) -> bytes:
    """`levels` nested divs, each with its own word, and a paragraph after them all."""
    opened = "".join(f"<div>word{i} " for i in range(levels))
    return f"<html><body>{opened}{'</div>' * levels}<p>The end.</p></body></html>".encode()


def mostly_utf8(nul_bytes: int = 0) -> bytes:
    """~6 KB of UTF-8 with one `Café`, 20 invalid byte runs and optionally NUL bytes."""
    text = bytearray(("Plain words in a sentence. " * 220 + "Café au lait. ").encode())
    for k in range(20):
        text[200 + k * 250] = 0xFF
    for k in range(nul_bytes):
        text.insert(300 + k * 250, 0)
    return bytes(text)


@pytest.fixture(scope="module")
def bomb() -> bytes:
    content = docx_with_body_of(1100)
    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        declared = sum(info.file_size for info in archive.infolist())
    assert declared >= 2**30 and len(content) < 5 * 2**20  # >= 1 GiB from a few MiB
    return content


@pytest.fixture
def no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    """python-docx must never be asked to open (decompress) an over-limit container."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("python-docx opened a container over a limit")

    monkeypatch.setattr(python_docx, "Document", refuse)


# --- one document at a time ------------------------------------------------------------------


def test_a_zip_bomb_docx_fails_from_its_directory_without_decompressing(
    bomb: bytes, no_parsing: None
) -> None:
    doc = extract_document(bomb, "file:///inbox/bomb.docx")
    assert doc.text == "" and doc.error is not None
    assert doc.error.startswith("bomb.docx: the zip container unpacks to 1.1 GiB")
    assert "extraction.zip_uncompressed_bytes_max = 512.0 MiB" in doc.error
    assert "raise extraction.zip_uncompressed_bytes_max in seams.yaml" in doc.error


def test_a_docx_with_55_mb_of_xml_fails_without_parsing(no_parsing: None) -> None:
    content = docx_with_body_of(55)
    assert len(content) < 300 * 1024  # a small file
    doc = extract_document(content, "big-xml.docx")
    assert doc.error is not None and "55.0 MiB" in doc.error
    assert "extraction.zip_xml_bytes_max" in doc.error


def test_a_zip_with_too_many_members_fails_from_its_end_record(no_parsing: None) -> None:
    members = [("word/document.xml", _deflated([(DOCUMENT_HEAD + DOCUMENT_TAIL, 1)]))]
    members += [(f"word/media/image{i}.png", _deflated([(b"x", 1)])) for i in range(12)]
    content = _zip(members)
    assert declared_directory(content)[0] == 13  # read from the end record alone
    doc = extract_document(content, "many.docx", ExtractionLimits(zip_members_max=10))
    assert doc.error is not None and "13 members" in doc.error
    assert "extraction.zip_members_max = 10" in doc.error


def test_a_genuine_docx_passes_the_same_checks() -> None:
    doc = extract_document(small_docx("Tides rise twice a day."), "report.docx")
    assert doc.error is None and "Tides rise twice a day." in doc.text


@pytest.mark.parametrize(
    ("content", "name"),
    [
        (b"Plain text. " * 100, "note.txt"),
        (deep_html(10), "page.html"),
        (small_docx("Some words. " * 50), "report.docx"),
    ],
)
def test_the_wall_clock_budget_fails_a_document_naming_the_limit(content: bytes, name: str) -> None:
    doc = extract_document(content, name, ExtractionLimits(seconds_max=1e-9))
    assert doc.error is not None and doc.text == ""
    assert doc.error.startswith(f"{name}: extraction took longer than 1e-09 s")
    assert "raise extraction.seconds_max in seams.yaml" in doc.error


def test_the_character_cap_fails_a_document_naming_the_limit() -> None:
    doc = extract_document(b"word " * 1000, "long.txt", ExtractionLimits(chars_max=4999))
    assert doc.error is not None and "more than 4,999 characters" in doc.error
    assert "extraction.chars_max" in doc.error
    assert (
        extract_document(b"word " * 1000, "ok.txt", ExtractionLimits(chars_max=5000)).error is None
    )


@pytest.mark.parametrize(
    "bad", [{"chars_max": 0}, {"seconds_max": -1.0}, {"zip_members_max": True},
            {"zip_xml_bytes_max": 1.5}, {"file_bytes_max": "10"}],
)  # fmt: skip
def test_limits_reject_values_that_are_not_positive_numbers(bad: dict[str, object]) -> None:
    (field,) = bad
    with pytest.raises(ConfigError, match=f"extraction.{field}="):
        ExtractionLimits(**bad)  # type: ignore[arg-type]


def test_html_nested_1000_levels_keeps_all_its_text_with_a_warning() -> None:
    doc = extract_document(deep_html(1000), "deep.html")
    assert doc.error is None
    words = doc.text.split()
    assert [w for w in words if w.startswith("word")] == [f"word{i}" for i in range(1000)]
    assert words[-2:] == ["The", "end."]
    assert len(doc.warnings) == 1 and f"deeper than {MAX_DEPTH} levels" in doc.warnings[0]


def test_html_of_ordinary_depth_is_not_flattened() -> None:
    doc = extract_document(deep_html(MAX_DEPTH - 3), "fine.html")  # + html, body, the last div
    assert doc.error is None and doc.warnings == []


def test_mostly_utf8_text_stays_utf8_with_a_warning_counting_the_bad_bytes() -> None:
    doc = extract_document(mostly_utf8(), "notes.txt")
    assert doc.error is None
    assert "Café au lait." in doc.text and "CafĂŠ" not in doc.text
    assert doc.text.count("\ufffd") == 20
    assert doc.warnings == [
        "20 undecodable byte sequence(s) replaced with U+FFFD (read as utf-8); "
        "re-save the file as UTF-8 to keep them"
    ]


def test_nul_bytes_are_stripped_with_a_warning_not_a_rejection() -> None:
    doc = extract_document(mostly_utf8(nul_bytes=12), "notes.txt")
    assert doc.error is None
    assert "\x00" not in doc.text and "Café au lait." in doc.text
    assert doc.text.count("\ufffd") == 20  # the NULs left no trace
    assert doc.warnings[0] == "12 NUL bytes removed (not text, and PostgreSQL cannot store them)"
    assert "20 undecodable" in doc.warnings[1]


def test_utf8_with_over_one_percent_of_latin1_bytes_stays_utf8_with_a_warning() -> None:
    # A Latin-1 snippet pasted into a UTF-8 file: 1.2 % of the bytes invalid, one valid `Café`.
    # Before: read as cp1250 (`CafĂ©`), no warning.
    text = bytearray(("Plain words in a sentence. " * 220 + "Café au lait. ").encode())
    bad = round(0.012 * len(text))
    for k in range(bad):
        text[100 + k * 80] = 0xE9  # `é` in Latin-1
    doc = extract_document(bytes(text), "pasted.txt")
    assert doc.error is None
    assert "Café au lait." in doc.text and "Ă" not in doc.text
    assert doc.text.count("\ufffd") == bad
    assert doc.warnings == [
        f"{bad} undecodable byte sequence(s) replaced with U+FFFD (read as utf-8); "
        "re-save the file as UTF-8 to keep them"
    ]


def test_legacy_text_with_an_accidental_utf8_pair_keeps_its_code_page() -> None:
    # cp1252 German prose (~1.5 % umlauts) quoting „Fuß“: `ß“` is the valid UTF-8 pair DF 93.
    prose = "Der Wagen fährt über die Brücke. Alle Leute gehen nach Hause. " * 30
    content = (prose + "Er sagte „Fuß“ und ging.").encode("cp1252")
    assert "\u07d3" in content.decode("utf-8", errors="replace")
    doc = extract_document(content, "brief.txt")
    assert doc.error is None and not doc.warnings
    assert "„Fuß“" in doc.text and "fährt über die Brücke" in doc.text


def test_a_legacy_encoded_file_is_still_read_as_its_code_page() -> None:
    doc = extract_document("Café crème, naïve façade.\n".encode("cp1252") * 5, "old.txt")
    assert doc.error is None and "Café crème, naïve façade." in doc.text and not doc.warnings


# --- in a batch --------------------------------------------------------------------------------


@pytest.mark.slow
def test_documents_over_limits_fail_alone_and_the_batch_is_chunked(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    tmp_path: Path,
    database_url: str,
    bomb: bytes,
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "bomb.docx").write_bytes(bomb)
    (inbox / "big-xml.docx").write_bytes(docx_with_body_of(55))
    (inbox / "deep.html").write_bytes(deep_html(1000))
    (inbox / "mostly-utf8.txt").write_bytes(mostly_utf8(nul_bytes=3))
    (inbox / "tides.md").write_text(SHORT_DOC)
    (inbox / "report.docx").write_bytes(small_docx("The harbour master keeps the tide tables."))
    summary = run_path(instance, inbox, lambda _message: None, defs=defs)
    assert len(summary.batches) == 1

    extracted = {
        Path(unquote(urlsplit(uri).path)).name: (error, warnings)
        for uri, error, warnings in rows(
            database_url, "SELECT source_uri, error, warnings FROM seams.extracted_text"
        )
    }
    chunked = {
        Path(unquote(urlsplit(uri).path)).name
        for (uri,) in rows(
            database_url,
            "SELECT DISTINCT e.source_uri FROM seams.chunks c JOIN seams.extracted_text e"
            " USING (batch_key, document_id)",
        )
    }
    assert "extraction.zip_uncompressed_bytes_max" in extracted["bomb.docx"][0]
    assert "extraction.zip_xml_bytes_max" in extracted["big-xml.docx"][0]
    assert chunked == {"deep.html", "mostly-utf8.txt", "tides.md", "report.docx"}
    assert any("flattened" in w for w in extracted["deep.html"][1])
    assert any("NUL" in w for w in extracted["mostly-utf8.txt"][1])


@pytest.mark.slow
def test_an_interrupted_batch_resumes_after_its_finished_steps_without_re_extracting(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    tmp_path: Path,
    database_url: str,
    bomb: bytes,
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "bomb.docx").write_bytes(bomb)
    (inbox / "tides.md").write_text("# Tides\n\nThe tide rises twice a day along this coast.\n")
    keys = runner.register_path(inbox, lambda _message: None, defs=defs)
    extracted = dg.AssetKey("extracted_text")
    # A run that stopped after extraction: the batch is unfinished (no chunks).
    runner.materialize_batches(
        instance,
        keys,
        print,
        runner.RunSummary(batches=keys),
        asset_selection=[extracted],
        defs=defs,
    )
    assert rows(database_url, "SELECT count(*) FROM seams.chunks") == [(0,)]

    said: list[str] = []
    runner.materialize_batches(
        instance, keys, said.append, runner.RunSummary(batches=keys), defs=defs, resume=keys
    )
    assert f"batch {keys[0]}: resuming at sentence_candidates" in said, said
    assert len(instance.fetch_materializations(extracted, limit=10).records) == 1  # not redone
    (failed,) = rows(database_url, "SELECT error FROM seams.extracted_text WHERE error IS NOT NULL")
    assert "zip_uncompressed_bytes_max" in failed[0]
    assert rows(database_url, "SELECT count(DISTINCT document_id) FROM seams.chunks") == [(1,)]
