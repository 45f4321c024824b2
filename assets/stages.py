"""What shapes one collection's chunking stages, and the `@dg.asset` arguments they share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

from seams.assets.checks import batch_check_specs
from seams.assets.display import asset_attributes
from seams.assets.partitions import DEFAULT_LINEAGE, Lineage
from seams.assets.versions import StageParts, code_version
from seams.chunking import ChunkingConfig

_STAGES = {
    "sentence_candidates": ("segment", "segmentation"),
    "candidate_embeddings": ("embed", "embedding"),
    "semantic_boundaries": ("cut", "boundaries"),
    "chunks": ("assemble", "assembly"),
}
"""Each stage's asset: its `stage` tag in the UI, and the `StageParts` slice of its version."""


@dataclass(frozen=True)
class ChunkingStages:
    """One collection's chunking stages (segment, embed, cut, assemble): the config they run
    with, the settings slices their code versions fold in, when they rematerialize themselves,
    and the lineage they belong to."""

    config: ChunkingConfig
    parts: StageParts
    automation_condition: dg.AutomationCondition | None = None
    lineage: Lineage = DEFAULT_LINEAGE

    def code_version(self, asset: str, version: str) -> str:
        """`asset`'s code version: its own `version` and the settings slice of its stage."""
        return code_version(version, *getattr(self.parts, _STAGES[asset][1]))

    def arguments(
        self,
        asset: str,
        version: str,
        *,
        description: str | None = None,
        kinds: tuple[str, ...] = ("postgres",),
        checks: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """The `@dg.asset` arguments of the stage making `asset`, declared the same way for
        every stage: the lineage's defaults, the UI's attributes, the code version, and (with
        `checks`, name -> description) blocking checks per batch. Without `description`, Dagster
        shows the asset function's docstring."""
        attributes = {
            **self.lineage.asset_defaults(),
            **asset_attributes(asset, stage=_STAGES[asset][0], kinds=kinds),
            "code_version": self.code_version(asset, version),
            "automation_condition": self.automation_condition,
        }
        if description is not None:
            attributes["description"] = description
        if checks is not None:
            attributes["check_specs"] = batch_check_specs(
                self.lineage.key(asset), checks, self.lineage.partitions, blocking=True
            )
        return attributes
