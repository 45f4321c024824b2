"""Profiles route document classes (path glob / metadata) to presets (seed 004)."""

from __future__ import annotations

import pytest

from chunking import ChunkingConfig, ChunkingProfiles, ConfigError, ProfileRule


def profiles() -> ChunkingProfiles:
    return ChunkingProfiles(
        rules=[
            ProfileRule(path_glob="*.md", preset="technical_docs"),
            ProfileRule(metadata={"doc_class": "novel"}, preset="narrative"),
            ProfileRule(
                path_glob="legal/*",
                metadata={"tenant": "acme"},
                overrides={"chunk_size_target": 180},
                name="acme-legal",
            ),
        ],
        default="default",
    )


def test_path_glob_routes_to_a_preset():
    assert profiles().config_for("docs/guide/setup.md") == ChunkingConfig.preset("technical_docs")


def test_metadata_routes_to_a_preset():
    config = profiles().config_for("books/moby.txt", {"doc_class": "novel"})
    assert config == ChunkingConfig.preset("narrative")


def test_most_specific_rule_wins_and_overrides_apply():
    config = profiles().config_for("legal/contract.md", {"tenant": "acme"})
    assert config.chunk_size_target == 180  # glob + metadata beats the *.md glob alone
    assert profiles().rule_for("legal/contract.md", {"tenant": "other"}) == 0


def test_no_match_gives_the_default():
    assert profiles().config_for("notes.txt", {}) == ChunkingConfig()
    assert profiles().config_for() == ChunkingConfig()
    assert profiles().rule_for(None, {"doc_class": "memo"}) is None


def test_bad_rules_fail_when_loaded_naming_the_rule():
    with pytest.raises(ConfigError, match=r"rules\[0\].*unknown preset"):
        ChunkingProfiles(rules=[ProfileRule(preset="legal")])
    with pytest.raises(ConfigError, match=r"acme.*chunk_size_target"):
        ChunkingProfiles(rules=[ProfileRule(name="acme", overrides={"chunk_size_target": 10_000})])
    with pytest.raises(ConfigError, match="default"):
        ChunkingProfiles(default="nope")


def test_profiles_load_from_plain_data():
    loaded = ChunkingProfiles.model_validate(
        {"rules": [{"path_glob": "*.rst", "preset": "technical_docs"}], "default": "narrative"}
    )
    assert loaded.config_for("a/b.rst") == ChunkingConfig.preset("technical_docs")
    assert loaded.config_for("a/b.txt") == ChunkingConfig.preset("narrative")
