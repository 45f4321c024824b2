"""chunk_text end to end: semantic path, lexical fallback (never a crash), determinism."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from chunking_doubles import CATS, ROCKETS, fake_embed, topic_text, word_counter

from seams.chunking import ChunkingConfig, InputError, chunk_text

SMALL = ChunkingConfig(chunk_size_min=20, chunk_size_target=60, chunk_size_max=100)


def test_finds_the_topic_seam_with_an_embedder():
    text = topic_text()
    chunks = chunk_text(
        text, document_id="d", config=SMALL, embed=fake_embed, token_counter=word_counter
    )
    assert [c.text for c in chunks] == [" ".join(CATS), " ".join(ROCKETS)]
    assert {c.boundary_method for c in chunks} == {"semantic"}
    assert chunks[1].metadata["boundary_reason"] == "semantic"
    assert all(c.cohesion is not None and -1 <= c.cohesion <= 1 for c in chunks)
    assert [c.chunk_index for c in chunks] == [0, 1]
    assert {c.total_chunks for c in chunks} == {2}
    assert all(c.metadata["token_counter"].endswith("word_counter") for c in chunks)


def test_no_embedder_uses_the_jaccard_fallback_and_says_so(caplog):
    with caplog.at_level(logging.INFO, logger="seams.chunking"):
        chunks = chunk_text(topic_text(), document_id="d", config=SMALL, token_counter=word_counter)
    assert chunks and {c.boundary_method for c in chunks} == {"jaccard"}
    assert all(c.cohesion is None for c in chunks)
    assert "Jaccard" in caplog.text
    # word overlap finds the seam too, give or take a sentence (it is blind to meaning)
    seam = len(" ".join(CATS)) + 1
    near = {seam, seam - len(CATS[-1]) - 1, seam + len(ROCKETS[0]) + 1}
    assert len(chunks) == 2 and chunks[1].start_char in near


@pytest.mark.parametrize(
    "broken",
    [
        lambda texts: (_ for _ in ()).throw(RuntimeError("model exploded")),
        lambda texts: np.zeros((len(texts) + 1, 8)),  # wrong number of rows
        lambda texts: np.full((len(texts), 8), np.nan),  # NaN
        lambda texts: "not an array",
        object(),  # not callable, no .embed
    ],
)
def test_a_failing_embedder_never_crashes(broken, caplog):
    with caplog.at_level(logging.WARNING, logger="seams.chunking"):
        chunks = chunk_text(
            topic_text(), document_id="d", config=SMALL, embed=broken, token_counter=word_counter
        )
    assert chunks and {c.boundary_method for c in chunks} == {"jaccard"}
    assert "Jaccard" in caplog.text


def test_an_object_with_embed_method_is_accepted():
    class Embedder:
        def embed(self, texts):
            return fake_embed(texts)

    chunks = chunk_text(
        topic_text(), document_id="d", config=SMALL, embed=Embedder(), token_counter=word_counter
    )
    assert {c.boundary_method for c in chunks} == {"semantic"}


def test_embedder_is_called_once_with_the_candidates():
    calls = []

    def embed(texts):
        calls.append(list(texts))
        return fake_embed(texts)

    chunk_text(topic_text(), document_id="d", config=SMALL, embed=embed)
    assert len(calls) == 1 and calls[0] == [*CATS, *ROCKETS]


def test_text_window_mode_embeds_windows():
    # Text windows give each candidate its forward window, not its own vector: the threshold
    # rule reads them as gap evidence (the optimal segmenter would see the seam one window late).
    config = SMALL.with_overrides(window_mode="text", window_size=2, segmenter="threshold")
    chunks = chunk_text(
        topic_text(), document_id="d", config=config, embed=fake_embed, token_counter=word_counter
    )
    assert [c.text for c in chunks] == [" ".join(CATS), " ".join(ROCKETS)]


def test_empty_short_and_single_candidate_documents():
    assert chunk_text("", document_id="d") == []
    assert chunk_text(" \n\t ", document_id="d", embed=fake_embed) == []
    (only,) = chunk_text("Just one sentence.", document_id="d", embed=fake_embed)
    assert only.text == "Just one sentence." and only.boundary_method == "semantic"
    assert only.cohesion is None


def test_deterministic_and_exact():
    text = topic_text(paragraph_break=True) + "\n\n# Appendix\n\n" + " ".join(CATS[:3])
    runs = [chunk_text(text, document_id="doc", embed=fake_embed, config=SMALL) for _ in range(2)]
    assert runs[0] == runs[1]
    for chunk in runs[0]:
        assert chunk.text == text[chunk.start_char : chunk.end_char]
    assert runs[0][-1].section == "Appendix"


def test_page_spans_flow_through():
    text = topic_text()
    middle = len(" ".join(CATS)) + 1
    chunks = chunk_text(
        text,
        document_id="d",
        config=SMALL,
        embed=fake_embed,
        token_counter=word_counter,
        page_spans=[(1, 0, middle), (2, middle, len(text))],
    )
    assert [(c.page_start, c.page_end) for c in chunks] == [(1, 1), (2, 2)]


def test_bad_inputs_are_input_errors():
    with pytest.raises(InputError):
        chunk_text(b"bytes", document_id="d")  # type: ignore[arg-type]
    with pytest.raises(InputError):
        chunk_text("text", document_id="")


def test_default_sizes_fit_the_model_window(minilm_tokenizer_json):
    from seams.chunking import load_token_counter

    counter = load_token_counter(minilm_tokenizer_json)
    text = "\n\n".join([topic_text()] * 8)
    chunks = chunk_text(text, document_id="d", embed=fake_embed, token_counter=counter)
    assert all(c.token_count <= 254 for c in chunks)
    exact = counter([c.text for c in chunks])
    assert [c.token_count for c in chunks] == exact  # sums of candidate counts are exact


def test_lexical_chunking_asked_for_is_no_warning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No `embed` is the documented lexical mode (the README's example uses it): said at info,
    never a warning on the user's stderr; each chunk records it."""
    log = logging.getLogger("seams.chunking.chunker")
    monkeypatch.setattr(log, "disabled", False)  # a logging setup earlier in the process may not
    with caplog.at_level(logging.INFO, logger=log.name):
        chunks = chunk_text("Bees make honey.\n\nMaps show places.", document_id="notes.md")
    assert {c.boundary_method for c in chunks} == {"jaccard"}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("no embedder given" in r.getMessage() for r in caplog.records)
