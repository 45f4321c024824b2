"""`seams model export`: provision every model the project uses under the data dir: the packaged
model, the static boundary model, and each model folder the settings name (`embedder.model`,
`retrieval.model`), so no run exports one inside its first step (once; verified when already
there)."""

from __future__ import annotations

import argparse

from seams.models.distill import distill_static_model
from seams.models.model_export import export_model, load_model_folder
from seams.models.model_store import default_model_dir, default_static_dir
from seams.resources.embedder import PipelineModels


def run(args: argparse.Namespace) -> int:
    """Export (or verify) every model and say where each is."""
    manifest = export_model(default_model_dir(args.environment), force=args.force)
    state = "exported" if manifest.exported_now else "already exported (verified)"
    print(
        f"{state}: {manifest.model_name} in {manifest.directory}\n"
        f"model_id {manifest.model_id}; variants: {', '.join(sorted(manifest.variants))}"
    )
    static = distill_static_model(default_static_dir(args.environment), force=args.force)
    print(f"static boundary model (fast preset): model_id {static.model_id}")
    models = PipelineModels.of(args.settings, args.environment)
    folders = {}  # folder -> the settings that name it, in order
    for field, setting in (
        ("embedder.model", models.boundary),
        ("retrieval.model", models.retrieval),
    ):
        if setting.folder is not None:
            folders.setdefault(setting.folder, []).append(field)
    models_dir = default_model_dir(args.environment).parent
    for folder, fields in folders.items():
        named = load_model_folder(folder, models_dir=models_dir)
        print(
            f"{' and '.join(fields)}: {named.model_name} in {named.directory}; "
            f"{named.dims} dimensions"
        )
    return 0
