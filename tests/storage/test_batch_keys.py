"""Batch keys people can tell apart: the creation stamp, the source folder's name, the content
digest; sortable by creation time, safe characters, bounded length."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from seams.storage.batches import SLUG_MAX, SourceFile, batch_key_for, source_slug

SAFE = re.compile(r"^\d{8}-\d{6}-(?:[a-z0-9_-]+-)?[0-9a-f]{8}$")


def _file(name: str, sha: str = "ab" * 32) -> SourceFile:
    uri = f"file:///data/{name}"
    return SourceFile(Path(f"/data/{name}"), uri, f"doc-{name}", sha, 10, 0.0)


@pytest.mark.parametrize(
    ("source", "slug"),
    [
        ("cli:/work/orchestration/sample_corpus", "sample_corpus"),
        ("cli:/data/Q3 Reports", "q3-reports"),
        ("inbox:/srv/seams/inbox", "inbox"),
        ("cli:/data/notes.md", "notes-md"),
        ("cli:/home/ana/Données été", "donnees-ete"),
        ("cli:/data/--[weird]--", "weird"),
        ("cli:/", ""),
        ("test", "test"),
    ],
)
def test_the_slug_is_the_source_folder_name_in_safe_characters(source: str, slug: str) -> None:
    assert source_slug(source) == slug


def test_a_key_carries_the_folder_name_between_the_stamp_and_the_digest() -> None:
    now = datetime(2026, 11, 27, 0, 17, 27, tzinfo=UTC)
    key = batch_key_for([_file("a.md")], now, source="cli:/work/sample_corpus")
    assert re.fullmatch(r"20261127-001727-sample_corpus-[0-9a-f]{8}", key)
    assert SAFE.match(key)
    # Unique by content: the same files under another folder name differ only in the name.
    other = batch_key_for([_file("a.md")], now, source="cli:/elsewhere/x")
    assert other.rsplit("-", 1)[1] == key.rsplit("-", 1)[1]
    assert batch_key_for([_file("a.md", "cd" * 32)], now, source="cli:/w/sample_corpus") != key


def test_keys_stay_bounded_and_sortable_by_creation_time() -> None:
    early = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    late = datetime(2026, 1, 2, 3, 4, 6, tzinfo=UTC)
    long_name = "cli:/data/" + "Z" * 200
    keys = [
        batch_key_for([_file("a.md")], late, source="cli:/data/aaa"),
        batch_key_for([_file("b.md")], early, source=long_name),
    ]
    assert sorted(keys) == keys[::-1]  # the earlier batch first, whatever its name
    assert len(keys[1]) == len("20260102-030405-") + SLUG_MAX + len("-12345678")
    assert all(SAFE.match(k) for k in keys)


def test_a_source_without_a_name_gives_the_old_key_form() -> None:
    now = datetime(2026, 11, 27, 0, 17, 27, tzinfo=UTC)
    assert re.fullmatch(r"20261127-001727-[0-9a-f]{8}", batch_key_for([_file("a.md")], now))
    assert re.fullmatch(
        r"20261127-001727-[0-9a-f]{8}", batch_key_for([_file("a.md")], now, source="cli:/")
    )
