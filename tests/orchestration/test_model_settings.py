"""`embedder.model` and `retrieval.model` as the composition root resolves them: which code
versions each changes, the resources it makes, and one-line errors for a bad value.

No model runs here (a code version is computed from the folder's files), so these tests stay in
CI's lane; tests/orchestration/test_your_model_pipeline.py runs a real model end to end.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import replace
from pathlib import Path

import dagster as dg
import pytest

from seams.assets.candidates import SEGMENTATION_VERSION
from seams.assets.chunks import CHUNKS_VERSION
from seams.assets.embeddings import EMBEDDING_VERSION
from seams.assets.retrieval import INDEX_VERSION
from seams.assets.versions import code_version
from seams.environment import SeamsEnvironment
from seams.errors import ConfigError
from seams.models import distill
from seams.models.model_export import packaged_model_dir
from seams.models.model_store import (
    ModelManifest,
    default_static_dir,
    installed_version,
    load_static_manifest,
)
from seams.orchestration.cli.entry import main
from seams.orchestration.definitions import build_assets, build_resources, built_index_mode
from seams.settings import SeamsSettings
from tests.support.samples import PIPELINE_ASSETS
from tests.support.tiny_models import wordpiece, write_mean_pooling_layout
from tests.test_docs import provide_models

STAGES = PIPELINE_ASSETS[1:]


def _folder(path: Path, weights: bytes = b"weights-0") -> Path:
    """The files of a sentence-transformers folder (what its identity is computed from)."""
    path.mkdir(parents=True, exist_ok=True)
    write_mean_pooling_layout(path, max_seq_length=128, config='{"model_type": "bert"}')
    wordpiece().save(str(path / "tokenizer.json"))
    (path / "model.safetensors").write_bytes(weights)
    return path


def _environment(root: Path) -> SeamsEnvironment:
    config = root / "seams.yaml"
    config.write_text("{}\n")
    return SeamsEnvironment(data_dir=root / "data", config_path=config, project_dir=root)


def _versions(settings: dict, environment: SeamsEnvironment) -> dict[str, str]:
    assets = build_assets(SeamsSettings.model_validate(settings), environment)
    return {
        key.to_user_string(): version
        for asset in assets
        for key, version in asset.code_versions_by_key.items()
    }


def _changed(a: dict[str, str], b: dict[str, str]) -> set[str]:
    return {stage for stage in STAGES if a[stage] != b[stage]}


def test_default_models_keep_their_code_versions(tmp_path: Path) -> None:
    """Default settings add no model part: each stage's code version is the formula it had
    before these settings existed (written out here, not taken from `StageParts`), preset
    `fast` (static boundaries, the index of chunk texts) too. So existing data stays in sync."""
    environment = _environment(tmp_path)
    for preset, mode in (("default", "pooled"), ("fast", "text")):
        settings = SeamsSettings.model_validate({"chunking": {"preset": preset}})
        config, variant = settings.chunking_config(), settings.embedder.variant
        segmentation = (config.fingerprint("segmentation"), f"tokenizer:{variant}")
        embedding = (*segmentation, config.fingerprint("embedding"), variant)
        assembly = (*embedding, config.fingerprint("boundaries"), config.fingerprint("assembly"))
        lexical = f"text_search_config:{settings.retrieval.text_search_config}"
        expected = {
            "sentence_candidates": code_version(SEGMENTATION_VERSION, *segmentation),
            "candidate_embeddings": code_version(EMBEDDING_VERSION, *embedding),
            "chunks": code_version(CHUNKS_VERSION, *assembly),
            "chunk_index": code_version(INDEX_VERSION, *assembly, f"mode:{mode}", "", lexical),
        }
        versions = _versions({"chunking": {"preset": preset}}, environment)
        assert {stage: versions[stage] for stage in expected} == expected, preset


def test_static_is_the_static_boundary_model(tmp_path: Path) -> None:
    environment = _environment(tmp_path)
    assert _versions({"embedder": {"model": "static"}}, environment) == _versions(
        {"chunking": {"overrides": {"boundary_model": "static"}}}, environment
    )


def test_retrieval_model_moves_only_the_index(tmp_path: Path) -> None:
    environment = _environment(tmp_path)
    folder = _folder(tmp_path / "models" / "mine")
    default = _versions({}, environment)
    relative = _versions({"retrieval": {"model": "models/mine"}}, environment)
    assert _changed(default, relative) == {"chunk_index"}
    assert _versions({"retrieval": {"model": str(folder)}}, environment) == relative
    # The query prompt does not change the index's vectors; the document prompt does.
    query = _versions({"retrieval": {"model": "models/mine", "query_prompt": "q: "}}, environment)
    assert query == relative
    passage = {"retrieval": {"model": "models/mine", "document_prompt": "passage: "}}
    assert _changed(relative, _versions(passage, environment)) == {"chunk_index"}
    packaged_prompt = _versions({"retrieval": {"document_prompt": "passage: "}}, environment)
    assert _changed(default, packaged_prompt) == {"chunk_index"}


def test_embedder_model_moves_everything_after_the_candidates(tmp_path: Path) -> None:
    environment = _environment(tmp_path)
    folder = _folder(tmp_path / "mine")
    default = _versions({}, environment)
    mine = _versions({"embedder": {"model": str(folder)}}, environment)
    assert _changed(default, mine) == set(STAGES) - {"sentence_candidates"}
    # The id, not the path: the same files elsewhere are the same model, new weights are not.
    moved = _folder(tmp_path / "elsewhere")
    assert _versions({"embedder": {"model": str(moved)}}, environment) == mine
    (folder / "model.safetensors").write_bytes(b"weights-1")
    retrained = _versions({"embedder": {"model": str(folder)}}, environment)
    assert _changed(mine, retrained) == set(STAGES) - {"sentence_candidates"}
    # A folder under the `fast` preset places the boundaries itself.
    fast = _versions(
        {"chunking": {"preset": "fast"}, "embedder": {"model": str(moved)}}, environment
    )
    assert (
        fast["candidate_embeddings"]
        != _versions({"chunking": {"preset": "fast"}}, environment)["candidate_embeddings"]
    )


def test_resources_follow_the_settings(tmp_path: Path) -> None:
    environment = _environment(tmp_path)
    folder = _folder(tmp_path / "mine")
    default = build_resources(SeamsSettings(), environment)
    assert "seams_boundary_embedder" not in default
    assert default["seams_retrieval_embedder"] is default["seams_embedder"]
    settings = SeamsSettings.model_validate(
        {
            "embedder": {"model": str(folder), "batch_size": 8},
            "retrieval": {"query_prompt": "q: "},
        }
    )
    resources = build_resources(settings, environment)
    boundary, retrieval = (
        resources["seams_boundary_embedder"],
        resources["seams_retrieval_embedder"],
    )
    assert boundary.model_dir == retrieval.model_dir == str(folder.resolve())
    assert (boundary.query_prompt, retrieval.query_prompt) == (None, "q: ")
    assert boundary.batch_size == retrieval.batch_size == 8
    assert retrieval.models_dir == str(environment.models_dir)
    assert resources["seams_embedder"].model_dir == str(environment.models_dir / "all-MiniLM-L6-v2")


def test_the_index_asks_for_the_retrieval_model(tmp_path: Path) -> None:
    environment = _environment(tmp_path)
    folder = _folder(tmp_path / "mine")
    index_key = dg.AssetKey("chunk_index")

    def index(settings: dict) -> dg.AssetsDefinition:
        assets = build_assets(SeamsSettings.model_validate(settings), environment)
        return next(asset for asset in assets if index_key in asset.keys)

    assert "seams_embedder" in index({}).required_resource_keys
    mine = index({"retrieval": {"model": str(folder)}})
    assert "seams_retrieval_embedder" in mine.required_resource_keys
    # Pooled vectors are the candidates' model's: another model embeds each chunk's text.
    assert [key.to_user_string() for key in mine.dependency_keys] == ["chunks"]
    modes = {
        name: built_index_mode(SeamsSettings.model_validate(settings), environment)
        for name, settings in {
            "default": {},
            "retrieval folder": {"retrieval": {"model": str(folder)}},
            "same folder": {"embedder": {"model": str(folder)}},
            "static": {"embedder": {"model": "static"}},
            "late": {"retrieval": {"model": str(folder), "mode": "late"}},
        }.items()
    }
    assert modes == {
        "default": "pooled",
        "retrieval folder": "text",
        "same folder": "pooled",
        "static": "text",
        "late": "late",
    }


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"retrieval": {"model": "nowhere"}}, r"retrieval\.model: 'nowhere': .*nowhere is not a"),
        ({"embedder": {"model": "empty"}}, r"embedder\.model: 'empty': .*holds no embedding model"),
        ({"retrieval": {"model": "static"}}, r"retrieval\.model: 'static'"),
        (
            {
                "embedder": {"model": "mine"},
                "chunking": {"overrides": {"boundary_model": "static"}},
            },
            r"chunking\.overrides\.boundary_model: 'static' contradicts embedder\.model",
        ),
    ],
)
def test_a_bad_model_setting_is_one_line_naming_the_field(
    tmp_path: Path, settings: dict, message: str
) -> None:
    environment = _environment(tmp_path)
    (tmp_path / "empty").mkdir()
    _folder(tmp_path / "mine")
    with pytest.raises(ConfigError, match=message) as raised:
        build_assets(SeamsSettings.model_validate(settings), environment)
    assert "\n" not in str(raised.value)


def test_a_missing_folder_is_named_with_its_resolved_path(tmp_path: Path) -> None:
    environment = _environment(tmp_path)
    with pytest.raises(ConfigError, match=str(tmp_path / "gone")):
        build_resources(SeamsSettings.model_validate({"embedder": {"model": "gone"}}), environment)
    shutil.rmtree(tmp_path / "data", ignore_errors=True)


def test_a_model_error_names_the_settings_file(tmp_path: Path) -> None:
    """As every settings error does: the file, then the field and the path."""
    environment = _environment(tmp_path)
    with pytest.raises(ConfigError) as raised:
        build_assets(SeamsSettings.model_validate({"embedder": {"model": "gone"}}), environment)
    assert str(raised.value).startswith(f"{tmp_path / 'seams.yaml'}: embedder.model: 'gone': ")


def test_late_chunking_with_a_model_it_cannot_run_is_refused_when_the_settings_load(
    tmp_path: Path,
) -> None:
    """Late chunking mean-pools token vectors: a CLS-pooling folder (or one whose documents get
    a prompt) is refused from its files, before any run, not when chunk_index builds."""
    environment = _environment(tmp_path)
    cls_folder = _folder(tmp_path / "cls")
    (cls_folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    late = {"retrieval": {"model": "cls", "mode": "late"}}
    with pytest.raises(
        ConfigError, match=r"retrieval\.mode: late cannot run retrieval\.model .*cls"
    ):
        build_assets(SeamsSettings.model_validate(late), environment)
    _folder(tmp_path / "mean")
    prompted = {"retrieval": {"model": "mean", "mode": "late", "document_prompt": "passage: "}}
    with pytest.raises(ConfigError, match="document prompt"):
        build_assets(SeamsSettings.model_validate(prompted), environment)
    plain = {"retrieval": {"model": "mean", "mode": "late"}}
    assert built_index_mode(SeamsSettings.model_validate(plain), environment) == "late"


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        ("modules-only", "1_Pooling/config.json is missing"),
        ("no-weights", "model.safetensors is missing: the folder holds no weights"),
        ("broken-tokenizer", "tokenizer.json: not a tokenizer Seams can read"),
        ("truncated-tokenizer", "tokenizer.json: not a tokenizer Seams can read"),
    ],
)
def test_a_model_folder_is_checked_whole_when_the_settings_load(
    tmp_path: Path, damage: str, named: str
) -> None:
    """A folder that would fail at its first use (an export, a run's index step) fails when the
    definitions are built (`seams check` too), in one line naming the file."""
    environment = _environment(tmp_path)
    folder = _folder(tmp_path / "mine")
    if damage == "modules-only":
        for path in sorted(folder.rglob("*"), reverse=True):
            if path.name != "modules.json":
                path.unlink() if path.is_file() else path.rmdir()
    elif damage == "no-weights":
        (folder / "model.safetensors").unlink()
    elif damage == "broken-tokenizer":
        (folder / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "Nope"}}')
    else:
        text = (folder / "tokenizer.json").read_text()
        (folder / "tokenizer.json").write_text(text[: len(text) // 2])
    with pytest.raises(ConfigError) as raised:
        build_resources(SeamsSettings.model_validate({"retrieval": {"model": "mine"}}), environment)
    message = str(raised.value)
    assert "\n" not in message and f"{folder}/{named}" in message, message
    assert message.startswith(f"{tmp_path / 'seams.yaml'}: retrieval.model: 'mine': "), message
    shutil.rmtree(tmp_path / "data", ignore_errors=True)


def test_model_export_provisions_every_model_the_settings_name(
    tmp_path: Path,
    exported_model: ModelManifest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`seams model export` makes (or verifies) each model folder seams.yaml names, not only the
    packaged models, so no first run exports one inside its embedding step."""
    provide_models(tmp_path, exported_model, monkeypatch)
    # The stand-in static model, recorded as distilled from this install (distilling for real
    # takes minutes here; the slow lane does it): `seams model export` verifies and keeps it.
    static = load_static_manifest(default_static_dir())
    replace(
        static,
        source=distill._source_info(packaged_model_dir()),
        versions={"model2vec": installed_version("model2vec")},
    ).write()
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        shutil.copy(exported_model.directory / name, mine / name)
    write_mean_pooling_layout(mine, max_seq_length=256, config='{"hidden_size": 384}')
    (tmp_path / "seams.yaml").write_text("retrieval: {model: mine}\n", encoding="utf-8")
    for variable in ("SEAMS_CONFIG", "SEAMS_PROJECT_DIR"):  # the working folder's seams.yaml
        monkeypatch.delenv(variable, raising=False)
    assert main(["model", "export"]) == 0
    out = capsys.readouterr().out
    assert f"retrieval.model: mine in {mine}; 384 dimensions" in out, out


def test_model_export_without_the_export_extra_skips_only_a_static_model_no_setting_uses(
    tmp_path: Path,
    exported_model: ModelManifest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A lean install (no torch) provisions what its runs need: the static model, which only
    the `fast` preset uses, is skipped with a line, and is an error once the settings use it."""
    provide_models(tmp_path, exported_model, monkeypatch)
    shutil.rmtree(default_static_dir())
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails, as without the extra
    for variable in ("SEAMS_CONFIG", "SEAMS_PROJECT_DIR"):  # the working folder's seams.yaml
        monkeypatch.delenv(variable, raising=False)
    assert main(["model", "export"]) == 0
    out = capsys.readouterr().out
    assert "static boundary model (fast preset): not made, the settings do not use it" in out, out
    assert "seams-chunking[export]" in out and not default_static_dir().exists()
    (tmp_path / "seams.yaml").write_text("chunking: {preset: fast}\n", encoding="utf-8")
    assert main(["model", "export"]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "distilling the static model needs" in error, error
