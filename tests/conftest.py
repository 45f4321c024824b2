"""Shared fixtures: an isolated data dir and a real PostgreSQL for every test that needs one.

The server is Seams' own embedded PostgreSQL (started once per session -- per worker under
pytest-xdist, which `make test` uses -- in a temp dir, stopped and deleted at the end) or, when
`SEAMS_TEST_DATABASE_URL` is set, that server. Each test asking for `database_url` gets a fresh
database (~30 ms), dropped afterwards. Nothing here skips: a database
that cannot be started fails the tests that need it, loudly.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import dagster as dg
import pytest

from seams.environment import SeamsEnvironment
from seams.models.model_store import ModelManifest
from seams.resources import database
from seams.resources.database import EmbeddedPostgres
from seams.resources.embedded_server import server_tempdir
from seams.resources.postgres import PostgresResource, close_pool
from tests.support import ast_parse, processes
from tests.support.databases import database_name, fresh_database, migrated_postgres
from tests.support.instances import current_definitions, keep_environment, open_instance
from tests.support.object_store import Bucket, make_bucket, s3_server, use_s3_environment

ast_parse.install()  # before pytest parses a test module or formats a traceback

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
    # In-process `seams` commands start the data dir's own embedded server: stop it, then remove
    # the session's files (a model export and a database each), so runs leave nothing behind.
    EmbeddedPostgres.for_environment(SeamsEnvironment.from_os()).stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    shutil.rmtree(root, ignore_errors=True)


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


@pytest.fixture(scope="session")
def dagster_template(pg_server_url: str, isolated_environment: Path) -> Iterator[str]:
    """The name of a database holding only pgvector and Dagster's own tables, made once per
    session by opening an instance on it: a test's instance database is a copy of it, which
    saves Dagster's schema creation (seconds) per test."""
    with fresh_database(pg_server_url) as url, pytest.MonkeyPatch.context() as monkeypatch:
        keep_environment(monkeypatch)
        monkeypatch.setenv(database.URL_ENV, url)
        monkeypatch.delenv(database.DAGSTER_URL_ENV, raising=False)
        with open_instance(monkeypatch):
            pass
        close_pool(url)
        yield database_name(url)


@pytest.fixture
def database_url(pg_server_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database (with pgvector) for one test, dropped afterwards: empty, or, for a test
    that opens the Dagster `instance` fixture on it, with Dagster's tables already made."""
    template = None
    if "instance" in request.fixturenames:
        template = request.getfixturevalue("dagster_template")
    with fresh_database(pg_server_url, template=template) as url:
        yield url


@pytest.fixture
def postgres(database_url: str) -> Iterator[PostgresResource]:
    """The resource over a fresh database with the Seams schema in place (a module that wants
    the bare database defines its own `postgres`)."""
    yield from migrated_postgres(database_url)


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


@pytest.fixture
def defs(instance: dg.DagsterInstance) -> dg.Definitions:
    """The definitions of this test's environment: built after `instance` chose its database
    and exported its variables."""
    return current_definitions()


SERVICE_FIXTURES = frozenset({"pg_server_url", "exported_model"})
"""Fixtures that start PostgreSQL or make the ONNX export: a test using one, directly or through
another fixture, is marked `services` at collection (and left out of `make test-fast`)."""


@pytest.fixture(autouse=True)
def services_only_where_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    """Only `slow` tests may start Dagster's webserver and daemon or Celery workers, and only
    `slow` or `services` tests may run a `seams` command in a child process
    (`tests.support.processes` refuses otherwise): `make test-fast` runs what is left, so no
    test in it waits on a server."""
    slow = request.node.get_closest_marker("slow") is not None
    processes.services_allowed = slow
    processes.children_allowed = slow or request.node.get_closest_marker("services") is not None
    yield
    processes.services_allowed = processes.children_allowed = True


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark a test that needs PostgreSQL or the ONNX export `services` (before `-m` selects)."""
    if SERVICE_FIXTURES & set(getattr(item, "fixturenames", ())):
        item.add_marker(pytest.mark.services)


@pytest.hookimpl(trylast=True)  # after `-m` deselected: order only what will run
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the slow tests first on every xdist worker.

    `--dist worksteal` hands each worker a contiguous share of the collection and lets idle
    workers steal from the *end* of a busy one's queue. Dealing the slow tests out round-robin
    to the front of each share means no worker is left with a minutes-long test while the
    others are done; the fast tests fill the tail, where stealing evens things out. Shares are
    balanced by slow test *functions*, not items: the 24 short cases of one parametrized slow
    test would otherwise count as 24 long tests and send every other slow module to the other
    worker. A module's slow tests stay together (they often share a costly module-scoped
    fixture). The first share starts with tests that need the ONNX export (its worker makes it);
    the others start with slow modules that need no export (the static model's distillation,
    first use from an empty data dir), so their workers work instead of waiting for the export's
    lock. The order is deterministic, so every worker collects the same list (xdist checks that).
    """
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))  # set on xdist workers
    # Without slow tests (`make test`), the first share starts with the tests that need the
    # ONNX export (its worker makes it at once) and the others with those that do not, so no
    # worker waits for the export's lock while there is other work.
    fast = sorted(
        (item for item in items if not item.get_closest_marker("slow")),
        key=lambda item: "exported_model" not in getattr(item, "fixturenames", ()),
    )
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
    needs_export = {
        module
        for module, module_items in by_module.items()
        if any("exported_model" in getattr(i, "fixturenames", ()) for i in module_items)
    }
    for share in shares[1:]:  # stable: modules keep their order and stay together
        share.sort(key=lambda item: item.nodeid.split("::")[0] in needs_export)
    for i, share in enumerate(shares):  # the scheduler's split: len(pending) // nodes_remaining
        size = (len(items) - sum(map(len, shares[:i]))) // (workers - i) if i < workers - 1 else 0
        if i < workers - 1:
            take = max(0, size - len(share))
            share.extend(fast[:take])
            del fast[:take]
        else:
            share.extend(fast)
    items[:] = [item for share in shares for item in share]


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """Say so when the `slow` tests were left out (`make test`, `make test-fast`), so a green
    summary is never read as the whole suite."""
    if "not slow" in (config.getoption("markexpr") or ""):
        terminalreporter.write_line(
            "seams: the tests marked slow were left out; `make test-all` runs them too"
        )


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A real S3 API server (moto's server mode) for the session's object-source tests."""
    with s3_server() as endpoint:
        yield endpoint


@pytest.fixture
def s3_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """This process's S3 configuration pointing at the test servers' credentials (never the
    user's)."""
    use_s3_environment(monkeypatch, tmp_path)


@pytest.fixture
def bucket(s3_endpoint: str, s3_environment: None) -> Bucket:
    """A fresh versioned bucket, reached with the test credentials (`s3_environment`)."""
    return make_bucket(s3_endpoint, versioned=True)


@pytest.fixture
def plain_bucket(s3_endpoint: str, s3_environment: None) -> Bucket:
    """A fresh bucket that keeps no versions (a changed object's old bytes are gone)."""
    return make_bucket(s3_endpoint, versioned=False)


@pytest.fixture
def seams_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    """`seams_yaml(text)`: `text` written as the test's seams.yaml (in `tmp_path`), with
    SEAMS_CONFIG pointing at it; returns its path. Called again, it changes the settings."""
    path = tmp_path / "seams.yaml"

    def write(text: str) -> Path:
        path.write_text(text, encoding="utf-8")
        monkeypatch.setenv("SEAMS_CONFIG", str(path))
        return path

    return write
