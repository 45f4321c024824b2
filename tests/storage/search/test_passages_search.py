"""Passages through the real search (PostgreSQL + pgvector, the real ONNX model, the pipeline run
by Dagster): with a budget the reader gets whole sentences of each hit around its best one, at
exact offsets and never over budget; without one, each whole hit marks its best passage."""

from __future__ import annotations

from seams.orchestration.cli.search import format_response
from seams.storage.search import search_response
from tests.support.databases import rows
from tests.support.search_index import Indexed, indexed_corpus_fixture

QUERY = "the compost heap smells of ammonia and rotten eggs: how is that fixed?"
ANSWER = "turning it with a fork and adding brown material fixes the smell"


indexed = indexed_corpus_fixture("passages")


def _sources(url: str) -> dict[str, str]:
    return dict(rows(url, "SELECT document_id, text FROM seams.extracted_text"))


def _sentence_edges(url: str, document_id: str) -> tuple[set[int], set[int]]:
    spans = rows(
        url,
        "SELECT start_char, end_char FROM seams.semantic_boundaries WHERE document_id = %s",
        document_id,
    )
    return {a for a, _ in spans}, {b for _, b in spans}


def test_a_small_budget_gets_the_answer_sentence_where_whole_chunks_do_not_fit(
    indexed: Indexed,
) -> None:
    sources = _sources(indexed.url)
    for budget in (60, 120, 250):
        response = search_response(indexed.postgres, indexed.embedder, QUERY, 3, budget=budget)
        packed = response.context
        assert packed is not None and packed.spans
        assert packed.tokens <= budget
        assert packed.tokens == sum(
            indexed.embedder.count_tokens([s.text])[0] for s in packed.spans
        )
        seen: dict[str, list[tuple[int, int]]] = {}
        for span in packed.spans:
            assert span.text == sources[span.document_id][span.start_char : span.end_char]
            starts, ends = _sentence_edges(indexed.url, span.document_id)
            assert span.start_char in starts and span.end_char in ends  # whole sentences
            for a, b in seen.get(span.document_id, []):
                assert span.end_char <= a or b <= span.start_char  # no text twice
            seen.setdefault(span.document_id, []).append((span.start_char, span.end_char))
        assert ANSWER in packed.spans[0].text
        for hit in response.hits:  # each hit given says which part of it was given
            assert hit.start_char <= hit.passage_start < hit.passage_end <= hit.end_char
            assert hit.passage == sources[hit.document_id][hit.passage_start : hit.passage_end]
            assert any(
                s.start_char <= hit.passage_start and hit.passage_end <= s.end_char
                for s in packed.spans
                if hit.rank in s.ranks
            )
    # `seams search --budget` names each context span's file, as it names the hits'.
    shown = format_response(response).splitlines()
    spans = [line for line in shown if line.startswith("  [")]
    assert len(spans) == len(response.context.spans)
    files = {hit.rank: hit.file_name for hit in response.hits}
    for line, span in zip(spans, response.context.spans, strict=True):
        assert line.startswith(f"  [{files[span.ranks[0]]} {span.start_char}:"), line
    whole = search_response(
        indexed.postgres, indexed.embedder, QUERY, 3, budget=60, passages=False
    ).context
    assert whole is not None
    assert not any(ANSWER in s.text for s in whole.spans)  # a whole chunk costs more than 60


def test_without_a_budget_hits_stay_whole_and_mark_their_best_passage(indexed: Indexed) -> None:
    response = search_response(indexed.postgres, indexed.embedder, QUERY, 3)
    best = response.hits[0]
    assert ANSWER in best.text and ANSWER in (best.passage or "")
    assert len(best.passage or "") < len(best.text)
    as_json = best.to_dict()
    assert as_json["passage"] == best.passage
    assert (as_json["passage_start"], as_json["passage_end"]) == (
        best.passage_start,
        best.passage_end,
    )
    plain = search_response(indexed.postgres, indexed.embedder, QUERY, 3, passages=False)
    assert [h.chunk_id for h in plain.hits] == [h.chunk_id for h in response.hits]
    assert all(h.passage_start is None for h in plain.hits)


def test_the_output_numbers_hits_by_rank_and_says_what_the_budget_left_out(
    indexed: Indexed,
) -> None:
    from seams.errors import counted
    from seams.orchestration.cli.search import format_response

    response = search_response(indexed.postgres, indexed.embedder, QUERY, 3, budget=40)
    packed = response.context
    assert packed is not None
    shown = format_response(response)
    given = [h.rank for h in response.hits]
    assert given == list(packed.given) and given[0] == 1
    for rank in given:
        assert f"\n{rank}. " in f"\n{shown}"
    last = given[-1]
    for x in packed.left_out:
        if x.rank < last:
            assert f"left out: hit {x.rank} (needs {x.tokens} tokens, {x.room} left)" in shown
    assert f"({len(given)} of {counted(packed.offered, 'ranked hit')} given;" in shown
    if packed.offered > last:
        assert f"left out: {counted(packed.offered - last, 'lower-ranked hit')}," in shown
    as_json = response.to_dict()
    assert as_json["ranked"] == packed.offered
    assert [x["rank"] for x in as_json["left_out"]] == list(packed.skipped)
