"""`seams export` against the real pipeline: the bundled sample corpus chunked into a fresh
PostgreSQL, exported to Parquet and JSON Lines, read back and compared with `seams.chunks`."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import dagster as dg
import numpy as np
import psycopg
import pyarrow.parquet as pq
import pytest

from seams.orchestration import cli, runner
from seams.resources.database import URL_ENV
from seams.resources.postgres import PostgresResource
from seams.storage import schema
from seams.storage.export_files import export_chunks
from seams.storage.export_rows import ExportRequest, export_columns
from tests.support.samples import copy_samples

SAMPLE_FILES = sorted(p.name for p in runner.SAMPLE_CORPUS.iterdir() if p.name != "README.md")
CHUNK_COLUMNS = [c.name for c in schema.CHUNKS.columns]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """The bundled sample corpus (its documents; the README describes them)."""
    return copy_samples(tmp_path / "corpus", SAMPLE_FILES)


@pytest.fixture
def small_corpus(tmp_path: Path) -> Path:
    """Two documents of the sample corpus: enough for two batches and a newer version."""
    return copy_samples(tmp_path / "corpus", SAMPLE_FILES[:2])


def _materialize(instance: dg.DagsterInstance, path: Path, *, defs: dg.Definitions) -> list[str]:
    keys = runner.register_path(path, print, defs=defs)
    runner.materialize_batches(instance, keys, print, runner.RunSummary(batches=keys), defs=defs)
    return keys


def _db_rows(database_url: str, relation: str = "seams.chunks") -> list[dict]:
    columns = ", ".join(CHUNK_COLUMNS)
    with psycopg.connect(database_url) as conn, conn.cursor() as cur:
        cur.execute(
            f"SELECT {columns} FROM {relation} ORDER BY batch_key, document_id, chunk_index"
        )
        return [dict(zip(CHUNK_COLUMNS, row, strict=True)) for row in cur.fetchall()]


def _normalise(row: dict) -> dict:
    """Parquet holds `metadata` as JSON text, JSON Lines and the database as an object."""
    out = {name: row[name] for name in CHUNK_COLUMNS}
    if isinstance(out["metadata"], str):
        out["metadata"] = json.loads(out["metadata"])
    return out


def test_parquet_and_jsonl_exports_hold_exactly_the_chunks_table(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    corpus: Path,
    database_url: str,
    tmp_path: Path,
) -> None:
    _materialize(instance, corpus, defs=defs)
    expected = _db_rows(database_url)
    assert len({r["document_id"] for r in expected}) == len(SAMPLE_FILES)

    parquet = tmp_path / "chunks.parquet"
    assert cli.main(["export", "--format", "parquet", "--batch-rows", "7", str(parquet)]) == 0
    table = pq.read_table(parquet)
    assert table.column_names == [c.name for c in export_columns()]
    exported = table.to_pylist()
    assert [_normalise(r) for r in exported] == expected  # same rows, ids, order, provenance
    assert all(r["source_uri"] for r in exported)
    # A project without collections exports every chunk as the default collection's.
    assert {r["collection"] for r in exported} == {"default"}
    # Streamed: written 7 rows at a time, one row group per fetched batch.
    metadata = pq.ParquetFile(parquet).metadata
    assert metadata.num_row_groups == -(-len(expected) // 7)
    assert max(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)) == 7

    jsonl = tmp_path / "chunks.jsonl"  # format from the suffix
    assert cli.main(["export", str(jsonl)]) == 0
    lines = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    assert [_normalise(r) for r in lines] == expected
    assert list(lines[0]) == [c.name for c in export_columns()]


def test_export_filters_by_batch_and_current_version_and_adds_vectors(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    small_corpus: Path,
    database_url: str,
    tmp_path: Path,
) -> None:
    (first,) = _materialize(instance, small_corpus, defs=defs)
    changed = small_corpus / SAMPLE_FILES[0]
    changed.write_text("# Changed\n\nA new version of this document.\n", encoding="utf-8")
    (second,) = _materialize(instance, small_corpus, defs=defs)
    postgres = PostgresResource(url=database_url)

    everything = export_chunks(postgres, ExportRequest(tmp_path / "all.jsonl", "jsonl"))
    only_second = export_chunks(
        postgres, ExportRequest(tmp_path / "second.jsonl", "jsonl", batch_key=second)
    )
    current = export_chunks(
        postgres, ExportRequest(tmp_path / "current.parquet", "parquet", current=True)
    )
    assert everything.rows == len(_db_rows(database_url))
    assert only_second.rows == 1  # the one changed document, one short chunk
    second_rows = [json.loads(x) for x in (tmp_path / "second.jsonl").read_text().splitlines()]
    assert {r["batch_key"] for r in second_rows} == {second}
    current_rows = pq.read_table(tmp_path / "current.parquet").to_pylist()
    assert [_normalise(r) for r in current_rows] == _db_rows(database_url, "seams.current_chunks")
    assert current.rows == everything.rows - sum(
        1
        for r in _db_rows(database_url)
        if r["batch_key"] == first and r["document_id"] == second_rows[0]["document_id"]
    )

    vectors = tmp_path / "vectors.parquet"
    assert cli.main(["export", "--vectors", "--batch", first, str(vectors)]) == 0
    rows = pq.read_table(vectors).to_pylist()
    with psycopg.connect(database_url) as conn:
        index = {
            (doc, chunk): np.array(json.loads(vec), dtype=np.float32)
            for doc, chunk, vec in conn.execute(
                "SELECT document_id, chunk_id, embedding::text FROM seams.chunk_index"
                " WHERE batch_key = %s",
                (first,),
            )
        }
    assert len(rows) == len(index) > 0
    for row in rows:
        assert row["vector_model_id"] and row["vector_mode"]
        np.testing.assert_array_equal(
            np.array(row["embedding"], np.float32), index[row["document_id"], row["chunk_id"]]
        )


def test_a_failed_export_leaves_no_file_and_names_the_bad_batch(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    monkeypatch.setenv(URL_ENV, database_url)
    out = tmp_path / "chunks.parquet"
    out.write_bytes(b"an earlier export")
    assert cli.main(["export", "--batch", "no-such-batch", str(out)]) == cli.EXIT_ERROR
    assert "no batch 'no-such-batch'" in capsys.readouterr().err
    assert out.read_bytes() == b"an earlier export"  # untouched, no partial file beside it
    assert [p.name for p in tmp_path.iterdir()] == ["chunks.parquet"]
    assert cli.main(["export", str(tmp_path / "chunks.csv")]) == cli.EXIT_ERROR
    assert "--format" in capsys.readouterr().err


def test_export_makes_a_missing_folder_and_writes_as_the_users_umask_allows(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    """Seams keeps its own files private, but an export is the user's file: under umask 022 it is
    0644 in folders of 0755 made for it; a failed export takes the folders it made away again."""
    monkeypatch.setenv(URL_ENV, database_url)
    previous = os.umask(0o022)
    try:
        failed = tmp_path / "missing" / "chunks.jsonl"
        assert cli.main(["export", "--batch", "no-such-batch", str(failed)]) == cli.EXIT_ERROR
        assert not (tmp_path / "missing").exists()
        out = tmp_path / "exports" / "today" / "chunks.jsonl"
        assert cli.main(["export", str(out)]) == 0
    finally:
        os.umask(previous)
    assert "wrote 0 chunk rows" in capsys.readouterr().out
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    for folder in (out.parent, out.parent.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755
