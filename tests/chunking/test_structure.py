"""Structure that belongs together stays together: a lead-in (a line ending in a colon) with
the list, table or code it introduces, a heading with its section's text, and a short section
in a chunk of its own under its own name."""

from __future__ import annotations

import pytest
from chunking_doubles import fake_embed, word_counter

from seams.chunking import chunk_text
from seams.chunking.config import ChunkingConfig
from seams.chunking.segment import segment
from seams.storage.search.context_budget import (
    BudgetItem,
    Sentence,
    best_passage,
    bound_to_next,
    pack_passages,
)

PROSE = (
    "Graph indexes link every stored vector to its nearest neighbours in layers. "
    "A query walks the layers greedily from the top layer toward the bottom layer. "
    "The walk visits few vectors, so graph search stays fast on large collections. "
)
LEAD_IN = "Three parameters control HNSW:"
ITEMS = [
    "- M sets how many links each node keeps for recall and memory.",
    "- ef_construction sets the breadth of the build for quality.",
    "- ef_search sets the breadth of a query for recall against latency.",
]
GUIDE = f"## Graph indexes\n\n{PROSE}\n\n{LEAD_IN}\n\n" + "\n".join(ITEMS) + "\n"


def _chunks(text: str, config: ChunkingConfig) -> list:
    return chunk_text(text, document_id="d", config=config, embed=fake_embed,
                      token_counter=word_counter)  # fmt: skip


def test_a_line_ending_in_a_colon_before_a_list_is_a_lead_in() -> None:
    kinds = {text[c.start_char : c.end_char]: c.kind for text in [GUIDE] for c in segment(GUIDE)}
    assert kinds[LEAD_IN] == "lead_in"
    assert kinds[ITEMS[0]] == "list_item"
    assert "lead_in" not in {c.kind for c in segment("It has two parts: a head and a tail.")}


@pytest.mark.parametrize("preset", ["default", "technical_docs"])
@pytest.mark.parametrize("segmenter", ["optimal", "threshold"])
def test_a_lead_in_and_its_list_are_one_unit_for_boundaries(preset: str, segmenter: str) -> None:
    config = ChunkingConfig.preset(preset, segmenter=segmenter, chunk_size_min=5)
    chunks = _chunks(GUIDE, config)
    holder = [c for c in chunks if LEAD_IN in c.text]
    assert len(holder) == 1 and all(item in holder[0].text for item in ITEMS), [
        c.text for c in chunks
    ]


def test_a_size_split_keeps_the_lead_in_with_the_first_item() -> None:
    items = [f"- option {n} sets the {n}th knob of the index for recall." for n in range(12)]
    text = f"{PROSE}\n\n{LEAD_IN}\n\n" + "\n".join(items) + "\n"
    config = ChunkingConfig(chunk_size_min=5, chunk_size_target=30, chunk_size_max=40)
    chunks = _chunks(text, config)
    assert len(chunks) > 2  # the list does not fit one chunk
    holder = next(c for c in chunks if LEAD_IN in c.text)
    assert items[0] in holder.text and not holder.text.rstrip().endswith(":")


def test_a_heading_is_never_a_chunk_alone_when_its_section_has_text() -> None:
    text = "# Guide\n\n## Setup\n\n### Install\n\n" + PROSE * 3 + "\n\n## Usage\n\n" + PROSE
    config = ChunkingConfig(chunk_size_min=2, chunk_size_target=20, chunk_size_max=30)
    for chunk in _chunks(text, config):
        lines = [line for line in chunk.text.splitlines() if line.strip()]
        assert not all(line.startswith("#") for line in lines), chunk.text


def test_a_short_section_starts_its_own_chunk_under_its_own_name() -> None:
    text = (
        "## Deploying\n\n" + PROSE * 2 + "\n\n## Rolling back\n\nRun release rollback now.\n\n"
        "## Monitoring\n\n" + PROSE.replace("Graph", "Metric") * 2 + "\n\n## Support\n\n"
        "Call the ops desk.\n"
    )
    for preset in ("default", "technical_docs"):
        config = ChunkingConfig.preset(preset, chunk_size_min=20)
        chunks = _chunks(text, config)
        for name, words in (("Rolling back", "release rollback"), ("Support", "ops desk")):
            short = [c for c in chunks if words in c.text]
            assert len(short) == 1 and short[0].text.startswith(f"## {name}"), [
                c.text for c in chunks
            ]
            assert short[0].text.count("## ") == 1  # the section alone, not merged
            assert short[0].section.endswith(name)


def test_a_passage_starting_at_a_heading_holds_the_sentence_after_it() -> None:
    text = "## Rolling back a deploy\n\nRun release rollback to the previous version. It is fast."
    spans = [(0, 24), (26, 72), (73, 84)]
    sentences = [Sentence(a, b, s) for (a, b), s in zip(spans, [1.0, 0.6, 0.1], strict=True)]
    units = bound_to_next(sentences, [True, False, False])
    assert [(u.start, u.end) for u in units] == [(0, 72), (73, 84)]
    assert units[0].score == 1.0
    assert best_passage(units) == (0, 0)
    item = BudgetItem(1, ("b", "d"), "c", 0, 84, text, 0, text, units)
    packed = pack_passages([item], 12, word_counter)
    assert packed.spans[0].text.startswith("## Rolling back a deploy\n\nRun release rollback")
