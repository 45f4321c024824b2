"""Document batches: frozen manifests of source files, registered once, never changed.

A batch is what one partition of every per-batch asset reads. Registering one stores, in a single
transaction, the manifest rows (`seams.batches`, `seams.batch_documents`) and what makes each
document version readable again on any machine:

- a file of a folder: its bytes (`seams.source_files`, content-addressed by sha256), since no
  other machine sees the folder;
- an object of an `s3://` prefix: its key (in the URI), ETag, version id (where the bucket keeps
  versions) and the sha256 of the bytes read; every worker reads the store itself, and a rerun
  reads that version again or fails with one line naming the object (`seams.storage.sources`).

So a rerun or backfill reads exactly the inputs of the first run, even after the inbox changed,
and no step hands data through local files (the code location runs unchanged on k8s or celery
executors).

Registration is idempotent: a file version that is already its document's newest registered
version never lands in another batch, whoever (sensor, schedule, CLI) races to register it.
Registering changes nothing readers see: a new version replaces the old one when its batch is
published (`seams.storage.publication`). Retiring a document whose file is gone is immediate.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePath
from typing import TypeVar

import psycopg

from seams.errors import InputError, counted
from seams.models.model_store import file_sha256
from seams.storage import publication, schema, writer_locks
from seams.storage.connections import describe_connection, retrying
from seams.storage.object_store import ListedObject

REGISTER_LOCK = "seams:register-batch"
_COLLECTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


@dataclass(frozen=True)
class SourceFile:
    """One file version found in an inbox."""

    path: Path
    source_uri: str
    document_id: str
    sha256: str
    size_bytes: int
    mtime: float


@dataclass(frozen=True)
class ObjectVersion:
    """One object version read from an object store, as a batch records it (its bytes stay in
    the store)."""

    source_uri: str
    document_id: str
    sha256: str
    size_bytes: int
    mtime: float
    etag: str
    version_id: str | None


DocumentVersion = SourceFile | ObjectVersion
"""What a batch freezes: a file version (bytes stored) or an object version (bytes in the store)."""
V = TypeVar("V", SourceFile, ObjectVersion, ListedObject)


@dataclass(frozen=True)
class RefusedFile:
    path: Path | str
    """The file's path, or an object's `s3://` URI."""
    reason: str


@dataclass(frozen=True)
class ManifestEntry:
    document_id: str
    source_uri: str
    source_sha256: str
    size_bytes: int
    etag: str | None = None
    """An object's ETag (None for a file of a folder)."""
    version_id: str | None = None
    """An object's version id, where its bucket keeps versions."""


def document_id_for(source_uri: str) -> str:
    """Stable per source: a new version of the same file keeps its document id."""
    return "doc-" + hashlib.sha256(source_uri.encode("utf-8")).hexdigest()[:24]


def scan_inbox(root: Path) -> tuple[list[SourceFile], list[RefusedFile]]:
    """Every regular file under `root` (sorted), and the entries refused with the reason why.

    Symlinks are followed only while they stay inside `root`; hidden files (`.name`) are skipped,
    as editors and sync tools leave them half-written.
    """
    root = root.expanduser()
    if root.is_file() and not root.name.startswith("."):
        return [_source_file(root, root.resolve())], []
    if not root.is_dir():
        what = "does not exist" if not root.exists() else "is neither a file nor a folder"
        raise InputError(f"{root} {what}: pass a file or a folder of documents")
    real_root = root.resolve()
    found: list[SourceFile] = []
    refused: list[RefusedFile] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        kept = []
        for name in sorted(dirnames):
            folder = Path(dirpath) / name
            if name.startswith("."):
                continue
            if folder.is_symlink():  # os.walk does not follow it: say so instead of staying silent
                target = folder.resolve()
                why = (
                    f"symlink leaves the inbox (to {target})"
                    if not target.is_relative_to(real_root)
                    else "symlinked folder: not followed (its files are scanned where they are)"
                )
                refused.append(RefusedFile(folder, why))
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            path = Path(dirpath) / name
            target = path.resolve()
            if not target.is_relative_to(real_root):
                refused.append(RefusedFile(path, f"symlink leaves the inbox (to {target})"))
                continue
            if not target.is_file():
                refused.append(RefusedFile(path, "not a regular file"))
                continue
            try:
                found.append(_source_file(path, target))
            except OSError as exc:
                refused.append(RefusedFile(path, f"unreadable: {exc.strerror or exc}"))
    return found, refused


def _source_file(path: Path, target: Path) -> SourceFile:
    """The file version at `path` (whose real file is `target`); OSError when unreadable."""
    stat = target.stat()
    digest = file_sha256(target)
    uri = path.absolute().as_uri()
    return SourceFile(path, uri, document_id_for(uri), digest, stat.st_size, stat.st_mtime)


def unregistered(
    conn: psycopg.Connection, files: Sequence[V], collection: str | None = None
) -> list[V]:
    """The files (or objects) that are not their document's newest registered version (of
    `collection`, when given), in input order. A file's version is its sha256; an object's, its
    ETag, so a listing decides what is new without reading a byte.

    A file never registered is new; so is one that changed, one reverted to an older version
    (A -> B -> A: A is again newer than B, as `current_chunks` must then show), one that
    comes back after it was retired (its file had disappeared), and one whose newest version
    is another collection's (the settings now route it here: a renamed collection, a new
    nested one), so it moves, and its old collection's search stops showing it.
    """
    seen: set[str] = set()
    fresh = []
    for start in range(0, len(files), DECIDE_SLICE):
        part = files[start : start + DECIDE_SLICE]
        ids = [_document_id(f) for f in part]
        latest = _latest_versions(conn, ids, collection is not None)
        for f, document_id in zip(part, ids, strict=True):
            # A document's id derives from its URI: the set holds the listing's own strings.
            if latest.get(document_id) != (_version(f), collection) and f.source_uri not in seen:
                seen.add(f.source_uri)
                fresh.append(f)
    return fresh


DECIDE_SLICE = 5_000
"""Documents whose registered versions one query reads: a listing of any size holds at most
this many of them at once, beside the listing itself."""


def _latest_versions(
    conn: psycopg.Connection, ids: list[str], by_collection: bool
) -> dict[str, tuple[str, str | None] | None]:
    """Each of `ids`' newest registered version and collection (the collection only when
    `by_collection`), or None for a retired document; ids never registered are absent."""
    return {
        document_id: None if retired else (version, owner if by_collection else None)
        for document_id, version, owner, retired in conn.execute(
            "SELECT DISTINCT ON (d.document_id) d.document_id,"
            " coalesce(d.etag, d.source_sha256), d.collection,"
            " EXISTS ("
            "  SELECT 1 FROM seams.document_tombstones AS t"
            "  WHERE t.document_id = d.document_id AND t.retired_at >= d.registered_at)"
            " FROM seams.batch_documents AS d WHERE d.document_id = ANY(%s)"
            " ORDER BY d.document_id, d.registered_at DESC, d.batch_key DESC",
            (ids,),
        )
    }


def _document_id(item: SourceFile | ObjectVersion | ListedObject) -> str:
    return (
        item.document_id if not isinstance(item, ListedObject) else document_id_for(item.source_uri)
    )


def _version(item: SourceFile | ObjectVersion | ListedObject) -> str:
    """What tells two versions of a document apart: a file's sha256, an object's ETag."""
    return item.sha256 if isinstance(item, SourceFile) else item.etag


SLUG_MAX = 24
"""At most this many characters of the source's name in a batch key."""
_NOT_SLUG = re.compile(r"[^a-z0-9_]+")


def source_slug(source: str) -> str:
    """The name of a batch's source folder (or file), as a key may carry it: lowercase ASCII
    letters, digits and `_`, any other run of characters one `-`, at most SLUG_MAX characters;
    `cli:/data/Sample Corpus` -> `sample-corpus`, `inbox:/srv/inbox` -> `inbox`, '' when nothing
    is left (a key then carries no name)."""
    _kind, _, where = source.partition(":")
    name = PurePath(where or source).name
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return _NOT_SLUG.sub("-", ascii_name.lower()).strip("-")[:SLUG_MAX].rstrip("-")


def batch_key_for(
    files: Iterable[DocumentVersion], now: datetime | None = None, *, source: str = ""
) -> str:
    """Sortable by creation time, unique by content, named after its source folder:
    `20261122-190512-sample_corpus-1a2b3c4d` (`20261122-190512-1a2b3c4d` without a name; keys
    made before batches carried names keep that form and work as before)."""
    digest = hashlib.sha256()
    for f in sorted(files, key=lambda f: (f.document_id, f.sha256)):
        digest.update(f"{f.document_id}:{f.sha256}\n".encode())
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    slug = source_slug(source)
    return "-".join(part for part in (stamp, slug, digest.hexdigest()[:8]) if part)


def register_batch(
    conn: psycopg.Connection,
    files: Sequence[DocumentVersion],
    *,
    source: str,
    collection: str = schema.DEFAULT_COLLECTION,
) -> str | None:
    """`_register_batch_once` on `conn` (outside any transaction), rerun whole when PostgreSQL
    aborts its transaction (deadlock, serialization failure); past the last attempt, a
    `StorageError` that names the abort."""
    check_collection(collection)
    return retrying(
        describe_connection(conn),
        "registering a batch",
        lambda: _register_batch_once(conn, files, source=source, collection=collection),
    )


def check_collection(collection: str) -> str:
    """`collection` when it is a collection name (1-40 characters of a-z, 0-9 and _, starting
    with a letter, without '__'), else an `InputError` naming it: it keys locks and policies."""
    if (
        not isinstance(collection, str)
        or not _COLLECTION_NAME.fullmatch(collection)
        or "__" in collection
    ):
        raise InputError(
            f"collection {collection!r}: a collection name is 1-40 characters of a-z, 0-9 "
            "and _, starting with a letter, without '__'"
        )
    return collection


def _register_batch_once(
    conn: psycopg.Connection, files: Sequence[DocumentVersion], *, source: str, collection: str
) -> str | None:
    """Freeze the files that are new versions into a new batch of `collection`; None when
    nothing is new. Every row the batch's builds write carries its collection
    (`seams.storage.builds.open_builds`), whatever the frames hold.

    One transaction under a writer lock: a crash leaves the whole batch or nothing, and two
    registrars (sensor, schedule, CLI) racing over the same files make one batch, not two.
    """
    with conn.transaction():
        writer_locks.lock(conn, REGISTER_LOCK)
        fresh = unregistered(conn, files, collection)
        if not fresh:
            return None
        key = batch_key_for(fresh, source=source)
        conn.execute(
            "INSERT INTO seams.batches (batch_key, source, document_count, collection)"
            " VALUES (%s, %s, %s, %s)",
            (key, source, len(fresh), collection),
        )
        for f in fresh:
            if isinstance(f, SourceFile):  # an object's bytes stay in its store
                _store_file(conn, f)
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO seams.batch_documents (batch_key, document_id, source_uri,"
                " source_sha256, size_bytes, etag, version_id, collection)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [(key, *_manifest_row(f), collection) for f in fresh],
            )
    return key


def _manifest_row(f: DocumentVersion) -> tuple[str, str, str, int, str | None, str | None]:
    """document_id, source_uri, sha256, size, ETag and version id (an object's) of a version."""
    etag, version_id = (f.etag, f.version_id) if isinstance(f, ObjectVersion) else (None, None)
    return (f.document_id, f.source_uri, f.sha256, f.size_bytes, etag, version_id)


def _store_file(conn: psycopg.Connection, f: SourceFile) -> None:
    """Copy the file's bytes into the database, checking they still hash to what we scanned."""
    content = f.path.read_bytes()
    if hashlib.sha256(content).hexdigest() != f.sha256:
        raise InputError(f"{f.path} changed while it was being registered: register it again")
    conn.execute(
        "INSERT INTO seams.source_files (sha256, size_bytes, content) VALUES (%s, %s, %s)"
        " ON CONFLICT (sha256) DO NOTHING",
        (f.sha256, f.size_bytes, content),
    )


def batch_manifest(conn: psycopg.Connection, batch_key: str) -> list[ManifestEntry]:
    """The frozen manifest of one batch, ordered by document id; an unknown key is an error."""
    rows = conn.execute(
        "SELECT document_id, source_uri, source_sha256, size_bytes, etag, version_id"
        " FROM seams.batch_documents WHERE batch_key = %s ORDER BY document_id",
        (batch_key,),
    ).fetchall()
    if not rows:
        exists = conn.execute(
            "SELECT 1 FROM seams.batches WHERE batch_key = %s", (batch_key,)
        ).fetchone()
        if not exists:
            raise InputError(
                f"batch {batch_key!r} is not registered: register it with `seams run PATH` "
                "or let the inbox sensor do it"
            )
    return [ManifestEntry(*row) for row in rows]


def source_bytes(conn: psycopg.Connection, sha256: str) -> bytes:
    row = conn.execute(
        "SELECT content FROM seams.source_files WHERE sha256 = %s", (sha256,)
    ).fetchone()
    if row is None:
        raise InputError(
            f"the stored source with sha256 {sha256} is missing from seams.source_files"
        )
    return bytes(row[0])


@dataclass(frozen=True)
class BatchSource:
    """Where a batch came from, as people name it: the folder (or file) and how many files."""

    source: str
    files: int

    @property
    def folder(self) -> str:
        """The registered source without its registrar's prefix (`cli:/data/in` -> `/data/in`;
        the inbox keeps its word: `inbox /data/inbox`)."""
        kind, _, where = self.source.partition(":")
        if not where:
            return self.source
        return where if kind == "cli" else f"{kind} {where}"

    def __str__(self) -> str:
        return f"{self.folder}, {counted(self.files, 'file')}"


def batch_sources(conn: psycopg.Connection, batch_keys: Sequence[str]) -> dict[str, BatchSource]:
    """Per batch key, its registered source and file count (unknown keys are left out)."""
    rows = conn.execute(
        "SELECT batch_key, source, document_count FROM seams.batches WHERE batch_key = ANY(%s)",
        (list(batch_keys),),
    )
    return {key: BatchSource(source, int(count)) for key, source, count in rows}


def all_batch_keys(conn: psycopg.Connection, *, collection: str | None = None) -> list[str]:
    """Every batch key (of `collection` only, when given), oldest first."""
    rows = conn.execute(
        "SELECT batch_key FROM seams.batches WHERE %(c)s::text IS NULL OR collection = %(c)s"
        " ORDER BY batch_key",
        {"c": collection},
    )
    return [r[0] for r in rows]


def stored_collections(conn: psycopg.Connection) -> list[str]:
    """The collections the data holds batches of (those the connection may read), sorted."""
    rows = conn.execute("SELECT DISTINCT collection FROM seams.batches ORDER BY 1")
    return [r[0] for r in rows]


def batch_collections(conn: psycopg.Connection, batch_keys: Sequence[str]) -> dict[str, str]:
    """Per batch key, the collection it was registered for (unknown keys are left out)."""
    rows = conn.execute(
        "SELECT batch_key, collection FROM seams.batches WHERE batch_key = ANY(%s)",
        (list(batch_keys),),
    )
    return {key: collection for key, collection in rows}


@dataclass(frozen=True)
class RetiredDocument:
    """A document whose file was in a folder's earlier batch and is gone from the folder now."""

    document_id: str
    source_uri: str
    last_batch_key: str


RETIRE_REASON = "its file is no longer in the folder"
"""Also said of an object no longer under its prefix."""


def retire_missing(
    conn: psycopg.Connection, root: Path, present: Iterable[Path]
) -> list[RetiredDocument]:
    """Retire every live document registered from under the folder `root` whose file is not
    among `present` (every path the scan saw, refused ones too): one tombstone row each, in one
    transaction under the registration lock. `current_chunks`, the BM25 statistics and search
    drop them at once (`publication.retire`, same transaction);
    their batches and chunks stay as history. A file path (not a folder) retires nothing.
    """
    root = root.expanduser()
    if not root.is_dir():
        return []
    prefix = root.absolute().as_uri().rstrip("/") + "/"
    seen = [document_id_for(path.absolute().as_uri()) for path in present]
    return retire_absent(conn, prefix, seen)


def retire_absent(
    conn: psycopg.Connection, prefix: str, seen: Sequence[str]
) -> list[RetiredDocument]:
    """Retire every live document whose URI starts with `prefix` (a folder's `file://` URI or
    an `s3://bucket/prefix/`) and whose id is not in `seen` (see `retire_missing`)."""
    with conn.transaction():
        writer_locks.lock(conn, REGISTER_LOCK)
        rows = conn.execute(
            "INSERT INTO seams.document_tombstones"
            " (document_id, source_uri, last_batch_key, reason)"
            " SELECT latest.document_id, latest.source_uri, latest.batch_key, %(reason)s"
            " FROM (SELECT DISTINCT ON (d.document_id) d.document_id, d.source_uri,"
            "              d.batch_key, d.registered_at"
            "       FROM seams.batch_documents AS d"
            "       WHERE left(d.source_uri, length(%(prefix)s)) = %(prefix)s"
            "       ORDER BY d.document_id, d.registered_at DESC, d.batch_key DESC) AS latest"
            " WHERE NOT (latest.document_id = ANY(%(seen)s))"
            "   AND NOT EXISTS (SELECT 1 FROM seams.document_tombstones AS t"
            "                   WHERE t.document_id = latest.document_id"
            "                     AND t.retired_at >= latest.registered_at)"
            " RETURNING document_id, source_uri, last_batch_key",
            {"reason": RETIRE_REASON, "prefix": prefix, "seen": seen},
        ).fetchall()
        # Readers stop seeing them now, not at the next publication.
        publication.retire(conn, [row[0] for row in rows])
    return sorted((RetiredDocument(*row) for row in rows), key=lambda r: r.source_uri)
