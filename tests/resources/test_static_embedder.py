"""StaticEmbedder and the offline distillation of the static boundary model.

Fast tests run on a small static model made here (random vectors over MiniLM's real tokenizer,
written in the distiller's format), so they need neither torch nor minutes of distillation.
The `export` tests distil the real model (model2vec over the packaged all-MiniLM-L6-v2), twice,
and prove the bytes identical. All run with networking unavailable to Python.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from seams.chunking import ChunkingConfig, chunk_text
from seams.errors import EmbeddingError, InputError
from seams.models.distill import DISTILL_PARAMS, distill_static_model
from seams.models.model_export import packaged_model_dir, write_tokenizer
from seams.models.model_store import (
    EMBEDDINGS_FILE,
    TOKENIZER_FILE,
    StaticManifest,
    default_static_dir,
    file_sha256,
    load_static_manifest,
)
from seams.models.static_runtime import clear_static_cache
from seams.resources.static_embedder import StaticEmbedderResource
from tests.support.models import write_tiny_static_model
from tests.support.network import forbid_network

TINY_DIMS = 16


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any attempt to reach a non-local address (Unix sockets and loopback still work)."""
    forbid_network(monkeypatch)


def test_the_network_guard_works() -> None:
    with pytest.raises(OSError, match="attempted in a test"):
        socket.create_connection(("203.0.113.1", 443), timeout=0.1)
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock,
        pytest.raises(OSError, match="network access attempted"),
    ):
        sock.connect(("203.0.113.1", 443))


def make_static_model(folder: Path, dims: int = TINY_DIMS, seed: int = 7) -> StaticManifest:
    """A static model folder in the distiller's format: random rows over MiniLM's tokenizer
    (stored as the exporter stores it), the [UNK] row zeroed as distilled."""
    folder.mkdir(parents=True, exist_ok=True)
    write_tokenizer(packaged_model_dir() / TOKENIZER_FILE, folder / TOKENIZER_FILE)
    return write_tiny_static_model(folder, folder / TOKENIZER_FILE, dims, seed=seed, unknown_id=100)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> StaticEmbedderResource:
    folder = tmp_path_factory.mktemp("static") / "model"
    make_static_model(folder)
    return StaticEmbedderResource(model_dir=str(folder))


TEXTS = [
    "The cat purrs when it is content.",
    "Rockets burn liquid oxygen and kerosene.",
    "",
    "🙂",
    "A much longer text " * 200,
    "Ünïcödé façade naïve café",
]


def test_embeddings_are_float32_unit_rows(tiny: StaticEmbedderResource) -> None:
    vectors = tiny.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), TINY_DIMS) and vectors.dtype == np.float32
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert tiny.embed([]).shape == (0, TINY_DIMS)


def test_embedding_is_the_normalised_mean_of_token_rows(tiny: StaticEmbedderResource) -> None:
    text = TEXTS[0]
    manifest = tiny.manifest
    matrix = np.load(manifest.embeddings_path).astype(np.float32)
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(str(manifest.tokenizer_path)).encode(text, add_special_tokens=False)
    expected = matrix[ids.ids].mean(axis=0)
    expected /= np.linalg.norm(expected)
    np.testing.assert_allclose(tiny.embed([text])[0], expected, atol=1e-6)


def test_deterministic_and_independent_of_batch_neighbours(tiny: StaticEmbedderResource) -> None:
    alone = np.stack([tiny.embed([t])[0] for t in TEXTS])
    together = tiny.embed(TEXTS)
    assert np.array_equal(alone, together)
    assert np.array_equal(tiny(TEXTS), together)  # __call__ is embed


def test_texts_without_known_tokens_get_one_fixed_unit_vector(tiny: StaticEmbedderResource) -> None:
    empty, emoji = tiny.embed(["", "🙂"])
    assert np.array_equal(empty, emoji)
    assert empty[0] == 1.0 and np.count_nonzero(empty) == 1


def test_count_tokens_is_minilm_word_pieces(tiny: StaticEmbedderResource, minilm_counter) -> None:
    assert tiny.count_tokens(TEXTS) == minilm_counter(TEXTS)
    assert tiny.count_tokens(["Hello world"]) == [2]


def test_model_id_is_the_sha256_of_the_vectors(tiny: StaticEmbedderResource) -> None:
    assert tiny.model_id == file_sha256(tiny.manifest.embeddings_path)
    assert len(tiny.model_id) == 64 and tiny.dims == TINY_DIMS


def test_input_errors(tiny: StaticEmbedderResource) -> None:
    with pytest.raises(InputError, match="texts"):
        tiny.embed("not a list")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"texts\[1\]"):
        tiny.embed(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(InputError, match="texts"):  # not one count per character
        tiny.count_tokens("not a list")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"texts\[1\]"):
        tiny.count_tokens(["ok", 3])  # type: ignore[list-item]


def test_missing_and_corrupt_models_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="seams model export") as missing:
        StaticEmbedderResource(model_dir=str(tmp_path / "nowhere")).embed(["x"])
    # A library user without the `seams` command learns the Python way too, in the same line.
    assert "distill_static_model()" in str(missing.value) and "\n" not in str(missing.value)
    folder = tmp_path / "model"
    make_static_model(folder)
    data = bytearray((folder / EMBEDDINGS_FILE).read_bytes())
    data[-1] ^= 0xFF
    (folder / EMBEDDINGS_FILE).write_bytes(bytes(data))
    clear_static_cache()
    with pytest.raises(EmbeddingError, match=r"embeddings\.npy is corrupt"):
        StaticEmbedderResource(model_dir=str(folder)).embed(["x"])


def test_default_folder_is_under_the_data_dir() -> None:
    assert default_static_dir().name == "all-MiniLM-L6-v2-static"
    assert StaticEmbedderResource().resolved_model_dir() == default_static_dir()


def test_usable_as_the_chunkers_embedder(tiny: StaticEmbedderResource) -> None:
    text = "\n\n".join(f"Sentence number {i} talks about topic {i % 3}." for i in range(30))
    chunks = chunk_text(
        text,
        document_id="doc",
        config=ChunkingConfig.preset(
            "fast", chunk_size_min=8, chunk_size_target=40, chunk_size_max=60
        ),
        embed=tiny,
        token_counter=tiny.count_tokens,
    )
    assert len(chunks) > 1 and all(c.boundary_method == "semantic" for c in chunks)
    assert all(c.text == text[c.start_char : c.end_char] for c in chunks)


def test_hot_path_imports_neither_torch_nor_model2vec(tiny: StaticEmbedderResource) -> None:
    code = (
        "import sys\n"
        "from seams.resources.static_embedder import StaticEmbedderResource\n"
        f"model = StaticEmbedderResource(model_dir={str(tiny.resolved_model_dir())!r})\n"
        "model.embed(['hi there'])\n"
        "heavy = [m for m in ('torch', 'model2vec', 'transformers', 'skeletoken') "
        "if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""


@pytest.fixture(scope="module")
def minilm_counter():
    from seams.chunking import load_token_counter

    return load_token_counter(packaged_model_dir() / TOKENIZER_FILE)


# --- the real distillation (needs the export extra; minutes on a busy 2-core machine) ---------
@pytest.mark.slow
@pytest.mark.export
def test_the_real_distillation_is_byte_identical_idempotent_and_a_good_boundary_model(
    isolated_environment: Path, tmp_path: Path
) -> None:
    """One test for the two real distillations it needs (each tens of seconds): a fixture
    shared by two tests was built twice when xdist ran them apart."""
    distilled = distill_static_model()
    _byte_identical_and_idempotent(distilled, tmp_path)
    _a_good_boundary_model()


def _byte_identical_and_idempotent(distilled: StaticManifest, tmp_path: Path) -> None:
    again = distill_static_model(tmp_path / "again", force=True)
    assert again.distilled_now
    names = sorted(p.name for p in distilled.directory.iterdir())
    assert names == sorted(p.name for p in again.directory.iterdir())
    assert names == ["embeddings.npy", "manifest.json", "tokenizer.json"]
    for name in names:
        assert (distilled.directory / name).read_bytes() == (again.directory / name).read_bytes()
    assert again.model_id == distilled.model_id
    reused = distill_static_model()
    assert not reused.distilled_now and reused.model_id == distilled.model_id


def _a_good_boundary_model() -> None:
    manifest = load_static_manifest(default_static_dir())
    assert manifest.dims == 256 and manifest.vocab_size == 30522
    assert manifest.source["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert manifest.versions["model2vec"] != "absent"
    assert manifest.distill == DISTILL_PARAMS
    assert manifest.fidelity["min_cosine"] >= 0.999
    size = manifest.embeddings_path.stat().st_size
    assert 14e6 < size < 17e6
    embedder = StaticEmbedderResource()
    cats = ["The cat purrs when the cat is content.", "A cat grooms its fur with a rough tongue."]
    rockets = [
        "The rocket burns kerosene at launch.",
        "The rocket booster lands on a barge after launch.",
    ]
    vectors = embedder.embed(cats + rockets)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    sims = vectors @ vectors.T
    within, across = (sims[0, 1] + sims[2, 3]) / 2, sims[:2, 2:].mean()
    assert within > across + 0.2  # measured: 0.51 vs 0.12
    assert embedder.model_id == manifest.model_id
