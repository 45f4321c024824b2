"""What every target store offers Seams, and the records it holds.

A *target* mirrors Seams' published current chunks into a vector store a team already runs
(`seams.targets` holds its settings). The logic that decides what to write is one, for every
store (`seams.storage.targets.sync`); a store kind only does what its client does: create an
object, list ids, read records, upsert, delete, point readers at an object, drop one.

How a new kind plugs in: write `storage/targets/<kind>.py` with a class implementing
`TargetStore` below (its client imported inside that module only) and an
`open_store(name, settings, location) -> TargetStore` function; add the kind to
`seams.targets.KINDS` and to `KIND_MODULES` in `seams.storage.targets`; add its client as the
extra `seams-chunking[<kind>]` in pyproject.toml. Its tests run the shared scenario of
tests/storage/targets against a real engine.

Objects: readers use one name (`TargetSettings.store_name`). Records of one retrieval model and
dimension live in one object named `model_object(name, model, dimension)`; a model switch fills
the new object beside the old one, then `switch` points readers at it in one step where the
store can (a view, an alias) and the old object is dropped. `switch` returns the object that
is live afterwards: the model object itself where readers go through a view or alias, or the
readers' name where the store has neither and copies the new records into it (LanceDB).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from seams.errors import StorageError
from seams.storage.connections import redact
from seams.targets import TargetSettings

TEXT, INTEGER = "text", "integer"

RECORD_FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("chunk_id", TEXT, False),
    ("document_id", TEXT, False),
    ("source_uri", TEXT, True),
    ("collection", TEXT, False),
    ("chunk_index", INTEGER, False),
    ("total_chunks", INTEGER, False),
    ("start_char", INTEGER, False),
    ("end_char", INTEGER, False),
    ("section", TEXT, False),
    ("page_start", INTEGER, True),
    ("page_end", INTEGER, True),
    ("token_count", INTEGER, False),
    ("config_hash", TEXT, False),
    ("model_id", TEXT, False),
    ("source_sha256", TEXT, False),
    ("vector_model_id", TEXT, False),
    ("text", TEXT, False),
)
"""Every field a record carries beside its vector: (name, type, nullable). `model_id` is the
chunk's lineage (the model that placed its boundaries, as in `seams.chunks`); `vector_model_id`
is the model of the record's vector (the serving retrieval model)."""
FIELD_NAMES = tuple(name for name, _, _ in RECORD_FIELDS)
VECTOR_FIELD = "vector"
"""The vector's column or field, where the store names it (pgvector, LanceDB)."""

RECORD_NAMESPACE = uuid.UUID("0b8a3c4e-5f1d-4c6e-9a2b-7d3e1f0c5a96")
"""The namespace of `record_uuid`: fixed forever, so a chunk keeps its record id."""


@dataclass(frozen=True)
class Record:
    """One chunk as a store holds it: its fields (`FIELD_NAMES`) and its vector."""

    fields: Mapping[str, Any]
    vector: np.ndarray

    @property
    def chunk_id(self) -> str:
        return str(self.fields["chunk_id"])


def record_uuid(chunk_id: str) -> str:
    """A deterministic UUID of a chunk id, for stores whose record ids are UUIDs (Qdrant)."""
    return str(uuid.uuid5(RECORD_NAMESPACE, chunk_id))


def model_object(name: str, model_id: str, dimension: int) -> str:
    """The object holding `name`'s records of one model and dimension: `<name>__<dim>_<hash>`,
    deterministic (a rerun finds the object a killed sync began), at most 60 characters."""
    digest = hashlib.sha256(model_id.encode()).hexdigest()[:10]
    return f"{name}__{int(dimension)}_{digest}"


def is_model_object(name: str, candidate: str) -> bool:
    """Whether `candidate` is one of `name`'s model objects (`model_object`)."""
    return candidate.startswith(f"{name}__")


def unreachable(
    target: str, settings: TargetSettings, store: str, location: str, exc: Exception
) -> StorageError:
    """The one-line error of a store that cannot be opened: the target and the field that
    located it (`url_env` or `path`), the store, its location with any password hidden, and
    the client's reason on one line."""
    field = "url_env" if settings.url_env is not None else "path"
    reason = " ".join(str(exc).split())[:200] or type(exc).__name__
    return StorageError(
        f"targets.{target}.{field}: cannot reach {store} at {redact(location)} ({reason})"
    )


def normalised(value: Any) -> Any:
    """A field value as compared between Seams and a store: numpy scalars as Python ones, NaN
    (a store's null in a numeric column) as None."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if value != value:
            return None
        if value.is_integer():
            return int(value)
    return value


def differing_fields(expected: Mapping[str, Any], stored: Mapping[str, Any]) -> list[str]:
    """The fields whose stored value is not Seams' (a missing field counts as null)."""
    return [
        name
        for name in FIELD_NAMES
        if normalised(expected.get(name)) != normalised(stored.get(name))
    ]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity; 0 for vectors of different dimensions or a zero vector."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return 0.0
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norm if norm else 0.0


class TargetStore(Protocol):
    """One target's store, opened (its client connected). Every method names the object it
    acts on; ids are chunk ids (a store that needs UUIDs maps them with `record_uuid`).

    Writes are idempotent: an upsert of a record the object holds replaces it, a delete of an
    id it lacks does nothing, so a sync killed at any instant can simply run again.
    """

    kind: str
    name: str
    """The name readers use (the table or collection of the settings)."""
    atomic_switch: bool
    """Whether `switch` changes what readers see in one step (no moment with neither model)."""

    def live(self) -> str | None:
        """The object readers read now (None: the readers' name does not exist yet)."""
        ...

    def objects(self) -> list[str]:
        """Every object of this target that exists: the live one and the model objects."""
        ...

    def ensure(self, obj: str, dimension: int) -> None:
        """Create `obj` for vectors of `dimension` (cosine) where it does not exist."""
        ...

    def count(self, obj: str) -> int:
        """How many records `obj` holds (a count, where listing every id is slow)."""
        ...

    def ids(self, obj: str) -> set[str]:
        """The chunk ids `obj` holds."""
        ...

    def read(self, obj: str) -> Iterator[Record]:
        """Every record `obj` holds, fields and vector, in any order."""
        ...

    def upsert(self, obj: str, records: Sequence[Record]) -> None:
        """Write `records` (new ones added, existing ids replaced whole)."""
        ...

    def delete(self, obj: str, chunk_ids: Sequence[str]) -> None:
        """Delete the records of `chunk_ids`."""
        ...

    def switch(self, obj: str) -> str:
        """Point readers at `obj`; returns the object live afterwards."""
        ...

    def drop(self, obj: str) -> None:
        """Remove `obj` (never the object readers read)."""
        ...

    def close(self) -> None: ...
