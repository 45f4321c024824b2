"""Each store kind mirrors the published current chunks exactly, through every kind of change
(real PostgreSQL for Seams; real pgvector, LanceDB and Qdrant local mode as the targets).

Published states are made at the storage level (`corpus`): a corpus, a changed, a retired and
a new document, a backfill that changes one chunk, a model switch to another dimension and
back. After each, the store's records equal what `seams export --current --vectors` reads,
`check_target` finds nothing, and a sync sends only what changed.
"""

from __future__ import annotations

import pytest

from seams.resources.postgres import PostgresResource
from seams.storage.targets.sync import check_target, sync_target
from tests.storage.targets import corpus
from tests.storage.targets.stores import KINDS, assert_mirrors, opener, store_settings

MODEL_A, DIM_A = "model-a", 16
MODEL_B, DIM_B = "model-b", 8
COLLECTIONS = ("default",)


def texts(doc: str, n: int, changed: int | None = None) -> list[str]:
    return [f"{doc} part {i}{' revised' if i == changed else ''} about rivers" for i in range(n)]


def first_corpus() -> dict[str, dict[str, list[str]]]:
    return {
        "b1": {"alpha": texts("alpha", 4), "beta": texts("beta", 3)},
        "b2": {"gamma": texts("gamma", 5)},
    }


SERVER_KINDS = ("chroma", "milvus")
"""Kinds whose engine starts a server process (Chroma's, Milvus Lite's): seconds each, so the
default lane repairs a hand-edited record in the stores that open in-process and the slow lane
in these too."""


@pytest.fixture(
    params=[k if k not in SERVER_KINDS else pytest.param(k, marks=pytest.mark.slow) for k in KINDS]
)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


SCENARIO_KINDS = [k if k == "pgvector" else pytest.param(k, marks=pytest.mark.slow) for k in KINDS]
"""The whole scenario runs for every kind in the slow lane, for pgvector in the default one;
every in-process kind's sync, check and repair run in the default lane (the test after this
one)."""


@pytest.mark.parametrize("kind", SCENARIO_KINDS)
def test_a_store_mirrors_every_published_change_and_only_what_changed_is_sent(
    kind: str, postgres: PostgresResource, pg_server_url: str, tmp_path, monkeypatch
) -> None:
    batches = first_corpus()
    for batch, documents in batches.items():
        corpus.publish_batch(postgres, batch, documents, MODEL_A, DIM_A)
    with store_settings(kind, pg_server_url, tmp_path, monkeypatch) as settings:
        store = opener(settings)()
        try:

            def sync(verify: bool = False):
                result = sync_target(postgres, "docs", store, COLLECTIONS, verify=verify)
                assert_mirrors(store, corpus.current_records(postgres))
                found = check_target(postgres, "docs", store, COLLECTIONS)
                assert found.exact, found
                assert found.records == result.records
                return result

            first = sync()
            assert (first.written, first.deleted, first.records) == (12, 0, 12)
            assert not first.switched and first.live is not None  # readers had none
            assert sync().written == 0  # nothing changed: nothing sent

            # A changed file (one chunk revised, one added) and a new file, in a new batch.
            corpus.publish_batch(
                postgres,
                "b3",
                {"alpha": texts("alpha", 5, changed=1), "delta": texts("delta", 2)},
                MODEL_A,
                DIM_A,
            )
            changed = sync()  # alpha's records all carry its new version; delta's are new
            assert (changed.written, changed.deleted, changed.switched) == (7, 1, False)

            corpus.retire(postgres, ["beta"])  # a deleted file
            retired = sync()
            assert (retired.written, retired.deleted) == (0, 3)

            # A settings change and backfill: one chunk of b2 comes out different.
            batches["b2"] = {"gamma": texts("gamma", 5, changed=4)}
            corpus.rebuild(postgres, "b2", batches["b2"], MODEL_A, DIM_A)
            backfill = sync()
            assert (backfill.written, backfill.deleted) == (1, 1)

            # A model switch to another dimension (published whole), then back.
            live = {"b2": batches["b2"], "b3": {"alpha": texts("alpha", 5, changed=1),
                                                "delta": texts("delta", 2)}}  # fmt: skip
            for model, dimension in ((MODEL_B, DIM_B), (MODEL_A, DIM_A)):
                for batch in ("b1", "b2", "b3"):
                    documents = live.get(batch, batches["b1"])
                    corpus.rebuild(postgres, batch, documents, model, dimension)
                switched = sync()
                assert switched.switched and switched.written == switched.records
                assert switched.dropped, "the previous model's object is dropped"
                assert store.objects() == [switched.live] or settings.kind == "lancedb"
        finally:
            store.close()


def test_a_record_deleted_or_altered_by_hand_is_found_and_repaired(
    kind: str, postgres: PostgresResource, pg_server_url: str, tmp_path, monkeypatch
) -> None:
    for batch, documents in first_corpus().items():
        corpus.publish_batch(postgres, batch, documents, MODEL_A, DIM_A)
    with store_settings(kind, pg_server_url, tmp_path, monkeypatch) as settings:
        store = opener(settings)()
        try:
            sync_target(postgres, "docs", store, COLLECTIONS)
            live = store.live()
            records = {r.chunk_id: r for r in store.read(live)}
            gone, altered = sorted(records)[:2]
            store.delete(live, [gone])
            record = records[altered]
            store.upsert(live, [type(record)({**record.fields, "text": "edited"}, record.vector)])
            found = check_target(postgres, "docs", store, COLLECTIONS)
            assert found.counts() == {"records": 11, "missing": 1, "extra": 0, "stale": 1}
            assert found.examples["missing"] == [gone]
            assert found.examples["stale"] == [f"{altered} (text)"]
            # The asset's quick sync sees the deleted id in the store's ids; the ledger alone
            # cannot see an edit: the verifying sync reads the records.
            assert sync_target(postgres, "docs", store, COLLECTIONS).written == 1
            found = check_target(postgres, "docs", store, COLLECTIONS)
            assert found.counts() == {"records": 12, "missing": 0, "extra": 0, "stale": 1}
            repaired = sync_target(postgres, "docs", store, COLLECTIONS, verify=True)
            assert repaired.written == 1 and repaired.found is not None
            assert check_target(postgres, "docs", store, COLLECTIONS).exact
            assert_mirrors(store, corpus.current_records(postgres))
        finally:
            store.close()


def test_a_sync_lists_the_stores_ids_only_when_its_count_is_not_the_ledgers(
    postgres: PostgresResource, pg_server_url: str, tmp_path, monkeypatch
) -> None:
    for batch, documents in first_corpus().items():
        corpus.publish_batch(postgres, batch, documents, MODEL_A, DIM_A)
    with store_settings("pgvector", pg_server_url, tmp_path, monkeypatch) as settings:
        store = opener(settings)()
        listed: list[str] = []
        ids = store.ids
        store.ids = lambda obj: listed.append(obj) or ids(obj)  # type: ignore[method-assign]
        try:
            assert sync_target(postgres, "docs", store, COLLECTIONS).written == 12
            assert sync_target(postgres, "docs", store, COLLECTIONS).written == 0
            assert listed == []  # the store held as many records as the ledger listed
            live = store.live()
            store.delete(live, [sorted(ids(live))[0]])  # by hand
            assert sync_target(postgres, "docs", store, COLLECTIONS).written == 1
            assert listed == [live]
            assert check_target(postgres, "docs", store, COLLECTIONS).exact
        finally:
            store.close()


@pytest.mark.slow
def test_a_milvus_lite_file_opened_again_is_read_and_synced(
    postgres: PostgresResource, pg_server_url: str, tmp_path, monkeypatch
) -> None:
    """Milvus Lite serves its file from the client that opens it, and a collection an earlier
    client made is released until loaded: `seams sync` opens the file afresh each time."""
    for batch, documents in first_corpus().items():
        corpus.publish_batch(postgres, batch, documents, MODEL_A, DIM_A)
    with store_settings("milvus", pg_server_url, tmp_path, monkeypatch) as settings:
        first = opener(settings)()
        try:
            sync_target(postgres, "docs", first, COLLECTIONS)
        finally:
            first.close()
        store = opener(settings)()
        try:
            assert check_target(postgres, "docs", store, COLLECTIONS).exact
            corpus.retire(postgres, ["beta"])
            assert sync_target(postgres, "docs", store, COLLECTIONS).deleted == 3
            assert_mirrors(store, corpus.current_records(postgres))
        finally:
            store.close()
