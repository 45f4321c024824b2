"""Where documents come from: a folder or an `s3://` prefix, behind one small interface.

A source is scanned (what is there now, and what was refused), its new versions frozen into
batches (`seams.storage.batches`), and a batch's documents read back, on any machine:

- `FolderSource`: a scan reads and hashes every file; registration stores the bytes in
  PostgreSQL (no other machine sees the folder), and reading a batch reads them from there.
- `ObjectSource`: a scan is a paginated listing (key, ETag, size; no bytes read), so deciding
  what is new costs one request per 1,000 objects; freezing reads only the new and changed
  objects, hashing them; reading a batch fetches the version its manifest recorded (by version
  id, else only while the ETag is unchanged) and checks its sha256, so a rerun on any machine
  reads the same bytes or fails with one line naming the object.

`DocumentReader` is the one door extraction reads a manifest entry through.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from seams.storage.batches import (
    ManifestEntry,
    ObjectVersion,
    RefusedFile,
    RetiredDocument,
    SourceFile,
    document_id_for,
    retire_absent,
    retire_missing,
    scan_inbox,
    source_bytes,
)
from seams.storage.object_store import (
    ListedObject,
    ObjectChanged,
    ObjectGone,
    ObjectPrefix,
    ObjectStore,
    is_object_uri,
    too_large,
)

Report = Callable[[str], None]
Location = Path | ObjectPrefix
"""A source as the settings name it: a folder (or one file), or an `s3://bucket/prefix`."""
READERS = 16
"""Objects read at once while freezing a batch (network-bound: threads, not processes)."""
BATCH_OBJECTS_MAX = 500
"""Objects read into one batch at most: a sensor's look reads no more (the rest make the next
batch), and `seams run` splits what is new into batches of this size."""
Version = SourceFile | ListedObject
"""What a scan finds: a file version (hashed) or a listed object (not read)."""


def found_at(version: Version) -> Path | str:
    """Where a scan found it: a file's path, an object's `s3://` URI (as `route` takes them)."""
    return version.path if isinstance(version, SourceFile) else version.source_uri


def location_of(text: str | Path) -> Location:
    """`s3://bucket/prefix` as an `ObjectPrefix`, anything else as a path (not resolved)."""
    return ObjectPrefix.parse(text) if is_object_uri(text) else Path(text)


def location_text(location: Location) -> str:
    """How a location is written in messages and batch sources (`/data/in`, `s3://b/docs/`)."""
    return location.uri if isinstance(location, ObjectPrefix) else str(location.absolute())


@dataclass
class Scan:
    """What a look at a source found: document versions (files hashed, objects only listed) and
    the entries it refused and why."""

    found: list[SourceFile] | list[ListedObject]
    refused: list[RefusedFile] = field(default_factory=list)


class FolderSource:
    """The files under a folder (or one file)."""

    def __init__(self, folder: Path) -> None:
        self.location = folder

    def scan(self, report: Report | None = None) -> Scan:
        found, refused = scan_inbox(self.location)
        return Scan(found, refused)

    def freeze(self, found: Sequence[SourceFile], report: Report | None = None) -> list[SourceFile]:
        """Scanned files are already hashed: registration reads them once more to store them."""
        return list(found)

    def retire_missing(self, conn: psycopg.Connection, scan: Scan) -> list[RetiredDocument]:
        present = [*(f.path for f in scan.found), *(r.path for r in scan.refused)]
        return retire_missing(conn, self.location, present)  # type: ignore[arg-type]


class ObjectSource:
    """The objects under an `s3://bucket/prefix`."""

    def __init__(self, prefix: ObjectPrefix, store: ObjectStore, *, max_bytes: int) -> None:
        self.location = prefix
        self.store = store
        self.max_bytes = max_bytes

    def scan(self, report: Report | None = None) -> Scan:
        """The whole listing, or a `StorageError` (a partial listing registers nothing). An
        object over `max_bytes` is refused before a byte of it is read."""
        found: list[ListedObject] = []
        refused: list[RefusedFile] = []
        for item in self.store.list(self.location, report):
            if item.size_bytes > self.max_bytes:
                refused.append(RefusedFile(item.source_uri, _over(item, self.max_bytes)))
            else:
                found.append(item)
        return Scan(found, refused)

    def freeze(
        self, found: Sequence[ListedObject], report: Report | None = None
    ) -> list[ObjectVersion]:
        """Read the listed objects (several at once), hashing each: the versions a batch
        records. One deleted since the listing is left out (saying so); the next scan retires
        its document."""

        def read(item: ListedObject) -> ObjectVersion | None:
            try:
                got = self.store.read(item.source_uri, max_bytes=self.max_bytes)
            except ObjectGone as exc:
                if report is not None:
                    report(f"skipped {exc}")
                return None
            return ObjectVersion(
                item.source_uri,
                document_id_for(item.source_uri),
                got.sha256,
                len(got.content),
                item.mtime,
                got.etag,
                got.version_id,
            )

        if not found:
            return []
        with ThreadPoolExecutor(min(READERS, len(found))) as pool:
            return [v for v in pool.map(read, found) if v is not None]

    def retire_missing(self, conn: psycopg.Connection, scan: Scan) -> list[RetiredDocument]:
        return retire_absent(conn, self.location.uri, self.seen(scan))

    @staticmethod
    def seen(scan: Scan) -> list[str]:
        """The id of every document a look saw, refused ones too (an object that is there is
        not deleted): derived when asked, so that a listing keeps nothing per object beyond
        what deciding reads."""
        uris = [*(item.source_uri for item in scan.found), *(str(r.path) for r in scan.refused)]
        return [document_id_for(uri) for uri in uris]


Source = FolderSource | ObjectSource


def open_source(location: Location, *, endpoint_url: str | None, max_bytes: int) -> Source:
    """The source at `location`; `endpoint_url` names an S3-compatible store (None: the
    environment's S3 endpoint), `max_bytes` the largest object read (extraction.file_bytes_max)."""
    if isinstance(location, ObjectPrefix):
        return ObjectSource(location, ObjectStore(endpoint_url), max_bytes=max_bytes)
    return FolderSource(location)


class DocumentReader:
    """The bytes of a batch's documents: a file's from PostgreSQL, where registration stored
    them; an object's from its store, exactly the version the manifest recorded."""

    def __init__(
        self, conn: psycopg.Connection, *, endpoint_url: str | None, max_bytes: int
    ) -> None:
        self.conn = conn
        self.max_bytes = max_bytes
        self._store = ObjectStore(endpoint_url)

    def read(self, batch_key: str, entry: ManifestEntry) -> bytes:
        """Raises `InputError` with one line naming the object when the recorded version is
        gone or its bytes changed."""
        if not is_object_uri(entry.source_uri):
            return source_bytes(self.conn, entry.source_sha256)
        try:
            got = self._store.read(
                entry.source_uri,
                max_bytes=max(self.max_bytes, entry.size_bytes),
                version_id=entry.version_id,
                etag=entry.etag,
            )
        except ObjectGone:
            which = f"version {entry.version_id}" if entry.version_id else "the object"
            raise ObjectGone(
                f"{entry.source_uri}: {which} recorded by batch {batch_key} is gone from the "
                "bucket: restore it, or register the prefix again (`seams run`) and run the "
                "new batch"
            ) from None
        except ObjectChanged:
            raise ObjectChanged(_changed(entry, batch_key)) from None
        if got.sha256 != entry.source_sha256:
            raise ObjectChanged(_changed(entry, batch_key))
        return got.content


def _changed(entry: ManifestEntry, batch_key: str) -> str:
    return (
        f"{entry.source_uri}: changed since batch {batch_key} recorded it (ETag {entry.etag}, "
        f"sha256 {entry.source_sha256[:12]}...) and the bucket keeps no older version: enable "
        "versioning on the bucket so reruns read what a batch recorded, or register the "
        "prefix again (`seams run`) and run the new batch"
    )


def _over(item: ListedObject, max_bytes: int) -> str:
    return too_large(item.source_uri, item.size_bytes, max_bytes).split(": ", 1)[1]
