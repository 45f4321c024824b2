"""Milvus targets: a collection per model, readers query an alias.

`collection: rag_chunks` is an alias of the model collection `rag_chunks__<dim>_<hash>`: the
chunk id is the primary key (VARCHAR), every field of `base.RECORD_FIELDS` a scalar field
(nullable where the lineage may be null) and `vector` a FLOAT_VECTOR with a COSINE index.
Collections are made with strong consistency, so a reader sees a write once it returned. A
model switch fills the new collection, then moves the alias in one `alter_alias` (atomic on the
server), and drops the old collection.

`url_env` names the server's URL (`http://host:19530`; a token in the URL's password,
`http://:TOKEN@host:19530`, is passed as the client's token); `path` opens Milvus Lite, a
local file ending in `.db` (one process at a time), which the tests use. Milvus holds at most
65,535 bytes in a text field: a longer chunk or section is refused with one line naming it.
The client is the extra `seams-chunking[milvus]`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from pymilvus import DataType, MilvusClient
from pymilvus.client.types import LoadState

from seams.errors import StorageError
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

MAX_TEXT_BYTES = 65_535
"""The longest VARCHAR Milvus stores."""
_ID_BYTES = 128
_PAGE = 1000
_CONNECTION: dict[str, Any] = {"dedicated": True, "timeout": 60}
"""A connection of the store's own, closed with it: a later sync in the same process connects
afresh instead of reviving a shared channel that sat idle (which the server may have sent
away meanwhile); 60 s to connect, for a busy machine (Milvus Lite serves from this process)."""


def open_store(target: str, settings: TargetSettings, location: str) -> MilvusStore:
    try:
        if settings.url_env is not None:
            parts = urlsplit(location)
            netloc = parts.hostname or ""
            if parts.port:
                netloc += f":{parts.port}"
            uri = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
            client = MilvusClient(uri=uri, token=parts.password or "", **_CONNECTION)
        else:
            if not location.endswith(".db"):
                raise ValueError("Milvus Lite's path is a file ending in .db")
            client = MilvusClient(location, **_CONNECTION)
        client.list_collections()
    except Exception as exc:  # the client raises its transport's own errors
        raise unreachable(target, settings, "Milvus", location, exc) from None
    return MilvusStore(target, client, settings.store_name)


class MilvusStore:
    """A target in Milvus or Milvus Lite (`TargetStore`)."""

    kind = "milvus"
    atomic_switch = True

    def __init__(self, target: str, client: MilvusClient, name: str) -> None:
        self.target, self.client, self.name = target, client, name

    def live(self) -> str | None:
        if self.name in self.client.list_collections():
            raise StorageError(
                f"targets.{self.target}.collection: {self.name} is a collection Seams did not "
                "make (readers' names are aliases): choose another name, or drop it"
            )
        # Listed first: the client logs a missing alias that it is asked to describe as an error.
        if self.name not in self.client.list_aliases()["aliases"]:
            return None
        return str(self.client.describe_alias(self.name)["collection_name"])

    def objects(self) -> list[str]:
        return sorted(n for n in self.client.list_collections() if is_model_object(self.name, n))

    def ensure(self, obj: str, dimension: int) -> None:
        if self.client.has_collection(obj):
            return
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        for name, kind, nullable in RECORD_FIELDS:
            if name == "chunk_id":
                schema.add_field(name, DataType.VARCHAR, max_length=_ID_BYTES, is_primary=True)
            elif kind == INTEGER:
                schema.add_field(name, DataType.INT64, nullable=nullable)
            else:
                schema.add_field(
                    name, DataType.VARCHAR, max_length=MAX_TEXT_BYTES, nullable=nullable
                )
        schema.add_field(VECTOR_FIELD, DataType.FLOAT_VECTOR, dim=int(dimension))
        index = self.client.prepare_index_params()
        index.add_index(VECTOR_FIELD, index_type="AUTOINDEX", metric_type="COSINE")
        self.client.create_collection(
            obj, schema=schema, index_params=index, consistency_level="Strong"
        )

    def _loaded(self, obj: str) -> str:
        """`obj`, loaded for queries: a collection opened by another process (Milvus Lite
        reopening its file, a restarted server) is released until loaded."""
        if self.client.get_load_state(obj)["state"] != LoadState.Loaded:
            self.client.load_collection(obj)
        return obj

    def count(self, obj: str) -> int:
        rows = self.client.query(self._loaded(obj), filter="", output_fields=["count(*)"])
        return int(rows[0]["count(*)"])

    def _rows(self, obj: str, fields: list[str]) -> Iterator[dict[str, Any]]:
        self._loaded(obj)
        iterator = self.client.query_iterator(obj, batch_size=_PAGE, output_fields=fields)
        try:
            while rows := iterator.next():
                yield from rows
        finally:
            iterator.close()

    def ids(self, obj: str) -> set[str]:
        return {str(row["chunk_id"]) for row in self._rows(obj, ["chunk_id"])}

    def read(self, obj: str) -> Iterator[Record]:
        for row in self._rows(obj, [*FIELD_NAMES, VECTOR_FIELD]):
            fields = {name: row.get(name) for name in FIELD_NAMES}
            yield Record(fields, np.asarray(row[VECTOR_FIELD], dtype=np.float32))

    def _row(self, record: Record) -> dict[str, Any]:
        row = {name: record.fields.get(name) for name in FIELD_NAMES}
        for name, kind, _ in RECORD_FIELDS:
            value = row[name]
            if kind != INTEGER and value is not None and len(str(value).encode()) > MAX_TEXT_BYTES:
                raise StorageError(
                    f"targets.{self.target}: chunk {record.chunk_id}'s {name} is longer than "
                    f"the {MAX_TEXT_BYTES:,} bytes a Milvus field holds: lower chunk_size_max"
                )
        row[VECTOR_FIELD] = np.asarray(record.vector, dtype=np.float32).tolist()
        return row

    def upsert(self, obj: str, records: Sequence[Record]) -> None:
        if records:
            self.client.upsert(obj, [self._row(r) for r in records])

    def delete(self, obj: str, chunk_ids: Sequence[str]) -> None:
        if chunk_ids:
            self.client.delete(obj, ids=list(chunk_ids))

    def switch(self, obj: str) -> str:
        if self.live() is None:
            self.client.create_alias(obj, self.name)
        else:
            self.client.alter_alias(obj, self.name)
        return obj

    def drop(self, obj: str) -> None:
        self.client.drop_collection(obj)

    def close(self) -> None:
        self.client.close()
