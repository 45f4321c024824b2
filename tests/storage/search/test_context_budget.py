"""`pack_budget`: the reader's budget is never exceeded, no text is given twice, every span is
exactly the source's text, and hits are taken in rank order (a hit that does not fit is
skipped, not cut)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seams.errors import InputError
from seams.storage.search.context_budget import BudgetItem, pack_budget

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


def _count(texts: list[str]) -> list[int]:
    """A token counter that is not additive over concatenation (like a real tokenizer)."""
    return [len(t.split()) + t.count(",") for t in texts]


def _document(words: list[str], cuts: list[int]) -> tuple[str, list[tuple[int, int]]]:
    """A source text and its chunks' spans: whitespace between chunks belongs to none."""
    text, spans, start = "", [], 0
    for n, word in enumerate(words):
        if n and n in cuts:
            spans.append((start, len(text)))
            text += "\n\n"
            start = len(text)
        elif n:
            text += ", " if n % 3 == 0 else " "
        text += word
    spans.append((start, len(text)))
    return text, spans


def _items(text: str, spans: list[tuple[int, int]], order: list[int], group: str,
           overlap: int) -> list[BudgetItem]:  # fmt: skip
    items = []
    for rank, i in enumerate(order, 1):
        start, end = spans[i]
        start = max(0, start - overlap) if i else start  # overlap taken from the previous chunk
        window_start = spans[i - 1][0] if i else start
        window_end = spans[i + 1][1] if i + 1 < len(spans) else end
        items.append(BudgetItem(rank, ("b", group), f"{group}{i}", start, end, text[start:end],
                                window_start, text[window_start:window_end]))  # fmt: skip
    return items


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=60),
    cuts=st.lists(st.integers(1, 59), max_size=15),
    seed=st.randoms(use_true_random=False),
    budget=st.integers(1, 80),
    overlap=st.sampled_from([0, 0, 4]),
)
def test_a_budget_is_never_exceeded_and_no_text_is_given_twice(
    words: list[str], cuts: list[int], seed, budget: int, overlap: int
) -> None:
    docs = {}
    items: list[BudgetItem] = []
    for group in ("x", "y"):
        text, spans = _document(words if group == "x" else words[::-1], cuts)
        docs[group] = text
        order = list(range(len(spans)))
        seed.shuffle(order)
        items.extend(_items(text, spans, order[: seed.randint(1, len(order))], group, overlap))
    seed.shuffle(items)
    items = [replace(item, rank=rank) for rank, item in enumerate(items, 1)]
    packed = pack_budget(items, budget, _count)
    assert packed.tokens <= budget
    assert packed.tokens == sum(_count([s.text])[0] for s in packed.spans)
    covered: dict[str, list[tuple[int, int]]] = {}
    for span in packed.spans:
        assert span.text == docs[span.document_id][span.start_char : span.end_char]
        source = docs[span.document_id]
        for start, end in covered.get(span.document_id, []):
            assert span.end_char <= start or end <= span.start_char  # never the same text twice
            gap = (
                source[span.end_char : start]
                if span.end_char <= start
                else source[end : span.start_char]
            )
            assert gap.strip(), "touching hits are one span"
        covered.setdefault(span.document_id, []).append((span.start_char, span.end_char))
    kept = {r for s in packed.spans for r in s.ranks}
    assert kept.isdisjoint(packed.skipped)
    for item in items:  # every kept hit's text is given; a skipped one would not have fitted
        if item.rank in kept:
            assert any(s.document_id == item.group[1] and s.start_char <= item.start_char
                       and item.end_char <= s.end_char for s in packed.spans)  # fmt: skip
    if items and _count([items[0].text])[0] <= budget:
        assert 1 in kept  # the best hit always comes first when it fits


def test_touching_hits_merge_and_a_hit_that_does_not_fit_is_skipped_not_cut() -> None:
    text, spans = _document(WORDS, [3, 6])  # three chunks
    items = _items(text, spans, [1, 0, 2], "x", 0)
    packed = pack_budget(items, 7, _count)
    # rank 1 (chunk 1, 3 tokens) and rank 2 (chunk 0, 3 tokens) touch: one span of 6 tokens;
    # rank 3 (chunk 2, 2 tokens) does not fit the one token left and is skipped whole.
    (span,) = packed.spans
    assert (span.start_char, span.end_char) == (spans[0][0], spans[1][1])
    assert span.ranks == (1, 2) and packed.skipped == (3,) and packed.tokens == 6
    with pytest.raises(InputError, match="budget"):
        pack_budget(items, 0, _count)
