"""A file version belongs to the collection it was last registered for: when the settings route
it to another collection (a renamed collection, a new nested one), registering it again moves
it there; registering it again for the same collection makes nothing."""

from __future__ import annotations

from pathlib import Path

from seams.storage.batches import register_batch, scan_inbox, unregistered
from tests.support.databases import fresh_database, migrated_postgres


def test_a_file_routed_to_another_collection_is_registered_again_there(
    pg_server_url: str, tmp_path: Path
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nOne.\n", encoding="utf-8")
    (folder / "b.md").write_text("# B\n\nTwo.\n", encoding="utf-8")
    files, _ = scan_inbox(folder)
    with fresh_database(pg_server_url) as url:
        for postgres in migrated_postgres(url):
            with postgres.connection() as conn:
                first = register_batch(conn, files, source="test", collection="handbook")
                assert first is not None
                assert register_batch(conn, files, source="test", collection="handbook") is None
                assert unregistered(conn, files) == []  # any collection: nothing new
                assert unregistered(conn, files, "manual") == files
                moved = register_batch(conn, files[:1], source="test", collection="manual")
                assert moved is not None and moved != first
                assert unregistered(conn, files, "manual") == files[1:]
                rows = conn.execute(
                    "SELECT batch_key, collection, count(*) FROM seams.batch_documents"
                    " GROUP BY 1, 2 ORDER BY 2"
                ).fetchall()
    assert rows == [(first, "handbook", 2), (moved, "manual", 1)]


def test_new_and_changed_files_are_found_across_query_slices(
    pg_server_url: str, tmp_path: Path, monkeypatch
) -> None:
    """A long listing is decided a slice of documents at a time: slices of two over five files
    find the same new and changed files, in input order, as one query would."""
    from seams.storage import batches

    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(5):
        (folder / f"{i}.md").write_text(f"# Note {i}\n\nText {i}.\n", encoding="utf-8")
    files, _ = scan_inbox(folder)
    with fresh_database(pg_server_url) as url:
        for postgres in migrated_postgres(url):
            with postgres.connection() as conn:
                assert register_batch(conn, files[:3], source="test") is not None
                (folder / "1.md").write_text("# Note 1\n\nChanged.\n", encoding="utf-8")
                again, _ = scan_inbox(folder)
                whole = unregistered(conn, again)
                monkeypatch.setattr(batches, "DECIDE_SLICE", 2)
                assert unregistered(conn, again) == whole
    assert [f.path.name for f in whole] == ["1.md", "3.md", "4.md"]
