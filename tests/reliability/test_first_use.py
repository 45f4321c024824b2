"""First use under concurrency: two first `seams run`s at once on an empty data dir both finish
(one exports the model, the other waits and reuses it; one creates the cluster and Dagster's
tables, the other attaches), and a data dir deleted under its running server starts afresh.

Before: one run died with `FileNotFoundError: .../models/.all-MiniLM-L6-v2.tmp-.../model.onnx`
(the other's export removed its staging folder), the other with "lost the connection to
PostgreSQL (Dagster's run storage: ... No such file or directory)" after "Retrying failed
database creation": the server of a data dir deleted earlier (never stopped) noticed its lock
file was gone, shut down, and removed the socket of the new server in the same place.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from seams.resources.database import DAGSTER_DATABASE, DATA_DATABASE, EmbeddedPostgres
from seams.resources.embedded_server import orphaned_servers, server_tempdir
from tests.support.cli import run_seams, seams_env
from tests.support.databases import rows

DOCS = {
    "a": "# Tides\n\nThe tide rises twice a day along this coast. Fishermen read the tables.\n",
    "b": "# Bread\n\nA sourdough starter needs flour, water and patience. Bakers feed it daily.\n",
}


@pytest.fixture
def root() -> Iterator[Path]:
    """A folder the server's user can enter; every server started under it is stopped after."""
    folder = server_tempdir("seams-first-")
    yield folder
    for pid_file in folder.rglob("postmaster.pid"):
        EmbeddedPostgres(pid_file.parent).stop()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_two_first_runs_at_once_on_an_empty_data_dir_both_complete(root: Path) -> None:
    data_dir = root / "data"
    inboxes = {}
    for name, text in DOCS.items():
        inboxes[name] = root / f"inbox-{name}"
        inboxes[name].mkdir()
        (inboxes[name] / f"{name}.md").write_text(text, encoding="utf-8")
    # Both started at once, nothing exported and no cluster yet: as `seams run a & seams run b`.
    runs = {}
    for name, inbox in inboxes.items():
        runs[name] = subprocess.Popen(
            [sys.executable, "-m", "seams", "run", str(inbox)],
            env=seams_env(SEAMS_DATA_DIR=str(data_dir)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            cwd="/",
        )  # fmt: skip
    outputs = {name: proc.communicate(timeout=1500) for name, proc in runs.items()}
    for name, proc in runs.items():
        out, err = outputs[name]
        assert proc.returncode == 0, f"run {name}:\n{out}\n{err}"
        assert "Traceback" not in out + err
        assert "Retrying failed database" not in err, err  # Dagster's tables: created once
        assert "documents:      1 (0 failed)" in out, out

    url = EmbeddedPostgres(data_dir / "postgres").url(DATA_DATABASE)
    assert url is not None
    batches = rows(url, "SELECT batch_key, source FROM seams.batches ORDER BY source")
    assert len(batches) == 2 and batches[0][0] != batches[1][0]  # distinct batches
    for (key, source), name in zip(batches, sorted(DOCS), strict=True):
        assert source.endswith(f"inbox-{name}"), source
        texts = rows(url, "SELECT text FROM seams.chunks WHERE batch_key = %s", key)
        assert [t for (t,) in texts] == [DOCS[name].strip()]  # complete: the whole document
    # The ONNX export published once, complete (the static boundary model only for settings
    # that use it); no staging folder left behind.
    models = data_dir / "models"
    published = sorted(p.name for p in models.iterdir() if not p.name.startswith("."))
    assert published == ["all-MiniLM-L6-v2"]
    assert (models / "all-MiniLM-L6-v2" / "manifest.json").is_file()
    assert not [p for p in models.iterdir() if ".tmp-" in p.name]
    # Every run the two commands started (the model export's included) says so where the UI
    # shows "Launched by".
    dagster_url = EmbeddedPostgres(data_dir / "postgres").url(DAGSTER_DATABASE)
    launched = rows(
        dagster_url,
        "SELECT r.pipeline_name, t.value FROM runs r LEFT JOIN run_tags t"
        " ON t.run_id = r.run_id AND t.key = 'user' ORDER BY r.id",
    )
    assert launched and all(user == "seams run" for _, user in launched), launched
    assert "__ASSET_JOB" in {job for job, _ in launched}  # the export ran here, tagged too


@pytest.mark.slow
@pytest.mark.services
def test_a_data_dir_deleted_under_its_running_server_starts_afresh(root: Path) -> None:
    data_dir = root / "data"
    env = seams_env(SEAMS_DATA_DIR=str(data_dir))
    assert run_seams("db", "start", env=env).returncode == 0
    pgdata = data_dir / "postgres"
    old = EmbeddedPostgres(pgdata).url(DATA_DATABASE)
    old_pid = int((pgdata / "postmaster.pid").read_text().split()[0])
    shutil.rmtree(data_dir)  # "start over" without `seams db stop`: the server keeps running
    assert orphaned_servers(pgdata) == [old_pid]

    started = run_seams("db", "start", env=env)
    assert started.returncode == 0, started.stderr
    # The orphan is gone now, not a minute later when it would take the new socket with it.
    assert not Path(f"/proc/{old_pid}").exists() or _zombie(old_pid)
    assert orphaned_servers(pgdata) == []
    url = EmbeddedPostgres(pgdata).url(DATA_DATABASE)
    assert url is not None and url == old  # same place, a new cluster
    assert (pgdata / ".s.PGSQL.5432").exists()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    new_pid = int((pgdata / "postmaster.pid").read_text().split()[0])
    assert new_pid != old_pid


def _zombie(pid: int) -> bool:
    time.sleep(0.1)
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
