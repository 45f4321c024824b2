"""Real stores for the target tests, started by the tests: pgvector in another database of the
test PostgreSQL server, LanceDB in a folder, Qdrant in qdrant-client's local mode (a folder;
there is no Qdrant server package to start here)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from seams.environment import SeamsEnvironment
from seams.storage.targets import TargetStore, open_target
from seams.storage.targets.sync import VECTOR_COSINE
from seams.targets import TargetSettings
from tests.support.databases import fresh_database

KINDS = ("pgvector", "lancedb", "qdrant")

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
    yield TargetSettings(kind="qdrant", collection="rag_chunks", path=str(folder / "qdrant"))


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
