"""BM25 in PostgreSQL equals BM25 computed here, and stays equal as the corpus changes.

The reference takes each current chunk's lexemes from PostgreSQL's own `to_tsvector` (the
analyzer is PostgreSQL's by design) and does everything else in Python: document frequencies,
chunk count, average length, IDF and the BM25 sum. Batches are written the way the pipeline
writes them (`write_table`, then `write_and_publish`: the `chunk_index` write publishes the
batch), registrations by plain INSERTs (they change nothing until publication), retirements
as `retire_missing` records them.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import psycopg
import pytest
from psycopg import sql

from seams.errors import ConfigError
from seams.resources.postgres import PostgresResource, close_pool
from seams.storage import publication, schema
from seams.storage.index_publication import write_and_publish
from seams.storage.partition_tables import write_table
from seams.storage.search import lexical
from tests.support.bm25 import bm25_scores
from tests.support.databases import fresh_database, migrated_postgres

DOC_A = [
    "The cat sat on the mat. Cats like warm mats.",
    "Dogs chase cats across the garden; the dog is fast.",
    "A quiet library holds old books and maps.",
]
DOC_B = [
    "Maps of the harbour show the lighthouse and the old pier.",
    "The lighthouse keeper keeps a log of every ship.",
    "Ships and boats: the harbour master counts them all.",
    "The the the and of",  # stop words only: length 0, still a chunk
]
DOC_C = ["Garden cats sleep in the sun while dogs dig.", "Compost heaps warm the garden soil."]
QUERIES = [
    "cats and dogs",
    "old maps of the harbour",
    "lighthouse ship log",
    "garden",
    "zebra cats",
]


def _add_batch(
    postgres: PostgresResource,
    key: str,
    docs: dict[str, list[str]],
    *,
    config: str = "english",
    register: bool = True,
) -> None:
    """Register `docs` as a batch, then write its chunks and chunk_index partitions."""
    with postgres.connection() as conn:
        if register:
            conn.execute(
                "INSERT INTO seams.batches (batch_key, source, document_count) VALUES (%s, %s, %s)",
                (key, "test", len(docs)),
            )
            for document_id in docs:
                conn.execute(
                    "INSERT INTO seams.batch_documents (batch_key, document_id, source_uri,"
                    " source_sha256, size_bytes) VALUES (%s, %s, %s, %s, 0)",
                    (key, document_id, f"file:///{document_id}.txt", f"{key}-{document_id}"),
                )
    chunks, index = [], []
    for document_id, texts in docs.items():
        start = 0
        for i, text in enumerate(texts):
            chunk_id = f"{document_id}-{i}-{hash(text) & 0xFFFF:x}"
            chunks.append({
                "batch_key": key, "chunk_id": chunk_id, "document_id": document_id,
                "chunk_index": i, "total_chunks": len(texts), "text": text,
                "start_char": start, "end_char": start + len(text), "overlap_start": start,
                "overlap_end": start, "token_count": len(text.split()), "sentence_count": 1,
                "page_start": None, "page_end": None, "section": "", "cohesion": None,
                "boundary_method": "semantic", "strategy": "context_aware", "metadata": {},
                "run_id": "test", "config_hash": "test", "model_id": "m",
                "source_sha256": f"{key}-{document_id}", "code_version": "test",
            })  # fmt: skip
            index.append({
                "batch_key": key, "chunk_id": chunk_id, "document_id": document_id,
                "mode": "pooled", "model_id": "m",
                "embedding": np.full(schema.EMBEDDING_DIM, 0.05, np.float32),
                "text_search_config": config,
            })  # fmt: skip
            start += len(text) + 2
    write_table(postgres, schema.CHUNKS, pd.DataFrame(chunks), [key])
    write_and_publish(postgres, pd.DataFrame(index), [key])


def _reference(
    conn: psycopg.Connection[Any], config: str, query: str
) -> dict[tuple[str, str], float]:
    """BM25 of every current indexed chunk, computed in Python from `to_tsvector`'s lexemes."""
    rows = conn.execute(
        "SELECT c.batch_key, c.chunk_id, c.text"
        " FROM seams.current_chunks AS c JOIN seams.chunk_index AS i"
        " ON i.batch_key = c.batch_key AND i.chunk_id = c.chunk_id"
        " WHERE i.text_search_config = %s",
        (config,),
    ).fetchall()
    return bm25_scores(conn, config, query, {(b, c): text for b, c, text in rows})


def _check_against_reference(postgres: PostgresResource, config: str = "english") -> None:
    """Every query: PostgreSQL's top chunks and scores are the reference's (1e-6), and the
    stored statistics are what the current chunks imply."""
    with postgres.connection() as conn:
        for query in QUERIES:
            expected = _reference(conn, config, query)
            terms = lexical.query_terms(conn, config, query)
            assert terms is not None
            found = lexical.top_chunks(conn, terms, pool=100)
            want = sorted(
                ((s, k) for k, s in expected.items() if s > 0), key=lambda x: (-x[0], x[1][1])
            )
            assert [(h.batch_key, h.chunk_id) for h in found] == [k for _, k in want], query
            assert [h.score for h in found] == pytest.approx([s for s, _ in want], abs=1e-6)
            every = lexical.score_chunks(conn, terms, list(expected))
            assert set(every) == set(expected)
            for key, hit in every.items():
                assert hit.score == pytest.approx(expected[key], abs=1e-6), (query, key)
        stats = conn.execute(
            "SELECT chunks, length_sum FROM seams.lexical_totals WHERE text_search_config = %s",
            (config,),
        ).fetchone()
        current = conn.execute(
            "SELECT count(*), coalesce(sum(length(to_tsvector(%s::regconfig, c.text))), 0)"
            " FROM seams.current_chunks AS c",
            (config,),
        ).fetchone()
        assert stats[0] == current[0]
        dfs = dict(conn.execute(
            "SELECT lexeme, df FROM seams.lexical_terms WHERE text_search_config = %s"
            " AND df > 0", (config,)
        ).fetchall())  # fmt: skip
        want_dfs = dict(conn.execute(
            "SELECT u.lexeme, count(*) FROM seams.current_chunks AS c"
            " CROSS JOIN LATERAL unnest(to_tsvector(%s::regconfig, c.text)) AS u GROUP BY 1",
            (config,),
        ).fetchall())  # fmt: skip
        assert dfs == want_dfs
        postings = conn.execute("SELECT count(*) FROM seams.lexical_postings").fetchone()[0]
        assert postings == sum(want_dfs.values())


def test_bm25_scores_from_postgresql_equal_a_python_reference(postgres: PostgresResource) -> None:
    _add_batch(postgres, "b1", {"a": DOC_A, "b": DOC_B})
    _check_against_reference(postgres)
    with postgres.connection() as conn:
        terms = lexical.query_terms(conn, "english", "cats and dogs")
        assert terms is not None and terms.lexemes == ("cat", "dog")  # stemmed, stop words gone
        (first, *_) = lexical.top_chunks(conn, terms, pool=5)
        assert first.matched_terms == ("cat", "dog")


def test_idf_stays_right_as_batches_arrive_documents_retire_and_backfills_replace_rows(
    postgres: PostgresResource,
) -> None:
    _add_batch(postgres, "b1", {"a": DOC_A, "b": DOC_B})
    _check_against_reference(postgres)
    # A new batch: a new document and a new version of "a".
    _add_batch(postgres, "b2", {"c": DOC_C, "a": [*DOC_A[:2], "Cats nap on mats all day."]})
    _check_against_reference(postgres)
    # A newer version registered but not built yet: its old chunks count until it is published.
    with postgres.connection() as conn:
        conn.execute("INSERT INTO seams.batches (batch_key, source, document_count)"
                     " VALUES ('b3', 'test', 1)")  # fmt: skip
        conn.execute("INSERT INTO seams.batch_documents (batch_key, document_id, source_uri,"
                     " source_sha256, size_bytes)"
                     " VALUES ('b3', 'c', 'file:///c.txt', 'b3-c', 0)")  # fmt: skip
        live = conn.execute("SELECT count(*) FROM seams.lexical_chunks WHERE document_id = 'c'"
                            " AND batch_key = 'b2'").fetchone()[0]  # fmt: skip
    assert live == len(DOC_C)
    _check_against_reference(postgres)
    _add_batch(postgres, "b3", {"c": ["Garden dogs and garden cats."]}, register=False)
    _check_against_reference(postgres)
    # Retirement: the file of "b" disappeared (as `retire_missing` records it).
    with postgres.connection() as conn, conn.transaction():
        conn.execute("INSERT INTO seams.document_tombstones (document_id, source_uri,"
                     " last_batch_key, reason)"
                     " VALUES ('b', 'file:///b.txt', 'b1', 'gone')")  # fmt: skip
        publication.retire(conn, ["b"])
    with postgres.connection() as conn:
        gone = conn.execute("SELECT count(*) FROM seams.lexical_chunks"
                            " WHERE document_id = 'b'").fetchone()[0]  # fmt: skip
    assert gone == 0
    _check_against_reference(postgres)
    # Backfills: a batch rewritten with the same rows, then with different chunks (new config).
    _add_batch(postgres, "b2", {"c": DOC_C, "a": [*DOC_A[:2], "Cats nap on mats all day."]},
               register=False)  # fmt: skip
    _check_against_reference(postgres)
    _add_batch(postgres, "b2", {"c": DOC_C[:1], "a": ["Cats and mats, rewritten."]},
               register=False)  # fmt: skip
    _check_against_reference(postgres)
    # An old batch rewritten changes nothing that is current.
    _add_batch(postgres, "b1", {"a": DOC_A, "b": DOC_B}, register=False)
    _check_against_reference(postgres)
    # A failed write leaves the index as it was.
    with pytest.raises(RuntimeError), postgres.connection() as conn, conn.transaction():
        conn.execute("DELETE FROM seams.chunk_index WHERE batch_key = 'b2'")
        raise RuntimeError("crash mid-write")
    _check_against_reference(postgres)


def test_queries_of_unseen_words_stop_words_long_text_or_other_scripts_work(
    postgres: PostgresResource,
) -> None:
    greek = "Ο φάρος του λιμανιού ανάβει κάθε βράδυ."
    chinese = "灯塔每天晚上亮起。"
    _add_batch(postgres, "b1", {"a": DOC_A, "b": DOC_B, "g": [greek, chinese]})
    with postgres.connection() as conn:
        unseen = lexical.query_terms(conn, "english", "zebra quokka")
        assert unseen is not None and unseen.lexemes and not unseen.known
        assert lexical.top_chunks(conn, unseen, pool=10) == []
        stop = lexical.query_terms(conn, "english", "the and of it is")
        assert stop is not None and stop.lexemes == ()
        assert lexical.top_chunks(conn, stop, pool=10) == []
        long_query = " ".join(["lighthouse harbour cats"] * 180)[:4000]
        terms = lexical.query_terms(conn, "english", long_query)
        assert terms is not None
        assert lexical.top_chunks(conn, terms, pool=3)
        many = " ".join(f"word{n}" for n in range(700))  # more lexemes than are read
        assert lexical.top_chunks(conn, lexical.query_terms(conn, "english", many), pool=3) == []
        for query, chunk in (("φάρος", greek), ("灯塔每天晚上亮起", chinese)):
            terms = lexical.query_terms(conn, "english", query)
            found = lexical.top_chunks(conn, terms, pool=3)
            assert [h.chunk_id for h in found] == [f"g-{[greek, chinese].index(chunk)}-"
                                                  f"{hash(chunk) & 0xFFFF:x}"]  # fmt: skip
    _check_against_reference(postgres)


def test_each_text_search_configuration_keeps_its_own_statistics(
    postgres: PostgresResource,
) -> None:
    _add_batch(postgres, "b1", {"a": DOC_A}, config="english")
    _add_batch(postgres, "b2", {"b": DOC_B}, config="simple")
    with postgres.connection() as conn:
        totals = dict(conn.execute(
            "SELECT text_search_config, chunks FROM seams.lexical_totals WHERE chunks > 0"
        ).fetchall())  # fmt: skip
        assert totals == {"english": len(DOC_A), "simple": len(DOC_B)}
        simple = lexical.query_terms(conn, "simple", "the lighthouse")
        assert simple is not None and simple.lexemes == ("lighthouse", "the")  # no stop words
        assert lexical.query_terms(conn, "german", "Leuchtturm") is None  # nothing indexed
        with pytest.raises(ConfigError, match="no_such_config"):
            lexical.query_terms(conn, "no_such_config", "x")
        with pytest.raises(ConfigError, match="pg_ts_config"):
            lexical.check_text_search_config(conn, "no_such_config")


# --- the exact read: a corpus whose common lexemes exceed the first round's depth -------------

START = 3
"""The exact read's first depth here: every lexeme below is in more chunks, so reads go deeper."""
SYLLABLES = [c + v for c in "bdgklmnprstvz" for v in "aeiou"]
COMMON = "zorblat"  # in every chunk
HALF = "quenmar"  # in about half
TENTH = "vexilo"  # in about a tenth, often repeated
TWIN = "Zorblat quenmar vexilo vexilo, zorblat."  # many documents hold exactly this chunk
DECOY = "plimsol"
"""In 20 one-word chunks, whose stored impact is above that of the one long chunk that repeats
it 8 times, whose true score is the highest: the best bounds first are not the best chunks."""
EXACT_QUERIES = [
    COMMON,
    f"{COMMON} {HALF}",
    f"{HALF} {TENTH}",
    f"{TENTH} {COMMON} {HALF}",
    DECOY,
]


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(3))


def _texts(rng: random.Random, count: int, filler: list[str]) -> list[str]:
    """`count` chunk texts: lengths from 1 to ~200 lexemes (the average above the postings'
    reference length, so a posting's stored impact is below its true term score), the common
    lexemes at varied tf, filler words drawn with a long tail."""
    weights = [1 / (n + 1) for n in range(len(filler))]
    out = []
    for _ in range(count):
        words = [COMMON] * rng.choice((1, 1, 1, 2, 3))
        words += [HALF] * (rng.random() < 0.5) * rng.choice((1, 1, 2, 4))
        words += [TENTH] * (rng.random() < 0.1) * rng.choice((1, 2, 3, 5))
        words += rng.choices(filler, weights, k=rng.choice((0, 2, 10, 60, 120, 160, 200)))
        rng.shuffle(words)
        out.append(" ".join(words).capitalize() + ".")
    return out


@pytest.fixture(scope="module")
def deep_corpus(pg_server_url: str) -> Iterator[PostgresResource]:
    """~350 chunks in two groups (english: 291, of which 24 the same `TWIN` text, ties, and the
    `DECOY` chunks; simple: 60), in one database for the module."""
    rng = random.Random(41)
    filler = sorted({_word(rng) for _ in range(120)})
    with fresh_database(pg_server_url) as url:
        (resource,) = migrated_postgres(url)  # the schema; the pool closes when the module ends
        english = {f"e{n:03d}": _texts(rng, 10, filler) for n in range(24)}
        for n in range(24):
            english[f"t{n:03d}"] = [TWIN]
        for n in range(20):
            english[f"d{n:03d}"] = [DECOY.capitalize() + "."]
        english["long"] = [" ".join([DECOY] * 8 + rng.choices(filler, k=162))]
        _add_batch(resource, "deep-e", english)
        simple = {f"s{n:03d}": _texts(rng, 10, filler) for n in range(6)}
        _add_batch(resource, "deep-s", simple, config="simple")
        yield resource
        close_pool(url)


def _group_reference(
    conn: psycopg.Connection[Any], query: str
) -> list[tuple[float, tuple[str, str]]]:
    """Every chunk with a positive BM25 score, each scored with its own group's statistics,
    ordered as search orders: score, then chunk_id, then batch_key."""
    scored = []
    for config in ("english", "simple"):
        scores = _reference(conn, config, query)
        scored += [(s, key) for key, s in scores.items() if s > 0]
    return sorted(scored, key=lambda x: (-x[0], x[1][1], x[1][0]))


@pytest.mark.parametrize("exact_k", [1, 5, None])
def test_the_exact_read_returns_the_exhaustive_top_k_of_every_group_whatever_the_depth(
    deep_corpus: PostgresResource, exact_k: int | None
) -> None:
    pool = 12
    k = pool if exact_k is None else exact_k
    with deep_corpus.connection() as conn:
        rounds = []
        for query in EXACT_QUERIES:
            want = _group_reference(conn, query)
            expected = {key: s for s, key in want}
            groups = lexical.group_terms(conn, query)
            assert [g.config for g in groups] == ["english", "simple"]
            assert all(df > START for df in groups[0].document_frequencies), query
            found = lexical.top_chunks_of(
                conn, groups, pool, exact_k=exact_k, start_depth=START, growth=2
            )
            # The first k: the exhaustive ones, ties broken as the exhaustive order breaks them.
            assert [(h.batch_key, h.chunk_id) for h in found[:k]] == [key for _, key in want[:k]]
            assert len(found) == pool
            for hit in found:  # every score exact, the rest of the pool included
                assert hit.score == pytest.approx(expected[(hit.batch_key, hit.chunk_id)], abs=1e-9)
            reads = [lexical.exact_read(conn, g, pool, exact_k=k, start_depth=START, growth=2)
                     for g in groups]  # fmt: skip
            rounds += [r.rounds for r in reads]
        assert max(rounds) >= 3  # the corpus makes the read go deeper, several times


def test_a_fixed_depth_read_misses_what_the_exact_read_finds(deep_corpus: PostgresResource) -> None:
    """The corpus is one where reading `START` postings per lexeme is not enough: the test
    above would fail with the fixed-depth read."""
    with deep_corpus.connection() as conn:
        missed = 0
        for query in EXACT_QUERIES:
            want = _group_reference(conn, query)
            groups = lexical.group_terms(conn, query)
            fixed = lexical.top_chunks_of(conn, groups, 5, depth=START)
            missed += [(h.batch_key, h.chunk_id) for h in fixed] != [key for _, key in want[:5]]
            exhaustive = lexical.top_chunks_of(conn, groups, 5, exhaustive=True)
            assert [(h.batch_key, h.chunk_id) for h in exhaustive] == [key for _, key in want[:5]]
        assert missed >= 2


def test_a_read_stopped_by_its_depth_limit_says_it_is_not_proven(
    deep_corpus: PostgresResource,
) -> None:
    """`max_depth` bounds the rounds: a query that needs deeper reads keeps the last round's
    best with exact scores and `exact` False; without the limit the same read proves it."""
    with deep_corpus.connection() as conn:
        flagged = 0
        for query in EXACT_QUERIES:
            groups = lexical.group_terms(conn, query)
            free = lexical.exact_read_of(conn, groups, 12, exact_k=5, start_depth=START, growth=2,
                                         max_depth=None)  # fmt: skip
            capped = lexical.exact_read_of(conn, groups, 12, exact_k=5, start_depth=START,
                                           growth=2, max_depth=START)  # fmt: skip
            assert free.exact
            assert capped.rounds <= len(groups)  # at most one round per group, never deeper
            assert capped.depth == START
            if capped.exact:
                assert [h.score for h in capped.hits[:5]] == [h.score for h in free.hits[:5]]
            flagged += not capped.exact
            expected = {key: s for s, key in _group_reference(conn, query)}
            for hit in capped.hits:
                assert hit.score == pytest.approx(expected[(hit.batch_key, hit.chunk_id)], abs=1e-9)
        assert flagged >= 1


def test_the_exact_read_refuses_a_depth_that_cannot_grow(deep_corpus: PostgresResource) -> None:
    with deep_corpus.connection() as conn:
        terms = lexical.query_terms(conn, "english", COMMON)
        assert terms is not None
        with pytest.raises(ValueError, match="growth >= 2"):
            lexical.exact_read(conn, terms, 5, growth=1)


def test_term_bounds_hold_every_true_term_score_and_are_tight() -> None:
    def term_score(tf: int, length: int, avgdl: float) -> float:
        norm = tf + lexical.K1 * (1 - lexical.B + lexical.B * length / avgdl)
        return tf * (lexical.K1 + 1) / norm

    rng = np.random.default_rng(5)
    reference = lexical.REFERENCE_LENGTH
    widths = []
    for _ in range(5000):
        tf = int(rng.integers(1, 257))
        length = int(rng.integers(tf, 4 * tf + 600))
        avgdl = float(rng.choice([reference, rng.uniform(1, 800)]))
        stored = float(np.float32(term_score(tf, length, reference)))  # a real column
        low, high = lexical.term_bounds(stored, avgdl)
        true = term_score(tf, length, avgdl)
        assert low <= true < high, (tf, length, avgdl)
        widths.append(high / low)
    assert np.median(widths) < 1.2  # bounds, not a ceiling: the read prunes with them


def test_the_reads_bounds_in_sql_are_term_bounds(deep_corpus: PostgresResource) -> None:
    """The read computes `term_bounds` in SQL (`_bound`): the two must stay one formula."""
    rng = np.random.default_rng(9)
    impacts = [float(np.float32(x)) for x in rng.uniform(0.01, lexical.K1 + 0.99, 200)]
    statement = sql.SQL(
        "SELECT n, {low}, {high} FROM unnest(%(impacts)s::float4[]) WITH ORDINALITY AS u(i, n)"
        " ORDER BY n"
    ).format(
        low=lexical._bound(sql.SQL("i"), high=False), high=lexical._bound(sql.SQL("i"), high=True)
    )
    with deep_corpus.connection() as conn:
        for avgdl in (0.63, 12.0, float(lexical.REFERENCE_LENGTH), 70.3, 800.0):
            rho = lexical.REFERENCE_LENGTH / avgdl
            rows = conn.execute(statement, {"impacts": impacts, "rho": rho}).fetchall()
            assert [n for n, _, _ in rows] == list(range(1, len(impacts) + 1))
            # The impacts are float4 values, so the server bounds exactly these numbers.
            for impact, (_, low, high) in zip(impacts, rows, strict=True):
                want_low, want_high = lexical.term_bounds(impact, avgdl)
                assert low == pytest.approx(want_low, rel=1e-12)
                assert high == pytest.approx(want_high, rel=1e-12)


def test_bounds_hold_where_the_average_length_is_far_below_the_reference() -> None:
    """Chunks of stop words only count with length 0: the average can fall below one lexeme,
    where the float4 impact's rounding is multiplied up to ~80x near a tight bound."""

    def term_score(tf: int, length: int, avgdl: float) -> float:
        norm = tf + lexical.K1 * (1 - lexical.B + lexical.B * length / avgdl)
        return tf * (lexical.K1 + 1) / norm

    for tf in (1, 2, 3):
        for length in range(tf, 40):
            for n in range(1, 60):
                for num in range(1, n):
                    avgdl = num / n
                    stored = float(np.float32(term_score(tf, length, lexical.REFERENCE_LENGTH)))
                    low, high = lexical.term_bounds(stored, avgdl)
                    assert low <= term_score(tf, length, avgdl) < high, (tf, length, avgdl)


@pytest.fixture(scope="module")
def many_words(pg_server_url: str) -> Iterator[tuple[PostgresResource, list[str], str]]:
    """32 rare words, each once in its own long chunk, and a 33rd, commoner (in 2 chunks), six
    times in a short one: the best chunk for all 33 holds only the word read last."""
    rng = random.Random(7)
    words = sorted({_word(rng) + _word(rng) for _ in range(60)})[:33]
    rare, common = words[:32], words[32]
    filler = sorted({_word(rng) for _ in range(400)})
    with fresh_database(pg_server_url) as url:
        (resource,) = migrated_postgres(url)
        docs = {f"r{i:02d}": [" ".join([w, *filler[i * 5:i * 5 + 150]])] for i, w in
                enumerate(rare)}  # fmt: skip
        docs["x"] = [" ".join([common] * 6)]
        docs["y"] = [" ".join([common, *filler[:100]])]
        _add_batch(resource, "many", docs)
        yield resource, rare, common
        close_pool(url)


def test_a_query_of_more_words_than_are_read_at_once_still_finds_its_best(
    many_words: tuple[PostgresResource, list[str], str],
) -> None:
    resource, rare, common = many_words
    query = " ".join([*rare, common])
    with resource.connection() as conn:
        scores = _reference(conn, "english", query)
        want = sorted(((s, key) for key, s in scores.items() if s > 0),
                      key=lambda x: (-x[0], x[1][1], x[1][0]))  # fmt: skip
        groups = lexical.group_terms(conn, query)
        assert len(groups[0].known) > lexical.MAX_QUERY_TERMS
        read = lexical.exact_read_of(conn, groups, 12, exact_k=3)
        assert read.exact
        assert [(h.batch_key, h.chunk_id) for h in read.hits[:3]] == [k for _, k in want[:3]]
        assert read.hits[0].chunk_id.startswith("x")


def test_search_proves_at_least_its_k_of_the_pool_exact() -> None:
    from seams.storage.search.request import exact_size, pool_size

    for k in range(1, 300):
        assert k <= exact_size(pool_size(k)) <= max(k, 10)
