"""Chunk ids: sha256 of document_id + ":" + normalised text; repeats numbered from the 2nd."""

from __future__ import annotations

import hashlib

import pytest

from seams.chunking import assign_chunk_ids, chunk_id, normalise_text


def sha(payload: str) -> str:
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def test_normalisation_is_nfc_collapsed_whitespace_stripped_case_kept():
    assert normalise_text("  Cafe\u0301 \n\t au  lait\r\n") == "Café au lait"
    assert normalise_text("A  B") == normalise_text("A\nB")
    assert normalise_text("Case") != normalise_text("case")


def test_id_is_the_namespaced_hash():
    assert chunk_id("doc-1", "Hello  world") == sha("doc-1:Hello world")
    assert chunk_id("doc-1", "Hello world", occurrence=3) == sha("doc-1:3:Hello world")
    with pytest.raises(ValueError):
        chunk_id("doc-1", "x", occurrence=0)


def test_same_text_in_other_documents_gets_other_ids():
    assert chunk_id("a", "Boilerplate.") != chunk_id("b", "Boilerplate.")


def test_repeats_within_a_document_are_numbered_first_keeps_plain_form():
    ids = assign_chunk_ids("d", ["Header", "Body one", "Header", "Header ", "Body two"])
    assert ids[0] == sha("d:Header")
    assert ids[2] == sha("d:2:Header")
    assert ids[3] == sha("d:3:Header")  # equal after normalisation counts as a repeat
    assert len(set(ids)) == 5
    assert ids == assign_chunk_ids("d", ["Header", "Body one", "Header", "Header ", "Body two"])


def test_lone_surrogates_do_not_crash_hashing():
    assert len(chunk_id("d", "bad \ud800 text")) == 64
