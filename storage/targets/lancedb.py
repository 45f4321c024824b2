"""LanceDB targets: one table readers open, model tables beside it during a switch.

`table: rag_chunks` holds one row per record: the fields of `base.RECORD_FIELDS` as columns and
`vector` (a fixed-size list of float32; search it with cosine distance). Changes are
`merge_insert` on `chunk_id` (new and changed rows), then a delete of retired ids: two commits,
each a new version of the table.

LanceDB has no aliases or views. A model switch fills `rag_chunks__<dim>_<hash>` beside the
table, then overwrites the readers' table with its rows: one write, committed as one new
version of the table (Lance commits a version's manifest atomically), so a reader sees the old
model's version or the new one, never a mix and never an empty table. The switch rewrites every
row (no rename exists), and a reader holding the table open sees the new version only when it
checks for one: open it with `lancedb.connect(path, read_consistency_interval=timedelta(0))`
or call `table.checkout_latest()`. The client is the extra `seams-chunking[lancedb]`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa

from seams.storage.targets.base import (
    FIELD_NAMES,
    INTEGER,
    RECORD_FIELDS,
    VECTOR_FIELD,
    Record,
    is_model_object,
    unreachable,
)
from seams.targets import TargetSettings


def open_store(target: str, settings: TargetSettings, location: str) -> LanceStore:
    try:
        db = lancedb.connect(location)
        db.list_tables()
    except Exception as exc:  # the client raises its storage layer's own errors
        raise unreachable(target, settings, "LanceDB", location, exc) from None
    return LanceStore(target, db, settings.store_name)


def record_schema(dimension: int) -> pa.Schema:
    fields = [
        pa.field(name, pa.int64() if kind == INTEGER else pa.string(), nullable=nullable)
        for name, kind, nullable in RECORD_FIELDS
    ]
    fields.append(pa.field(VECTOR_FIELD, pa.list_(pa.float32(), int(dimension)), nullable=False))
    return pa.schema(fields)


class LanceStore:
    """A target in a LanceDB database (`TargetStore`)."""

    kind = "lancedb"
    atomic_switch = True

    def __init__(self, target: str, db: Any, name: str) -> None:
        self.target, self.db, self.name = target, db, name

    def _tables(self) -> list[str]:
        found: list[str] = []
        page = None
        while True:
            response = self.db.list_tables(page_token=page)
            found += list(response.tables)
            page = response.page_token
            if not page:
                return found

    def live(self) -> str | None:
        return self.name if self.name in self._tables() else None

    def objects(self) -> list[str]:
        return sorted(t for t in self._tables() if t == self.name or is_model_object(self.name, t))

    def ensure(self, obj: str, dimension: int) -> None:
        if obj not in self._tables():
            self.db.create_table(obj, schema=record_schema(dimension))

    def count(self, obj: str) -> int:
        return int(self.db.open_table(obj).count_rows())

    def ids(self, obj: str) -> set[str]:
        table = self.db.open_table(obj)
        rows = table.search().select(["chunk_id"]).limit(max(table.count_rows(), 1)).to_arrow()
        return set(rows.column("chunk_id").to_pylist())

    def read(self, obj: str) -> Iterator[Record]:
        table = self.db.open_table(obj).to_arrow()
        for batch in table.to_batches(max_chunksize=2000):
            columns = batch.to_pydict()
            for i in range(batch.num_rows):
                fields = {name: columns[name][i] for name in FIELD_NAMES}
                vector = np.asarray(columns[VECTOR_FIELD][i], dtype=np.float32)
                yield Record(fields, vector)

    def _arrow(self, obj: str, records: Sequence[Record]) -> pa.Table:
        schema = self.db.open_table(obj).schema
        data: dict[str, list[Any]] = {
            name: [r.fields.get(name) for r in records] for name in FIELD_NAMES
        }
        data[VECTOR_FIELD] = [np.asarray(r.vector, dtype=np.float32) for r in records]
        return pa.Table.from_pydict(data, schema=schema)

    def upsert(self, obj: str, records: Sequence[Record]) -> None:
        if not records:
            return
        (
            self.db.open_table(obj)
            .merge_insert("chunk_id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(self._arrow(obj, records))
        )

    def delete(self, obj: str, chunk_ids: Sequence[str]) -> None:
        if chunk_ids:
            quoted = ", ".join("'" + c.replace("'", "''") + "'" for c in chunk_ids)
            self.db.open_table(obj).delete(f"chunk_id IN ({quoted})")

    def switch(self, obj: str) -> str:
        if obj != self.name:
            rows = self.db.open_table(obj).to_arrow()
            self.db.create_table(self.name, data=rows, mode="overwrite")
        return self.name

    def drop(self, obj: str) -> None:
        self.db.drop_table(obj)

    def close(self) -> None:
        """Nothing to release: LanceDB holds no connection."""
