"""Chroma targets: one collection readers open, model collections beside it during a switch.

`collection: rag_chunks` holds one record per chunk: its id is the chunk id, its document the
chunk's text, its embedding the serving model's vector (cosine space), its metadata every other
field of `base.RECORD_FIELDS` (a null field is left out: Chroma stores no nulls). LangChain's
`Chroma(collection_name=..., client=...)` reads these records as they are.

Chroma has no aliases or views. A model switch fills `rag_chunks__<dim>_<hash>` beside the
readers' collection, then renames the readers' collection away and the new one to the readers'
name: two requests, so a reader that opens the collection between them is told it does not
exist (it never sees two models in one collection). `seams check` and docs/targets.md say so.

`url_env` names the server's URL (`http://host:8000`; a token in the URL's password,
`http://:TOKEN@host:8000`, is sent as `Authorization: Bearer TOKEN`); `path` opens Chroma's
persistent client on a local folder (one process at a time). The client is the extra
`seams-chunking[chroma]`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import chromadb
import numpy as np

from seams.storage.targets.base import FIELD_NAMES, Record, is_model_object, unreachable
from seams.targets import TargetSettings

_PAGE = 1000
_RETIRED = "retired"
"""Suffix of the readers' collection renamed away during a switch (`<name>__retired`): a model
object by its name, so the sync that switched (or the next one) drops it."""


def open_store(target: str, settings: TargetSettings, location: str) -> ChromaStore:
    try:
        client = _client(location) if settings.url_env is not None else _local(location)
        client.heartbeat()
    except Exception as exc:  # the client raises its transport's own errors
        raise unreachable(target, settings, "Chroma", location, exc) from None
    return ChromaStore(target, client, settings.store_name)


def _client(url: str) -> Any:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("the URL must look like http://host:8000")
    headers = {"Authorization": f"Bearer {parts.password}"} if parts.password else None
    return chromadb.HttpClient(
        host=parts.hostname,
        port=parts.port or (443 if parts.scheme == "https" else 8000),
        ssl=parts.scheme == "https",
        headers=headers,
    )


def _local(path: str) -> Any:
    return chromadb.PersistentClient(path=path)


class ChromaStore:
    """A target in Chroma (`TargetStore`)."""

    kind = "chroma"
    atomic_switch = False

    def __init__(self, target: str, client: Any, name: str) -> None:
        self.target, self.client, self.name = target, client, name

    def _names(self) -> list[str]:
        found: list[str] = []
        while True:
            page = self.client.list_collections(limit=_PAGE, offset=len(found))
            found += [c.name for c in page]
            if len(page) < _PAGE:
                return found

    def _open(self, obj: str) -> Any:
        return self.client.get_collection(obj, embedding_function=None)

    def live(self) -> str | None:
        return self.name if self.name in self._names() else None

    def objects(self) -> list[str]:
        return sorted(n for n in self._names() if n == self.name or is_model_object(self.name, n))

    def ensure(self, obj: str, dimension: int) -> None:
        # Chroma learns the dimension from the first record; the space is fixed at creation.
        self.client.get_or_create_collection(
            obj, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
        )

    def _pages(self, obj: str, include: list[str]) -> Iterator[dict[str, Any]]:
        collection = self._open(obj)
        offset = 0
        while True:
            page = collection.get(include=include, limit=_PAGE, offset=offset)
            if not page["ids"]:
                return
            yield page
            offset += len(page["ids"])

    def count(self, obj: str) -> int:
        return int(self._open(obj).count())

    def ids(self, obj: str) -> set[str]:
        return {cid for page in self._pages(obj, []) for cid in page["ids"]}

    def read(self, obj: str) -> Iterator[Record]:
        for page in self._pages(obj, ["embeddings", "documents", "metadatas"]):
            for cid, text, meta, vector in zip(
                page["ids"], page["documents"], page["metadatas"], page["embeddings"], strict=True
            ):
                fields = dict(meta or {})
                fields["chunk_id"], fields["text"] = cid, text
                yield Record(fields, np.asarray(vector, dtype=np.float32))

    def upsert(self, obj: str, records: Sequence[Record]) -> None:
        if not records:
            return
        self._open(obj).upsert(
            ids=[r.chunk_id for r in records],
            embeddings=np.stack([np.asarray(r.vector, dtype=np.float32) for r in records]),
            documents=[str(r.fields["text"]) for r in records],
            metadatas=[
                {
                    name: r.fields[name]
                    for name in FIELD_NAMES
                    if name not in ("chunk_id", "text") and r.fields.get(name) is not None
                }
                for r in records
            ],
        )

    def delete(self, obj: str, chunk_ids: Sequence[str]) -> None:
        if chunk_ids:
            self._open(obj).delete(ids=list(chunk_ids))

    def switch(self, obj: str) -> str:
        if obj == self.name:
            return obj
        names = self._names()
        if self.name in names:
            retired = f"{self.name}__{_RETIRED}"
            if retired in names:
                self.client.delete_collection(retired)
            self._open(self.name).modify(name=retired)
        self._open(obj).modify(name=self.name)
        return self.name

    def drop(self, obj: str) -> None:
        self.client.delete_collection(obj)

    def close(self) -> None:
        """Nothing to release: the client opens a request per call."""
