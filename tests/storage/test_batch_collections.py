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
