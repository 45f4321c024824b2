"""The documentation stays true: the site builds with `mkdocs build --strict` (no broken link,
anchor or missing page), the configuration reference is what `docs/gen_config.py` makes of the
settings models today, every ```python block of README.md and docs/*.md runs, and the demo
summary in README.md has the lines `seams run` prints.

`run_python_blocks` is the one way a page's blocks run; `tests/integrations/test_library_doc.py`
uses it for docs/library.md, with its own checks of what the page prints.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from seams.models.model_store import ModelManifest, default_model_dir, default_static_dir
from seams.orchestration import cli, runner
from tests.support.models import write_tiny_static_model

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = [README, *sorted(DOCS.glob("*.md"))]

BLOCK = re.compile(
    r"(?:^<!-- not run: (?P<reason>.*?) -->\n)?"
    r"(?:^<!-- runs over an indexed corpus: (?P<indexed>.*?) -->\n)?"
    r"^```python\n(?P<code>.*?)^```$",
    re.DOTALL | re.MULTILINE,
)
MAX_NOT_RUN = 3
"""Blocks marked `<!-- not run: why -->` just before them are skipped; keep such markers rare.
Blocks marked `<!-- runs over an indexed corpus: TEST_FILE -->` need a database with the sample
corpus published: the named test file runs them (`run_python_blocks(page, indexed=True)`)."""

DEDICATED = {
    DOCS / "library.md": "tests/integrations/test_library_doc.py",
    DOCS / "targets.md": "tests/storage/targets/test_targets_doc.py",
    DOCS / "dagster.md": "tests/orchestration/test_merged_definitions.py",
}
"""Pages whose blocks run in a test of their own (through `run_python_blocks`)."""


@dataclass(frozen=True)
class Block:
    number: int
    code: str
    not_run: str | None  # the reason given in the marker, if any
    indexed: str | None  # the test file that runs it over an indexed corpus, if any


def python_blocks(page: str) -> list[Block]:
    """The page's ```python blocks, in order, each with its not-run reason (None: it runs)."""
    return [
        Block(number, match["code"], match["reason"], match["indexed"])
        for number, match in enumerate(BLOCK.finditer(page), start=1)
    ]


def run_python_blocks(path: Path, *, indexed: bool = False) -> int:
    """Run the page's blocks in order, as one script (later blocks see earlier names); the number
    that ran. A failure names the page and the block. `indexed`: run only the blocks that need an
    indexed corpus (the caller provides one), else only the others."""
    namespace: dict[str, object] = {"__name__": f"doc:{path.name}"}
    ran = 0
    for block in python_blocks(path.read_text(encoding="utf-8")):
        if block.not_run is None and (block.indexed is not None) == indexed:
            exec(compile(block.code, f"{path}: python block {block.number}", "exec"), namespace)
            ran += 1
    return ran


def provide_models(tmp_path: Path, exported_model: ModelManifest, mp: pytest.MonkeyPatch) -> None:
    """A data dir as `seams model export` leaves it, the working folder empty: the real ONNX
    export and a static model (a tiny stand-in in the distiller's format: real distillation takes
    minutes here)."""
    mp.setenv("SEAMS_DATA_DIR", str(tmp_path / "data"))
    mp.chdir(tmp_path)
    default_model_dir().parent.mkdir(parents=True)
    default_model_dir().symlink_to(exported_model.directory, target_is_directory=True)
    write_tiny_static_model(default_static_dir(), exported_model.directory / "tokenizer.json")


# --- (a) the site builds -------------------------------------------------------------------------


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).parent / "mkdocs"
    config, site = ROOT / "mkdocs.yml", tmp_path / "site"
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line]
    assert done.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(
        warnings or done.stderr.splitlines()[-20:]
    )
    assert (site / "configuration" / "index.html").is_file()


def test_the_home_page_links_every_page() -> None:
    """docs/index.md is where a reader starts: every page of the site is reachable from it."""
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in DOCS.glob("*.md") if p.name != "index.md")
    assert [p for p in pages if f"]({p}" not in home] == []


# --- (b) the configuration reference is current -----------------------------------------------


def test_the_configuration_reference_is_generated_from_the_settings_models() -> None:
    spec = importlib.util.spec_from_file_location("gen_config", DOCS / "gen_config.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    committed = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert committed == generator.render(), (
        "docs/configuration.md is not what the settings models say: run "
        f"`{generator.COMMAND}` and commit docs/configuration.md"
    )


# --- (c) every python block runs ------------------------------------------------------------------


@pytest.fixture
def models_in_a_fresh_data_dir(
    tmp_path: Path, exported_model: ModelManifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    provide_models(tmp_path, exported_model, monkeypatch)


def test_not_run_markers_are_few_and_say_why() -> None:
    skipped = [
        (page.name, block)
        for page in PAGES
        for block in python_blocks(page.read_text(encoding="utf-8"))
        if block.not_run is not None
    ]
    assert all(block.not_run.strip() for _, block in skipped), skipped
    assert len(skipped) <= MAX_NOT_RUN, f"too many blocks marked not run: {skipped}"


def test_blocks_over_an_indexed_corpus_name_the_test_that_runs_them() -> None:
    for page in PAGES:
        for block in python_blocks(page.read_text(encoding="utf-8")):
            if block.indexed is not None:
                runner_file = ROOT / block.indexed
                assert runner_file.is_file(), f"{page.name} block {block.number}: {block.indexed}"
                source = runner_file.read_text(encoding="utf-8")
                assert page.name in source and "indexed=True" in source, runner_file


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(page, id=page.relative_to(ROOT).as_posix())
        for page in PAGES
        if page not in DEDICATED and python_blocks(page.read_text(encoding="utf-8"))
    ],
)
def test_every_python_block_of_the_page_runs(page: Path, models_in_a_fresh_data_dir: None) -> None:
    assert run_python_blocks(page) >= 1


def test_the_readme_has_a_python_block_that_runs() -> None:
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert [b for b in blocks if b.not_run is None], "README.md: the library in five lines"


# --- (d) the demo summary in the README is what `seams run` prints -------------------------------

KEY = re.compile(r"\b\d{8}-\d{6}-(?:[a-z0-9_-]+-)?[0-9a-f]{8}\b")
PATH = re.compile(r"(?:…)?/[^\s,()]+")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
SINGULAR = re.compile(r"\bN [a-z]+s\b")


def _singular(match: re.Match[str]) -> str:
    word = match.group()
    return word[:-2] if word.endswith(("ches", "shes", "xes", "ses", "zes")) else word[:-1]


LABEL = re.compile(r"^([a-z][a-z ]*[a-z]):")


def summary_shape(text: str) -> list[str]:
    """The summary's lines with paths, numbers and batch keys blanked; the progress lines
    (`seams: ...`) by their first word, as their paths and ids differ from run to run."""
    shape = []
    for line in text.splitlines():
        if line.startswith("seams: "):
            shape.append("seams: " + line.split()[1])
        elif LABEL.match(line) or line.startswith(" "):
            blanked = NUMBER.sub("N", PATH.sub("PATH", KEY.sub("KEY", line))).rstrip()
            shape.append(SINGULAR.sub(_singular, blanked))  # `1 file` and `7 files` alike
    return shape


def readme_demo_block() -> str:
    fences = re.findall(r"^```(\w*)\n(.*?)^```$", README.read_text(encoding="utf-8"), re.S | re.M)
    (block,) = [text for _, text in fences if re.search(r"^batches: ", text, re.M)]
    # The README shows the commands as they are typed in the checkout.
    return block.replace(".venv/bin/seams", runner.seams_command()).replace(
        ".venv/bin/python", runner.python_command()
    )


@pytest.mark.slow
def test_the_readme_demo_summary_has_the_lines_seams_run_prints(
    instance: dg.DagsterInstance, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "kitchen_science.md").write_bytes(
        (runner.SAMPLE_CORPUS / "kitchen_science.md").read_bytes()
    )
    assert cli.main(["run", str(folder)]) == 0
    printed = capsys.readouterr().out
    documented = summary_shape(readme_demo_block())
    labels = [m[1] for m in map(LABEL.match, documented) if m and m[1] != "seams"]
    assert labels == ["batches", "documents", "chunks", "embeddings", "throughput", "look at them"]
    assert summary_shape(printed) == documented, (
        "README.md's demo block no longer matches what `seams run` prints: paste the summary of "
        "a fresh `make demo` into README.md\n--- printed:\n" + printed
    )
