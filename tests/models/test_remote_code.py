"""A model folder's own Python code never runs: a `config.json` whose `auto_map` points at a
module in the folder (an unknown `model_type`) is refused with one line naming the file, and the
module is never imported, whatever the terminal answers."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from seams.errors import ConfigError
from seams.models.model_export import export_folder
from tests.support.tiny_models import wordpiece

pytestmark = pytest.mark.export

TRANSFORMER = "sentence_transformers.models.Transformer"
POOLING = "sentence_transformers.models.Pooling"
EVIL = """
from pathlib import Path
Path(__file__).with_name("ran").write_text("the folder's code ran")
from transformers import PretrainedConfig, PreTrainedModel
class EvilConfig(PretrainedConfig):
    model_type = "evilbert"
class EvilModel(PreTrainedModel):
    config_class = EvilConfig
"""


@pytest.mark.slow  # imports torch and transformers: a minute on a 2-core machine
def test_a_folder_that_needs_its_own_code_is_refused_without_running_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "evil-model"
    folder.mkdir()
    transformer = {"idx": 0, "name": "0", "path": "", "type": TRANSFORMER}
    pooling = {"idx": 1, "name": "1", "path": "1_Pooling", "type": POOLING}
    (folder / "modules.json").write_text(json.dumps([transformer, pooling]), "utf-8")
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True}), "utf-8"
    )
    (folder / "config.json").write_text(
        json.dumps(
            {
                "model_type": "evilbert",
                "max_position_embeddings": 128,
                "auto_map": {"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel"},
            }
        ),
        "utf-8",
    )
    wordpiece().save(str(folder / "tokenizer.json"))
    (folder / "evil.py").write_text(EVIL, "utf-8")
    # Whoever sits at the terminal answers "y" to transformers' "run the custom code?" prompt.
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n" * 3))
    with pytest.raises(ConfigError) as caught:
        export_folder(folder, tmp_path / "out")
    message = str(caught.value)
    assert "\n" not in message and str(folder / "config.json") in message, message
    assert "never runs" in message
    assert not (folder / "ran").exists()
