"""The inbox sensor over an `s3://` prefix (a real S3 API server, moto's): it decides from the
listing alone what waits, reads only the objects of the batch it makes, and registers nothing
when the listing fails midway."""

from __future__ import annotations

from pathlib import Path

import pytest

from seams.errors import StorageError
from seams.orchestration.sensors import look_at_inbox
from seams.resources.postgres import PostgresResource
from seams.settings import InboxSettings
from seams.storage.batches import all_batch_keys, batch_manifest
from tests.support.object_store import Bucket, TroubledStore, use_s3_environment


def test_the_sensor_batches_what_waits_under_a_prefix_once(
    postgres: PostgresResource, bucket: Bucket
) -> None:
    inbox = InboxSettings(path=bucket.uri("inbox"), endpoint_url=bucket.endpoint, min_files=2)
    bucket.put("inbox/a.md", "# A\n\nAlpha.")
    waiting = look_at_inbox(postgres, inbox, set(), seal=False)
    assert waiting.new_batch is None and "1 file waiting" in waiting.reason

    bucket.put("inbox/b.md", "# B\n\nBeta.")
    tick = look_at_inbox(postgres, inbox, set(), seal=False)
    assert tick.new_batch and "2 new files >= min_files=2" in tick.reason
    with postgres.connection() as conn:
        manifest = batch_manifest(conn, tick.new_batch)
        source = conn.execute(
            "SELECT source FROM seams.batches WHERE batch_key = %s", (tick.new_batch,)
        ).fetchone()[0]
    expected = [bucket.uri("inbox/a.md"), bucket.uri("inbox/b.md")]
    assert sorted(e.source_uri for e in manifest) == expected
    assert all(e.version_id and e.etag for e in manifest)
    assert source == f"inbox:{bucket.uri('inbox/')}"

    again = look_at_inbox(postgres, inbox, {tick.new_batch}, seal=False)
    assert again.batch_keys == []  # idempotent: the same object versions never batch twice
    bucket.put("inbox/a.md", "# A\n\nAlpha, second version.")
    sealed = look_at_inbox(postgres, inbox, {tick.new_batch}, seal=True)
    assert sealed.new_batch and "sealed 1 pending file" in sealed.reason


def test_a_listing_that_fails_midway_registers_nothing(
    postgres: PostgresResource, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    use_s3_environment(monkeypatch, tmp_path)
    with TroubledStore("fail_second_page") as troubled:
        inbox = InboxSettings(path="s3://troubled/docs", endpoint_url=troubled.endpoint)
        with pytest.raises(StorageError, match=r"^listing s3://troubled/docs/ failed after 1,000"):
            look_at_inbox(postgres, inbox, set(), seal=True)
    with postgres.connection() as conn:
        assert all_batch_keys(conn) == []
