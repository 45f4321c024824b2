"""Sizes in LLM tokens: `tokenizer="cl100k_base"` counts with tiktoken, offline, and every chunk
is measured against the embedding model's window too. Runs with networking unavailable to
Python: tiktoken's plain `cl100k_base` would try to download its file; the offline one must not.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from chunking_doubles import fake_embed

from seams.chunking import ChunkingConfig, chunk_text, load_token_counter, segment
from seams.chunking.tokens import CL100K_NAME, Cl100kCounter, cl100k_counter
from tests.support.network import forbid_network

CORPUS = Path(__file__).resolve().parents[2] / "benchmarks" / "corpus" / "topics"


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any attempt to reach a non-local address (Unix sockets and loopback still work)."""
    forbid_network(monkeypatch)


@pytest.fixture(scope="module")
def cl100k() -> Cl100kCounter:
    return cl100k_counter()


@pytest.fixture(scope="module")
def model_counter(minilm_tokenizer_json):
    return load_token_counter(minilm_tokenizer_json)


@pytest.fixture(scope="module")
def prose() -> str:
    """~6k words of real prose with paragraphs (the topic-shift corpus)."""
    return "\n\n".join(p.read_text(encoding="utf-8").strip() for p in sorted(CORPUS.glob("*.txt")))


def test_ids_match_the_reference_encoding(cl100k: Cl100kCounter) -> None:
    assert cl100k.encode("Hello world") == [9906, 1917]
    assert cl100k.encode("") == []
    assert cl100k(["Hello world", "", "Hello, world!"]) == [2, 0, 4]
    assert cl100k.name == CL100K_NAME == "cl100k_base"


def test_special_token_text_is_counted_as_plain_text(cl100k: Cl100kCounter) -> None:
    assert cl100k(["<|endoftext|>"])[0] > 1  # not the special token, and no error
    assert cl100k(["lone \ud800 surrogate"])[0] > 0


def test_counts_differ_from_the_models_word_pieces(cl100k, model_counter) -> None:
    text = "Tokenization differs: WordPiece splits 'unbelievably' differently from BPE."
    assert cl100k([text]) != model_counter([text])


def test_candidates_are_counted_in_cl100k(prose: str, cl100k, model_counter) -> None:
    config = ChunkingConfig(tokenizer="cl100k_base")
    candidates = segment(prose, config, model_counter)
    texts = [prose[c.start_char : c.end_char] for c in candidates]
    assert [c.token_count for c in candidates] == cl100k(texts)


@pytest.mark.parametrize(("minimum", "target", "maximum"), [(48, 200, 254), (20, 60, 80)])
def test_chunk_token_counts_stay_within_bounds(
    prose: str, cl100k, model_counter, minimum: int, target: int, maximum: int
) -> None:
    config = ChunkingConfig(
        tokenizer="cl100k_base",
        chunk_size_min=minimum,
        chunk_size_target=target,
        chunk_size_max=maximum,
    )
    chunks = chunk_text(
        prose, document_id="doc", config=config, embed=fake_embed, token_counter=model_counter
    )
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.metadata["token_counter"] == "cl100k_base"
        assert chunk.metadata["size_unit"] == "tokens"
        assert chunk.token_count == chunk.metadata["size"]
        exact = cl100k([chunk.text])[0]
        # the recorded count is a sum over sentences, never below the exact count of the text
        assert exact <= chunk.token_count
        if not chunk.metadata["oversized"]:
            assert exact <= chunk.token_count <= maximum
        if not chunk.metadata["undersized"]:
            assert chunk.token_count >= minimum


def test_chunks_are_measured_against_the_model_window(prose: str, model_counter) -> None:
    config = ChunkingConfig(
        tokenizer="cl100k_base", chunk_size_min=200, chunk_size_target=350, chunk_size_max=400
    )
    chunks = chunk_text(
        prose, document_id="doc", config=config, embed=fake_embed, token_counter=model_counter
    )
    flagged = [c for c in chunks if c.metadata["exceeds_model_window"]]
    assert flagged, "400 cl100k tokens exceed MiniLM's 254 word pieces"
    for chunk in chunks:
        model_tokens = model_counter([chunk.text])[0]
        assert chunk.metadata["model_tokens"] == model_tokens
        assert chunk.metadata["exceeds_model_window"] == (model_tokens > 254)


def test_model_window_flag_uses_the_heuristic_without_a_model_counter(prose: str) -> None:
    config = ChunkingConfig(tokenizer="cl100k_base", model_window_tokens=100)
    chunks = chunk_text(prose[:5000], document_id="doc", config=config, embed=fake_embed)
    assert all("model_tokens" in c.metadata for c in chunks)
    assert any(c.metadata["exceeds_model_window"] for c in chunks)


def test_default_mode_is_unchanged(prose: str, model_counter) -> None:
    chunks = chunk_text(
        prose[:5000], document_id="doc", embed=fake_embed, token_counter=model_counter
    )
    assert all("model_tokens" not in c.metadata for c in chunks)
    assert all(c.token_count == model_counter([c.text])[0] for c in chunks)


def test_tokenizer_choice_shapes_what_is_sized_only() -> None:
    base = ChunkingConfig()
    llm = base.with_overrides(tokenizer="cl100k_base")
    # The optimal segmenter cuts under the size contract, so the size unit shapes boundaries too.
    for section in ("segmentation", "boundaries", "assembly"):
        assert llm.fingerprint(section) != base.fingerprint(section)
    assert llm.fingerprint("embedding") == base.fingerprint("embedding")
    threshold = base.with_overrides(segmenter="threshold")
    llm_threshold = threshold.with_overrides(tokenizer="cl100k_base")
    assert llm_threshold.fingerprint("boundaries") == threshold.fingerprint("boundaries")
    assert llm.fingerprint() != base.fingerprint()
    window = llm.with_overrides(model_window_tokens=510)
    assert window.fingerprint("assembly") != llm.fingerprint("assembly")
    assert window.fingerprint("segmentation") == llm.fingerprint("segmentation")


def test_importing_chunking_does_not_import_tiktoken() -> None:
    code = "import sys, seams.chunking; print('tiktoken' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
