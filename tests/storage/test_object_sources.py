"""Object sources against a real S3 API server (moto's, started by the tests) through the client
code users run: a listing decides what is new without reading a byte, a batch records key,
ETag, version id and sha256, a rerun reads exactly those bytes or fails with one line naming the
object, deleted objects retire their documents, and every failure of the store is one line that
names the bucket (and key)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import boto3
import pytest

from seams.errors import StorageError
from seams.resources.postgres import PostgresResource
from seams.storage import batches
from seams.storage.object_store import ObjectChanged, ObjectGone, ObjectPrefix, ObjectStore
from seams.storage.sources import DocumentReader, ObjectSource
from tests.support.object_store import Bucket, TroubledStore, require_auth, use_s3_environment

LIMIT = 1 << 20


def _source(bucket: Bucket, prefix: str = "docs/", max_bytes: int = LIMIT) -> ObjectSource:
    store = ObjectStore(bucket.endpoint)
    return ObjectSource(ObjectPrefix.parse(bucket.uri(prefix)), store, max_bytes=max_bytes)


def _register(postgres: PostgresResource, source: ObjectSource) -> tuple[str | None, list]:
    scan = source.scan()
    with postgres.connection() as conn:
        pending = batches.unregistered(conn, scan.found, "default")
        key = batches.register_batch(
            conn, source.freeze(pending), source=f"cli:{source.location.uri}"
        )
        retired = source.retire_missing(conn, scan)
    return key, retired


def _read_all(postgres: PostgresResource, bucket: Bucket, key: str) -> dict[str, bytes]:
    with postgres.connection() as conn:
        reader = DocumentReader(conn, endpoint_url=bucket.endpoint, max_bytes=LIMIT)
        return {
            entry.source_uri: reader.read(key, entry) for entry in batches.batch_manifest(conn, key)
        }


def test_a_batch_records_each_object_version_and_a_rerun_reads_those_bytes(
    postgres: PostgresResource, bucket: Bucket
) -> None:
    bucket.put("docs/a.md", "# A\n\nFirst version of a.")
    bucket.put("docs/b.md", "# B\n\nB stays.")
    bucket.put("docs/c.md", "# C\n\nC will be deleted.")
    bucket.put("docs/.draft.md", "hidden: skipped")
    bucket.put("other/x.md", "outside the prefix")
    source = _source(bucket)

    first, retired = _register(postgres, source)
    assert first and not retired
    with postgres.connection() as conn:
        manifest = {e.source_uri: e for e in batches.batch_manifest(conn, first)}
        stored = conn.execute("SELECT count(*) FROM seams.source_files").fetchone()[0]
    assert sorted(manifest) == [bucket.uri(f"docs/{n}.md") for n in "abc"]
    a = manifest[bucket.uri("docs/a.md")]
    assert a.source_sha256 == hashlib.sha256(b"# A\n\nFirst version of a.").hexdigest()
    assert a.etag and a.version_id and a.size_bytes == len(b"# A\n\nFirst version of a.")
    assert stored == 0  # an object's bytes stay in its store

    # Nothing changed: the listing alone says so.
    assert _register(postgres, source) == (None, [])

    # A changed, a deleted and a new object: the changed and the new make the next batch, the
    # deleted one's document is retired.
    bucket.put("docs/a.md", "# A\n\nSecond version of a.")
    bucket.delete("docs/c.md")
    bucket.put("docs/d.md", "# D\n\nNew.")
    second, retired = _register(postgres, source)
    with postgres.connection() as conn:
        uris = sorted(e.source_uri for e in batches.batch_manifest(conn, second))
    assert uris == [bucket.uri("docs/a.md"), bucket.uri("docs/d.md")]
    assert [r.source_uri for r in retired] == [bucket.uri("docs/c.md")]

    # A rerun of the first batch reads the versions it recorded, on a versioned bucket even the
    # overwritten and the deleted object's.
    again = _read_all(postgres, bucket, first)
    assert again[bucket.uri("docs/a.md")] == b"# A\n\nFirst version of a."
    assert again[bucket.uri("docs/c.md")] == b"# C\n\nC will be deleted."


def test_a_changed_object_under_a_frozen_batch_is_refused_with_one_line(
    postgres: PostgresResource, plain_bucket: Bucket
) -> None:
    plain_bucket.put("docs/a.md", "# A\n\nWhat the batch recorded.")
    first, _ = _register(postgres, _source(plain_bucket))
    assert first
    plain_bucket.put("docs/a.md", "# A\n\nChanged behind the batch's back.")
    with pytest.raises(ObjectChanged) as changed:
        _read_all(postgres, plain_bucket, first)
    message = str(changed.value)
    assert "\n" not in message
    assert message.startswith(f"{plain_bucket.uri('docs/a.md')}: changed since batch {first}")
    assert "enable versioning" in message

    plain_bucket.delete("docs/a.md")
    with pytest.raises(ObjectGone, match=rf"^{plain_bucket.uri('docs/a.md')}: the object") as gone:
        _read_all(postgres, plain_bucket, first)
    assert "\n" not in str(gone.value)


def test_a_recorded_version_that_is_gone_is_one_line(
    postgres: PostgresResource, bucket: Bucket
) -> None:
    version = bucket.put("docs/a.md", "# A\n\nRecorded.")["VersionId"]
    first, _ = _register(postgres, _source(bucket))
    bucket.client.delete_object(Bucket=bucket.name, Key="docs/a.md", VersionId=version)
    with pytest.raises(ObjectGone, match=f"version {version} recorded by batch {first} is gone"):
        _read_all(postgres, bucket, first)


def test_an_object_over_the_size_limit_is_refused_unread(bucket: Bucket) -> None:
    bucket.put("docs/big.txt", b"x" * 2048)
    bucket.put("docs/small.txt", b"fine")
    source = _source(bucket, max_bytes=1024)
    scan = source.scan()
    assert [item.source_uri for item in scan.found] == [bucket.uri("docs/small.txt")]
    [refused] = scan.refused
    assert refused.path == bucket.uri("docs/big.txt")
    assert "over the limit extraction.file_bytes_max = 1.0 KiB" in refused.reason
    # refused is not deleted: its document is not retired
    seen = [batches.document_id_for(bucket.uri(f"docs/{n}")) for n in ("small.txt", "big.txt")]
    assert source.seen(scan) == seen


def test_store_failures_are_one_line_naming_the_bucket(
    bucket: Bucket, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = ObjectPrefix.parse(f"s3://{bucket.name}-missing/docs")
    store = ObjectStore(bucket.endpoint)
    with pytest.raises(StorageError, match=rf"no such bucket '{bucket.name}-missing'"):
        list(store.list(missing))

    use_s3_environment(monkeypatch, tmp_path, credentials=False)
    with pytest.raises(StorageError) as no_keys:
        list(ObjectStore(bucket.endpoint).list(ObjectPrefix.parse(bucket.uri("docs/"))))
    assert str(no_keys.value).startswith(f"listing {bucket.uri('docs/')} failed")
    assert "no S3 credentials found: set AWS_ACCESS_KEY_ID" in str(no_keys.value)


@pytest.mark.usefixtures("s3_environment")
def test_throttling_is_retried_with_backoff_then_one_line() -> None:
    with TroubledStore("throttle") as troubled:
        store = ObjectStore(troubled.endpoint)
        with pytest.raises(StorageError) as throttled:
            store.read("s3://troubled/docs/a.md", max_bytes=LIMIT)
    message = str(throttled.value)
    assert message.startswith("reading s3://troubled/docs/a.md failed: the store kept throttling")
    assert "(SlowDown) after 2 attempts" in message  # AWS_MAX_ATTEMPTS=2 in the test environment
    assert troubled.requests == 2


@pytest.mark.usefixtures("s3_environment")
def test_a_listing_that_fails_midway_yields_no_scan() -> None:
    with TroubledStore("fail_second_page") as troubled:
        store = ObjectStore(troubled.endpoint)
        source = ObjectSource(ObjectPrefix.parse("s3://troubled/docs"), store, max_bytes=LIMIT)
        progress: list[str] = []
        with pytest.raises(StorageError, match=r"^listing s3://troubled/docs/ failed after 1,000"):
            source.scan(progress.append)
    assert troubled.requests >= 2


def test_a_prefix_is_a_folder() -> None:
    assert ObjectPrefix.parse("s3://bkt/docs").uri == "s3://bkt/docs/"
    assert ObjectPrefix.parse("s3://bkt").uri == "s3://bkt/"
    assert ObjectPrefix.parse("s3://bkt/docs").holds("s3://bkt/docs/a.md")
    assert not ObjectPrefix.parse("s3://bkt/docs").holds("s3://bkt/docs2/a.md")


def test_access_denied_and_rejected_keys_are_one_line(
    bucket: Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server checks credentials (moto's IAM): a user without a policy is denied, an
    unknown key is rejected; each is one line naming the bucket."""
    prefix = ObjectPrefix.parse(bucket.uri("docs/"))
    with require_auth(bucket.endpoint, unchecked=2):
        iam = boto3.client("iam", endpoint_url=bucket.endpoint, region_name="us-east-1")
        iam.create_user(UserName="nobody")
        key = iam.create_access_key(UserName="nobody")["AccessKey"]
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
        with pytest.raises(StorageError) as denied:
            list(ObjectStore(bucket.endpoint).list(prefix))
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIANOBODYKNOWS")
        with pytest.raises(StorageError) as rejected:
            list(ObjectStore(bucket.endpoint).list(prefix))
    assert str(denied.value) == (
        f"listing {prefix.uri} failed after 0 objects: access denied to bucket {bucket.name}: "
        "the credentials need s3:ListBucket on the bucket and s3:GetObject (and "
        "s3:GetObjectVersion) on its objects"
    )
    assert "the store rejects these S3 credentials (InvalidAccessKeyId)" in str(rejected.value)
