"""pgvector's `vector` type on a psycopg connection: numpy arrays in (text or binary, COPY
included) and float32 arrays out. pgvector's binary format is an int16 dimension, an int16 unused,
then big-endian float4 values; owning these adapters (instead of the `pgvector` package) lets
loads return float32 arrays directly, for Seams' own tables and for a pgvector target alike."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import psycopg
from psycopg.adapt import Buffer, Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo

from seams.errors import StorageError

_HEADER = struct.Struct(">HH")


_BIG_ENDIAN_F4 = np.dtype(">f4")


def _as_float32(obj: Any) -> np.ndarray:
    """Big-endian float4 values; arrays already in that layout pass without a copy."""
    values = np.asarray(obj)
    if values.dtype != _BIG_ENDIAN_F4:
        values = values.astype(_BIG_ENDIAN_F4)
    if values.ndim != 1:
        raise ValueError(f"a vector must be 1-D, got shape {values.shape}")
    return values


class VectorBinaryDumper(Dumper):
    """numpy arrays and float sequences -> pgvector `vector`, binary."""

    format = Format.BINARY

    def dump(self, obj: Any) -> Buffer:
        values = _as_float32(obj)
        return _HEADER.pack(values.shape[0], 0) + values.tobytes()


class VectorTextDumper(Dumper):
    def dump(self, obj: Any) -> Buffer:
        # float32 -> float64 is exact, and repr() of a float round-trips: no digit is lost.
        values = _as_float32(obj).astype(np.float64).tolist()
        return ("[" + ",".join(map(repr, values)) + "]").encode()


class VectorBinaryLoader(Loader):
    """pgvector `vector` -> 1-D float32 numpy array (the exact stored values)."""

    format = Format.BINARY

    def load(self, data: Buffer) -> np.ndarray:
        dim = int.from_bytes(bytes(data[:2]), "big")
        return np.frombuffer(data, dtype=">f4", count=dim, offset=4).astype(np.float32)


class VectorTextLoader(Loader):
    def load(self, data: Buffer) -> np.ndarray:
        text = bytes(data).decode()[1:-1]
        return np.array(text.split(",") if text else [], dtype=np.float32)


def register_vector(context: psycopg.Connection[Any]) -> None:
    """Register `vector` on a connection: COPY via `set_types(["vector"])`, numpy parameters,
    and loads as float32 arrays. Raises `StorageError` when pgvector is not installed."""
    info = TypeInfo.fetch(context, "vector")
    if info is None:
        raise StorageError(
            "the pgvector extension is missing in this database: run `CREATE EXTENSION vector` "
            "(Seams' embedded PostgreSQL ships it)"
        )
    info.register(context)
    adapters = context.adapters
    for base in (VectorTextDumper, VectorBinaryDumper):  # binary last: the default for np arrays
        dumper = type(base.__name__, (base,), {"oid": info.oid})
        adapters.register_dumper(None, dumper)  # by oid, for COPY
        adapters.register_dumper(np.ndarray, dumper)
    adapters.register_loader(info.oid, VectorTextLoader)
    adapters.register_loader(info.oid, VectorBinaryLoader)
