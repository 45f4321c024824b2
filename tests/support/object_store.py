"""A real S3 API server for the object-source tests (moto's server mode on a free loopback port),
the environment a user's S3 configuration gives a process, and small HTTP servers that answer
like a store in trouble (throttling, a listing that fails midway). Not part of the product.
"""

from __future__ import annotations

import contextlib
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import free_port

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


@contextlib.contextmanager
def s3_server() -> Iterator[str]:
    """moto's S3 API server in a thread of this process, on a free 127.0.0.1 port; its URL."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def s3_environment(tmp: Path, *, credentials: bool = True, attempts: int = 2) -> dict[str, str]:
    """The variables a user's S3 configuration sets (here: test keys, one region, no config
    files, no instance metadata lookups), for this process or a worker's."""
    env = {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "no-aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_MAX_ATTEMPTS": str(attempts),
    }
    if credentials:
        env.update(CREDENTIALS)
    return env


def use_s3_environment(
    monkeypatch: pytest.MonkeyPatch, tmp: Path, *, credentials: bool = True, attempts: int = 2
) -> None:
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN",
                 *CREDENTIALS):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    for name, value in s3_environment(tmp, credentials=credentials, attempts=attempts).items():
        monkeypatch.setenv(name, value)


@dataclass
class Bucket:
    """A fresh bucket on the test server, and the client to change it with (as a user would)."""

    endpoint: str
    name: str
    client: Any

    def put(self, key: str, body: bytes | str) -> dict[str, Any]:
        data = body.encode() if isinstance(body, str) else body
        return self.client.put_object(Bucket=self.name, Key=key, Body=data)

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.name, Key=key)

    def uri(self, prefix: str = "") -> str:
        return f"s3://{self.name}/{prefix}"


def make_bucket(endpoint: str, *, versioned: bool) -> Bucket:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **_keys())
    name = f"seams-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=name)
    if versioned:
        client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return Bucket(endpoint, name, client)


def _keys() -> dict[str, str]:
    return {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@contextlib.contextmanager
def require_auth(endpoint: str, *, unchecked: int) -> Iterator[None]:
    """moto's server checks credentials against its IAM after the next `unchecked` requests
    (those make a user and its keys), until the block ends."""

    def reset(count: str) -> None:
        request = urllib.request.Request(
            f"{endpoint}/moto-api/reset-auth",
            data=count.encode(),
            method="POST",
            headers={"Content-Type": "text/plain"},
        )
        urllib.request.urlopen(request, timeout=10).close()

    reset(str(unchecked))
    try:
        yield
    finally:
        reset("inf")


class TroubledStore:
    """A loopback HTTP server that answers like an S3 store in trouble: `throttle` answers
    every request 503 SlowDown; `fail_second_page` lists one full page of 1,000 keys, then
    answers the next page 500 InternalError. `requests` counts what it was asked."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.requests = 0
        store = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                store.requests += 1
                if store.mode == "throttle":
                    self._answer(503, _error("SlowDown", "Please reduce your request rate."))
                elif "continuation-token" in self.path:
                    self._answer(500, _error("InternalError", "We encountered an internal error."))
                else:
                    self._answer(200, _first_page())

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> TroubledStore:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _error(code: str, message: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
        f"<Message>{message}</Message><RequestId>1</RequestId></Error>"
    ).encode()


def _first_page() -> bytes:
    items = "".join(
        f"<Contents><Key>docs/{i:04d}.md</Key><LastModified>2026-01-01T00:00:00.000Z"
        f'</LastModified><ETag>"{i:032x}"</ETag><Size>10</Size>'
        "<StorageClass>STANDARD</StorageClass></Contents>"
        for i in range(1000)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult '
        'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>troubled</Name>'
        "<Prefix>docs/</Prefix><KeyCount>1000</KeyCount><MaxKeys>1000</MaxKeys>"
        "<IsTruncated>true</IsTruncated><NextContinuationToken>page2</NextContinuationToken>"
        f"{items}</ListBucketResult>"
    ).encode()
