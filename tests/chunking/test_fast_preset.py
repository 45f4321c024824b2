"""The `fast` preset (contract): boundaries from the static model, the default's sizes.

`boundary_model` is a pipeline choice (which model embeds candidates); the engine itself only
sees the vectors it is given, so these tests drive it with the deterministic fake embedder.
The chunking invariants on the fast preset are property-tested in test_chunking_properties.py.
"""

from __future__ import annotations

import pytest
from chunking_doubles import fake_embed, topic_text, word_counter

from seams.chunking import CONFIG_SECTIONS, ChunkingConfig, ConfigError, chunk_text


def test_fast_preset_uses_the_static_boundary_model_and_default_sizes() -> None:
    fast = ChunkingConfig.preset("fast")
    default = ChunkingConfig()
    assert fast.boundary_model == "static" and default.boundary_model == "model"
    assert "fast" in ChunkingConfig.PRESETS
    for name in CONFIG_SECTIONS["segmentation"] + CONFIG_SECTIONS["assembly"]:
        assert getattr(fast, name) == getattr(default, name), name
    assert ChunkingConfig.preset("fast", percentile=20.0).percentile == 20.0


def test_changing_only_the_boundary_model_changes_embeddings_and_below() -> None:
    default = ChunkingConfig()
    static = default.with_overrides(boundary_model="static")
    assert static.fingerprint("segmentation") == default.fingerprint("segmentation")
    assert static.fingerprint("embedding") != default.fingerprint("embedding")
    assert static.fingerprint() != default.fingerprint()
    # text windows and the boundary model both change what is embedded, independently
    text = default.with_overrides(window_mode="text")
    assert len({text.with_overrides(boundary_model="static").fingerprint("embedding"),
                text.fingerprint("embedding"), static.fingerprint("embedding")}) == 3  # fmt: skip


def test_fast_preset_fingerprints_differ_from_the_default() -> None:
    fast, default = ChunkingConfig.preset("fast"), ChunkingConfig()
    assert fast.fingerprint("segmentation") == default.fingerprint("segmentation")
    assert fast.fingerprint("assembly") == default.fingerprint("assembly")
    assert fast.fingerprint("embedding") != default.fingerprint("embedding")


def test_bad_boundary_model_names_the_field() -> None:
    with pytest.raises(ConfigError, match="boundary_model='onnx'"):
        ChunkingConfig(boundary_model="onnx")
    with pytest.raises(ConfigError, match="tokenizer='gpt2'"):
        ChunkingConfig(tokenizer="gpt2")


def test_fast_preset_finds_the_topic_seam() -> None:
    text = topic_text(paragraph_break=False)
    seam = text.index("The rocket burns")
    config = ChunkingConfig.preset("fast", chunk_size_min=10, chunk_size_target=40)
    chunks = chunk_text(
        text, document_id="doc", config=config, embed=fake_embed, token_counter=word_counter
    )
    assert seam in {c.core_start for c in chunks}
    assert all(c.boundary_method == "semantic" for c in chunks)
