"""Real stores for the target tests, started by the tests: pgvector in another database of the
test PostgreSQL server, LanceDB in a folder, Qdrant in qdrant-client's local mode (a folder;
there is no Qdrant server package to start here), Chroma's own server (`chroma run`, from the
`chromadb` package; one per test process, a collection per test) and Milvus Lite (a file)."""

from __future__ import annotations

import atexit
import contextlib
import itertools
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from seams.environment import SeamsEnvironment
from seams.storage.targets import TargetStore, open_target
from seams.storage.targets.sync import VECTOR_COSINE
from seams.targets import TargetSettings
from tests.support.databases import fresh_database
from tests.support.processes import free_port, stop_group

KINDS = ("pgvector", "lancedb", "qdrant", "chroma", "milvus")

Opener = Callable[[], TargetStore]


@contextlib.contextmanager
def store_settings(
    kind: str, pg_server_url: str, folder: Path, monkeypatch
) -> Iterator[TargetSettings]:
    """The settings of a `kind` target on a real engine, torn down afterwards."""
    if kind == "pgvector":
        with fresh_database(pg_server_url) as url:
            monkeypatch.setenv("TARGET_PG_URL", url)
            yield TargetSettings(kind="pgvector", table="rag_chunks", url_env="TARGET_PG_URL")
        return
    if kind == "lancedb":
        yield TargetSettings(kind="lancedb", table="rag_chunks", path=str(folder / "lance"))
        return
    if kind == "qdrant":
        yield TargetSettings(kind="qdrant", collection="rag_chunks", path=str(folder / "qdrant"))
        return
    if kind == "chroma":
        monkeypatch.setenv("TARGET_CHROMA_URL", chroma_server())
        name = f"rag_chunks_{next(_CHROMA_NAMES)}"
        yield TargetSettings(kind="chroma", collection=name, url_env="TARGET_CHROMA_URL")
        return
    yield TargetSettings(kind="milvus", collection="rag_chunks", path=str(folder / "milvus.db"))


_CHROMA_NAMES = itertools.count()
_chroma: dict[str, str] = {}


def chroma_server() -> str:
    """The URL of this test process's Chroma server (`chroma run`), started on first use in a
    temporary folder; at exit the server is stopped and its folder removed."""
    if "url" in _chroma:
        return _chroma["url"]
    folder = Path(tempfile.mkdtemp(prefix="seams-chroma-"))
    chroma = shutil.which("chroma", path=str(Path(sys.executable).parent)) or "chroma"
    port = free_port()
    with (folder / "server.log").open("wb") as log:
        proc = subprocess.Popen(
            [
                chroma,
                "run",
                "--path",
                str(folder / "db"),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    atexit.register(_stop_chroma, proc, folder)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"chroma run did not answer: {(folder / 'server.log').read_text()[-500:]}"
                ) from None
            time.sleep(0.1)
    _chroma["url"] = url
    return url


def _stop_chroma(proc: subprocess.Popen, folder: Path) -> None:
    stop_group(proc, grace_s=5)
    shutil.rmtree(folder, ignore_errors=True)


def opener(settings: TargetSettings) -> Opener:
    return lambda: open_target("docs", settings, SeamsEnvironment.from_os())


def stored(store: TargetStore) -> dict[str, tuple[str, str, np.ndarray]]:
    """chunk id -> (text, vector model, vector) of what readers of `store` read."""
    live = store.live()
    assert live is not None
    return {
        r.chunk_id: (r.fields["text"], r.fields["vector_model_id"], r.vector)
        for r in store.read(live)
    }


def assert_mirrors(store: TargetStore, published: dict[str, tuple[str, str, np.ndarray]]) -> None:
    """The store holds exactly the published current chunks: ids, text, model, vectors."""
    held = stored(store)
    assert set(held) == set(published)
    for chunk_id, (text, model, vector) in published.items():
        got_text, got_model, got_vector = held[chunk_id]
        assert (got_text, got_model) == (text, model), chunk_id
        cos = float(vector @ got_vector) / float(
            np.linalg.norm(vector) * np.linalg.norm(got_vector)
        )
        assert cos >= VECTOR_COSINE, (chunk_id, cos)
