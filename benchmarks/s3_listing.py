"""Object sources: listing and registering 10k and 100k objects, and a bucket against a folder.

    .venv/bin/python -m benchmarks.s3_listing --objects 10000 --runs 3 --documents 10 \\
        --words 1000 --full-runs 1
    .venv/bin/python -m benchmarks.s3_listing --objects 100000 --runs 1 --documents 0 \\
        --full-runs 0 --steps list decide --one-pass \\
        --json benchmarks/results/s3_listing_100k.json

Against moto's S3 API server in a child process (so its memory is not ours) and a fresh embedded
PostgreSQL, through the code `seams run` and the inbox sensor use (`seams.storage.sources`).
The server's versioned buckets are filled before it starts, through moto's own backend in that
process (100k PUT requests over HTTP would take longer than everything measured here); every
listing and every read goes over HTTP to moto's server, as a client's would.

1. per size N: N small objects under one prefix, then
   - `list`: the paginated listing alone (1,000 keys per request), as a sensor's look;
   - `decide`: the listing plus what of it is new, against the registered versions (nothing
     registered: all N are new);
   - `register`: reading every new object (16 at a time), hashing it and registering it in
     batches of 500;
   - `again`: the next look after registration: listing and deciding that nothing is new;
   each with its wall time, this process's CPU time (the client's own work, whatever the
   server costs), and the peak of Python memory it allocated (tracemalloc, in a separate pass
   from the timed one), per object too, beside what a key and an ETag alone take as Python
   strings;
2. a bucket against a folder: the same `--documents` files registered from a folder (bytes read,
   hashed and stored in PostgreSQL) and from a bucket (listed, read and hashed; bytes stay in
   the store), then the `extracted_text` asset of that batch, which reads each document's bytes
   from PostgreSQL or from the store by the recorded version;
3. the same `--documents` files through a whole `seams run` (a child process, its own data dir
   and embedded PostgreSQL, the exported model linked in) from the folder and from the bucket:
   registration, extraction, chunking, embedding, indexing and publication, end to end.

Medians of `--runs` (`register` runs once: a second pass would find nothing new); the load
average is recorded with every figure: on a 2-core machine shared with other work, read the
ratios and the CPU column. Writes benchmarks/results/s3_listing.json.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from benchmarks.header import write_result
from benchmarks.synthetic import document

T = TypeVar("T")

RESULTS = Path(__file__).parent / "results" / "s3_listing.json"
STEPS = ("list", "decide", "register", "again")
BODY = "# Note {n}\n\nA short note, number {n}, about nothing in particular.\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--documents", type=int, default=200)
    parser.add_argument(
        "--steps",
        nargs="+",
        choices=STEPS,
        default=list(STEPS),
        help="which steps to measure at every size (in this order; `again` needs `register`)",
    )
    parser.add_argument(
        "--one-pass",
        action="store_true",
        help="measure peak memory in the timed pass, registration's too (its CPU then includes"
        " tracemalloc's): one listing per step, for sizes where moto's listing is slow",
    )
    parser.add_argument("--words", type=int, default=1500, help="words per compared document")
    parser.add_argument("--json", type=Path, default=RESULTS, help="write the results here")
    parser.add_argument(
        "--full-runs", type=int, default=1, help="whole `seams run`s per source (0: none)"
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

    server, endpoint = _moto_server(work, {f"bench-{n}": n for n in args.objects})
    database = EmbeddedPostgres(work / "pgdata")
    url = database.start()
    try:
        import boto3

        client = boto3.client("s3", endpoint_url=endpoint)
        sizes = {}
        for n in args.objects:
            sizes[n] = _listing(
                endpoint, f"bench-{n}", url, n, args.runs, args.steps, args.one_pass
            )
        texts = [document(seed, args.words) for seed in range(args.documents)]
        compared = (
            _bucket_against_folder(client, endpoint, url, work, texts, args.runs) if texts else {}
        )
        full = _full_runs(client, endpoint, work, texts, args.full_runs) if args.full_runs else {}
    finally:
        database.stop()
        server.terminate()
        server.wait(timeout=30)
    _print(sizes, compared, full)
    write_result(args.json, {"listing": {str(n): r for n, r in sizes.items()},
                           "bucket_against_folder": compared, "full_run": full,
                           "runs": args.runs})  # fmt: skip
    return 0


def _moto_server(work: Path, buckets: dict[str, int]) -> tuple[subprocess.Popen, str]:
    """`_serve_moto` in a child process, once it answers (its buckets filled)."""
    from tests.support.processes import free_port

    port = free_port()
    log = (work / "moto.log").open("w")
    code = f"from benchmarks.s3_listing import _serve_moto; _serve_moto({port}, {buckets!r})"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    import urllib.request

    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto's server exited: {(work / 'moto.log').read_text()}")
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
            return proc, endpoint
        except OSError:
            time.sleep(0.5)
    raise RuntimeError("moto's server never answered")


def _serve_moto(port: int, buckets: dict[str, int]) -> None:
    """moto's S3 server in this process, after filling versioned `buckets` (name -> objects
    under `notes/`) through moto's backend, the state its server answers from."""
    import threading

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    from moto.server import ThreadedMotoServer

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    for bucket, n in buckets.items():
        backend.create_bucket(bucket, "us-east-1")
        backend.put_bucket_versioning(bucket, "Enabled")
        for i in range(n):
            backend.put_object(bucket, f"notes/{i:06d}.md", BODY.format(n=i).encode())
    ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False).start()
    threading.Event().wait()


def _timed(step: Callable[[], T]) -> tuple[T, float, float]:
    """`step()`, the wall seconds and this process's CPU seconds it took."""
    started, started_cpu = time.perf_counter(), time.process_time()
    value = step()
    return value, time.perf_counter() - started, time.process_time() - started_cpu


def _listing(
    endpoint: str,
    bucket: str,
    url: str,
    n: int,
    runs: int,
    chosen: list[str],
    one_pass: bool = False,
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

    # The client made and its service model loaded before anything is measured.
    source.store.client.list_objects_v2(Bucket=bucket, MaxKeys=1)
    result: dict[str, Any] = {"key_and_etag_bytes": _key_and_etag_bytes(bucket, n)}
    every = {"list": (listed, runs), "decide": (decide, runs), "register": (register, 1),
             "again": (decide, runs)}  # fmt: skip
    steps = [(name, *every[name]) for name in STEPS if name in chosen]
    for name, step, repeat in steps:
        memory = _peak(step) if name != "register" and not one_pass else None
        times, cpu = [], []
        for _ in range(repeat):
            if one_pass:  # timed while traced
                tracemalloc.start()
            count, seconds, cpu_seconds = _timed(step)
            if tracemalloc.is_tracing():
                memory = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            times.append(seconds)
            cpu.append(cpu_seconds)
        if memory is None:  # the one pass that registers: the memory of its listing after
            memory = _peak(lambda: len(source.scan().found))
        result[name] = {
            "seconds": statistics.median(times),
            "cpu_seconds": statistics.median(cpu),
            "objects_per_s": n / statistics.median(times),
            "counted": count,
            "peak_mib": memory / 2**20,
            "peak_bytes_per_object": memory / n,
            "load_average": os.getloadavg()[0],
        }
        print(f"{n:,} {name}: {result[name]}", flush=True)
    return result


def _key_and_etag_bytes(bucket: str, n: int) -> int:
    """What the objects' keys (as `s3://` URIs) and ETags alone take as Python strings, per
    object: the floor a listing that keeps anything per object cannot go under."""
    uri = sys.getsizeof(f"s3://{bucket}/notes/{n - 1:06d}.md")
    return uri + sys.getsizeof(hashlib.md5(b"").hexdigest())


def _peak(step: Callable[[], int]) -> int:
    tracemalloc.start()
    try:
        step()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _bucket_against_folder(
    client: Any, endpoint: str, url: str, work: Path, texts: list[str], runs: int
) -> dict[str, Any]:
    import dagster as dg

    from seams.assets.extraction import build_extraction_asset
    from seams.assets.partitions import document_batches
    from seams.extraction.limits import ExtractionLimits
    from seams.resources.io_manager import PostgresIOManager
    from seams.resources.keys import IO_MANAGER_KEY, POSTGRES_KEY
    from seams.resources.postgres import PostgresResource
    from seams.storage.object_store import ObjectPrefix, ObjectStore
    from seams.storage.sources import FolderSource, ObjectSource

    postgres = PostgresResource(url=url)
    resources = {POSTGRES_KEY: postgres, IO_MANAGER_KEY: PostgresIOManager(postgres=postgres)}
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
            key, registered, _ = _timed(partial(_register, postgres, source, f"bench:{kind}{run}"))
            asset = build_extraction_asset(ExtractionLimits(), endpoint_url=endpoint)
            with dg.DagsterInstance.ephemeral() as instance:
                instance.add_dynamic_partitions(document_batches.name, [key])
                result, extracted, _ = _timed(
                    partial(
                        dg.materialize,
                        [asset],
                        partition_key=key,
                        instance=instance,
                        resources=resources,
                    )
                )
            assert result.success
            out[kind].append((registered, extracted))
            print(f"{kind} run {run}: register {registered:.2f} s, extract {extracted:.2f} s")
    return {
        kind: {
            "documents": len(texts),
            "register_s": statistics.median(r for r, _ in pairs),
            "extract_s": statistics.median(e for _, e in pairs),
            "load_average": os.getloadavg()[0],
        }
        for kind, pairs in out.items()
    }


def _register(postgres: Any, source: Any, name: str) -> str:
    """One batch of everything `source` holds now; its key."""
    from seams.storage import batches

    scan = source.scan()
    with postgres.connection() as conn:
        return batches.register_batch(conn, source.freeze(scan.found), source=name)


def _full_runs(
    client: Any, endpoint: str, work: Path, texts: list[str], runs: int
) -> dict[str, Any]:
    """`seams run FOLDER` and `seams run s3://BUCKET/docs` over the same files, alternating,
    each a child process with its own data dir (the exported model linked in) and embedded
    PostgreSQL, stopped after it: wall and CPU seconds of the command (its server's not
    included), per source, medians of `runs`."""
    from seams.environment import SeamsEnvironment
    from seams.models.model_export import export_model
    from seams.models.model_store import default_model_dir

    model = export_model(default_model_dir(SeamsEnvironment.from_os())).directory
    folder = work / "full-folder"
    folder.mkdir()
    client.create_bucket(Bucket="full")
    client.put_bucket_versioning(Bucket="full", VersioningConfiguration={"Status": "Enabled"})
    for i, text in enumerate(texts):
        (folder / f"doc{i:03d}.md").write_text(text, encoding="utf-8")
        client.put_object(Bucket="full", Key=f"docs/doc{i:03d}.md", Body=text.encode())
    places = {"folder": str(folder), "bucket": "s3://full/docs"}
    out: dict[str, list[tuple[float, float, float]]] = {"folder": [], "bucket": []}
    for run in range(runs):
        for kind, place in places.items():
            data = work / f"full-{kind}-{run}"
            (data / "models").mkdir(parents=True)
            (data / "models" / model.name).symlink_to(model)
            env = {k: v for k, v in os.environ.items() if not k.startswith("SEAMS_")}
            env |= {"SEAMS_DATA_DIR": str(data), "AWS_ENDPOINT_URL": endpoint}

            def seams(*args: str, env: dict[str, str] = env) -> subprocess.CompletedProcess:
                return subprocess.run([sys.executable, "-m", "seams", *args], env=env,
                                      cwd=work, capture_output=True, text=True)  # fmt: skip

            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            done, seconds, _ = _timed(lambda place=place: seams("run", place))
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            seams("db", "stop")
            if done.returncode != 0:
                raise RuntimeError(f"seams run {place} failed:\n{done.stdout}\n{done.stderr}")
            cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            out[kind].append((seconds, cpu, os.getloadavg()[0]))
            print(f"seams run {place}: {seconds:.1f} s, CPU {cpu:.1f} s", flush=True)
    return {
        kind: {
            "documents": len(texts),
            "runs": len(rows),
            "wall_s": statistics.median(w for w, _, _ in rows),
            "cpu_s": statistics.median(c for _, c, _ in rows),
            "load_averages": [load for _, _, load in rows],
        }
        for kind, rows in out.items()
    }


def _print(
    sizes: dict[int, dict[str, Any]], compared: dict[str, Any], full: dict[str, Any]
) -> None:
    print("\n| objects | step | median s | our CPU s | peak MiB | bytes/object | load |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n, steps in sizes.items():
        for name, r in steps.items():
            if not isinstance(r, dict):
                continue
            print(f"| {n:,} | {name} | {r['seconds']:.2f} | {r['cpu_seconds']:.2f} | "
                  f"{r['peak_mib']:.1f} | {r['peak_bytes_per_object']:.0f} | "
                  f"{r['load_average']:.1f} |")  # fmt: skip
        print(f"(a key and an ETag alone: {steps['key_and_etag_bytes']} bytes per object)")
    print("\n| source | documents | register s | extracted_text s |")
    print("|---|---:|---:|---:|")
    for kind, r in compared.items():
        print(f"| {kind} | {r['documents']} | {r['register_s']:.2f} | {r['extract_s']:.2f} |")
    for kind, r in full.items():
        print(f"seams run from the {kind}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU "
              f"(median of {r['runs']}, load {r['load_averages']})")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
