"""`seams serve` as a process people and operators meet: its pages in a real browser (Debian's
headless Chromium, which also takes the screenshots in docs/), a SIGTERM that lets the request
in flight finish, and a database that goes away under a request. Each starts a server of its
own, on the bundled sample corpus or on a PostgreSQL of its own."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from seams.paths import sample_corpus
from seams.resources.database import EmbeddedPostgres
from seams.resources.embedded_server import server_tempdir
from tests.support.cli import seams_env
from tests.support.search_index import Indexed, indexed_database, write_corpus
from tests.support.served import serving

DOCS = Path(__file__).resolve().parents[2] / "docs"
BROWSER_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
)  # fmt: skip
QUERY = "who measured the size of the earth"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def corpus(
    pg_server_url: str, exported_model: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Indexed]:
    folder = tmp_path_factory.mktemp("sample") / "corpus"
    shutil.copytree(Path(str(sample_corpus())), folder)
    with indexed_database(pg_server_url, folder) as indexed:
        yield indexed


def env_for(indexed: Indexed) -> dict[str, str]:
    return seams_env(SEAMS_DATABASE_URL=indexed.url, SEAMS_DATA_DIR=os.environ["SEAMS_DATA_DIR"])


def browser() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("needs Debian's chromium (apt-get install chromium)")
    return found


def render(url: str, screenshot: Path, size: str = "1280,1400") -> str:
    """The DOM headless Chromium built for `url`, after saving its screenshot."""
    with tempfile.TemporaryDirectory() as profile:
        flags = [browser(), *BROWSER_FLAGS, f"--user-data-dir={profile}",
                 f"--window-size={size}"]  # fmt: skip
        subprocess.run([*flags, f"--screenshot={screenshot}", url], check=True,
                       capture_output=True, timeout=120)  # fmt: skip
        dom = subprocess.run([*flags, "--dump-dom", url], check=True, capture_output=True,
                             text=True, timeout=120)  # fmt: skip
    assert screenshot.stat().st_size > 10_000
    return dom.stdout


def test_the_pages_in_a_browser(corpus: Indexed, tmp_path: Path) -> None:
    """The search page marks each hit's best passage and the packed context; the document page
    draws one boundary per chunk, naming its reason. Screenshots: docs/serve-*.png."""
    with serving(env_for(corpus), tmp_path / "serve.log") as (_, base):
        search = render(f"{base}/?q={QUERY.replace(' ', '+')}&budget=300",
                        DOCS / "serve-search.png")  # fmt: skip
        assert search.count("<mark") >= 2, search
        assert "Context:" in search and "history_of_maps.txt" in search
        (document,) = re.findall(r'href="/view/([^"?]+)\?mark=', search)[:1]
        with psycopg.connect(corpus.url) as conn:
            reasons = [
                r[0]
                for r in conn.execute(
                    "SELECT metadata->>'boundary_reason' FROM seams.current_chunks"
                    " WHERE document_id = %s ORDER BY chunk_index",
                    (document,),
                )
            ]
        page = render(f"{base}/view/{document}", DOCS / "serve-document.png", "1280,1800")
        drawn = re.findall(r'<div class="chunk ([a-z_]+)"', page)
        assert len(drawn) == len(reasons) > 1
        assert drawn == reasons
        assert page.count("<rect ") == len(reasons)


def test_sigterm_lets_the_request_in_flight_finish(corpus: Indexed, tmp_path: Path) -> None:
    """A search waiting on the database when SIGTERM arrives is answered in full; the server
    takes no new request meanwhile and ends once it is done (as SIGTERM's own exit status:
    uvicorn raises the signal again after its graceful shutdown)."""
    with serving(env_for(corpus), tmp_path / "serve.log") as (proc, base):
        answers: list[httpx.Response] = []
        with psycopg.connect(corpus.url) as holder:
            # The search's snapshot reads the publications first: held here, it waits.
            holder.execute("LOCK TABLE seams.publications IN ACCESS EXCLUSIVE MODE")
            request = threading.Thread(
                target=lambda: answers.append(
                    httpx.post(f"{base}/search", json={"query": QUERY, "k": 3}, timeout=60)
                )
            )
            request.start()
            wait_for_lock_waiter(corpus.url, holder.info.backend_pid)
            proc.send_signal(signal.SIGTERM)
            time.sleep(1.0)
            assert proc.poll() is None, "the server left before its request was answered"
            with pytest.raises(httpx.TransportError):
                httpx.get(f"{base}/health", timeout=2)
            holder.rollback()
        request.join(timeout=60)
        assert proc.wait(timeout=60) in (0, -signal.SIGTERM)
    assert len(answers) == 1 and answers[0].status_code == 200, answers
    assert len(answers[0].json()["hits"]) == 3


def wait_for_lock_waiter(url: str, holder_pid: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            waiting = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND %s = ANY(pg_blocking_pids(pid))",
                (holder_pid,),
            ).fetchone()
            if waiting and waiting[0]:
                return
            time.sleep(0.1)
    raise AssertionError("the search never reached the database")


@pytest.fixture
def own_server(
    exported_model: object, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[EmbeddedPostgres, Indexed]]:
    """A PostgreSQL of this test's own (it is stopped and started again), with the two test
    documents indexed."""
    root = server_tempdir("seams-serve-restart-")
    server = EmbeddedPostgres(root / "pgdata")
    try:
        corpus = write_corpus(tmp_path / "docs")
        with indexed_database(server.start(), corpus) as indexed:
            try:
                yield server, indexed
            finally:
                server.start()  # up again (idempotent), so the database can be dropped
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_a_database_restart_is_a_retry_then_a_503_never_a_trace(
    own_server: tuple[EmbeddedPostgres, Indexed], tmp_path: Path
) -> None:
    """The request in flight when the database goes away is tried once more, then answered 503
    in one line; /health says 503 meanwhile; once the database is back, searches answer again
    on fresh connections, with no restart of the server."""
    server, indexed = own_server
    body = {"query": "how do I fix a smelly compost heap", "k": 2}
    with serving(env_for(indexed), tmp_path / "serve.log") as (_, base):
        assert httpx.post(f"{base}/search", json=body, timeout=60).status_code == 200
        answers: list[httpx.Response] = []
        holder = psycopg.connect(indexed.url)
        holder.execute("LOCK TABLE seams.publications IN ACCESS EXCLUSIVE MODE")
        request = threading.Thread(
            target=lambda: answers.append(httpx.post(f"{base}/search", json=body, timeout=60))
        )
        request.start()
        wait_for_lock_waiter(indexed.url, holder.info.backend_pid)
        server.stop()  # fast shutdown: every backend, the holder's too, is gone
        holder.close()
        request.join(timeout=60)
        (answer,) = answers
        assert answer.status_code == 503, answer.text
        error = answer.json()["error"]
        assert "\n" not in error and "Traceback" not in answer.text and "database" in error
        assert httpx.get(f"{base}/health", timeout=30).status_code == 503
        server.start()
        again = httpx.post(f"{base}/search", json=body, timeout=60)
        assert again.status_code == 200, again.text
        assert len(again.json()["hits"]) == 2
        assert httpx.get(f"{base}/health", timeout=30).json() == {"status": "ready"}
        log = (tmp_path / "serve.log").read_text()
        assert "trying once more" in log and "Traceback" not in log
