"""`seams serve` end to end: a real server process with API keys, a real HTTP client, a project
of three collections made by the real pipeline (`alpha` read by tenant A, `beta` by tenant B,
`gamma` by nobody), on a database of its own.

One server for the module: the tests here only read, except the backfill, which leaves the
index as it found it (the same documents, published again).
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dagster as dg
import httpx
import psycopg
import pytest
from psycopg import sql

from seams.orchestration.cli.db import sync_from_settings
from seams.resources.postgres import PostgresResource, close_pool
from seams.settings import load_settings
from seams.storage import tenants
from seams.storage.batches import register_batch, scan_inbox
from tests.storage.test_tenant_isolation import DOCUMENTS, MARKERS, QUERIES, write_settings
from tests.support.cli import run_seams, seams_env
from tests.support.databases import fresh_database
from tests.support.privileges import tenant_names
from tests.support.search_index import materialize_batch, pipeline_resources
from tests.support.served import serving

TIMINGS = ("embed_ms", "search_ms")


@dataclass(frozen=True)
class Served:
    base: str
    url: str
    env: dict[str, str]
    keys: dict[str, str]
    """Tenant -> its API key."""
    reads: dict[str, str]
    """Tenant -> its collection."""
    batches: dict[str, str]
    """Collection -> its batch."""
    resources: dict[str, Any]
    instance: dg.DagsterInstance

    def post(self, tenant: str | None, body: Any, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.keys[tenant]}"} if tenant else {}
        return httpx.post(f"{self.base}/search", json=body, headers=headers, timeout=60, **kwargs)

    def get(self, tenant: str | None, path: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.keys[tenant]}"} if tenant else {}
        return httpx.get(f"{self.base}{path}", headers=headers, timeout=60)


@pytest.fixture(scope="module")
def served(
    pg_server_url: str,
    exported_model: object,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    a, b = tenant_names()
    folder = tmp_path_factory.mktemp("serve")
    settings_file = write_settings(folder, a, b)
    keys = {a: f"key-a-{uuid.uuid4().hex}", b: f"key-b-{uuid.uuid4().hex}"}
    keys_file = folder / "api-keys"
    keys_file.write_text(f"# tenant key\n{a} {keys[a]}\n\n{b} {keys[b]}\n", encoding="utf-8")
    keys_file.chmod(0o600)
    with fresh_database(pg_server_url) as url:
        resources = pipeline_resources(url)
        postgres: PostgresResource = resources["seams_postgres"]
        postgres.ensure_schema()
        instance = dg.DagsterInstance.ephemeral()
        batches = {}
        try:
            for collection in DOCUMENTS:
                files, _ = scan_inbox(folder / collection)
                with postgres.connection() as conn:
                    batches[collection] = register_batch(
                        conn, files, source="test", collection=collection
                    )
                materialize_batch(instance, resources, batches[collection])
            settings = load_settings(settings_file)
            with postgres.connection() as conn:
                sync_from_settings(conn, settings)
            env = seams_env(
                SEAMS_DATABASE_URL=url,
                SEAMS_CONFIG=str(settings_file),
                SEAMS_DATA_DIR=os.environ["SEAMS_DATA_DIR"],
                SEAMS_API_KEYS=str(keys_file),
            )
            with serving(env, folder / "serve.log") as (_, base):
                yield Served(
                    base, url, env, keys, {a: "alpha", b: "beta"}, batches, resources, instance
                )
        finally:
            instance.dispose()
            close_pool(url)
            with psycopg.connect(url, autocommit=True) as conn:
                for tenant in (a, b):
                    tenants.drop_tenant(conn, tenant)
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(tenants.GROUP)))


def without_timings(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k not in TIMINGS}


def collections_of(url: str, chunk_ids: list[str]) -> set[str]:
    """The collections the database itself says these chunks belong to."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT DISTINCT collection FROM seams.chunks WHERE chunk_id = ANY(%s)", (chunk_ids,)
        ).fetchall()
    return {r[0] for r in rows}


def test_the_api_answers_as_seams_search_json(served: Served) -> None:
    """The same arguments give the same answer (all but the timings) over HTTP with a tenant's
    key as from `seams search --json` connected as that tenant (`seams db url --tenant`)."""
    tenant = next(t for t, c in served.reads.items() if c == "alpha")
    env = {k: v for k, v in served.env.items() if k != "SEAMS_API_KEYS"}
    env["SEAMS_DATABASE_URL"] = tenants.tenant_url(served.url, tenant)
    body = {"query": QUERIES["alpha"], "budget": 120, "collections": ["alpha"]}
    cli = run_seams(
        "search", body["query"], "--budget", "120", "--collection", "alpha", "--json", env=env
    )
    assert cli.returncode == 0, cli.stderr
    answer = served.post(tenant, body)
    assert answer.status_code == 200, answer.text
    assert without_timings(answer.json()) == without_timings(json.loads(cli.stdout))
    assert answer.json()["hits"] and answer.json()["spans"], answer.json()


def test_a_key_reads_only_its_tenants_collections(served: Served) -> None:
    for tenant, own in served.reads.items():
        for query in QUERIES.values():
            answer = served.post(tenant, {"query": query, "k": 10})
            assert answer.status_code == 200, answer.text
            hits = answer.json()["hits"]
            assert hits, (tenant, query)
            assert collections_of(served.url, [h["chunk_id"] for h in hits]) == {own}
            text = " ".join(h["text"] + h["context"]["window_text"] for h in hits).lower()
            for other, marker in MARKERS.items():
                if other != own:
                    assert marker not in text, (tenant, other)
        # Another tenant's collection is unknown to this key, and no name of it is given.
        other = next(c for c in DOCUMENTS if c != own)
        refused = served.post(tenant, {"query": "anything", "collections": [other]})
        assert refused.status_code == 400
        assert other not in refused.json()["error"].split("declare")[-1]
        # Its documents are not there either; its metrics name its own collection only.
        with psycopg.connect(served.url) as conn:
            (document,) = conn.execute(
                "SELECT document_id FROM seams.current_documents WHERE collection = %s", (other,)
            ).fetchone()
            (mine,) = conn.execute(
                "SELECT document_id FROM seams.current_documents WHERE collection = %s", (own,)
            ).fetchone()
        assert served.get(tenant, f"/documents/{document}").status_code == 404
        assert served.get(tenant, f"/documents/{mine}").status_code == 200
        metrics = served.get(tenant, "/metrics").text
        assert f'seams_published_seq{{collection="{own}"}}' in metrics
        assert f'collection="{other}"' not in metrics


def test_no_key_no_answer(served: Served) -> None:
    for key in (None, "", "Bearer", "Bearer not-a-key-of-anyone", "Basic abc"):
        headers = {"Authorization": key} if key is not None else {}
        for method, path in (("POST", "/search"), ("GET", "/metrics"), ("GET", "/")):
            answer = httpx.request(
                method, f"{served.base}{path}", json={"query": "compost"}, headers=headers
            )
            assert answer.status_code == 401, (key, path, answer.text)
            assert "compost" not in answer.text
    assert httpx.get(f"{served.base}/health").json() == {"status": "ready"}


def test_the_document_shows_every_chunk_with_its_boundary(served: Served) -> None:
    tenant = next(t for t, c in served.reads.items() if c == "alpha")
    with psycopg.connect(served.url) as conn:
        (document,) = conn.execute(
            "SELECT document_id FROM seams.current_documents WHERE collection = 'alpha'"
        ).fetchone()
        chunks = conn.execute(
            "SELECT chunk_index, start_char, end_char, token_count, section"
            " FROM seams.current_chunks WHERE document_id = %s ORDER BY chunk_index",
            (document,),
        ).fetchall()
    answer = served.get(tenant, f"/documents/{document}")
    assert answer.status_code == 200, answer.text
    view = answer.json()
    assert view["file_name"] == "alpha.md" and view["collection"] == "alpha"
    got = [
        (c["chunk_index"], c["start_char"], c["end_char"], c["token_count"], c["section"])
        for c in view["chunks"]
    ]
    assert got == [tuple(row) for row in chunks]
    reasons = [c["reason"] for c in view["chunks"]]
    assert reasons[0] == "document_start"
    assert all(r in {"structural", "semantic", "size", "fallback"} for r in reasons[1:]), reasons
    assert all(c["similarity"] is not None for c in view["chunks"][1:])
    page = served.get(tenant, f"/view/{document}").text
    assert page.count('class="chunk ') == len(chunks)
    assert page.count("<rect ") == len(chunks)


BAD = [
    ({"query": ""}, 422),
    ({"query": "   "}, 400),
    ({"query": "x" * (1 << 20)}, 413),
    ({"query": "compost\x00heap"}, 400),
    ({"query": "compost", "collections": ["nowhere"]}, 400),
    ({"query": "compost", "collections": []}, 422),
    ({"query": "compost", "k": 0}, 422),
    ({"query": "compost", "k": 101}, 422),
    ({"query": "compost", "k": "five"}, 422),
    ({"query": "compost", "budget": 0}, 422),
    ({"query": "compost", "budget": 10**9}, 422),
    ({"query": "compost", "lexical_weight": 2}, 422),
    ({"query": "compost", "search": "fuzzy"}, 422),
    ({"query": "compost", "surprise": 1}, 422),
    ({"query": 42}, 422),
    ([], 422),
]


@pytest.mark.parametrize(("body", "status"), BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_is_a_4xx_with_one_line(served: Served, body: Any, status: int) -> None:
    tenant = next(iter(served.keys))
    answer = served.post(tenant, body)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert isinstance(error, str) and error and "\n" not in error and len(error) < 400


def test_malformed_json_and_odd_paths_are_4xx(served: Served) -> None:
    tenant = next(iter(served.keys))
    headers = {"Authorization": f"Bearer {served.keys[tenant]}",
               "Content-Type": "application/json"}  # fmt: skip
    for raw in (b'{"query": ', b"\xff\xfe", b'{"query": "a"}{'):
        answer = httpx.post(f"{served.base}/search", content=raw, headers=headers)
        assert answer.status_code == 400, answer.text
        assert answer.json() == {"error": "the request body is not valid JSON"}
    for path in ("/documents/%00", "/documents/" + "x" * 600, "/documents/nope", "/nowhere"):
        answer = httpx.get(f"{served.base}{path}", headers=headers)
        assert 400 <= answer.status_code < 500, (path, answer.text)


def test_openapi_describes_the_api(served: Served) -> None:
    document = httpx.get(f"{served.base}/openapi.json").json()
    assert {"/search", "/documents/{document_id}", "/health", "/metrics"} <= set(document["paths"])
    fields = document["components"]["schemas"]["SearchRequest"]["properties"]
    assert set(fields) == {"query", "k", "budget", "collections", "search", "lexical_weight"}


@pytest.mark.slow
def test_readers_during_a_backfill_get_whole_answers(served: Served) -> None:
    """While the `alpha` batch is built and published again, every search of its tenant answers
    200 with as many hits as before, from one publication or the next."""
    tenant = next(t for t, c in served.reads.items() if c == "alpha")
    body = {"query": QUERIES["alpha"], "k": 3}
    before = served.post(tenant, body).json()
    done = threading.Event()
    answers: list[httpx.Response] = []

    def read() -> None:
        while not done.is_set():
            answers.append(served.post(tenant, body))

    readers = [threading.Thread(target=read) for _ in range(3)]
    for thread in readers:
        thread.start()
    try:
        materialize_batch(served.instance, served.resources, served.batches["alpha"])
    finally:
        done.set()
        for thread in readers:
            thread.join()
    after = served.post(tenant, body).json()
    assert after["published_seq"] > before["published_seq"]
    assert answers
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert len(answer.json()["hits"]) == len(before["hits"]) == 3
    seen = {a.json()["published_seq"] for a in answers}
    assert seen <= {before["published_seq"], after["published_seq"]}
