"""What libraries print while the static model is distilled stays out of the user's terminal:
Rust's tokenizers writes its "OrderedVocab ... holes" warning straight to file descriptor 1,
which model2vec's pruned vocabulary always triggers; Seams logs it at debug instead."""

from __future__ import annotations

import logging

import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordLevel

from seams.models.distill import _printed_output_logged


def test_the_tokenizers_holes_warning_is_logged_at_debug_not_printed(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    holes = Tokenizer(WordLevel({"a": 0, "c": 2, "[UNK]": 3}, unk_token="[UNK]"))
    holes.to_str()  # unguarded: the library prints it
    assert "contains holes" in capfd.readouterr().out
    with caplog.at_level(logging.DEBUG, logger="seams.models.distill"), _printed_output_logged():
        holes.to_str()
    printed = capfd.readouterr()
    assert "holes" not in printed.out and "holes" not in printed.err
    assert any("contains holes" in r.getMessage() and r.levelno == logging.DEBUG
               for r in caplog.records)  # fmt: skip
