"""`pack_passages` and `best_passage`: with a budget each hit gives whole sentences around its
best one, grown while that is the most valuable use of the next tokens; never half a sentence,
never over budget, offsets exact, no text twice."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from seams.storage.search.context_budget import (
    BudgetItem,
    Sentence,
    best_passage,
    pack_budget,
    pack_passages,
)

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


def _count(texts: list[str]) -> list[int]:
    """Not additive over concatenation, like a real tokenizer (commas cost a token)."""
    return [len(t.split()) + t.count(",") for t in texts]


def _source(sentences: list[list[str]]) -> tuple[str, list[tuple[int, int]]]:
    """A text of sentences ("w w w." joined by one space or a paragraph break) and their spans."""
    text, spans = "", []
    for n, words in enumerate(sentences):
        if n:
            text += "\n\n" if n % 4 == 0 else " "
        start = len(text)
        text += ", ".join(words[:1]) + (" " if len(words) > 1 else "") + " ".join(words[1:]) + "."
        spans.append((start, len(text)))
    return text, spans


def _hit(text, spans, first, last, rank, scores, group="d", value=1.0) -> BudgetItem:
    """Sentences first..last of `text` as a hit; the window reaches one sentence to each side."""
    start, end = spans[first][0], spans[last][1]
    w_start = spans[max(0, first - 1)][0]
    w_end = spans[min(len(spans) - 1, last + 1)][1]
    return BudgetItem(
        rank=rank,
        group=("b", group),
        chunk_id=f"{group}{first}-{last}",
        start_char=start,
        end_char=end,
        text=text[start:end],
        window_start=w_start,
        window_text=text[w_start:w_end],
        sentences=tuple(
            Sentence(spans[i][0], spans[i][1], scores[i]) for i in range(first, last + 1)
        ),
        value=value,
    )


def test_the_best_passage_is_the_best_sentence_grown_to_strong_neighbours() -> None:
    s = [Sentence(0, 5, 0.1), Sentence(6, 9, 0.6), Sentence(10, 20, 1.0), Sentence(21, 30, 0.4)]
    assert best_passage(s) == (1, 2)
    assert best_passage(s, share=0.3) == (1, 3)
    assert best_passage(s, share=1.0) == (2, 2)
    assert best_passage([]) is None


def test_a_tight_budget_gets_the_best_sentence_of_a_hit_not_nothing() -> None:
    text, spans = _source([["a", "b", "c"], ["answer", "here"], ["d", "e", "f", "g"]])
    hit = _hit(text, spans, 0, 2, 1, [0.2, 1.0, 0.3])
    assert pack_budget([hit], 4, _count).spans == []  # the whole hit (9 tokens) never fits
    packed = pack_passages([hit], 4, _count)  # growing to either side would cost 5 or 6
    assert [s.text for s in packed.spans] == ["answer here."]
    assert packed.passages == {1: spans[1]}


def test_growth_takes_a_strong_neighbour_before_a_weak_hit_and_a_strong_hit_before_padding() -> (
    None
):
    text, spans = _source([["x"] * 2, ["best", "one"], ["strong", "next"], ["w"] * 2, ["v"] * 2,
                           ["other", "answer"], ["pad", "pad"]])  # fmt: skip
    first = _hit(text, spans, 0, 3, 1, [0.1, 1.0, 0.8, 0.05, 0, 0, 0])
    second = _hit(text, spans, 4, 6, 2, [0, 0, 0, 0, 0.2, 0.9, 0.1], value=0.9)
    # Growth valued by the sentence's evidence alone (hit_share 0), 2 tokens a sentence.
    # Values: hit 1's seed 1.0, hit 2's seed 0.9 * 0.9, hit 1's strong neighbour 0.8; then hit
    # 2's neighbour 0.2 * 0.9 beats hit 1's weak ones (0.1, 0.05).
    packed = pack_passages([first, second], 6, _count, hit_share=0.0)
    assert [s.text for s in packed.spans] == ["best one. strong next.", "other answer."]
    assert packed.passages == {1: (spans[1][0], spans[2][1]), 2: spans[5]}
    packed = pack_passages([first, second], 8, _count, hit_share=0.0)
    assert packed.passages[2] == (spans[4][0], spans[5][1])
    assert packed.passages[1] == (spans[1][0], spans[2][1])


def test_a_strong_hit_grows_through_weak_sentences_when_growth_leans_on_the_hit() -> None:
    # Paragraph-long evidence: the best hit's other sentences share few words with the question.
    text, spans = _source([["lead", "in"], ["best", "one"], ["more", "of"], ["it", "all"],
                           ["x", "y"], ["other", "answer"], ["pad", "pad"]])  # fmt: skip
    first = _hit(text, spans, 0, 3, 1, [0.05, 1.0, 0.1, 0.1, 0, 0, 0])
    second = _hit(text, spans, 5, 6, 2, [0, 0, 0, 0, 0, 0.6, 0.1], value=0.5)
    # Evidence alone: hit 2's seed (0.5 * 0.6 = 0.3) beats hit 1's next sentence (0.1).
    packed = pack_passages([first, second], 6, _count, hit_share=0.0)
    assert packed.passages == {1: (spans[1][0], spans[2][1]), 2: spans[5]}
    # Growth worth 0.5 + 0.5 * 0.1 of hit 1's value: hit 1 grows whole first.
    packed = pack_passages([first, second], 6, _count, hit_share=0.5)
    assert packed.passages == {1: (spans[1][0], spans[3][1])}
    assert packed.skipped == () and packed.tokens == 6


def test_a_seed_that_does_not_fit_skips_its_hit_and_a_later_one_still_fits() -> None:
    text, spans = _source([["a"] * 9, ["b", "c"]])
    big = _hit(text, spans, 0, 0, 1, [1.0, 0.0])
    small = _hit(text, spans, 1, 1, 2, [0.0, 0.5])
    packed = pack_passages([big, small], 4, _count)
    assert packed.skipped == (1,)
    assert [s.text for s in packed.spans] == ["b c."]


def test_passages_of_overlapping_hits_merge_and_are_paid_once() -> None:
    text, spans = _source([["a", "b"], ["c", "d"], ["e", "f"]])
    one = _hit(text, spans, 0, 1, 1, [0.2, 1.0, 0.0])
    two = _hit(text, spans, 1, 2, 2, [0.0, 0.9, 0.8])  # shares sentence 1 with hit 1
    packed = pack_passages([one, two], 100, _count)
    assert [(s.text, s.ranks) for s in packed.spans] == [(text, (1, 2))]
    assert packed.tokens == _count([text])[0]


@settings(max_examples=300, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 6), min_size=1, max_size=25),
    data=st.data(),
    budget=st.integers(1, 60),
    hit_share=st.floats(0, 1),
)
def test_passages_are_whole_sentences_of_their_hit_exact_and_within_budget(
    lengths: list[int], data: st.DataObject, budget: int, hit_share: float
) -> None:
    sources, items = {}, []
    for group in ("x", "y"):
        words = [[WORDS[(i + j) % len(WORDS)] for j in range(n)] for i, n in enumerate(lengths)]
        text, spans = _source(words if group == "x" else words[::-1])
        sources[group] = (text, spans)
        for _ in range(data.draw(st.integers(1, 4))):
            first = data.draw(st.integers(0, len(spans) - 1))
            last = data.draw(st.integers(first, min(len(spans) - 1, first + 4)))
            scores = [data.draw(st.floats(0, 1)) for _ in spans]
            value = data.draw(st.floats(0, 1))
            items.append(_hit(text, spans, first, last, 0, scores, group, value))
    order = data.draw(st.permutations(range(len(items))))
    items = [
        BudgetItem(**{**item.__dict__, "rank": rank})
        for rank, item in enumerate((items[i] for i in order), 1)
    ]
    packed = pack_passages(items, budget, _count, hit_share=hit_share)
    assert packed.tokens <= budget
    assert packed.tokens == sum(_count([s.text])[0] for s in packed.spans)
    seen: dict[str, list[tuple[int, int]]] = {}
    for span in packed.spans:
        text, spans = sources[span.document_id]
        assert span.text == text[span.start_char : span.end_char]
        starts, ends = {a for a, _ in spans}, {b for _, b in spans}
        assert span.start_char in starts and span.end_char in ends  # whole sentences
        for a, b in seen.get(span.document_id, []):  # no text twice
            assert span.end_char <= a or b <= span.start_char
        seen.setdefault(span.document_id, []).append((span.start_char, span.end_char))
    by_rank = {item.rank: item for item in items}
    given_ranks = {r for s in packed.spans for r in s.ranks}
    assert set(packed.passages) == given_ranks
    for rank, (start, end) in packed.passages.items():
        item = by_rank[rank]
        assert item.start_char <= start < end <= item.end_char  # inside its hit
        assert start in {s.start for s in item.sentences}
        assert end in {s.end for s in item.sentences}
        holder = [s for s in packed.spans if rank in s.ranks]
        assert len(holder) == 1 and holder[0].start_char <= start and end <= holder[0].end_char
