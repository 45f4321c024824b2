"""Readers during writes: threads querying through the LangChain and LlamaIndex retrievers while
a backfill re-cuts every chunk and while a `seams run` ingests new and changed documents. No
answer errs, none has fewer hits than the same query had before, and every answer's hits come
from one published state (one publication, each hit at its batch's generation published then).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from seams.environment import SeamsEnvironment
from seams.integrations.langchain_retriever import SeamsRetriever
from seams.integrations.llama_index_retriever import SeamsLlamaIndexRetriever
from seams.orchestration import runner
from seams.orchestration.definitions import build_definitions
from seams.resources.embedder import OnnxEmbedderResource
from seams.resources.postgres import PostgresResource
from seams.settings import SeamsSettings, load_settings
from tests.support.databases import rows
from tests.support.samples import SHORT_DOC, copy_samples, run_path

NAMES = ("field_notes.md", "kitchen_science.md", "platform_handbook.md")
QUERIES = (
    "how a honey bee colony is organised around its queen",
    "PostgreSQL backups retention",
    "Maillard reaction caramelization",
    "tides and the harbour",
)
K = 5
READERS = 4


@dataclass
class Answer:
    query: str
    hits: int
    seqs: set[int]
    builds: list[tuple[str, int]]
    """(batch_key, generation) of each hit."""


@dataclass
class Readers:
    """Threads asking every query in turn through both retrievers until stopped."""

    url: str
    answers: list[Answer] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def ask(self) -> Callable[[str], Answer]:
        """A retriever-backed asker (a new pair per thread: each has its own embedder)."""
        postgres = PostgresResource(url=self.url)
        langchain = SeamsRetriever(k=K, postgres=postgres, embedder=OnnxEmbedderResource())
        llama = SeamsLlamaIndexRetriever(k=K, postgres=postgres, embedder=OnnxEmbedderResource())
        turn = [0]

        def ask(query: str) -> Answer:
            turn[0] += 1
            if turn[0] % 2:
                metadata = [d.metadata for d in langchain.invoke(query)]
            else:
                metadata = [n.node.metadata for n in llama.retrieve(query)]
            return Answer(
                query,
                len(metadata),
                {m["published_seq"] for m in metadata},
                [(m["batch_key"], m["generation"]) for m in metadata],
            )

        return ask

    def start(self) -> None:
        def loop() -> None:
            ask = self.ask()
            i = 0
            while not self.stop.is_set():
                query = QUERIES[i % len(QUERIES)]
                i += 1
                try:
                    self.answers.append(ask(query))
                except Exception as exc:  # every error is a finding
                    self.errors.append(f"{query}: {type(exc).__name__}: {exc}")

        self.threads = [threading.Thread(target=loop) for _ in range(READERS)]
        for thread in self.threads:
            thread.start()

    def finish(self) -> list[Answer]:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=120)
        answers, self.answers = self.answers, []
        return answers


def _definitions(**chunking: Any) -> dg.Definitions:
    environment = SeamsEnvironment.from_os()
    settings = load_settings(environment=environment)
    if chunking:
        settings = SeamsSettings.model_validate(
            {**settings.model_dump(), "chunking": {"overrides": chunking}}
        )
    return build_definitions(settings, environment=environment)


def _chunk_ids(url: str) -> set[str]:
    return {r[0] for r in rows(url, "SELECT chunk_id FROM seams.current_chunks")}


def _check(answers: list[Answer], before: dict[str, int], url: str, during: str) -> None:
    assert answers, f"no answer was read during {during}"
    short = [(a.query, a.hits) for a in answers if a.hits < before[a.query]]
    assert not short, f"{len(short)} of {len(answers)} answers shorter during {during}: {short[:5]}"
    mixed = [a for a in answers if len(a.seqs) != 1]
    assert not mixed, f"answers mixing publications during {during}: {mixed[:3]}"
    # Each hit is at the generation its batch had in the publication the answer read.
    log = rows(
        url,
        "SELECT batch_key, seq, generation FROM seams.publications WHERE kind = 'batch'"
        " ORDER BY batch_key, seq",
    )
    for answer in answers:
        (seq,) = answer.seqs
        for batch, generation in answer.builds:
            published = [g for b, s, g in log if b == batch and s <= seq][-1:]
            assert published == [generation], (during, answer, batch, published)


@pytest.mark.slow
def test_readers_see_whole_published_states_during_a_backfill_and_a_run(
    instance: dg.DagsterInstance, database_url: str, tmp_path: Path
) -> None:
    inbox = copy_samples(tmp_path / "inbox", NAMES)
    run_path(instance, inbox, defs=_definitions())
    readers = Readers(database_url)
    ask = readers.ask()
    before = {query: ask(query).hits for query in QUERIES}
    assert all(hits == K for hits in before.values()), before
    old_chunks = _chunk_ids(database_url)

    # 1. A settings change that re-cuts every chunk, and its backfill.
    recut = _definitions(chunk_size_max=96, chunk_size_target=64)
    readers.start()
    try:
        summary = runner.backfill(instance, print, defs=recut)
    finally:
        during_backfill = readers.finish()
    assert summary.batches and not readers.errors, readers.errors[:5]
    # Every chunk was rewritten (a new build of the batch), most of them cut differently.
    new_chunks = _chunk_ids(database_url)
    generations = rows(database_url, "SELECT DISTINCT generation FROM seams.current_chunks")
    assert generations == [(2,)], generations
    assert new_chunks and len(new_chunks & old_chunks) < len(new_chunks) / 2
    _check(during_backfill, before, database_url, "the backfill")

    # 2. A `seams run` of a changed document and a new one, with the new settings.
    notes = inbox / "field_notes.md"
    notes.write_text(notes.read_text(encoding="utf-8") + "\n\nA late note on swarms.\n", "utf-8")
    (inbox / "tides.md").write_text(SHORT_DOC, encoding="utf-8")
    before = {query: ask(query).hits for query in QUERIES}
    readers.errors.clear()
    readers.stop.clear()
    readers.start()
    try:
        run_path(instance, inbox, defs=recut)
    finally:
        during_run = readers.finish()
    assert not readers.errors, readers.errors[:5]
    _check(during_run, before, database_url, "the run")
    current = rows(database_url, "SELECT count(DISTINCT document_id) FROM seams.current_chunks")
    assert current == [(len(NAMES) + 1,)]
