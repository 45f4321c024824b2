"""`seams model export`: provision the embedding model and the static boundary model under the
data dir (once; verified when already there)."""

from __future__ import annotations

import argparse

from seams.models.distill import distill_static_model
from seams.models.model_export import export_model
from seams.models.model_store import default_model_dir, default_static_dir


def run(args: argparse.Namespace) -> int:
    """Export (or verify) both models and say where they are."""
    manifest = export_model(default_model_dir(args.environment), force=args.force)
    state = "exported" if manifest.exported_now else "already exported (verified)"
    print(
        f"{state}: {manifest.model_name} in {manifest.directory}\n"
        f"model_id {manifest.model_id}; variants: {', '.join(sorted(manifest.variants))}"
    )
    static = distill_static_model(default_static_dir(args.environment), force=args.force)
    print(f"static boundary model (fast preset): model_id {static.model_id}")
    return 0
