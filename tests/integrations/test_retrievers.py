"""Hybrid search, token budgets and the framework retrievers, over one indexed sample corpus.

The corpus (three bundled sample documents) is chunked and indexed once by the real pipeline
with the default settings; every test reads it and leaves it as it found it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from seams.models.model_store import ModelManifest
from seams.orchestration import cli
from seams.resources import database
from seams.settings import SeamsSettings
from seams.storage.search import LEXICAL_WEIGHT, fuse_scores, search_response
from tests.support.instances import keep_environment
from tests.support.samples import copy_samples
from tests.support.search_index import Indexed, indexed_database
from tests.support.search_probes import candidate_pool
from tests.test_docs import DOCS, run_python_blocks

SETTINGS = SeamsSettings()
LIBRARY_PAGE = DOCS / "library.md"
NAMES = ["field_notes.md", "kitchen_science.md", "platform_handbook.md"]
QUERIES = [
    "how a honey bee colony is organised around its queen",
    "PostgreSQL backups retention",
    "Maillard reaction caramelization",
    "the of and",  # stop words only: dense still answers
]


@pytest.fixture(scope="module")
def indexed(
    pg_server_url: str, exported_model: ModelManifest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Indexed]:
    """The sample documents indexed with the default settings."""
    docs = copy_samples(tmp_path_factory.mktemp("hybrid") / "docs", NAMES)
    with indexed_database(pg_server_url, docs, SETTINGS) as built:
        yield built


def test_hybrid_hits_carry_both_scores_and_follow_the_documented_fusion(indexed: Indexed) -> None:
    for query in QUERIES:
        pool = candidate_pool(indexed.postgres, indexed.embedder, query, pool=40)
        response = search_response(indexed.postgres, indexed.embedder, query, k=5)
        assert response.search == "hybrid" and len(response.hits) == 5
        fused = fuse_scores([c.dense_score for c in pool.entries],
                            [c.lexical_score for c in pool.entries], LEXICAL_WEIGHT)  # fmt: skip
        want = sorted(zip(fused, pool.entries, strict=True),
                      key=lambda x: (-x[0], x[1].chunk_id))[:5]  # fmt: skip
        assert [h.chunk_id for h in response.hits] == [c.chunk_id for _, c in want]
        assert [h.score for h in response.hits] == pytest.approx([f for f, _ in want])
        for hit in response.hits:
            assert hit.dense_score is not None and hit.lexical_score is not None
            assert (hit.lexical_score > 0) == bool(hit.matched_terms)
            assert hit.matched in ("dense", "lexical", "dense+lexical")
    bees = search_response(indexed.postgres, indexed.embedder, QUERIES[0], k=1).hits[0]
    assert "queen" in bees.matched_terms and bees.matched == "dense+lexical"
    assert "queen" in bees.text.lower()
    lexical = search_response(indexed.postgres, indexed.embedder, "Maillard", k=5,
                              search="lexical")  # fmt: skip
    assert lexical.hits and all("maillard" in h.text.lower() for h in lexical.hits)
    assert all(h.dense_score is None and h.lexical_score == h.score for h in lexical.hits)
    dense = search_response(indexed.postgres, indexed.embedder, QUERIES[1], k=3, search="dense")
    assert all(h.lexical_score is None and h.dense_score == h.score for h in dense.hits)
    stop = search_response(indexed.postgres, indexed.embedder, "the of and", k=3,
                           search="lexical")  # fmt: skip
    assert stop.hits == [] and any("stop words" in n for n in stop.notes)


def test_a_budget_is_never_exceeded_and_no_text_is_returned_twice(indexed: Indexed) -> None:
    counter = indexed.embedder.count_tokens
    with indexed.postgres.connection() as conn:
        texts = dict(conn.execute(
            "SELECT batch_key || '/' || document_id, text FROM seams.extracted_text"
        ).fetchall())  # fmt: skip
    for query in QUERIES:
        for budget in (1, 40, 150, 600, 3000):
            response = search_response(indexed.postgres, indexed.embedder, query, k=5,
                                       budget=budget)  # fmt: skip
            packed = response.context
            assert packed is not None and packed.tokens <= budget
            assert packed.tokens == sum(counter([s.text])[0] for s in packed.spans)
            seen: dict[str, list[tuple[int, int]]] = {}
            for span in packed.spans:
                source = texts[f"{span.batch_key}/{span.document_id}"]
                assert span.text == source[span.start_char : span.end_char]
                for start, end in seen.get(span.document_id, []):
                    assert span.end_char < start or end < span.start_char  # apart, not touching
                seen.setdefault(span.document_id, []).append((span.start_char, span.end_char))
            assert [h.rank for h in response.hits] == sorted(h.rank for h in response.hits)
            ranks = sorted(r for s in packed.spans for r in s.ranks)
            assert ranks == [h.rank for h in response.hits]
    big = search_response(indexed.postgres, indexed.embedder, QUERIES[0], k=5, budget=3000)
    assert big.context is not None and len(big.hits) > 5  # the budget, not k, sets the length


@pytest.fixture
def reader_environment(indexed: Indexed, monkeypatch: pytest.MonkeyPatch) -> Indexed:
    """The environment a reader's process has: the index's URL, the packaged settings."""
    keep_environment(monkeypatch)
    monkeypatch.setenv(database.URL_ENV, indexed.url)
    monkeypatch.delenv(database.DAGSTER_URL_ENV, raising=False)
    monkeypatch.chdir(Path(__file__).parent)  # no ./seams.yaml: the packaged defaults
    monkeypatch.delenv("SEAMS_CONFIG", raising=False)
    return indexed


def test_the_retrievers_return_seams_search_hits(
    reader_environment: Indexed, capsys: pytest.CaptureFixture[str]
) -> None:
    from seams.integrations.langchain_retriever import SeamsRetriever
    from seams.integrations.llama_index_retriever import SeamsLlamaIndexRetriever

    langchain = SeamsRetriever(k=3)
    llama = SeamsLlamaIndexRetriever(k=3)
    for query in QUERIES[:3]:
        assert cli.main(["search", query, "-k", "3", "--json"]) == 0
        printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        expected = [(h["chunk_id"], h["text"], h["score"]) for h in printed["hits"]]
        docs = langchain.invoke(query)
        assert [(d.id, d.page_content, d.metadata["score"]) for d in docs] == expected
        assert docs[0].metadata["matched"] == printed["hits"][0]["matched"]
        nodes = llama.retrieve(query)
        assert [(n.node.node_id, n.node.get_content(), n.score) for n in nodes] == expected
        assert cli.main(["search", query, "--budget", "200", "--json"]) == 0
        printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        spans = [(s["text"], s["ranks"]) for s in printed["spans"]]
        budgeted = SeamsRetriever(budget=200).invoke(query)
        assert [(d.page_content, d.metadata["ranks"]) for d in budgeted] == spans
        nodes = SeamsLlamaIndexRetriever(budget=200).retrieve(query)
        assert [(n.node.get_content(), n.node.metadata["ranks"]) for n in nodes] == spans
    assert cli.main(["search", QUERIES[0], "-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "matched: dense+lexical" in out and "words: " in out and "queen" in out


def test_the_library_page_retriever_examples_run_over_the_index(
    reader_environment: Indexed, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_python_blocks(LIBRARY_PAGE, indexed=True) >= 1
    first, second = capsys.readouterr().out.splitlines()[-2:]
    assert "dense+lexical" in first and "queen" in first
    assert second.startswith("default ")
