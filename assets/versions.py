"""Code versions: an asset's own version plus the fingerprints of the settings that shape it.

Dagster compares code versions to decide what is unsynced, but it marks a downstream asset stale
only after its upstream is re-materialized. So each stage's version folds in its own config slice
*and* those of the stages above it: change the boundary threshold and the UI shows
`semantic_boundaries` and `chunks` unsynced at once, while `sentence_candidates` and
`candidate_embeddings` (whose inputs did not change) stay fresh.

Nothing here reads settings: the composition root (`orchestration.definitions`) computes the
parts from the settings it loaded and hands them to the asset factories.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from seams.chunking import ChunkingConfig


def code_version(asset_version: str, *parts: str) -> str:
    """`<asset_version>-<12 hex digits of the parts>`: short enough to read in the UI."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:12]
    return f"{asset_version}-{digest}"


@dataclass(frozen=True)
class StageParts:
    """Cumulative settings slices, one per stage, in pipeline order."""

    segmentation: tuple[str, ...]
    embedding: tuple[str, ...]
    boundaries: tuple[str, ...]
    assembly: tuple[str, ...]

    @classmethod
    def of(
        cls, config: ChunkingConfig, embedder_variant: str, boundary_model: str | None = None
    ) -> StageParts:
        """The parts for `config` run with the `embedder_variant` ONNX graph (and tokenizer);
        `boundary_model`: the identity of the model folder that embeds the candidates instead
        of the packaged one (its id, not its path: new weights in the same folder count), which
        then marks embeddings, boundaries, chunks and the index, never the candidates (they are
        sized with the packaged tokenizer whatever model embeds them). None, the packaged
        model, adds nothing, so those code versions are what they always were."""
        segmentation = (config.fingerprint("segmentation"), f"tokenizer:{embedder_variant}")
        model = (f"model:{boundary_model}",) if boundary_model is not None else ()
        embedding = (*segmentation, config.fingerprint("embedding"), embedder_variant, *model)
        boundaries = (*embedding, config.fingerprint("boundaries"))
        assembly = (*boundaries, config.fingerprint("assembly"))
        return cls(segmentation, embedding, boundaries, assembly)
