"""Does a Milvus target list and read every record exactly once at 100,000 records?

`seams sync` and `--check` read a Milvus collection through pymilvus' `query_iterator`
(`storage/targets/milvus.py`), and milvus-lite's tracker has reports of that iterator repeating
or dropping rows on large collections. This fills a Milvus Lite file through the target's own
`upsert` (`--records` records of 8 dimensions), churns it as backfills do (5 % upserted again,
1 % deleted, spread over the keys), then compares the ids that `ids()` and `read()` return with
the ids that should be there: records, distinct ids, missing and unexpected ones.

    .venv/bin/python benchmarks/experiments/milvus_listing.py --records 100000
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pymilvus import MilvusClient  # noqa: E402

from seams.storage.targets.base import INTEGER, RECORD_FIELDS, Record  # noqa: E402
from seams.storage.targets.milvus import MilvusStore  # noqa: E402

BATCH = 2000


def record(i: int, generation: int, rng: np.random.Generator) -> Record:
    fields = {
        name: i if kind == INTEGER else f"{name}-{i}-{generation}"
        for name, kind, _ in RECORD_FIELDS
    }
    fields["chunk_id"] = hashlib.sha256(str(i).encode()).hexdigest()[:40]
    return Record(fields, rng.random(8, dtype=np.float32))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    n, rng = args.records, np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="seams-milvus-listing-") as folder:
        store = MilvusStore("listing", MilvusClient(str(Path(folder) / "t.db")), "chunks")
        obj = "chunks__m1"
        store.ensure(obj, 8)
        started = time.perf_counter()
        for s in range(0, n, BATCH):
            store.upsert(obj, [record(i, 0, rng) for i in range(s, min(n, s + BATCH))])
        for s in range(0, n, 20 * BATCH):
            store.upsert(obj, [record(i, 1, rng) for i in range(s, min(n, s + BATCH))])
        gone = [record(i, 0, rng).chunk_id for i in range(0, n, 100)]
        store.delete(obj, gone)
        expected = {record(i, 0, rng).chunk_id for i in range(n)} - set(gone)
        print(f"written and churned in {time.perf_counter() - started:.0f} s; "
              f"count() {store.count(obj):,}, expected {len(expected):,}")  # fmt: skip
        listed = store.ids(obj)
        print(f"ids():  {len(listed):,} ids, missing {len(expected - listed):,}, "
              f"unexpected {len(listed - expected):,}")  # fmt: skip
        read = [r.chunk_id for r in store.read(obj)]
        seen = set(read)
        print(f"read(): {len(read):,} records, {len(seen):,} distinct, "
              f"missing {len(expected - seen):,}, unexpected {len(seen - expected):,}")  # fmt: skip
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
