"""`seams model export`: provision every model the project uses under the data dir: the packaged
model, the static boundary model, and each model folder the settings name (`embedder.model`,
`retrieval.model`), so no run exports one inside its first step (once; verified when already
there). The static model needs the export extra (torch) to distil: where it is missing and the
settings do not use the static model, that model is skipped with a line, not an error, so a
lean install (`seams-chunking[pipeline]`) provisions what its runs need."""

from __future__ import annotations

import argparse
import importlib.util

from seams.errors import EmbeddingError
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
    try:
        static = distill_static_model(default_static_dir(args.environment), force=args.force)
        print(f"static boundary model (fast preset): model_id {static.model_id}")
    except EmbeddingError as error:
        if args.settings.uses_static_model() or _can_distill():
            raise
        print(
            f"static boundary model (fast preset): not made, the settings do not use it ({error})"
        )
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


def _can_distill() -> bool:
    """Whether the export extra's distillation packages are installed."""
    return all(importlib.util.find_spec(name) for name in ("torch", "transformers", "model2vec"))
