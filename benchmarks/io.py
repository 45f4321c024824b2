"""Postgres IO manager throughput: rows/s written and read for the two frames that matter most.

Usage:
    python -m benchmarks.io [--rounds 5] [--rows 100000] [--json PATH]

Frames: a 100k-row `sentence_candidates` frame (12 small columns) and a 100k x 384
`candidate_embeddings` frame (float32, pgvector). Each round rewrites the same partition (so it
includes the DELETE of the previous round's rows, as a real rerun does) with binary COPY and with
text COPY, interleaved so machine noise hits both alike, then loads it back. Times cover the whole
`write_table` / `read_table` call: validation and coercion, locks, DELETE, COPY, commit; and the
SELECT plus DataFrame construction. Reported: medians, rows/s, MB/s of COPY data, and each
contender's ratio against text COPY measured in the same run. Targets (issue 5): >= 50k rows/s
writing candidates, >= 10k rows/s writing embeddings.

Runs against `SEAMS_DATABASE_URL` when set (in a scratch database it creates and drops), else a
throwaway embedded PostgreSQL in a temp dir.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import statistics
import struct
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import psycopg
from psycopg import sql
from psycopg.adapt import Buffer, Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.header import write_result  # noqa: E402
from seams.resources.database import URL_ENV, EmbeddedPostgres, database_url_for  # noqa: E402
from seams.resources.embedded_server import server_tempdir  # noqa: E402
from seams.resources.postgres import PostgresResource, close_pool, register_vector  # noqa: E402
from seams.storage import schema  # noqa: E402
from seams.storage.partition_tables import read_table, write_table  # noqa: E402

DEFAULT_JSON = REPO / "benchmarks" / "results" / "io.json"
TARGETS = {"sentence_candidates": 50_000, "candidate_embeddings": 10_000}
FORMATS = ("binary", "text")


def candidates_frame(rows: int, seed: int = 0) -> pd.DataFrame:
    """`rows` sentence candidates over documents of 100 candidates each (12 columns)."""
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, 1_000_000, rows)
    pages = pd.array(rng.integers(1, 300, rows), dtype="Int64")
    pages[::7] = pd.NA
    return pd.DataFrame(
        {
            "document_id": [f"docs/guide-{i // 100:05d}.md" for i in range(rows)],
            "candidate_index": np.arange(rows) % 100,
            "start_char": starts,
            "end_char": starts + rng.integers(20, 400, rows),
            "kind": rng.choice(["sentence", "heading", "list_item", "code"], rows),
            "section": rng.choice(["Intro", "Install > Linux", "API > Errors"], rows),
            "page": pages,
            "token_count": rng.integers(3, 120, rows),
            "paragraph": np.arange(rows) // 4,
            "split": rng.random(rows) < 0.01,
            "header_start": pd.array([None] * rows, dtype="Int64"),
            "header_end": pd.array([None] * rows, dtype="Int64"),
        }
    )


def embeddings_frame(rows: int, dim: int = schema.EMBEDDING_DIM, seed: int = 0) -> pd.DataFrame:
    """`rows` L2-normalised float32 embeddings of dimension `dim`."""
    rng = np.random.default_rng(seed)
    matrix = rng.normal(size=(rows, dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return pd.DataFrame(
        {
            "document_id": [f"docs/guide-{i // 100:05d}.md" for i in range(rows)],
            "candidate_index": np.arange(rows) % 100,
            "model_id": "all-MiniLM-L6-v2/onnx-fp32",
            "embedding": list(matrix),
        }
    )


@contextlib.contextmanager
def scratch_database() -> Iterator[str]:
    """A fresh database on SEAMS_DATABASE_URL's server or on a throwaway embedded server."""
    external = os.environ.get(URL_ENV, "").strip()
    root: Path | None = None
    server: EmbeddedPostgres | None = None
    if external:
        server_url = external
    else:
        root = server_tempdir("seams-bench-")
        server = EmbeddedPostgres(root / "pgdata")
        server_url = server.start()
    name = f"seams_bench_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        url = database_url_for(server_url, name)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        yield url
        close_pool(url)
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
    finally:
        if server is not None:
            server.stop()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


def measure(postgres: PostgresResource, rounds: int, rows: int) -> list[dict[str, object]]:
    frames = {
        "sentence_candidates": candidates_frame(rows),
        "candidate_embeddings": embeddings_frame(rows),
    }
    results: list[dict[str, object]] = []
    for name, frame in frames.items():
        table = schema.ASSET_TABLES[name]
        write_s: dict[str, list[float]] = {f: [] for f in FORMATS}
        read_s: list[float] = []
        copy_bytes: dict[str, int] = {}
        write_table(postgres, table, frame, ["warmup"])  # pool, schema, caches
        for round_ in range(rounds):
            for fmt in FORMATS:
                if fmt == "text" and name == "candidate_embeddings" and round_ > 0:
                    continue  # ~20x slower than binary (Python formats 38M floats): one run
                started = time.perf_counter()
                result = write_table(postgres, table, frame, ["bench"], copy_format=fmt)
                write_s[fmt].append(time.perf_counter() - started)
                assert result.rows_written == rows
                copy_bytes[fmt] = result.bytes_written
            started = time.perf_counter()
            loaded = read_table(postgres, table, ["bench"])
            read_s.append(time.perf_counter() - started)
            assert len(loaded) == rows
        reference = statistics.median(write_s["text"])
        for fmt in FORMATS:
            median = statistics.median(write_s[fmt])
            results.append(
                _row(name, f"write, {fmt} COPY", rows, write_s[fmt], reference, copy_bytes[fmt])
            )
            assert median > 0
        results.append(_row(name, "read (binary SELECT)", rows, read_s, reference, None))
    return results


class _HalfvecBinaryDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: np.ndarray) -> bytes:
        return struct.pack(">HH", obj.shape[0], 0) + obj.astype(">f2").tobytes()


class _HalfvecBinaryLoader(Loader):
    format = Format.BINARY

    def load(self, data: Buffer) -> np.ndarray:
        dim = int.from_bytes(bytes(data[:2]), "big")
        return np.frombuffer(data, dtype=">f2", count=dim, offset=4).astype(np.float32)


def halfvec_probe(url: str, rounds: int, rows: int) -> list[dict[str, object]]:
    """Raw COPY + SELECT of the embedding matrix as `vector` vs `halfvec`, and halfvec's fidelity.

    Issue 5 asks for halfvec where it measures better and keeps fidelity; this is the evidence.
    """
    matrix = np.stack(embeddings_frame(rows)["embedding"].to_list())
    out: list[dict[str, object]] = []
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        info = TypeInfo.fetch(conn, "halfvec")
        assert info is not None, "pgvector >= 0.7 has halfvec"
        info.register(conn)
        conn.adapters.register_dumper(None, type("D", (_HalfvecBinaryDumper,), {"oid": info.oid}))
        conn.adapters.register_loader(info.oid, _HalfvecBinaryLoader)
        timings: dict[str, tuple[list[float], list[float]]] = {}
        loaded: dict[str, np.ndarray] = {}
        for _ in range(rounds):
            for kind in ("vector", "halfvec"):
                probe = sql.Identifier(f"probe_{kind}")
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(probe))
                conn.execute(sql.SQL("CREATE TABLE {} (i int, e {})").format(probe, sql.SQL(kind)))
                copy_sql = sql.SQL("COPY {} (i, e) FROM STDIN (FORMAT BINARY)").format(probe)
                started = time.perf_counter()
                with conn.transaction(), conn.cursor() as cur, cur.copy(copy_sql) as copy:
                    copy.set_types(["int4", kind])
                    for i, row in enumerate(matrix):
                        copy.write_row((i, row))
                write = time.perf_counter() - started
                started = time.perf_counter()
                with conn.cursor(binary=True) as cur:
                    cur.execute(sql.SQL("SELECT e FROM {} ORDER BY i").format(probe))
                    loaded[kind] = np.stack([r[0] for r in cur.fetchall()])
                read = time.perf_counter() - started
                timings.setdefault(kind, ([], []))[0].append(write)
                timings[kind][1].append(read)
            size = {
                k: conn.execute("SELECT pg_total_relation_size(%s)", (f"probe_{k}",)).fetchone()[0]
                for k in ("vector", "halfvec")
            }
    cosine = (loaded["halfvec"] * matrix).sum(axis=1) / np.linalg.norm(loaded["halfvec"], axis=1)
    for kind in ("vector", "halfvec"):
        write_s, read_s = timings[kind]
        out.append(
            {
                "type": kind,
                "write_rows_per_s": round(rows / statistics.median(write_s)),
                "read_rows_per_s": round(rows / statistics.median(read_s)),
                "table_mb": round(size[kind] / 1e6, 1),
                "exact": bool(np.array_equal(loaded[kind], matrix)),
                "min_cosine_vs_float32": 1.0 if kind == "vector" else round(float(cosine.min()), 8),
            }
        )
    return out


def _row(
    frame: str,
    operation: str,
    rows: int,
    seconds: list[float],
    reference: float,
    nbytes: int | None,
) -> dict[str, object]:
    median = statistics.median(seconds)
    return {
        "frame": frame,
        "operation": operation,
        "rows": rows,
        "median_s": round(median, 4),
        "runs_s": [round(s, 4) for s in seconds],
        "rows_per_s": round(rows / median),
        "copy_mb_per_s": round(nbytes / median / 1e6, 1) if nbytes else None,
        "vs_text_copy_write": round(median / reference, 2),
        "target_rows_per_s": TARGETS[frame] if operation.startswith("write") else None,
    }


def markdown(results: list[dict[str, object]]) -> str:
    lines = [
        "| frame | operation | median s | rows/s | COPY MB/s | time vs text COPY | target |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        target = r["target_rows_per_s"]
        verdict = ""
        if isinstance(target, int):
            verdict = f">= {target:,} " + ("ok" if int(r["rows_per_s"]) >= target else "MISSED")  # type: ignore[call-overload]
        mbps = "" if r["copy_mb_per_s"] is None else r["copy_mb_per_s"]
        lines.append(
            f"| {r['frame']} | {r['operation']} | {r['median_s']} | {r['rows_per_s']:,} | "
            f"{mbps} | {r['vs_text_copy_write']} | {verdict} |"
        )
    return "\n".join(lines)


def markdown_probe(probe: list[dict[str, object]]) -> str:
    lines = [
        "| embedding type | write rows/s | read rows/s | table MB | exact | min cosine |",
        "|---|---|---|---|---|---|",
    ]
    for p in probe:
        lines.append(
            f"| {p['type']} | {p['write_rows_per_s']:,} | {p['read_rows_per_s']:,} | "
            f"{p['table_mb']} | {p['exact']} | {p['min_cosine_vs_float32']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    with scratch_database() as url:
        postgres = PostgresResource(url=url)
        with psycopg.connect(url) as conn:
            server_version = conn.info.server_version
        results = measure(postgres, args.rounds, args.rows)
        probe = halfvec_probe(url, args.rounds, args.rows)
    print(markdown(results))
    print("\nRaw COPY/SELECT of the 384-d embeddings alone, `vector` vs `halfvec`:\n")
    print(markdown_probe(probe))
    report = {
        "benchmark": "io",
        "rounds": args.rounds,
        "rows": args.rows,
        "server": "SEAMS_DATABASE_URL" if os.environ.get(URL_ENV) else "embedded",
        "server_version": server_version,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "results": results,
        "halfvec_probe": probe,
    }
    write_result(args.json, report, argv)
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
