"""What `seams` prints from documents reaches the terminal as text, never as terminal commands,
and every query a user can type is searched for or refused in one line before any work.

A document (and its file and folder names) carrying ESC[2J (clear the screen), OSC 0 (set the
window title), OSC 52 (write the clipboard) and the 8-bit CSI goes through the real pipeline, then
through `seams run`, `seams search` (human and JSON) and `seams export`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import dagster as dg
import pytest

from seams.errors import InputError
from seams.orchestration import cli
from seams.orchestration.cli.terminal import printable, printable_json
from seams.storage.search.query import check_query

CLEAR = "\x1b[2J"
TITLE = "\x1b]0;pwned\x07"
CLIPBOARD = "\x1b]52;c;cHduZWQ=\x07"
CSI8 = "\x9b31m"
#: What a terminal would act on: every C0 control but newline, DEL, every C1 control.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")
DOCUMENT = (
    f"# Bees {CLEAR}in the hive\n\n"
    f"The queen bee {CLIPBOARD}lays every egg in the hive. Worker bees {CSI8} feed the larvae "
    f"and guard the entrance.{TITLE} Drones {CLEAR} mate with queens of other colonies.\n\n"
    "In winter the colony clusters around the queen and shivers to keep her warm. The cluster "
    "eats the honey it stored in summer.\n"
)
FILE_NAME = f"bees{TITLE}.md"
FOLDER_NAME = f"hive{CLEAR}"


def test_printable_escapes_every_control_and_keeps_text() -> None:
    assert printable(f"a{CLEAR}b{TITLE}c{CLIPBOARD}d{CSI8}\x7f") == (
        "a\\x1b[2Jb\\x1b]0;pwned\\x07c\\x1b]52;c;cHduZWQ=\\x07d\\x9b31m\\x7f"
    )
    assert printable("line\nnext\ttab\r") == "line\\nnext\\ttab\\r"
    assert printable("line\nnext\ttab\r", keep="\n\t") == "line\nnext\ttab\\r"
    plain = "Café 名前 🚀 \u200b back\\slash 'quotes' \u00a0"  # printable text is untouched
    assert printable(plain) == plain
    encoded = json.dumps({"t": f"{CLEAR}{CSI8}\x7f"}, ensure_ascii=False)
    assert RAW_CONTROL.search(printable_json(encoded)) is None
    assert json.loads(printable_json(encoded)) == {"t": f"{CLEAR}{CSI8}\x7f"}


@pytest.mark.parametrize(
    ("argv", "query", "k"),
    [
        (["-queen"], "-queen", 5),
        (["--queen"], "--queen", 5),
        (["-kitten"], "-kitten", 5),  # not `-k itten`
        (["-hello"], "-hello", 5),  # not `-h ello`
        (["-k", "3", "-queen"], "-queen", 3),
        (["-queen", "-k2"], "-queen", 2),
        (["--", "-queen"], "-queen", 5),
        (["-5"], "-5", 5),
        (["-k3", "queen"], "queen", 3),
    ],
)
def test_a_query_that_starts_with_a_dash_is_the_query(argv: list[str], query: str, k: int) -> None:
    args = cli.build_parser().parse_args(["search", *argv])
    assert (args.query, args.k) == (query, k)


def test_an_unknown_option_beside_a_query_is_still_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(["search", "queen", "--jsn"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --jsn" in capsys.readouterr().err


@pytest.mark.parametrize("query", ["queen\x00bee", "\x00", 42])
def test_check_query_refuses_a_nul_or_a_non_string(query: object) -> None:
    with pytest.raises(InputError, match=r"NUL character|must be a string"):
        check_query(query)
    assert check_query("queen bee \x1b") == "queen bee \x1b"


def test_an_error_quoting_input_shows_it_escaped(capfd: pytest.CaptureFixture[str]) -> None:
    missing = f"/nonexistent/{FOLDER_NAME}{TITLE}"
    assert cli.main(["run", missing]) == cli.EXIT_ERROR
    out, err = capfd.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert RAW_CONTROL.search(err) is None, err
    assert "/nonexistent/hive\\x1b[2J\\x1b]0;pwned\\x07 does not exist" in err


def test_a_nul_in_a_query_is_one_line_before_any_work(
    capfd: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No model and no database here: the query is refused before either is looked for.
    monkeypatch.setenv("SEAMS_DATA_DIR", str(tmp_path / "empty"))
    assert cli.main(["search", "queen\x00bee"]) == cli.EXIT_ERROR
    out, err = capfd.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith("seams: error: the query contains a NUL character (\\x00) at position 5")
    assert not (tmp_path / "empty").exists()


def test_documents_reach_the_terminal_escaped(
    instance: dg.DagsterInstance,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / FOLDER_NAME
    folder.mkdir()
    (folder / FILE_NAME).write_text(DOCUMENT, encoding="utf-8")

    assert cli.main(["run", str(folder)]) == 0
    out, _ = capfd.readouterr()
    assert RAW_CONTROL.search(out) is None, out
    assert "hive\\x1b[2J" in out  # the folder, as `seams run` reports it
    assert "documents:      1 (0 failed)" in out

    assert cli.main(["search", "queen bee eggs", "-k", "3"]) == 0
    out, _ = capfd.readouterr()
    assert RAW_CONTROL.search(out) is None, out
    assert "bees\\x1b]0;pwned\\x07.md" in out  # the file name
    assert "'Bees \\x1b[2Jin the hive'" in out  # the section title
    assert "\\x1b]52;c;cHduZWQ=\\x07" in out or "\\x9b31m" in out  # the chunk text

    assert cli.main(["search", "queen bee eggs", "-k", "3", "--json"]) == 0
    out, _ = capfd.readouterr()
    assert RAW_CONTROL.search(out) is None, out
    hits = json.loads(out)["hits"]
    # The JSON keeps the text as stored: the escapes are JSON's, decoded by any reader.
    assert any(CLIPBOARD in hit["text"] or CSI8 in hit["text"] for hit in hits), hits

    # A query that starts with '-' is searched for, through the real command.
    assert cli.main(["search", "-queen", "-k", "1", "--json"]) == 0
    out, _ = capfd.readouterr()
    assert json.loads(out)["query"] == "-queen" and json.loads(out)["hits"]

    target = tmp_path / f"out{CLEAR}.jsonl"
    assert cli.main(["export", str(target)]) == 0
    out, _ = capfd.readouterr()
    assert RAW_CONTROL.search(out) is None, out
    assert "out\\x1b[2J.jsonl" in out and target.exists()
