"""The files of `seams export`: the export rows written as Parquet or JSON Lines.

For vector stores other than pgvector and for offline analysis. `export_chunks` streams the rows
of `seams.storage.export_rows` (a consistent snapshot, `batch_rows` at a time) and writes each
batch at once, as one Parquet row group (`pyarrow.parquet.ParquetWriter`) or as JSON lines, so
memory stays bounded whatever the table size. The file appears under its name only when
complete: it is written to a temporary file beside it and renamed, so a failure leaves no
half-written export (and an existing file untouched). A missing folder is made first (and removed
again if the export fails); the file and folders get the modes the request's umask allows.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from seams.errors import ConfigError, DiskFullError, InputError, SeamsError, os_error_message
from seams.storage.connections import ConnectionSource
from seams.storage.export_formats import FORMATS, ExportFormat
from seams.storage.export_rows import ExportColumn, ExportRequest, export_columns, stream_rows

if TYPE_CHECKING:
    import pyarrow as pa

SUFFIXES: dict[str, ExportFormat] = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
}


@dataclass
class ExportSummary:
    """What an export wrote."""

    path: Path
    format: ExportFormat
    rows: int = 0
    batches: int = 0
    seconds: float = 0.0


def arrow_schema(columns: Sequence[ExportColumn]) -> pa.Schema:
    """The Parquet schema: text -> string, integer -> int32, double -> float64, boolean -> bool,
    jsonb -> string (JSON text), vector -> list<float32>."""
    import pyarrow as pa

    types = {
        "text": pa.string(),
        "integer": pa.int32(),
        "bigint": pa.int64(),
        "double precision": pa.float64(),
        "boolean": pa.bool_(),
        "jsonb": pa.string(),
        "vector": pa.list_(pa.float32()),
    }
    return pa.schema(
        [
            pa.field(
                c.name,
                types[c.base_type],
                nullable=c.nullable,
                metadata={"pg_type": c.pg_type, "description": c.description},
            )
            for c in columns
        ]
    )


# --- writing -------------------------------------------------------------------------------


class _ParquetSink:
    """Writes each batch as one row group through `pyarrow.parquet.ParquetWriter`."""

    def __init__(self, handle: IO[bytes], columns: Sequence[ExportColumn]) -> None:
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ConfigError(
                'format parquet needs pyarrow: pip install "seams-chunking[parquet]" '
                "(or use --format jsonl)"
            ) from exc
        self._pa = pa
        self._columns = list(columns)
        self._schema = arrow_schema(self._columns)
        self._writer = pq.ParquetWriter(handle, self._schema, compression="zstd")

    def write(self, rows: list[tuple[Any, ...]]) -> None:
        pa = self._pa
        arrays = []
        for index, (column, field) in enumerate(zip(self._columns, self._schema, strict=True)):
            values = [row[index] for row in rows]
            if column.base_type == "jsonb":
                values = [None if v is None else _json(v) for v in values]
            if column.base_type == "vector":
                arrays.append(_vector_array(pa, values, field.type))
            else:
                arrays.append(pa.array(values, type=field.type))
        self._writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=self._schema))

    def close(self) -> None:
        self._writer.close()


def _vector_array(pa: Any, values: list[Any], list_type: pa.DataType) -> pa.Array:
    """list<float32> from float32 arrays (None where a chunk has no vector), without a Python
    float per element."""
    lengths = np.array([0 if v is None else len(v) for v in values], dtype=np.int32)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    present = [np.asarray(v, dtype=np.float32) for v in values if v is not None]
    flat = np.concatenate(present) if present else np.zeros(0, np.float32)
    mask = pa.array([v is None for v in values], type=pa.bool_())
    array = pa.ListArray.from_arrays(
        pa.array(offsets, type=pa.int32()), pa.array(flat, type=pa.float32()), mask=mask
    )
    return array if array.type == list_type else array.cast(list_type)


class _JsonLinesSink:
    """One JSON object per line, keys in `export_columns()` order; `metadata` stays an object,
    `embedding` a list of floats."""

    def __init__(self, handle: IO[bytes], columns: Sequence[ExportColumn]) -> None:
        self._handle = handle
        self._names = [c.name for c in columns]
        self._vectors = {i for i, c in enumerate(columns) if c.base_type == "vector"}

    def write(self, rows: list[tuple[Any, ...]]) -> None:
        lines = []
        for row in rows:
            record = {
                name: (_vector_list(value) if i in self._vectors else value)
                for i, (name, value) in enumerate(zip(self._names, row, strict=True))
            }
            lines.append(_json(record))
        self._handle.write(("\n".join(lines) + "\n").encode("utf-8"))

    def close(self) -> None:
        self._handle.flush()


def _vector_list(value: Any) -> list[float] | None:
    return None if value is None else np.asarray(value, dtype=np.float32).tolist()


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# --- the whole export ---------------------------------------------------------------------


def export_chunks(postgres: ConnectionSource, request: ExportRequest) -> ExportSummary:
    """Stream the requested chunks from `postgres` (e.g. `PostgresResource`) into `request.out`
    (see module docstring)."""
    started = time.perf_counter()
    out = request.out
    check_target(out)
    summary = ExportSummary(path=out, format=request.format)
    columns = export_columns(request.vectors)
    sink_type = _ParquetSink if request.format == "parquet" else _JsonLinesSink
    umask = _process_umask() if request.umask is None else request.umask
    made: list[Path] = []
    try:
        made = _make_folders(out.parent, 0o777 & ~umask)
        with _replace_on_success(out, 0o666 & ~umask) as handle, postgres.connection() as conn:
            sink = sink_type(handle, columns)
            try:
                for rows in stream_rows(conn, request):
                    sink.write(rows)
                    summary.rows += len(rows)
                    summary.batches += 1
            finally:
                sink.close()
    except BaseException as exc:
        for folder in reversed(made):  # nothing of a failed export stays behind
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(exc, OSError):  # the target: read-only, full, vanished, not a file system
            raise _target_error(exc, out) from exc
        raise
    summary.seconds = time.perf_counter() - started
    return summary


def check_target(out: Path) -> None:
    """Refuse, before reading anything, an OUT that cannot be a file: a folder, or a path under a
    file (each named as what it is). A missing folder is no error: the export makes it."""
    if out.is_dir():
        raise InputError(f"OUT: {out} is a folder; give a file name such as chunks.parquet")
    if not out.parent.is_dir():
        under = next((p for p in out.parents if p.exists() and not p.is_dir()), None)
        if under is not None:
            raise InputError(
                f"OUT: cannot use {out}: {under} is a file, not a folder; give a path inside a "
                "folder"
            )


def _process_umask() -> int:
    """This process's umask (reading it means setting it: set back at once)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def _make_folders(folder: Path, mode: int) -> list[Path]:
    """Make `folder` and its missing parents with `mode` (not narrowed by the process's umask);
    the folders made, outermost first."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()][::-1]
    for path in missing:
        path.mkdir(exist_ok=True)
        os.chmod(path, mode)
    return missing


def _target_error(exc: OSError, out: Path) -> SeamsError:
    """The one-line error for an OS failure while writing `out` (the temporary file beside it
    counts as `out`): a full disk is a `DiskFullError`, anything else an `InputError`."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFullError.at(out.parent, f"writing {out.name}", elsewhere="export elsewhere")
    if exc.filename is not None and Path(str(exc.filename)).parent == out.parent:
        exc.filename = None  # the temporary file: name the target instead
    return InputError("OUT: " + os_error_message(exc, path=out))


@contextlib.contextmanager
def _replace_on_success(path: Path, mode: int) -> Iterator[IO[bytes]]:
    """A temporary file beside `path`, renamed onto it with `mode` only when the block succeeds
    (the temporary file stays its owner's alone while it is written)."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            os.fchmod(handle.fileno(), mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def format_for(out: Path, requested: str | None) -> ExportFormat:
    """`--format`, or the format OUT's suffix names (.parquet/.pq, .jsonl/.ndjson)."""
    if requested:
        if requested not in FORMATS:
            raise ConfigError(f"--format: {requested!r} is not one of {', '.join(FORMATS)}")
        return requested  # type: ignore[return-value]
    guessed = SUFFIXES.get(out.suffix.lower())
    if guessed is None:
        raise InputError(
            f"OUT: cannot tell the format from {out.name!r}; pass --format parquet or "
            "--format jsonl (or name the file *.parquet / *.jsonl)"
        )
    return guessed
