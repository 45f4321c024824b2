"""Hostile and odd input through the whole pipeline, in one batch beside a normal document.

Every document must come out either as chunks that keep every invariant (exact slices, nothing
lost, sizes within bounds unless flagged) or as a clear per-document error in
`seams.extracted_text.error`, and the rest of the batch must not notice. Symlinks that leave the
inbox never get in, and the user is told why.

The big inputs (2 MB without punctuation, a 1 MB sentence) would cost minutes of ONNX inference
on 2 cores, so the all-in-one batch runs with a fast stand-in for the model's inference (a
hashed bag of words, unit vectors, same shapes): everything else (tokenizer, segmentation,
cache, boundaries, assembly, checks, storage) is the real pipeline. The small Unicode cases run
again with the real model in the second test.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import dagster as dg
import numpy as np
import pytest

from seams.models.onnx_runtime import EmbeddingRuntime
from seams.orchestration import runner
from seams.settings import load_settings
from tests.support.databases import rows
from tests.support.invariants import invariant_problems
from tests.support.samples import run_path

TINY_FILES = 300
NO_PUNCTUATION_BYTES = 2_000_000
SENTENCE_BYTES = 1_000_000

UNICODE_DOCS: dict[str, bytes] = {
    "rtl_arabic_hebrew.txt": (
        "اللغة العربية تكتب من اليمين إلى اليسار. تستخدم الحروف المتصلة في الكتابة.\n\n"
        "עברית נכתבת מימין לשמאל. יש בה אותיות סופיות בסוף המילה.\n\n"
        "Mixed: the word שלום means peace, and سلام too. Numbers 123 stay left to right.\n"
    ).encode(),
    "cjk.txt": (
        "日本語の文章です。句読点で文が終わります。東京は日本の首都です。\n\n"
        "中文没有空格。这是第二个句子。北京是中国的首都。\n\n"
        "한국어 문장입니다. 서울은 한국의 수도입니다.\n\n"
        + "漢字" * 2500  # 5000 characters without a space or a full stop: no word boundary
        + "\n"
    ).encode(),
    "emoji_combining.md": (
        "# Emoji 🎉 and friends\n\n"
        "Families 👨‍👩‍👧‍👦 and flags 🇯🇵🇧🇷 are single graphemes. Skin tones 👍🏽 too.\n\n"
        "Combining marks: e\u0301 (e + acute) differs from é; Zalgo: "
        "Z\u0351\u0368a\u0350\u0367l\u036cg\u0346o\u0364\u0363 text.\n\n"
        "Astral plane: 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕸𝖆𝖙𝖍 and 🀄 mahjong.\n"
    ).encode(),
    "zero_width.txt": (
        "Zero\u200bwidth\u200bspaces hide\u200cinside\u200dwords. "
        "A BOM\ufeffin the middle and a soft\u00adhyphen.\n\n"
        "Left\u200eto\u200fright marks \u2060 word joiner.\n"
    ).encode(),
    "only_zero_width.txt": "\u200b\u200c\u200d\u2060\ufeff\u200b".encode(),
    "mixed_newlines.txt": (
        b"First line ends in CRLF.\r\nSecond in CR only.\rThird in LF.\n\n"
        b"A paragraph after a blank line.\r\n\r\nAnother after CRLF CRLF.\r\r"
        b"And one after CR CR.\n"
    ),
    "nul_bytes.txt": b"Text with a NUL\x00byte inside. And another\x00one here.\n",
    "invalid_utf8.txt": (
        "Mostly valid UTF-8: caf\u00e9, na\u00efve, \u00fcber. ".encode() * 3
        + b"Then bad bytes \xff\xfe\xc3 and a truncated \xe2\x82 sequence.\n"
    ),
    "latin1.txt": "Café crème, naïve façade. Résumé of a garçon.\n".encode("latin-1"),
}
ERROR_DOCS: dict[str, tuple[bytes, str]] = {
    "empty.txt": (b"", "empty file"),
    "whitespace_only.txt": (b"  \n\t\r\n   \n", "empty document"),
    "binary_nuls.txt": (b"\x00" * 4000 + b"not text", "binary"),
}
ODD_NAMES = (
    'quote\'s "double"; DROP TABLE seams.chunks;--.txt',
    "new\nline.txt",
    "ünïcödé 名前 🚀.md",
    "$(echo pwned) `id` %41.txt",
    "back\\slash & amp.txt",
)


def _words(rng: random.Random, size: int, separator: str = " ") -> str:
    vocabulary = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
        for _ in range(2000)
    ]
    out, length = [], 0
    while length < size:
        word = rng.choice(vocabulary)
        out.append(word)
        length += len(word) + len(separator)
    return separator.join(out)


def _write(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


def _hashed_bag_of_words(
    self: EmbeddingRuntime, texts: Sequence[str], **_options: Any
) -> np.ndarray:
    """Deterministic unit vectors with the model's shape: a stand-in for ONNX inference."""
    out = np.zeros((len(texts), self.dims), np.float32)
    for row, text in enumerate(texts):
        out[row, 0] = 1e-3  # never a zero vector
        for word in text.lower().split():
            slot = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big")
            out[row, slot % self.dims] += 1.0
    return out / np.linalg.norm(out, axis=1, keepdims=True)


CHUNK_COLUMNS = (
    "document_id", "text", "start_char", "end_char", "overlap_end", "chunk_index",
    "total_chunks", "token_count", "metadata", "boundary_method",
)  # fmt: skip
CHUNKS_QUERY = (
    "SELECT document_id, text, start_char, end_char, overlap_end, chunk_index, total_chunks,"
    " token_count, metadata, boundary_method FROM seams.chunks ORDER BY document_id, chunk_index"
)


def _documents(database_url: str) -> dict[str, dict[str, Any]]:
    """Per source file name: its extracted_text row and its chunks, in chunk order."""
    docs: dict[str, dict[str, Any]] = {}
    by_id: dict[str, dict[str, Any]] = {}
    for doc_id, uri, text, error in rows(
        database_url, "SELECT document_id, source_uri, text, error FROM seams.extracted_text"
    ):
        name = Path(unquote(urlsplit(uri).path)).name
        entry = {"document_id": doc_id, "uri": uri, "text": text, "error": error, "chunks": []}
        docs[name] = by_id[doc_id] = entry
    for values in rows(database_url, CHUNKS_QUERY):
        chunk = dict(zip(CHUNK_COLUMNS, values, strict=True))
        by_id[chunk["document_id"]]["chunks"].append(chunk)
    return docs


def _assert_clean(name: str, doc: dict[str, Any]) -> None:
    assert doc["error"] is None, f"{name!r}: {doc['error']}"
    assert doc["chunks"], f"{name!r}: text but no chunks"
    size_max = load_settings().chunking_config().chunk_size_max
    problems = invariant_problems(doc["text"], doc["chunks"], size_max)
    assert not problems, f"{name!r}: {problems[:5]}"


@pytest.fixture
def hostile_inbox(tmp_path: Path) -> tuple[Path, Path]:
    inbox = tmp_path / "inbox"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("credentials that must not be ingested\n")
    (outside / "folder").mkdir()
    (outside / "folder" / "also_secret.txt").write_text("nor this\n")
    rng = random.Random(20261122)
    shutil.copy(runner.SAMPLE_CORPUS / "kitchen_science.md", _mk(inbox) / "normal.md")
    for name, content in UNICODE_DOCS.items():
        _write(inbox / name, content)
    for name, (content, _) in ERROR_DOCS.items():
        _write(inbox / name, content)
    _write(inbox / "no_punctuation.txt", _words(rng, NO_PUNCTUATION_BYTES).encode())
    sentence = _words(rng, SENTENCE_BYTES, separator=", ").capitalize() + ".\n"
    _write(inbox / "one_sentence.txt", sentence.encode())
    for name in ODD_NAMES:
        _write(inbox / "odd" / name, f"A document named {name!r}. It has two sentences.\n".encode())
    for i in range(TINY_FILES):
        _write(inbox / "tiny" / f"note_{i:03d}.txt", f"Note {i}: the kettle sang.\n".encode())
    os.symlink(outside / "secret.txt", inbox / "escape.txt")
    os.symlink(outside / "folder", inbox / "escape_dir")
    os.symlink(tmp_path / "does-not-exist.txt", inbox / "dangling.txt")
    os.symlink(inbox / "normal.md", inbox / "inside_link.md")  # stays inside: allowed
    return inbox, outside


def _mk(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.mark.slow
def test_one_batch_of_hostile_documents_gives_chunks_or_clear_errors(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    hostile_inbox: tuple[Path, Path],
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inbox, _outside = hostile_inbox
    monkeypatch.setattr(EmbeddingRuntime, "embed", _hashed_bag_of_words)
    reported: list[str] = []
    summary = run_path(instance, inbox, reported.append, defs=defs)
    assert len(summary.batches) == 1  # all in one batch

    # Symlinks that leave the inbox are refused, each with the reason, and nothing of the
    # outside folder is stored.
    for link in ("escape.txt", "dangling.txt"):
        assert any(str(inbox / link) in line and "leaves the inbox" in line for line in reported), (
            link,
            reported,
        )
    stored = {r[0] for r in rows(database_url, "SELECT source_uri FROM seams.batch_documents")}
    assert not any("outside" in uri or "escape" in uri for uri in stored)

    docs = _documents(database_url)
    expected = (
        {"normal.md", "inside_link.md", "no_punctuation.txt", "one_sentence.txt"}
        | set(UNICODE_DOCS) | set(ERROR_DOCS) | set(ODD_NAMES)
        | {f"note_{i:03d}.txt" for i in range(TINY_FILES)}
    )  # fmt: skip
    assert set(docs) == expected

    for name, (_, why) in ERROR_DOCS.items():
        error = docs[name]["error"]
        assert error and name in error and why in error, (name, error)
        assert docs[name]["chunks"] == []
    for name in expected - set(ERROR_DOCS):
        _assert_clean(name, docs[name])

    # The normal document is untouched by its neighbours: semantic boundaries, several chunks.
    normal = docs["normal.md"]
    assert {c["boundary_method"] for c in normal["chunks"]} == {"semantic"}
    assert len(normal["chunks"]) >= 2
    assert normal["text"] == (runner.SAMPLE_CORPUS / "kitchen_science.md").read_text()
    # Odd names are stored verbatim and chunked like any other file.
    for name in ODD_NAMES:
        assert repr(name) in docs[name]["text"]
    for i in range(TINY_FILES):
        (chunk,) = docs[f"note_{i:03d}.txt"]["chunks"]
        assert chunk["text"] == f"Note {i}: the kettle sang."
    # Text is kept character for character (NUL bytes are removed, with a warning).
    assert docs["nul_bytes.txt"]["text"] == "Text with a NULbyte inside. And anotherone here.\n"
    assert "\r" in docs["mixed_newlines.txt"]["text"]
    assert "\u200b" in docs["zero_width.txt"]["text"]
    assert "Café crème" in docs["latin1.txt"]["text"]
    assert (
        "\ufffd" in docs["invalid_utf8.txt"]["text"] and "café" in docs["invalid_utf8.txt"]["text"]
    )
    # Big inputs: bounded chunks that cover the text (a 5000-character CJK run has no word
    # boundary, so it may be split anywhere, but still within the size bound).
    assert len(docs["no_punctuation.txt"]["chunks"]) > 1000
    assert len(docs["one_sentence.txt"]["chunks"]) > 500
    # A symlinked folder that leaves the inbox is refused with a reason too, not passed over
    # in silence (the user must learn why its files were not chunked).
    assert any(
        str(inbox / "escape_dir") in line and "leaves the inbox" in line for line in reported
    ), reported


@pytest.mark.slow
def test_unicode_edge_cases_chunk_with_the_real_model(
    instance: dg.DagsterInstance, defs: dg.Definitions, tmp_path: Path, database_url: str
) -> None:
    inbox = _mk(tmp_path / "inbox")
    for name, content in UNICODE_DOCS.items():
        _write(inbox / name, content)
    run_path(instance, inbox, defs=defs)
    docs = _documents(database_url)
    assert set(docs) == set(UNICODE_DOCS)
    for name, doc in docs.items():
        _assert_clean(name, doc)
    embedded, total = rows(
        database_url, "SELECT count(embedding), count(*) FROM seams.candidate_embeddings"
    )[0]
    assert embedded == total > 0  # the model embedded every candidate: no fallback
