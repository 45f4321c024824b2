"""ChunkingConfig: validation messages, presets, fingerprints (stable across processes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from seams.chunking import CONFIG_SECTIONS, ChunkingConfig, ConfigError

# sha256 of the canonical JSON of ChunkingConfig() (schema 1). If this changes, every chunk in
# every database becomes "unsynced": change it only on purpose, with the defaults.
DEFAULT_FINGERPRINT = "21a4c3d293e4015e78a0dbcd1ef86b5755d3ac6b2f9c825e0d0afd2f75b91fa7"
# The earlier default (threshold segmenter, min 48) keeps its digest, so deployed configs that chose
# it explicitly do not go "unsynced" because Seams grew a new default.
THRESHOLD_FINGERPRINT = "5435f0fa504375b8b50305e07f48de3d42911ae2a88c1e38a799f88dadc9748a"


def test_defaults_fit_the_minilm_window():
    config = ChunkingConfig()
    assert config.size_unit == "tokens"
    assert (config.chunk_size_min, config.chunk_size_target, config.chunk_size_max) == (
        32,
        200,
        254,
    )
    assert config.segmenter == "optimal"
    assert config.threshold_type == "percentile" and config.window_mode == "pooled"
    assert config.overlap_tokens == 0


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        ({"chunk_size_min": 0}, ["chunk_size_min=0", "greater than or equal to 1"]),
        ({"percentile": 101}, ["percentile=101", "less than or equal to 100"]),
        ({"boundary_threshold": 1.5}, ["boundary_threshold=1.5", "less than or equal to 1"]),
        ({"window_size": 0}, ["window_size=0", "greater than or equal to 1"]),
        ({"overlap_ratio": 0.9}, ["overlap_ratio=0.9", "0.5"]),
        ({"size_unit": "words"}, ["size_unit='words'", "'tokens'", "'chars'", "'sentences'"]),
        ({"threshold_type": "magic"}, ["threshold_type", "'gradient'"]),
        ({"window_mode": "x"}, ["window_mode", "'pooled'"]),
        (
            {"chunk_size_target": 300, "chunk_size_max": 254},
            ["chunk_size_target=300", "chunk_size_max=254"],
        ),
        ({"chunk_size_min": 250, "chunk_size_target": 240}, ["chunk_size_min=250"]),
        ({"overlap_tokens": 10, "overlap_ratio": 0.1}, ["overlap_tokens", "overlap_ratio"]),
        ({"extra_abbreviations": ("two words",)}, ["extra_abbreviations", "two words"]),
        ({"unknown_knob": 1}, ["unknown_knob: no such field"]),
        ({"cut_cots": 1}, ["cut_cots: no such field; did you mean cut_cost?"]),
    ],
)
def test_validation_errors_name_the_field_and_the_allowed_range(overrides, fragments):
    with pytest.raises(ConfigError) as caught:
        ChunkingConfig(**overrides)
    assert isinstance(caught.value, ValueError)
    for fragment in fragments:
        assert fragment in str(caught.value)


def test_model_validate_and_with_overrides_also_raise_config_error():
    with pytest.raises(ConfigError, match="chunk_size_max"):
        ChunkingConfig.model_validate({"chunk_size_max": -1})
    with pytest.raises(ConfigError, match="percentile"):
        ChunkingConfig().with_overrides(percentile=-5)


@pytest.mark.parametrize(
    ("given", "sizes"),
    [
        ({"chunk_size_max": 150}, (32, 150, 150)),  # the target follows the cap down
        ({"chunk_size_max": 20}, (20, 20, 20)),  # ... and so does the minimum
        ({"chunk_size_min": 300}, (300, 300, 300)),  # the cap gives way to a larger minimum
        ({"chunk_size_target": 10}, (10, 10, 254)),
        ({"chunk_size_max": None}, (32, 200, None)),
        ({"chunk_size_min": 40, "chunk_size_max": 150}, (40, 150, 150)),
    ],
)
def test_a_size_left_at_its_default_follows_the_sizes_given(given, sizes):
    config = ChunkingConfig(**given)
    assert (config.chunk_size_min, config.chunk_size_target, config.chunk_size_max) == sizes
    assert ChunkingConfig.preset("default", **given) == config
    assert ChunkingConfig().with_overrides(**given) == config


def test_a_presets_own_sizes_follow_its_overrides_and_only_given_sizes_conflict():
    narrative = ChunkingConfig.preset("narrative", chunk_size_max=150)
    assert (narrative.chunk_size_min, narrative.chunk_size_target) == (40, 150)
    assert narrative.overlap_tokens == 32  # the rest of the preset stays
    assert ChunkingConfig.preset("narrative").with_overrides(chunk_size_max=150) == narrative
    with pytest.raises(ConfigError, match="chunk_size_target=200"):
        ChunkingConfig.preset("narrative", chunk_size_max=150, chunk_size_target=200)
    # Configs that change no size keep their values and digests.
    assert ChunkingConfig.preset("default").fingerprint() == ChunkingConfig().fingerprint()
    technical = ChunkingConfig.preset("technical_docs")
    assert (technical.chunk_size_min, technical.chunk_size_target) == (64, 220)


def test_config_is_frozen():
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen error type
        ChunkingConfig().chunk_size_max = 10  # type: ignore[misc]


def test_presets():
    assert ChunkingConfig.preset("default") == ChunkingConfig()
    technical = ChunkingConfig.preset("technical_docs")
    narrative = ChunkingConfig.preset("narrative")
    assert technical.chunk_size_min > ChunkingConfig().chunk_size_min
    assert narrative.indented_code is False and narrative.overlap_tokens > 0
    assert ChunkingConfig.preset("narrative", overlap_tokens=0).overlap_tokens == 0
    with pytest.raises(ConfigError, match="default, technical_docs, narrative"):
        ChunkingConfig.preset("legal")


def test_fingerprint_is_pinned_and_stable_across_processes():
    code = "from seams.chunking import ChunkingConfig; print(ChunkingConfig().fingerprint())"
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert other == ChunkingConfig().fingerprint() == DEFAULT_FINGERPRINT
    earlier_default = ChunkingConfig(segmenter="threshold", chunk_size_min=48)
    assert earlier_default.fingerprint() == THRESHOLD_FINGERPRINT


def test_fingerprint_changes_with_any_value_and_ignores_construction_order():
    base = ChunkingConfig()
    assert base.fingerprint() == ChunkingConfig(**base.model_dump()).fingerprint()
    assert base.fingerprint() != base.with_overrides(percentile=41.0).fingerprint()
    assert len(base.fingerprint()) == 64


def test_every_field_shapes_some_section():
    covered = {name for fields in CONFIG_SECTIONS.values() for name in fields}
    assert covered == set(ChunkingConfig.model_fields)


def test_section_fingerprints_change_only_with_their_fields():
    base = ChunkingConfig()
    threshold = base.with_overrides(percentile=25.0)
    assert threshold.fingerprint("boundaries") != base.fingerprint("boundaries")
    for section in ("segmentation", "embedding", "assembly"):
        assert threshold.fingerprint(section) == base.fingerprint(section)
    sizes = base.with_overrides(chunk_size_target=180)
    assert sizes.fingerprint("assembly") != base.fingerprint("assembly")
    assert sizes.fingerprint("segmentation") == base.fingerprint("segmentation")
    # pooled windows reuse candidate embeddings; only text windows change what is embedded
    assert base.with_overrides(window_size=2).fingerprint("embedding") == base.fingerprint(
        "embedding"
    )
    text_mode = base.with_overrides(window_mode="text")
    assert text_mode.fingerprint("embedding") != base.fingerprint("embedding")
    assert set(base.fingerprints()) == {*CONFIG_SECTIONS, "config"}
    with pytest.raises(ConfigError, match="segmentation"):
        base.fingerprint("nonsense")
