"""Chunks a person would draw (issue 31), with the real all-MiniLM-L6-v2 ONNX export.

Three short documents written for these tests, of the shapes a new user tried: one subject in
several paragraphs (under the cap: one chunk; just over it: two, at a paragraph break), and
meeting notes whose agenda items are paragraphs (cut at the items). Before issue 31 the
one-subject text over the cap was cut inside its second paragraph and the notes came back as one
chunk.
"""

from __future__ import annotations

import re

import pytest

from seams.chunking import ChunkingConfig, chunk_text
from seams.models.embedders import OnnxEmbedder
from seams.models.model_store import ModelManifest

SOURDOUGH = """\
Sourdough bread starts with a starter, a paste of flour and water in which wild yeasts and \
lactic acid bacteria live together. A baker feeds it every day with fresh flour, and after a week \
or so it rises reliably and smells pleasantly sour. The starter is what leavens the loaf, so its \
health decides how the bread will turn out.

On baking day the starter is mixed with flour, water and salt into a shaggy dough. Many bakers \
let the flour and water rest first, an autolyse of half an hour, so the gluten begins to form \
before any kneading. Instead of kneading hard, the dough is stretched and folded a few times \
during the first hours.

Bulk fermentation then takes four to eight hours, depending on the warmth of the kitchen and the \
strength of the starter. The dough grows, turns airy and jiggles when the bowl is shaken. It is \
then shaped into a tight round, placed in a floured basket and often left in the fridge \
overnight, which deepens the flavour.

Finally the loaf is baked in a very hot oven, ideally inside a preheated cast-iron pot that traps \
steam for the first twenty minutes. A quick slash with a razor lets it expand evenly. When the \
crust is deep brown and the bottom sounds hollow, the bread must still cool for an hour before \
anyone cuts it."""

LIGHTHOUSES = """\
Lighthouses guided ships along dangerous coasts for centuries before satellite navigation. The \
earliest ones were simply fires lit on hilltops or towers, like the famous Pharos of Alexandria, \
which stood for more than a thousand years.

In the nineteenth century the Fresnel lens changed everything. Its rings of prisms bent the \
light of a single lamp into a narrow, powerful beam that sailors could see more than twenty miles \
away. Each lighthouse was given its own pattern of flashes, so a navigator could tell which tower \
he was looking at. Foghorns added a voice to the light when mist rolled in and the beam could no \
longer be seen.

Keepers lived at the lights with their families, trimming wicks, winding the clockwork that \
turned the lens and logging the weather. The work was lonely and relentless, especially on rock \
stations far out at sea, where supplies arrived by boat only when the waves allowed. Today almost \
every lighthouse is automated, and many of the old towers have become museums."""

MEETING_NOTES = """\
Release schedule: the team agreed to move the 4.2 release from March 3 to March 17. Two blocking \
bugs in the payment service still need fixes, and QA wants a full week of regression testing. \
Support asked for the changelog two days before the release so they can brief the larger \
customers.

Onboarding redesign: Priya showed the new sign-up flow with three screens instead of seven. \
Early user tests cut the average sign-up time from four minutes to ninety seconds. Design will \
polish the illustrations next sprint, and the old tutorial videos will be retired.

Budget: finance approved the cloud spend for the second quarter but asked us to reduce the \
staging clusters at night. Marco estimates this saves about 1,800 euros a month. The conference \
travel budget stays frozen until July, except for the two talks that were already accepted.

Action items: Lena files the release notes draft by Friday. Tom schedules the regression test \
plan with QA. Priya shares the prototype link with sales. Marco writes the script that shuts down \
staging at 8 pm. Everyone reviews the onboarding copy before the next meeting."""


@pytest.fixture(scope="module")
def minilm(exported_model: ModelManifest) -> OnnxEmbedder:
    return OnnxEmbedder(model_dir=str(exported_model.directory))


def paragraph_starts(text: str) -> list[int]:
    return [0, *(m.end() for m in re.finditer(r"\n\n", text))]


def chunks_of(text: str, embedder: OnnxEmbedder, config: ChunkingConfig | None = None):
    return chunk_text(
        text, document_id="notes.md", config=config or ChunkingConfig(), embed=embedder
    )


@pytest.mark.export
def test_one_subject_under_the_cap_stays_one_chunk(minilm: OnnxEmbedder):
    assert 150 < sum(minilm.count_tokens([LIGHTHOUSES])) <= ChunkingConfig().chunk_size_max
    assert [c.text for c in chunks_of(LIGHTHOUSES, minilm)] == [LIGHTHOUSES]


@pytest.mark.export
def test_one_subject_over_the_cap_is_cut_once_at_a_paragraph_break(minilm: OnnxEmbedder):
    cap = ChunkingConfig().chunk_size_max
    assert cap < sum(minilm.count_tokens([SOURDOUGH])) <= 2 * cap
    chunks = chunks_of(SOURDOUGH, minilm)
    assert len(chunks) == 2
    assert chunks[1].start_char in paragraph_starts(SOURDOUGH)
    assert all(c.token_count <= cap for c in chunks)


@pytest.mark.export
def test_meeting_notes_are_cut_at_their_agenda_items(minilm: OnnxEmbedder):
    assert sum(minilm.count_tokens([MEETING_NOTES])) <= ChunkingConfig().chunk_size_max
    starts = [c.start_char for c in chunks_of(MEETING_NOTES, minilm)]
    assert starts == paragraph_starts(MEETING_NOTES)


@pytest.mark.export
def test_a_one_subject_text_is_not_shredded_when_the_cap_is_small(minilm: OnnxEmbedder):
    """A size split uses the fewest pieces that fit (before: pieces toward chunk_size_min)."""
    config = ChunkingConfig(chunk_size_min=16, chunk_size_target=None, chunk_size_max=120)
    chunks = chunks_of(SOURDOUGH, minilm, config)
    sizes = [c.token_count for c in chunks]
    assert max(sizes) <= 120
    fewest = -(-sum(sizes) // 120)
    assert len(chunks) <= fewest + 1
    at_breaks = [c.start_char in paragraph_starts(SOURDOUGH) for c in chunks[1:]]
    assert sum(at_breaks) >= len(at_breaks) - 1
