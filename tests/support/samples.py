"""What the tests chunk: the bundled sample corpus (as folders and batches), a short document, the
second setting the adapters are checked with; and `seams run PATH` in-process."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from seams.chunking import ChunkingConfig
from seams.orchestration import runner

PIPELINE_ASSETS = (
    "extracted_text",
    "sentence_candidates",
    "candidate_embeddings",
    "semantic_boundaries",
    "chunks",
    "chunk_index",
)
"""The per-batch assets of every collection, in pipeline order, written out here: a test of
them must not read them from the code it tests."""

SAMPLE_CORPUS = runner.SAMPLE_CORPUS
"""The bundled sample corpus (package data, as `seams run` reads it)."""
SAMPLE_NAMES = sorted(p.name for p in SAMPLE_CORPUS.iterdir() if p.name != "README.md")
"""Its documents (the README only describes them)."""

LEXICAL = ChunkingConfig.preset("technical_docs")
"""The second setting the adapters are checked with: another preset, no model (lexical)."""

TWO_BATCHES = (("field_notes.md",), ("history_of_maps.txt", "kitchen_science.md"))
"""Two sample-corpus batches of different sizes: per-partition and per-run counts cannot agree
by chance."""

SHORT_DOC = (
    "# Tides\n\nThe tide rises twice a day along this coast. Fishermen read the tables before "
    "they leave the harbour.\n\nOyster beds lie bare at the lowest tides of spring.\n"
)


def copy_samples(folder: Path, names: Sequence[str]) -> Path:
    """A new folder holding copies of these sample-corpus files."""
    folder.mkdir()
    for name in names:
        shutil.copy(SAMPLE_CORPUS / name, folder / name)
    return folder


def register_sample_batches(
    tmp_path: Path,
    batches: tuple[tuple[str, ...], ...] = TWO_BATCHES,
    *,
    defs: dg.Definitions,
) -> list[str]:
    """Register each group of sample-corpus files as its own batch (a folder each); their keys."""
    keys = []
    for number, names in enumerate(batches):
        folder = copy_samples(tmp_path / f"batch_{number}", names)
        keys.extend(runner.register_path(folder, print, defs=defs))
    return keys


def run_path(
    instance: dg.DagsterInstance, path: Path, report: Any = print, *, defs: dg.Definitions
) -> runner.RunSummary:
    """Register `path` and materialize its batches, as `seams run PATH` does (in-process)."""
    keys = runner.register_path(path, report, defs=defs)
    summary = runner.RunSummary(batches=keys)
    runner.materialize_batches(instance, keys, report, summary, defs=defs)
    return summary
