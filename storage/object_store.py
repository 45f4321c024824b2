"""Objects in S3 and in every store that speaks its API (MinIO, Ceph, R2, GCS's interoperability
mode), through boto3: listed page by page, read whole and hashed, read again by version.

boto3 finds the endpoint, region and credentials the way the AWS command line does (`AWS_*`
environment variables, `AWS_PROFILE`, `~/.aws/config` and `~/.aws/credentials`, instance and
container roles), so seams.yaml never holds a secret; it may name an `endpoint_url` for a store
other than AWS. Throttling and transient failures are retried with backoff by botocore's
`standard` retry mode (`AWS_MAX_ATTEMPTS` / `max_attempts` in the config file, else
`MAX_ATTEMPTS`). boto3 is the optional extra `seams-chunking[s3]`, imported only when an `s3://`
source is named.

Every failure is one line naming the bucket (and the key, where there is one) and what to do.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

from seams.errors import ConfigError, InputError, StorageError

SCHEME = "s3://"
MAX_ATTEMPTS = 8
"""Attempts per request (throttling, 5xx, dropped connections) unless the S3 configuration of
the environment sets its own."""
PROGRESS_EVERY = 10_000
"""A long listing reports its progress every this many objects."""
READ_CHUNK = 1 << 20

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.\-_]{1,254}")  # S3's own names, plus what MinIO/R2 allow
_NO_CREDENTIALS = (
    "no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE "
    "(~/.aws/credentials), in the environment of every process that reads the source"
)

Report = Callable[[str], None]


class ObjectGone(InputError):
    """An object (or the version a batch recorded) is no longer in its bucket."""


class ObjectChanged(InputError):
    """An object's bytes are no longer those a batch recorded."""


@dataclass(frozen=True)
class ObjectPrefix:
    """`s3://bucket/prefix`: every object of `bucket` whose key starts with `prefix` (a folder:
    '' or ending in '/')."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, text: str) -> ObjectPrefix:
        """`s3://bucket`, `s3://bucket/`, `s3://bucket/some/folder[/]`; a `ConfigError` naming
        `text` otherwise."""
        if not is_object_uri(text):
            raise ConfigError(f"{text!r}: an object source is s3://bucket/prefix")
        bucket, _, prefix = text[len(SCHEME) :].partition("/")
        if not _BUCKET.fullmatch(bucket):
            raise ConfigError(
                f"{text!r}: {bucket!r} is not a bucket name (3-255 characters of a-z, 0-9, "
                "'.', '-' and '_'): write s3://bucket/prefix"
            )
        parts = [part for part in prefix.split("/") if part]
        if any(part in (".", "..") for part in parts):
            raise ConfigError(f"{text!r}: a prefix cannot have '.' or '..' parts")
        return cls(bucket, "".join(f"{part}/" for part in parts))

    @property
    def uri(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.prefix}"

    def uri_of(self, key: str) -> str:
        """The URI that names one object (and, hashed, its document)."""
        return f"{SCHEME}{self.bucket}/{key}"

    def holds(self, uri: str) -> bool:
        """Whether the object at `uri` is under this prefix."""
        return uri.startswith(self.uri) and uri != self.uri

    def relative(self, uri: str) -> PurePosixPath:
        """The object's key under the prefix, as `match` patterns see it."""
        return PurePosixPath(uri[len(self.uri) :])

    def __str__(self) -> str:
        return self.uri


def is_object_uri(text: object) -> bool:
    return isinstance(text, str) and text.startswith(SCHEME)


def split_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/key` -> (bucket, key)."""
    bucket, _, key = uri[len(SCHEME) :].partition("/")
    return bucket, key


@dataclass(frozen=True, slots=True)
class ListedObject:
    """What a listing says of one object (no bytes read): all a new-or-changed decision needs."""

    source_uri: str
    etag: str
    size_bytes: int
    mtime: float


@dataclass(frozen=True)
class ReadObject:
    """One object version read whole: its bytes and what identifies them."""

    content: bytes
    etag: str
    version_id: str | None
    """None where the bucket keeps no versions."""
    sha256: str


class ObjectStore:
    """A client of one S3 endpoint (None: the environment's, AWS by default), made on first use
    and shared by the threads of a process (boto3 clients are thread-safe)."""

    def __init__(self, endpoint_url: str | None = None) -> None:
        self.endpoint_url = endpoint_url
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = _make_client(self.endpoint_url)
        return self._client

    def list(self, where: ObjectPrefix, report: Report | None = None) -> Iterator[ListedObject]:
        """Every object under `where`, in key order, one page (1,000 keys) at a time; "folder"
        markers (keys ending in '/') and hidden names (a part starting with '.') are skipped.

        A failure on any page raises a `StorageError`: a caller that registers only after the
        last page never registers from a partial listing."""
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=where.bucket, Prefix=where.prefix
        )
        seen, said = 0, 0
        try:
            for page in pages:
                for item in page.get("Contents", ()):
                    seen += 1
                    key = item["Key"]
                    if key.endswith("/") or _hidden(key[len(where.prefix) :]):
                        continue
                    yield ListedObject(
                        where.uri_of(key),
                        _unquoted(item["ETag"]),
                        int(item["Size"]),
                        _timestamp(item["LastModified"]),
                    )
                if report is not None and seen - said >= PROGRESS_EVERY:
                    said = seen
                    report(f"listed {seen:,} objects of {where.uri}...")
        except Exception as exc:  # translated by _store_error, or re-raised
            raise _store_error(exc, where.bucket, None, f"listing {where.uri} failed after "
                               f"{seen:,} objects") from exc  # fmt: skip

    def read(
        self,
        uri: str,
        *,
        max_bytes: int,
        version_id: str | None = None,
        etag: str | None = None,
    ) -> ReadObject:
        """The object at `uri` (that version, when given; only while its ETag is `etag`, when
        given), read whole, at most `max_bytes`. Raises `InputError` naming the object when it is
        gone, changed or too large, `StorageError` when the store refuses."""
        bucket, key = split_uri(uri)
        request: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if version_id:
            request["VersionId"] = version_id
        elif etag:
            request["IfMatch"] = f'"{etag}"'
        try:
            response = self.client.get_object(**request)
            size = int(response.get("ContentLength", 0))
            if size > max_bytes:
                response["Body"].close()
                raise InputError(too_large(uri, size, max_bytes))
            digest, parts, body = hashlib.sha256(), [], response["Body"]
            read = 0
            while chunk := body.read(READ_CHUNK):
                read += len(chunk)
                if read > max_bytes:
                    body.close()
                    raise InputError(too_large(uri, read, max_bytes))
                digest.update(chunk)
                parts.append(chunk)
        except InputError:
            raise
        except Exception as exc:  # translated by _store_error, or re-raised
            raise _store_error(exc, bucket, key, f"reading {uri} failed") from exc
        version = response.get("VersionId")
        return ReadObject(
            b"".join(parts),
            _unquoted(response.get("ETag", "")),
            version if version and version != "null" else None,
            digest.hexdigest(),
        )


def too_large(uri: str, size: int, max_bytes: int) -> str:
    from seams.extraction.limits import size_text

    return (
        f"{uri}: {size_text(size)}, over the limit extraction.file_bytes_max = "
        f"{size_text(max_bytes)}; split the document, or raise extraction.file_bytes_max in "
        "seams.yaml if it is genuine"
    )


def _make_client(endpoint_url: str | None) -> Any:
    try:
        import boto3
        import botocore.session
        from botocore.config import Config
    except ImportError:
        raise ConfigError(
            "s3:// sources need boto3: install the extra with `pip install 'seams-chunking[s3]'`"
        ) from None
    core = botocore.session.get_session()
    core.register_component("data_loader", _loader())  # the S3 model parsed once per process
    retries: dict[str, Any] = {"mode": core.get_config_variable("retry_mode") or "standard"}
    if core.get_config_variable("max_attempts") is None:
        retries["total_max_attempts"] = MAX_ATTEMPTS
    config = Config(retries=retries, max_pool_connections=32)
    session = boto3.session.Session(botocore_session=core)
    return session.client("s3", endpoint_url=endpoint_url or None, config=config)


@functools.cache
def _loader() -> Any:
    """botocore's loader of service models, shared: each new session would parse them again."""
    from botocore.loaders import create_loader

    return create_loader()


_GONE = {"NoSuchKey", "NoSuchVersion", "404", "NotFound"}
_DENIED = {"AccessDenied", "AllAccessDisabled", "403", "Forbidden"}
_BAD_KEYS = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken"}
_THROTTLED = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "503",
              "TooManyRequests", "RequestThrottled"}  # fmt: skip


def _store_error(exc: Exception, bucket: str, key: str | None, doing: str) -> Exception:
    """One line for what boto3 raised while `doing`, naming the bucket and key."""
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
    )

    where = f"s3://{bucket}/{key}" if key is not None else f"bucket {bucket}"
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return StorageError(f"{doing}: {_NO_CREDENTIALS}")
    if isinstance(exc, EndpointConnectionError):
        return StorageError(
            f"{doing}: cannot reach the S3 endpoint {exc.kwargs.get('endpoint_url')}: check "
            "inbox.endpoint_url (or AWS_ENDPOINT_URL) and the network"
        )
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        attempts = exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0)
        if code == "NoSuchBucket":
            return StorageError(
                f"{doing}: no such bucket {bucket!r} at this endpoint: check the source's "
                "bucket name, inbox.endpoint_url and the region (AWS_REGION)"
            )
        if code in _GONE and key is not None:
            return ObjectGone(f"{where}: no longer in the bucket ({code})")
        if code == "PreconditionFailed" or status == 412:
            return ObjectChanged(f"{where}: its ETag is no longer the one recorded")
        if code in _BAD_KEYS:
            return StorageError(
                f"{doing}: the store rejects these S3 credentials ({code}): check "
                "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or AWS_PROFILE"
            )
        if code in _DENIED or status == 403:
            return StorageError(
                f"{doing}: access denied to {where}: the credentials need s3:ListBucket on the "
                "bucket and s3:GetObject (and s3:GetObjectVersion) on its objects"
            )
        if code in _THROTTLED or status in (429, 503):
            return StorageError(
                f"{doing}: the store kept throttling requests ({code or status}) after "
                f"{attempts + 1} attempts: retry later, or raise AWS_MAX_ATTEMPTS"
            )
        return StorageError(f"{doing}: {code or status}: {error.get('Message', exc)}")
    if isinstance(exc, BotoCoreError):
        return StorageError(f"{doing}: {exc}")
    return exc


def _hidden(relative: str) -> bool:
    """Names editors and sync tools leave half-written (`.name`), as a folder scan skips them."""
    return any(part.startswith(".") for part in relative.split("/"))


def _unquoted(etag: str) -> str:
    return etag.strip('"')


def _timestamp(value: datetime | str) -> float:
    return (
        value.timestamp()
        if isinstance(value, datetime)
        else datetime.fromisoformat(value).timestamp()
    )
