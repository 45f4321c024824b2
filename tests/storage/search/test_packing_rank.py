"""What a budget leaves out is said: every hit ranked above the last one given that is not in
the context is listed with the tokens it needed and the room there was, so the hits' numbering
reads true.

The corpus is a small vector-index guide: asked which HNSW parameters to tune for recall, the
M / ef_construction / ef_search list ranks 4th; the IVF paragraph that follows the 2nd hit ranks
5th and has the question's words in it."""

from __future__ import annotations

from dataclasses import replace

from seams.storage.search.context_budget import BudgetItem, Sentence, pack_passages

GUIDE = (
    "## Vector indexes\n\n"
    "An approximate index trades a little recall for a lot of speed. "
    "Exact search compares the query with every vector.\n\n"
    "HNSW builds a layered graph of neighbours. "
    "Search walks the graph from the top layer down.\n\n"
    "IVF clusters the vectors and searches the nearest lists. "
    "Tune its nprobe parameter for better recall at the cost of speed.\n\n"
    "## Memory\n\n"
    "Each vector costs four bytes a dimension. "
    "Quantisation cuts that by four.\n\n"
    "## Tuning HNSW\n\n"
    "Three parameters control HNSW:\n"
    "- M, the number of links per node.\n"
    "- ef_construction, the breadth of the build.\n"
    "- ef_search, the breadth of a query.\n"
)


def _count(texts: list[str]) -> list[int]:
    return [len(t.split()) for t in texts]


def _item(rank: int, first: str, last: str, scores: list[float], value: float) -> BudgetItem:
    """The hit from the sentence starting with `first` to the one ending with `last`; its
    sentences split at '. ', ':\\n' and '\\n', scored in order by `scores`."""
    start = GUIDE.index(first)
    end = GUIDE.index(last, start) + len(last)
    sentences, position = [], start
    for score in scores:
        stops = [GUIDE.find(m, position, end) for m in (". ", ":\n", ".\n")]
        stop = min((s + 1 for s in stops if s >= 0), default=end)
        sentences.append(Sentence(position, stop, score))
        position = stop
        while position < end and GUIDE[position] in " \n-":
            position += 1
    assert sentences[-1].end == end, (first, sentences)
    return BudgetItem(
        rank=rank,
        group=("b", "guide"),
        chunk_id=f"c{rank}",
        start_char=start,
        end_char=end,
        text=GUIDE[start:end],
        window_start=0,
        window_text=GUIDE,
        sentences=tuple(sentences),
        value=value,
    )


HITS = [
    _item(1, "An approximate", "every vector.", [0.5, 0.3], 1.0),
    _item(2, "HNSW builds", "top layer down.", [0.6, 0.2], 0.9),
    _item(3, "Each vector", "by four.", [0.1, 0.1], 0.7),
    _item(4, "Three parameters", "of a query.", [0.4, 0.3, 0.3, 0.3], 0.6),
    _item(5, "IVF clusters", "cost of speed.", [0.2, 0.9], 0.55),  # touches hit 2
]


def test_a_lower_ranked_neighbour_never_takes_the_room_of_a_better_hit() -> None:
    """At 58 words hit 5 would grow into hit 2's span by its IVF sentence, worth more than the
    list's lead-in (hit 4) but leaving hit 4 no room: the growth waits for hit 4's turn, so
    hit 4 is given and hit 5 stays its best sentence. Hit 3 is said to be left out, with what
    it needed."""
    packed = pack_passages(HITS, 58, _count)
    assert packed.given == (1, 2, 4, 5)
    assert packed.tokens <= 58
    assert GUIDE[packed.passages[5][0] :].startswith("Tune its nprobe")
    left = {x.rank: x for x in packed.left_out}
    assert set(left) == {3}
    assert left[3].tokens > left[3].room
    assert packed.unreached == 0 and packed.offered == 5


def test_only_value_not_a_merge_puts_a_neighbour_before_a_better_hit() -> None:
    """From 40 to 80 words the list (hit 4) is given except at 48-51, where hit 5's best
    sentence alone, not touching hit 2's span, is worth more than the list's lead-in: the
    seeds' own values order them. Wherever hit 5 grows into hit 2's span, hit 4 is given."""
    missing = []
    for budget in range(40, 81):
        packed = pack_passages(HITS, budget, _count)
        if 4 not in packed.given:
            missing.append(budget)
        if 5 in packed.given and GUIDE[packed.passages[5][0] :].startswith("IVF clusters"):
            assert 4 in packed.given, budget
    assert missing == [48, 49, 50, 51]


def test_every_better_hit_not_given_is_said_to_be_left_out() -> None:
    for budget in range(1, 80):
        packed = pack_passages(HITS, budget, _count)
        given = set(packed.given)
        assert packed.tokens <= budget
        for rank in given:  # every better hit was given or is said to be left out
            assert all(r in given or r in packed.skipped for r in range(1, rank))
        for x in packed.left_out:  # left out only when it did not fit
            assert x.tokens > x.room >= 0
        assert len(given) + len(packed.skipped) + packed.unreached == packed.offered == 5


def test_a_hit_inside_a_given_span_is_given_free() -> None:
    inside = _item(5, "Search walks", "top layer down.", [0.9], 0.55)  # a part of hit 2
    for budget in (24, 200):
        packed = pack_passages([*HITS[:4], inside], budget, _count)
        holder = next(s for s in packed.spans if 2 in s.ranks)
        assert 5 in holder.ranks and 5 in packed.given, budget


def test_one_answer_packed_at_several_budgets_packs_as_if_each_were_the_first() -> None:
    """The packer keeps what it learnt of the last items (their plan) for the next budget; a
    budget's context is the same whether the items are new or were just packed at another."""
    for budgets in ((20, 58, 200), (200, 58, 20), (58, 58, 1)):
        in_turn = [pack_passages(HITS, budget, _count) for budget in budgets]
        for budget, packed in zip(budgets, in_turn, strict=True):
            fresh = [replace(item) for item in HITS]  # other objects: planned anew
            assert packed == pack_passages(fresh, budget, _count)
