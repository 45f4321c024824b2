"""Readers of a target's store while Seams changes it: a reader asking in a loop through a
document change and a model switch (and back) never gets an empty answer, never loses a
document that stayed current, and never gets records of two models in one answer.

Each kind's reader reads the way an application does: pgvector through the view on its own
connection, LanceDB through a connection that checks for new versions, Qdrant through the
alias (local mode: the client of the sync, one process at a time), Milvus through the alias on
a client of its own (Milvus Lite: one server per file, shared by the process's clients).

Chroma cannot switch atomically (a rename in two requests): its readers are held to what
docs/targets.md promises instead, for a reader opening the collection by name at every query
and for one holding the collection it opened."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

from seams.resources.postgres import PostgresResource
from seams.storage.targets import TargetStore
from seams.storage.targets.sync import sync_target
from tests.storage.targets import corpus
from tests.storage.targets.stores import opener, store_settings
from tests.storage.targets.test_sync import DIM_A, DIM_B, MODEL_A, MODEL_B, texts

ATOMIC_KINDS = (
    "pgvector",
    pytest.param("lancedb", marks=pytest.mark.slow),
    pytest.param("qdrant", marks=pytest.mark.slow),
    pytest.param("milvus", marks=pytest.mark.slow),
)
"""The kinds whose switch is atomic and whose readers are written here (pgvector in the
default lane; the others' loops take tens of seconds)."""
Answer = list[tuple[str, str]]
"""(document_id, vector_model_id) of every record an answer holds."""


def reader_for(kind: str, store: TargetStore, settings) -> Callable[[], Answer]:
    if kind == "pgvector":
        import psycopg

        conn = psycopg.connect(settings.url("docs", os.environ), autocommit=True)
        return lambda: conn.execute(
            "SELECT document_id, vector_model_id FROM public.rag_chunks"
        ).fetchall()
    if kind == "lancedb":
        import lancedb

        db = lancedb.connect(settings.path, read_consistency_interval=timedelta(0))

        def read() -> Answer:
            rows = db.open_table("rag_chunks").to_arrow().select(["document_id", "vector_model_id"])
            return list(zip(*(rows.column(i).to_pylist() for i in range(2)), strict=True))

        return read
    if kind == "milvus":
        from pymilvus import MilvusClient

        milvus = MilvusClient(settings.path)
        fields = ["document_id", "vector_model_id"]
        return lambda: [
            (row["document_id"], row["vector_model_id"])
            for row in milvus.query("rag_chunks", filter="", output_fields=fields, limit=1000)
        ]
    client = store.client  # type: ignore[attr-defined]

    def scroll() -> Answer:
        points, _ = client.scroll("rag_chunks", limit=10_000, with_payload=True)
        return [(p.payload["document_id"], p.payload["vector_model_id"]) for p in points]

    return scroll


@pytest.mark.parametrize("kind", ATOMIC_KINDS)
def test_readers_never_see_an_empty_answer_a_missing_document_or_two_models(
    kind: str, postgres: PostgresResource, pg_server_url: str, tmp_path, monkeypatch
) -> None:
    documents = {"alpha": texts("alpha", 6), "gamma": texts("gamma", 6)}
    corpus.publish_batch(postgres, "b1", documents, MODEL_A, DIM_A)
    with store_settings(kind, pg_server_url, tmp_path, monkeypatch) as settings:
        store = opener(settings)()
        sync_target(postgres, "docs", store, ["default"], batch_records=2)
        read = reader_for(kind, store, settings)
        answers: list[Answer] = []
        errors: list[BaseException] = []
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                try:
                    answers.append(read())
                except BaseException as exc:  # a reader's error is a failure of the store
                    errors.append(exc)
                    return

        reader = threading.Thread(target=loop)
        reader.start()
        try:
            change_then_switch_and_back(postgres, store, documents)
        finally:
            stop.set()
            reader.join()
            store.close()
    assert not errors, errors[0]
    assert len(answers) > 3
    models_seen = set()
    for answer in answers:
        assert answer, "an empty answer"
        assert {doc for doc, _ in answer} == {"alpha", "gamma"}, "a document went missing"
        models = {model for _, model in answer}
        assert len(models) == 1, f"an answer mixing models: {models}"
        models_seen |= models
    assert models_seen == {MODEL_A, MODEL_B}


@pytest.mark.slow
def test_chroma_readers_see_what_the_docs_promise_through_changes_and_model_switches(
    postgres: PostgresResource, pg_server_url: str, tmp_path, monkeypatch
) -> None:
    """Through a document change: every answer complete, of one model, for both readers. Through
    a model switch: every answer still complete and of one model; the reader opening by name may
    be told the collection does not exist (between the two renames), the reader holding the old
    collection reads the old model until the sync drops it, then is told it does not exist and
    opens the name again."""
    from urllib.parse import urlsplit

    import chromadb
    from chromadb.errors import NotFoundError

    documents = {"alpha": texts("alpha", 6), "gamma": texts("gamma", 6)}
    corpus.publish_batch(postgres, "b1", documents, MODEL_A, DIM_A)
    with store_settings("chroma", pg_server_url, tmp_path, monkeypatch) as settings:
        name = settings.store_name
        store = opener(settings)()
        sync_target(postgres, "docs", store, ["default"], batch_records=2)
        phase = ["change"]
        seen: dict[str, list[tuple[str, str, Answer | None]]] = {"by_name": [], "held": []}
        errors: list[BaseException] = []
        stop = threading.Event()

        def loop() -> None:
            url = urlsplit(settings.url("docs", os.environ))
            client = chromadb.HttpClient(host=url.hostname, port=url.port)

            def answer(collection) -> Answer:
                metas = collection.get(include=["metadatas"])["metadatas"]
                return [(m["document_id"], m["vector_model_id"]) for m in metas]

            held = client.get_collection(name, embedding_function=None)
            while not stop.is_set():
                try:
                    for reader in ("by_name", "held"):
                        began = phase[0]
                        try:
                            if reader == "by_name":
                                got = answer(client.get_collection(name, embedding_function=None))
                            else:
                                got = answer(held)
                        except NotFoundError:
                            got = None
                            if reader == "held":
                                held = client.get_collection(name, embedding_function=None)
                        seen[reader].append((began, phase[0], got))
                except BaseException as exc:  # any other error is a failure of the store
                    errors.append(exc)
                    return

        thread = threading.Thread(target=loop)
        thread.start()
        try:
            change_then_switch_and_back(
                postgres, store, documents, before_switch=lambda: phase.__setitem__(0, "switch")
            )
        finally:
            stop.set()
            thread.join()
            store.close()
    assert not errors, errors[0]
    for reader, answers in seen.items():
        assert len(answers) > 3, reader
        models_seen = set()
        for began, ended, answer in answers:
            if answer is None:
                assert "switch" in (began, ended), f"{reader}: the collection vanished in a change"
                continue
            assert {doc for doc, _ in answer} == {"alpha", "gamma"}, f"{reader}: a missing document"
            models = {model for _, model in answer}
            assert len(models) == 1, f"{reader}: an answer mixing models: {models}"
            models_seen |= models
        assert models_seen == {MODEL_A, MODEL_B}, reader


def change_then_switch_and_back(
    postgres: PostgresResource,
    store: TargetStore,
    documents: dict[str, list[str]],
    before_switch: Callable[[], None] = lambda: None,
) -> None:
    """A new version of alpha (two chunks changed), then a switch to model B and back to A,
    each synced to `store` two records at a time."""
    changed = {"alpha": texts("alpha", 6, changed=2)}
    corpus.publish_batch(postgres, "b2", changed, MODEL_A, DIM_A)
    sync_target(postgres, "docs", store, ["default"], batch_records=2)
    for model, dimension in ((MODEL_B, DIM_B), (MODEL_A, DIM_A)):
        corpus.rebuild(postgres, "b1", documents, model, dimension)
        corpus.rebuild(postgres, "b2", changed, model, dimension)
        before_switch()
        sync_target(postgres, "docs", store, ["default"], batch_records=2)
