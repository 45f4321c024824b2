"""Object sources: listing and registering 10k and 100k objects, and a bucket against a folder.

    .venv/bin/python -m benchmarks.s3_listing [--objects 10000 100000] [--runs 3] [--documents 200]

Against moto's S3 API server in a child process (so its memory is not ours; above `--moto-up-to`
objects, a minimal S3 responder serving generated objects, as moto's listing slows with the
square of a bucket's size) and a fresh embedded PostgreSQL, through the code `seams run` and
the inbox sensor use (`seams.storage.sources`):

1. per size N: N small objects under one prefix, then
   - `list`: the paginated listing alone (1,000 keys per request), as a sensor's look;
   - `decide`: the listing plus what of it is new, against the registered versions (nothing
     registered: all N are new);
   - `register`: reading every new object (16 at a time), hashing it and registering it in
     batches of 500;
   - `again`: the next look after registration: listing and deciding that nothing is new;
   each with its wall time, this process's CPU time (the client's own work, whatever the
   server costs), and the peak of Python memory it allocated (tracemalloc, in a separate pass
   from the timed one), per object too;
2. a bucket against a folder: the same `--documents` files registered from a folder (bytes read,
   hashed and stored in PostgreSQL) and from a bucket (listed, read and hashed; bytes stay in
   the store), then the `extracted_text` asset of that batch, which reads each document's bytes
   from PostgreSQL or from the store by the recorded version. What follows extraction (every
   other asset) reads the same text either way.

Medians of `--runs`; on a 2-core machine shared with other work: read the ratios. Writes
benchmarks/results/s3_listing.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.header import write_result

RESULTS = Path(__file__).parent / "results" / "s3_listing.json"
BODY = "# Note {n}\n\nA short note, number {n}, about nothing in particular.\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--documents", type=int, default=200)
    parser.add_argument(
        "--moto-up-to",
        type=int,
        default=10_000,
        help="sizes above this list a generated bucket served by a minimal S3 responder",
    )
    parser.add_argument(
        "--register-up-to",
        type=int,
        default=100_000,
        help="register (read every object) only at sizes up to this; larger: listing only",
    )
    args = parser.parse_args()

    from benchmarks.scratch import scratch_data_dir

    work = scratch_data_dir("seams-bench-s3-")
    for name, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(work / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(work / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        os.environ[name] = value
    from seams.resources.database import EmbeddedPostgres

    server, endpoint = _moto_server(work)
    database = EmbeddedPostgres(work / "pgdata")
    url = database.start()
    try:
        import boto3

        client = boto3.client("s3", endpoint_url=endpoint)
        sizes = {}
        for n in args.objects:
            registers = n <= args.register_up_to
            if n > args.moto_up_to:  # generated objects, listed and read without moto's cost
                synthetic, where = _synthetic_server(n)
                try:
                    sizes[n] = _listing(where, "synthetic", url, n, args.runs, registers)
                finally:
                    synthetic.terminate()
                    synthetic.wait(timeout=30)
                sizes[n]["server"] = "synthetic"
                continue
            bucket = f"bench-{n}"
            client.create_bucket(Bucket=bucket)
            client.put_bucket_versioning(
                Bucket=bucket, VersioningConfiguration={"Status": "Enabled"}
            )
            started = time.perf_counter()
            _fill(client, bucket, n)
            print(f"{n:,} objects put in {time.perf_counter() - started:.0f} s", flush=True)
            sizes[n] = _listing(endpoint, bucket, url, n, args.runs, registers)
            sizes[n]["server"] = "moto"
        compared = _bucket_against_folder(client, endpoint, url, work, args.documents, args.runs)
    finally:
        database.stop()
        server.terminate()
        server.wait(timeout=30)
    _print(sizes, compared)
    write_result(RESULTS, {"listing": {str(n): r for n, r in sizes.items()},
                           "bucket_against_folder": compared, "runs": args.runs})  # fmt: skip
    return 0


def _moto_server(work: Path) -> tuple[subprocess.Popen, str]:
    from tests.support.processes import free_port

    port = free_port()
    log = (work / "moto.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    import urllib.request

    for _ in range(300):
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
            return proc, endpoint
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("moto's server never answered")


def _synthetic_server(n: int) -> tuple[subprocess.Popen, str]:
    """`_serve_synthetic` in a child process: an HTTP server answering S3's ListObjectsV2 and
    GetObject for a bucket `synthetic` of `n` generated objects, instantly (moto sorts every
    key on every page request, so its listing grows with the square of the bucket)."""
    from tests.support.processes import free_port

    port = free_port()
    code = f"from benchmarks.s3_listing import _serve_synthetic; _serve_synthetic({n}, {port})"
    proc = subprocess.Popen([sys.executable, "-c", code])
    endpoint = f"http://127.0.0.1:{port}"
    import urllib.request

    for _ in range(300):
        try:
            urllib.request.urlopen(f"{endpoint}/synthetic/notes/000000.md", timeout=1)
            return proc, endpoint
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the synthetic server never answered")


def _serve_synthetic(n: int, port: int) -> None:
    import hashlib
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qs, urlsplit

    def body(i: int) -> bytes:
        return BODY.format(n=i).encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if url.path.rstrip("/") == "/synthetic":
                start = int(query.get("continuation-token", ["0"])[0])
                end = min(start + 1000, n)
                items = "".join(
                    f"<Contents><Key>notes/{i:06d}.md</Key><LastModified>"
                    f"2026-01-01T00:00:00.000Z</LastModified><ETag>&quot;"
                    f"{hashlib.md5(body(i)).hexdigest()}&quot;</ETag><Size>{len(body(i))}"
                    "</Size><StorageClass>STANDARD</StorageClass></Contents>"
                    for i in range(start, end)
                )
                more = f"<NextContinuationToken>{end}</NextContinuationToken>" if end < n else ""
                page = (
                    '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://'
                    's3.amazonaws.com/doc/2006-03-01/"><Name>synthetic</Name><Prefix>notes/'
                    f"</Prefix><KeyCount>{end - start}</KeyCount><MaxKeys>1000</MaxKeys>"
                    f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>{more}{items}"
                    "</ListBucketResult>"
                ).encode()
                self._send(page, {"Content-Type": "application/xml"})
                return
            i = int(url.path.rsplit("/", 1)[1].split(".")[0])
            data = body(i)
            self._send(
                data,
                {
                    "ETag": f'"{hashlib.md5(data).hexdigest()}"',
                    "x-amz-version-id": f"v{i}",
                    "Last-Modified": "Thu, 01 Jan 2026 00:00:00 GMT",
                    "Content-Type": "text/markdown",
                },
            )

        def _send(self, data: bytes, headers: dict[str, str]) -> None:
            self.send_response(200)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def _fill(client: Any, bucket: str, n: int) -> None:
    def put(i: int) -> None:
        client.put_object(Bucket=bucket, Key=f"notes/{i:06d}.md", Body=BODY.format(n=i).encode())

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, range(n)))


def _listing(
    endpoint: str, bucket: str, url: str, n: int, runs: int, registers: bool
) -> dict[str, Any]:
    from seams.resources.postgres import PostgresResource
    from seams.storage import batches
    from seams.storage.object_store import ObjectPrefix, ObjectStore
    from seams.storage.sources import BATCH_OBJECTS_MAX, ObjectSource

    source = ObjectSource(
        ObjectPrefix.parse(f"s3://{bucket}/notes"), ObjectStore(endpoint), max_bytes=1 << 20
    )
    postgres = PostgresResource(url=url)
    postgres.ensure_schema()
    collection = f"c{n}"  # each size its own collection: "new" is judged per collection

    def listed() -> int:
        return len(source.scan().found)

    def decide() -> int:
        scan = source.scan()
        with postgres.connection() as conn:
            return len(batches.unregistered(conn, scan.found, collection))

    def register() -> int:
        scan = source.scan()
        with postgres.connection() as conn:
            pending = batches.unregistered(conn, scan.found, collection)
            for start in range(0, len(pending), BATCH_OBJECTS_MAX):
                part = source.freeze(pending[start : start + BATCH_OBJECTS_MAX])
                batches.register_batch(conn, part, source="bench", collection=collection)
        return len(pending)

    listed()  # the client made and its service model loaded before anything is measured
    result: dict[str, Any] = {}
    steps = [("list", listed, runs), ("decide", decide, runs)]
    if registers:
        steps += [("register", register, 1), ("again", decide, runs)]
    for name, step, repeat in steps:
        memory = _peak(step) if name != "register" else None
        times, cpu = [], []
        for _ in range(repeat):
            started, started_cpu = time.perf_counter(), time.process_time()
            count = step()
            times.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
        if name == "register":  # the one pass that registers: its memory measured after
            memory = _peak(lambda: len(source.scan().found))
        result[name] = {
            "seconds": statistics.median(times),
            "cpu_seconds": statistics.median(cpu),
            "objects_per_s": n / statistics.median(times),
            "counted": count,
            "peak_mib": memory / 2**20,
            "peak_bytes_per_object": memory / n,
        }
        print(f"{n:,} {name}: {result[name]}", flush=True)
    return result


def _peak(step: Callable[[], int]) -> int:
    tracemalloc.start()
    try:
        step()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _bucket_against_folder(
    client: Any, endpoint: str, url: str, work: Path, documents: int, runs: int
) -> dict[str, Any]:
    import dagster as dg

    from benchmarks.synthetic import document
    from seams.assets.extraction import build_extraction_asset
    from seams.assets.partitions import document_batches
    from seams.extraction.limits import ExtractionLimits
    from seams.resources.io_manager import PostgresIOManager
    from seams.resources.postgres import PostgresResource
    from seams.storage import batches
    from seams.storage.object_store import ObjectPrefix, ObjectStore
    from seams.storage.sources import FolderSource, ObjectSource

    texts = [document(seed, 3000) for seed in range(documents)]
    postgres = PostgresResource(url=url)
    resources = {"postgres": postgres, "io_manager": PostgresIOManager(postgres=postgres)}
    out: dict[str, list[tuple[float, float]]] = {"folder": [], "bucket": []}
    for run in range(runs):
        folder = work / f"folder-{run}"
        folder.mkdir()
        bucket = f"compare-{run}"
        client.create_bucket(Bucket=bucket)
        client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        for i, text in enumerate(texts):
            (folder / f"doc{i:03d}.md").write_text(f"{text}\n{run}", encoding="utf-8")
            client.put_object(
                Bucket=bucket, Key=f"docs/doc{i:03d}.md", Body=f"{text}\n{run}".encode()
            )
        sources = {
            "folder": FolderSource(folder),
            "bucket": ObjectSource(
                ObjectPrefix.parse(f"s3://{bucket}/docs"),
                ObjectStore(endpoint),
                max_bytes=1 << 26,
            ),
        }
        for kind, source in sources.items():
            started = time.perf_counter()
            scan = source.scan()
            with postgres.connection() as conn:
                key = batches.register_batch(
                    conn, source.freeze(scan.found), source=f"bench:{kind}{run}"
                )
            registered = time.perf_counter() - started
            asset = build_extraction_asset(ExtractionLimits(), endpoint_url=endpoint)
            with dg.DagsterInstance.ephemeral() as instance:
                instance.add_dynamic_partitions(document_batches.name, [key])
                started = time.perf_counter()
                result = dg.materialize(
                    [asset], partition_key=key, instance=instance, resources=resources
                )
                extracted = time.perf_counter() - started
            assert result.success
            out[kind].append((registered, extracted))
            print(f"{kind} run {run}: register {registered:.2f} s, extract {extracted:.2f} s")
    return {
        kind: {
            "documents": documents,
            "register_s": statistics.median(r for r, _ in pairs),
            "extract_s": statistics.median(e for _, e in pairs),
        }
        for kind, pairs in out.items()
    }


def _print(sizes: dict[int, dict[str, Any]], compared: dict[str, Any]) -> None:
    print("\n| objects | server | step | median s | our CPU s | peak MiB | bytes/object |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for n, steps in sizes.items():
        for name, r in steps.items():
            if name == "server":
                continue
            print(f"| {n:,} | {steps['server']} | {name} | {r['seconds']:.2f} | "
                  f"{r['cpu_seconds']:.2f} | {r['peak_mib']:.1f} | "
                  f"{r['peak_bytes_per_object']:.0f} |")  # fmt: skip
    folder, bucket = compared["folder"], compared["bucket"]
    print("\n| source | documents | register s | extracted_text s |")
    print("|---|---:|---:|---:|")
    for kind, r in compared.items():
        print(f"| {kind} | {r['documents']} | {r['register_s']:.2f} | {r['extract_s']:.2f} |")
    print(f"bucket/folder: register x{bucket['register_s'] / folder['register_s']:.2f}, "
          f"extract x{bucket['extract_s'] / folder['extract_s']:.2f}")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
