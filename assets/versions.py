"""Code versions: an asset's own version plus the fingerprints of the settings that shape it.

Dagster compares code versions to decide what is unsynced, but it marks a downstream asset stale
only after its upstream is re-materialized. So each stage's version folds in its own config slice
*and* those of the stages above it: change the boundary threshold and the UI shows
`semantic_boundaries` and `chunks` unsynced at once, while `sentence_candidates` and
`candidate_embeddings` (whose inputs did not change) stay fresh.
"""

from __future__ import annotations

import hashlib

from resources.settings import current_settings

SETTINGS = current_settings()
CONFIG = SETTINGS.chunking_config()


def code_version(asset_version: str, *parts: str) -> str:
    """`<asset_version>-<12 hex digits of the parts>`: short enough to read in the UI."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:12]
    return f"{asset_version}-{digest}"


# Cumulative settings slices, one per stage, in pipeline order.
SEGMENTATION_PARTS = (CONFIG.fingerprint("segmentation"), f"tokenizer:{SETTINGS.embedder.variant}")
EMBEDDING_PARTS = (*SEGMENTATION_PARTS, CONFIG.fingerprint("embedding"), SETTINGS.embedder.variant)
BOUNDARY_PARTS = (*EMBEDDING_PARTS, CONFIG.fingerprint("boundaries"))
ASSEMBLY_PARTS = (*BOUNDARY_PARTS, CONFIG.fingerprint("assembly"))
