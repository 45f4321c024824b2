"""Qdrant targets: a collection per model, readers query an alias.

`collection: rag_chunks` is an alias of the model collection `rag_chunks__<dim>_<hash>` (cosine
distance). A point's id is `base.record_uuid(chunk_id)` (Qdrant ids are integers or UUIDs) and
its payload holds every field of `base.RECORD_FIELDS`, `chunk_id` included. A model switch fills
the new collection, then moves the alias in one `update_collection_aliases` request (delete and
create together: atomic on a Qdrant server) and deletes the old collection.

`url_env` names the server's URL (`http://host:6333`; an API key, if any, in the URL's
`api_key` is not supported: put the server behind your network's auth). `path` opens
qdrant-client's local mode, a folder one process at a time, which the tests use (no Qdrant
server package installs here). The client is the extra `seams-chunking[qdrant]`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from qdrant_client import QdrantClient, models

from seams.errors import StorageError
from seams.storage.targets.base import (
    FIELD_NAMES,
    Record,
    is_model_object,
    record_uuid,
    unreachable,
)
from seams.targets import TargetSettings

_PAGE = 1000


def open_store(target: str, settings: TargetSettings, location: str) -> QdrantStore:
    try:
        if settings.url_env is not None:
            client = QdrantClient(url=location, timeout=30)
        else:
            client = QdrantClient(path=location)
        client.get_collections()
    except Exception as exc:  # the client raises its transport's own errors
        raise unreachable(target, settings, "Qdrant", location, exc) from None
    return QdrantStore(target, client, settings.store_name)


class QdrantStore:
    """A target in Qdrant (`TargetStore`)."""

    kind = "qdrant"
    atomic_switch = True

    def __init__(self, target: str, client: QdrantClient, name: str) -> None:
        self.target, self.client, self.name = target, client, name

    def live(self) -> str | None:
        for alias in self.client.get_aliases().aliases:
            if alias.alias_name == self.name:
                return str(alias.collection_name)
        if self.client.collection_exists(self.name):
            raise StorageError(
                f"targets.{self.target}.collection: {self.name} is a collection Seams did not "
                "make (readers' names are aliases): choose another name, or delete it"
            )
        return None

    def objects(self) -> list[str]:
        names = [c.name for c in self.client.get_collections().collections]
        return sorted(n for n in names if is_model_object(self.name, n))

    def ensure(self, obj: str, dimension: int) -> None:
        if not self.client.collection_exists(obj):
            self.client.create_collection(
                obj,
                vectors_config=models.VectorParams(
                    size=int(dimension), distance=models.Distance.COSINE
                ),
            )

    def _scroll(self, obj: str, payload: Any, vectors: bool) -> Iterator[models.Record]:
        offset = None
        while True:
            points, offset = self.client.scroll(
                obj, limit=_PAGE, offset=offset, with_payload=payload, with_vectors=vectors
            )
            yield from points
            if offset is None:
                return

    def count(self, obj: str) -> int:
        return int(self.client.count(obj, exact=True).count)

    def ids(self, obj: str) -> set[str]:
        return {
            str((p.payload or {}).get("chunk_id")) for p in self._scroll(obj, ["chunk_id"], False)
        }

    def read(self, obj: str) -> Iterator[Record]:
        for point in self._scroll(obj, True, True):
            payload = dict(point.payload or {})
            vector = point.vector if not isinstance(point.vector, dict) else None
            yield Record(payload, np.asarray(vector or [], dtype=np.float32))

    def upsert(self, obj: str, records: Sequence[Record]) -> None:
        points = [
            models.PointStruct(
                id=record_uuid(r.chunk_id),
                vector=np.asarray(r.vector, dtype=np.float32).tolist(),
                payload={name: r.fields.get(name) for name in FIELD_NAMES},
            )
            for r in records
        ]
        if points:
            self.client.upsert(obj, points=points, wait=True)

    def delete(self, obj: str, chunk_ids: Sequence[str]) -> None:
        if chunk_ids:
            self.client.delete(
                obj,
                points_selector=models.PointIdsList(points=[record_uuid(c) for c in chunk_ids]),
                wait=True,
            )

    def switch(self, obj: str) -> str:
        operations: list[Any] = []
        if self.live() is not None:
            operations.append(
                models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=self.name))
            )
        operations.append(
            models.CreateAliasOperation(
                create_alias=models.CreateAlias(collection_name=obj, alias_name=self.name)
            )
        )
        self.client.update_collection_aliases(change_aliases_operations=operations)
        return obj

    def drop(self, obj: str) -> None:
        self.client.delete_collection(obj)

    def close(self) -> None:
        self.client.close()
