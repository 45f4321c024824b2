"""Shared fixtures: an isolated data dir and a real PostgreSQL for every test that needs one.

The server is Seams' own embedded PostgreSQL (started once per session -- per worker under
pytest-xdist, which `make test` uses -- in a temp dir, stopped and deleted at the end) or, when
`SEAMS_TEST_DATABASE_URL` is set, that server. Each test asking for `database_url` gets a fresh
database (~30 ms), dropped afterwards. Nothing here skips: a database
that cannot be started fails the tests that need it, loudly.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import dagster as dg
import psycopg
import pytest
from dagster_graphql import DagsterGraphQLClient, DagsterGraphQLClientError
from psycopg import sql

from benchmarks.services import stop_group
from seams.environment import LEGACY_DAGSTER_DATABASE_URL_ENV, SeamsEnvironment
from seams.models.model_store import ModelManifest
from seams.orchestration.definitions import build_definitions
from seams.orchestration.instance import SeamsInstance, prepare_instance, workspace_file
from seams.resources import database
from seams.resources.database import EmbeddedPostgres, database_url_for
from seams.resources.embedded_server import server_tempdir
from seams.resources.postgres import close_pool
from seams.settings import load_settings

TEST_URL_ENV = "SEAMS_TEST_DATABASE_URL"


@pytest.fixture(scope="session", autouse=True)
def isolated_environment() -> Iterator[Path]:
    """Keep tests away from the user's ./.seams and from any configured server."""
    root = server_tempdir("seams-test-")
    saved = {k: os.environ.get(k) for k in ("SEAMS_DATA_DIR", "SEAMS_DATABASE_URL", "DAGSTER_HOME")}
    os.environ["SEAMS_DATA_DIR"] = str(root / "data")
    os.environ.pop("SEAMS_DATABASE_URL", None)
    os.environ.pop("DAGSTER_HOME", None)
    yield root
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def pg_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of the `postgres` database of the test server (superuser, trust auth)."""
    external = os.environ.get(TEST_URL_ENV, "").strip()
    if external:
        yield external
        return
    # Short path outside /root: the Unix socket path must stay under ~100 bytes.
    root = server_tempdir("seams-pg-")
    server = EmbeddedPostgres(root / "pgdata")
    url = server.start()
    try:
        yield url
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def fresh_database(pg_server_url: str) -> Iterator[str]:
    """A new, empty database (with pgvector) on the test server; dropped on exit."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = database_url_for(pg_server_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    try:
        yield url
    finally:
        close_pool(url)
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
def database_url(pg_server_url: str) -> Iterator[str]:
    """A fresh, empty database (with pgvector) for one test, dropped afterwards."""
    with fresh_database(pg_server_url) as url:
        yield url


@pytest.fixture(scope="session")
def exported_model(
    isolated_environment: Path, tmp_path_factory: pytest.TempPathFactory
) -> ModelManifest:
    """The real ONNX export in the session's data dir, where the pipeline's embedder looks.

    Exported once per test session: the pytest-xdist workers share a folder beside their own
    temp dirs, and the export's own lock makes the first worker build it while the others wait
    and reuse it; each worker then copies it into its data dir (a model copied in is what users
    may do too)."""
    from seams.models.model_export import export_model
    from seams.models.model_store import default_model_dir, load_manifest

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker's basetemp sits in the session's
        base = base.parent
    shared = base / "shared-models" / default_model_dir().name
    built = export_model(shared)
    target = default_model_dir()
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(built.directory, target)
    return load_manifest(target)


#: Variables a test may change (`open_instance` exports them) that must come back as they were.
ENV_VARIABLES = (
    "DAGSTER_HOME",
    "SEAMS_DATA_DIR",
    "SEAMS_CONFIG",
    LEGACY_DAGSTER_DATABASE_URL_ENV,
    database.URL_ENV,
    database.DAGSTER_URL_ENV,
)


def keep_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `monkeypatch` restore every variable a test or `open_instance` may change."""
    for variable in ENV_VARIABLES:
        value = os.environ.get(variable)
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value)


@pytest.fixture
def instance(
    database_url: str, monkeypatch: pytest.MonkeyPatch, exported_model: ModelManifest
) -> Iterator[dg.DagsterInstance]:
    """A PostgreSQL-backed Dagster instance whose data and run storage is `database_url`."""
    keep_environment(monkeypatch)
    monkeypatch.setenv(database.URL_ENV, database_url)
    monkeypatch.delenv(database.DAGSTER_URL_ENV, raising=False)
    with open_instance(monkeypatch) as dagster_instance:
        yield dagster_instance


def current_definitions() -> dg.Definitions:
    """The definitions of this process's settings and environment as they are now, as an entry
    point builds them: call it after the fixtures (or the test) set `SEAMS_DATABASE_URL`,
    `SEAMS_DATA_DIR` or `SEAMS_CONFIG`, since definitions carry the environment they were built
    in; never at import."""
    environment = SeamsEnvironment.from_os()
    return build_definitions(load_settings(environment=environment), environment=environment)


@pytest.fixture
def defs(instance: dg.DagsterInstance) -> dg.Definitions:
    """The definitions of this test's environment: built after `instance` chose its database
    and exported its variables."""
    return current_definitions()


def export_instance(monkeypatch: pytest.MonkeyPatch) -> SeamsInstance:
    """`prepare_instance()`, its variables exported (until the test ends) for this test's child
    processes (subprocess probes, webserver, daemon), as `seams dev` hands them to its children."""
    seams_instance = prepare_instance()
    for name, value in seams_instance.variables().items():
        monkeypatch.setenv(name, value)
    return seams_instance


def open_instance(monkeypatch: pytest.MonkeyPatch) -> dg.DagsterInstance:
    """The prepared Dagster instance (see `export_instance`); use it as a context manager."""
    return export_instance(monkeypatch).open()


TWO_BATCHES = (("field_notes.md",), ("history_of_maps.txt", "kitchen_science.md"))
"""Two sample-corpus batches of different sizes: per-partition and per-run counts cannot agree
by chance."""


def register_sample_batches(
    tmp_path: Path,
    batches: tuple[tuple[str, ...], ...] = TWO_BATCHES,
    *,
    defs: dg.Definitions,
) -> list[str]:
    """Register each group of sample-corpus files as its own batch (a folder each); their keys."""
    from seams.orchestration import runner

    keys = []
    for number, names in enumerate(batches):
        folder = copy_samples(tmp_path / f"batch_{number}", names)
        keys.extend(runner.register_path(folder, print, defs=defs))
    return keys


def copy_samples(folder: Path, names: Sequence[str]) -> Path:
    """A new folder holding copies of these sample-corpus files."""
    from seams.orchestration import runner

    folder.mkdir()
    for name in names:
        shutil.copy(runner.SAMPLE_CORPUS / name, folder / name)
    return folder


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def dagster_services(logs: Path, *, timeout_s: float = 180) -> Iterator[DagsterGraphQLClient]:
    """dagster-webserver + dagster-daemon for the `seams` location on a free loopback port, against
    the instance `export_instance()` set up; yields a GraphQL client once the UI answers."""
    port = free_port()
    bin_dir = Path(sys.executable).parent
    workspace = workspace_file(SeamsEnvironment.from_os().dagster_home)
    commands = {
        "webserver": [str(bin_dir / "dagster-webserver"), "-w", str(workspace),
                      "-h", "127.0.0.1", "-p", str(port)],
        "daemon": [str(bin_dir / "dagster-daemon"), "run", "-w", str(workspace)],
    }  # fmt: skip
    procs = {}
    for name, command in commands.items():
        log = (logs / f"{name}.log").open("w")
        procs[name] = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=os.environ
        )
    try:
        client = DagsterGraphQLClient("127.0.0.1", port_number=port, timeout=60)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                client._execute("{ version }")
                break
            except DagsterGraphQLClientError:
                assert procs["webserver"].poll() is None, (logs / "webserver.log").read_text()[
                    -3000:
                ]
                assert time.monotonic() < deadline, "the webserver never answered"
                time.sleep(0.5)
        yield client
    finally:
        stop_group(*procs.values(), grace_s=30)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the slow tests first on every xdist worker.

    `--dist worksteal` hands each worker a contiguous share of the collection and lets idle
    workers steal from the *end* of a busy one's queue. Dealing the slow tests out round-robin
    to the front of each share means no worker is left with a minutes-long test while the
    others are done; the fast tests fill the tail, where stealing evens things out. Shares are
    balanced by slow test *functions*, not items: the 24 short cases of one parametrized slow
    test would otherwise count as 24 long tests and send every other slow module to the other
    worker. A module's slow tests stay together (they often share a costly module-scoped
    fixture). The order is deterministic, so every worker collects the same list (xdist checks
    that).
    """
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))  # set on xdist workers
    fast = [item for item in items if not item.get_closest_marker("slow")]
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    by_module: dict[str, list[pytest.Item]] = {}
    for item in items:
        if item.get_closest_marker("slow"):
            by_module.setdefault(item.nodeid.split("::")[0], []).append(item)
    weights = [0] * workers  # slow test functions dealt to each share so far
    for module_items in by_module.values():
        lightest = min(range(workers), key=weights.__getitem__)
        shares[lightest].extend(module_items)
        weights[lightest] += len({getattr(i, "originalname", i.name) for i in module_items})
    for i, share in enumerate(shares):  # the scheduler's split: len(pending) // nodes_remaining
        size = (len(items) - sum(map(len, shares[:i]))) // (workers - i) if i < workers - 1 else 0
        if i < workers - 1:
            take = max(0, size - len(share))
            share.extend(fast[:take])
            del fast[:take]
        else:
            share.extend(fast)
    items[:] = [item for share in shares for item in share]
