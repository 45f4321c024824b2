"""Any sentence-transformers model through `OnnxEmbedder`: vectors equal sentence-transformers'
own `encode` for models built here from a fixed seed (no download), and the packaged MiniLM
embeds exactly as before.

The tiny models (hidden size 32, two layers) cover what a folder decides: the tokenizer's kind
and special tokens (WordPiece with [CLS]/[SEP], SentencePiece-style Unigram with <s>/</s>,
byte-level BPE with only an end token), pooling (mean, CLS, last token), a Dense projection to
96 dimensions, query/document prompts, and windows of 128 and 512 tokens. Building and exporting
one takes about a second; tests that need torch are marked `export`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from seams.errors import ConfigError
from seams.models.embedders import OnnxEmbedder
from seams.models.model_folder import VectorRecipe, read_modules
from seams.models.model_store import ModelManifest, file_sha256, load_manifest
from seams.models.onnx_runtime import load_runtime, special_frame, split_windows
from tests.support.tiny_models import CORPUS, MODELS, bpe, unigram, wordpiece

TEXTS = [
    "the river bank was flooded in spring",
    "a bank raised its rates",
    "models read the data quickly",
    "",
    "The Token of the River",
    "data data data model embedding token river bank spring rates",
]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return np.einsum("nd,nd->n", a, b)


@pytest.fixture(scope="module")
def st_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("sentence_transformers")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    root = tmp_path_factory.mktemp("your-models")
    return {name: build(root / name) for name, build in MODELS.items()}


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("exports")


def _reference(folder: Path, texts: list[str], prompt_name: str | None) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu")
    return model.encode(texts, prompt_name=prompt_name, convert_to_numpy=True)


# --------------------------------------------------------------------------- fidelity


@pytest.mark.export
@pytest.mark.parametrize("name", list(MODELS))
def test_vectors_equal_sentence_transformers(
    name: str, st_folders: dict[str, Path], models_dir: Path
) -> None:
    from seams.models.model_export import export_folder

    folder = st_folders[name]
    export = export_folder(folder, models_dir=models_dir)
    embedder = OnnxEmbedder(model_dir=str(export.directory))
    reference_dims = _reference(folder, TEXTS[:1], None).shape[1]
    assert embedder.dims == reference_dims == (96 if "dense96" in name else 32)
    assert embedder.window_tokens == int(name.rsplit("-", 1)[-1])
    prompted = "prompts" in name
    plain = _reference(folder, TEXTS, None)
    spread = plain @ plain.T
    assert spread[np.triu_indices(len(TEXTS), 1)].min() < 0.99, "texts must get distinct vectors"
    if prompted:  # else a dropped prompt would still pass the fidelity bound below
        assert _cosines(plain, _reference(folder, TEXTS, "query")).min() < 0.99
    for prompt_name, ours in (
        ("document" if prompted else None, embedder.embed(TEXTS)),
        ("query" if prompted else None, embedder.embed_queries(TEXTS)),
    ):
        cosines = _cosines(ours, _reference(folder, TEXTS, prompt_name))
        assert cosines.min() >= 0.999, (name, prompt_name, cosines)
        assert np.allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-5)


@pytest.mark.export
def test_prompts_are_read_from_the_folder_and_can_be_overridden(
    st_folders: dict[str, Path], models_dir: Path
) -> None:
    from seams.models.model_export import export_folder

    folder = st_folders["bert-cls-dense96-prompts-512"]
    export = export_folder(folder, models_dir=models_dir)
    embedder = OnnxEmbedder(model_dir=str(export.directory))
    assert embedder.resolved_query_prompt() == "query: "
    assert embedder.resolved_document_prompt() == "passage: "
    queries, documents = embedder.embed_queries(TEXTS[:3]), embedder.embed(TEXTS[:3])
    assert not np.allclose(queries, documents, atol=1e-4)  # the prompts change the vectors
    bare = OnnxEmbedder(model_dir=str(export.directory), query_prompt="", document_prompt="")
    assert np.allclose(bare.embed_queries(TEXTS[:3]), bare.embed(TEXTS[:3]), atol=1e-6)
    assert _cosines(bare.embed(TEXTS[:3]), _reference(folder, TEXTS[:3], None)).min() >= 0.999
    other = OnnxEmbedder(model_dir=str(export.directory), document_prompt="search_document: ")
    ref = _reference_with_prompt(folder, TEXTS[:3], "search_document: ")
    assert _cosines(other.embed(TEXTS[:3]), ref).min() >= 0.999
    # The document prompt makes the index vectors: it is part of the model's id.
    assert len({embedder.model_id, bare.model_id, other.model_id}) == 3


def _reference_with_prompt(folder: Path, texts: list[str], prompt: str) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu").encode(texts, prompt=prompt)


@pytest.mark.export
def test_export_is_deterministic_and_reused(
    st_folders: dict[str, Path], tmp_path: Path, models_dir: Path
) -> None:
    from seams.models.model_export import export_folder

    folder = st_folders["bert-cls-dense96-prompts-512"]
    first = export_folder(folder, tmp_path / "a")
    second = export_folder(folder, tmp_path / "b")
    assert first.exported_now and second.exported_now
    assert first.model_id == second.model_id
    assert first.extra_files == second.extra_files
    again = export_folder(folder, tmp_path / "a")
    assert not again.exported_now and again.model_id == first.model_id
    assert load_manifest(tmp_path / "a").recipe == read_modules(folder)[1]


@pytest.mark.export
def test_a_sentence_transformers_folder_is_exported_on_first_use(
    st_folders: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEAMS_DATA_DIR", str(tmp_path / "data"))
    folder = st_folders["bert-mean-128"]
    embedder = OnnxEmbedder(model_dir=str(folder))
    vectors = embedder.embed(TEXTS)
    assert _cosines(vectors, _reference(folder, TEXTS, None)).min() >= 0.999
    exports = list((tmp_path / "data" / "models").glob("bert-mean-128-*/manifest.json"))
    assert len(exports) == 1
    assert not any(folder.glob("*.onnx"))  # the user's folder is never written to


@pytest.mark.export
def test_a_folder_with_its_own_onnx_graph_is_used_as_is(
    st_folders: dict[str, Path], tmp_path: Path, models_dir: Path
) -> None:
    """An Optimum-style folder (model.onnx + tokenizer.json beside the model's configuration)
    runs without export; a sentence-transformers repository's `onnx/model.onnx` too."""
    from seams.models.model_export import export_folder

    source = st_folders["unigram-xlmr-mean-512"]
    export = export_folder(source, models_dir=models_dir)
    for graph in ("model.onnx", "onnx/model.onnx"):
        folder = tmp_path / graph.replace("/", "-")
        shutil.copytree(source, folder)
        (folder / graph).parent.mkdir(exist_ok=True)
        shutil.copy(export.directory / "model.onnx", folder / graph)
        embedder = OnnxEmbedder(model_dir=str(folder))
        assert embedder.model_id != export.variants["fp32"].sha256  # mean over a new window
        cosines = _cosines(embedder.embed(TEXTS), _reference(source, TEXTS, None))
        assert cosines.min() >= 0.999
        assert not (folder / "manifest.json").exists()


@pytest.mark.export
def test_long_texts_are_windowed_within_the_model_window(
    st_folders: dict[str, Path], models_dir: Path
) -> None:
    """A text longer than the window is the mean of windows that each fit it; the truncate
    mode equals sentence-transformers' truncation."""
    from seams.models.model_export import export_folder

    folder = st_folders["bert-mean-128"]
    export = export_folder(folder, models_dir=models_dir)
    long = " ".join(CORPUS * 8)
    truncating = OnnxEmbedder(model_dir=str(export.directory), long_text="truncate")
    ref = _reference(folder, [long], None)
    assert _cosines(truncating.embed([long]), ref).min() >= 0.999
    windowed = OnnxEmbedder(model_dir=str(export.directory)).embed([long])
    assert _cosines(windowed, ref).min() < 0.999  # the tail counts


# --------------------------------------------------------------------------- folder reading


def test_special_tokens_come_from_the_post_processor() -> None:
    for build, prefix, suffix in (
        (wordpiece, ["[CLS]"], ["[SEP]"]),
        (unigram, ["<s>"], ["</s>"]),
        (bpe, [], ["<|endoftext|>"]),
    ):
        tok = build()
        frame = special_frame(tok)
        assert [tok.id_to_token(i) for i in frame.prefix] == prefix
        assert [tok.id_to_token(i) for i in frame.suffix] == suffix


def test_pooling_and_window_are_read_not_assumed(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {
                    "idx": 0,
                    "name": "0",
                    "path": "",
                    "type": "sentence_transformers.models.Transformer",
                },
                {
                    "idx": 1,
                    "name": "1",
                    "path": "1_Pooling",
                    "type": "sentence_transformers.models.Pooling",
                },
            ]
        )
    )
    (folder / "sentence_bert_config.json").write_text(
        '{"max_seq_length": 384, "do_lower_case": true}'
    )
    (folder / "config.json").write_text(
        '{"max_position_embeddings": 514, "model_type": "xlm-roberta"}'
    )
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "q: ", "passage": "p: "}, "default_prompt_name": None})
    )
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 8, "pooling_mode_cls_token": True})
    )
    recipe = read_modules(folder)[1]
    assert recipe.pooling == ("cls",)
    assert recipe.steps == ()  # no Normalize module: Seams normalises anyway (same directions)
    assert (recipe.max_seq_length, recipe.max_positions, recipe.do_lower_case) == (384, 512, True)
    assert (recipe.query_prompt(), recipe.document_prompt()) == ("q: ", "p: ")
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode": "weightedmean"}')
    with pytest.raises(ConfigError, match="weightedmean"):
        read_modules(folder)


def test_an_old_manifest_reads_as_minilms_recipe(exported_model: ModelManifest) -> None:
    data = json.loads((exported_model.directory / "manifest.json").read_text())
    assert "recipe" not in data  # the packaged model's manifest is written as before
    assert load_manifest(exported_model.directory).recipe == VectorRecipe()


# --------------------------------------------------------------------------- the packaged model


def _previous_embed(manifest: ModelManifest, texts: list[str]) -> np.ndarray:
    """The embedding pipeline as it was before other models were supported, step for step:
    ids without specials, near-equal windows of 254, [CLS] ids [SEP] padded with 0, batches of
    32 sorted by length, masked-sum matmul, token-weighted mean, L2 norm."""
    runtime = load_runtime(manifest.variant_path("fp32"), manifest.tokenizer_path, cache=False)
    ids = [e.ids for e in runtime.tokenizer.encode_batch(texts, add_special_tokens=False)]
    owner, windows = [], []
    for index, row in enumerate(ids):
        parts = split_windows(row, 254)
        owner += [index] * len(parts)
        windows += parts
    owner_arr = np.asarray(owner)
    lengths = np.asarray([len(w) + 2 for w in windows], np.int64)
    order = np.argsort(lengths, kind="stable")
    sums = np.empty((len(windows), 384), np.float32)
    for start in range(0, len(order), 32):
        batch = order[start : start + 32]
        width = int(lengths[batch].max())
        input_ids = np.zeros((len(batch), width), np.int64)
        mask = np.zeros((len(batch), width), np.int64)
        for r, i in enumerate(batch):
            n = len(windows[i])
            input_ids[r, : n + 2] = [101, *windows[i], 102]
            mask[r, : n + 2] = 1
        feed = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": input_ids * 0}
        hidden = runtime.session.run(None, feed)[0]
        sums[batch] = np.matmul(mask[:, None, :].astype(np.float32), hidden)[:, 0, :]
    counts = lengths.astype(np.float32)
    if len(windows) == len(texts):
        means = sums / counts[:, None]
    else:
        totals = np.zeros((len(texts), 384), np.float32)
        np.add.at(totals, owner_arr, sums)
        means = totals / np.bincount(owner_arr, counts, len(texts)).astype(np.float32)[:, None]
    return (means / np.linalg.norm(means, axis=1, keepdims=True)).astype(np.float32)


def test_packaged_model_embeds_exactly_as_before(exported_model: ModelManifest) -> None:
    texts = [*TEXTS, *CORPUS, " ".join(CORPUS * 8), "Grüße aus Köln — 東京", "x" * 900]
    embedder = OnnxEmbedder(model_dir=str(exported_model.directory))
    assert np.array_equal(embedder.embed(texts), _previous_embed(exported_model, texts))
    assert np.array_equal(embedder.embed_queries(texts), embedder.embed(texts))  # no prompts
    assert embedder.model_id == file_sha256(exported_model.directory / "model.onnx")
    assert (embedder.dims, embedder.window_tokens) == (384, 256)
    assert OnnxEmbedder().model_id == embedder.model_id  # the data dir's default folder


# --------------------------------------------------------------------------- late chunking


@pytest.mark.export
def test_late_chunking_frames_windows_with_the_models_own_special_tokens(
    st_folders: dict[str, Path], models_dir: Path
) -> None:
    """A Unigram model's late vectors: each chunk is the mean of its tokens' states in a window
    framed <s> … </s> (as `embed` frames a text), here one window per document."""
    from seams.models.chunk_vectors import late_vectors
    from seams.models.model_export import export_folder

    export = export_folder(st_folders["unigram-xlmr-mean-512"], models_dir=models_dir)
    runtime = OnnxEmbedder(model_dir=str(export.directory)).runtime()
    text = " ".join(CORPUS[:3])
    cut = len(CORPUS[0])
    spans = [(0, cut), (cut + 1, len(text))]
    (late,) = late_vectors(runtime, [(text, spans)], max_tokens=512)
    encoding = runtime.tokenizer.encode(text, add_special_tokens=False)
    framed = [
        runtime.tokenizer.token_to_id("<s>"),
        *encoding.ids,
        runtime.tokenizer.token_to_id("</s>"),
    ]
    feed = {"input_ids": np.array([framed]), "attention_mask": np.ones((1, len(framed)), np.int64)}
    if "token_type_ids" in {i.name for i in runtime.session.get_inputs()}:
        feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
    states = runtime.session.run(None, feed)[0][0, 1:-1]
    for row, (start, end) in enumerate(spans):
        inside = [n for n, (a, b) in enumerate(encoding.offsets) if a < end and b > start]
        expected = states[inside].mean(axis=0)
        assert _cosines(late[row : row + 1], expected[None]).min() >= 0.99999


@pytest.mark.export
@pytest.mark.parametrize(
    ("name", "document_prompt", "problem"),
    [
        ("bert-cls-dense96-prompts-512", None, "pools by cls"),
        ("bpe-gpt2-lasttoken-128", None, "pools by lasttoken"),
        ("bert-mean-128", "passage: ", "document prompt"),
    ],
)
def test_late_chunking_refuses_a_model_it_cannot_run(
    name: str,
    document_prompt: str | None,
    problem: str,
    st_folders: dict[str, Path],
    models_dir: Path,
) -> None:
    from seams.models.chunk_vectors import check_late_model, late_vectors
    from seams.models.model_export import export_folder

    export = export_folder(st_folders[name], models_dir=models_dir)
    embedder = OnnxEmbedder(model_dir=str(export.directory), document_prompt=document_prompt)
    with pytest.raises(ConfigError, match=rf"retrieval\.mode: late .*{problem}.*use mode text"):
        if document_prompt:  # the asset passes the prompt it would index with
            check_late_model(embedder.runtime(), embedder.resolved_document_prompt())
        else:
            late_vectors(embedder.runtime(), [(CORPUS[0], [(0, 10)])])


# --------------------------------------------------------------------------- which model, by id


@pytest.mark.export
def test_an_index_models_id_finds_its_embedder_again(
    st_folders: dict[str, Path], exported_model: ModelManifest, tmp_path: Path
) -> None:
    """Queries reach an index of any model that built one: the packaged embedder finds the
    folder's model by the id the index holds (with the prompts it indexed with), and the
    folder's finds the packaged model; an unknown id is one error that says to backfill."""
    from seams.errors import EmbeddingError
    from seams.models.known_models import recalled_models, remember_model

    models = tmp_path / "models"
    shutil.copytree(exported_model.directory, models / "all-MiniLM-L6-v2")
    packaged = OnnxEmbedder(models_dir=str(models))
    folder = st_folders["bert-cls-dense96-prompts-512"]
    mine = OnnxEmbedder(model_dir=str(folder), models_dir=str(models), query_prompt="ask: ")
    with pytest.raises(EmbeddingError, match="run `seams backfill`"):
        packaged.for_model(mine.model_id)  # never indexed: unknown
    remember_model(mine, models)
    (known,) = recalled_models(models)
    assert (known.query_prompt, known.document_prompt) == ("ask: ", "passage: ")
    found = packaged.for_model(mine.model_id)
    assert found.model_id == mine.model_id
    assert np.array_equal(found.embed_queries(TEXTS[:2]), mine.embed_queries(TEXTS[:2]))
    assert mine.for_model(packaged.model_id).model_id == packaged.model_id
    assert packaged.for_model(packaged.model_id) is packaged
    with pytest.raises(EmbeddingError, match="run `seams backfill`"):
        packaged.for_model("0" * 64)


@pytest.mark.export
def test_any_model_falls_back_to_cpu_when_cuda_cannot_start(
    st_folders: dict[str, Path], models_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With onnxruntime-gpu installed the CUDA provider comes first for any model; when it
    cannot start, the same vectors come from the CPU (no GPU here: the CUDA path itself is not
    run by this suite)."""
    import onnxruntime as ort

    from seams.models.model_export import export_folder
    from seams.models.onnx_runtime import CPU_PROVIDER, CUDA_PROVIDER, clear_runtime_cache

    export = export_folder(st_folders["unigram-xlmr-mean-512"], models_dir=models_dir)
    reference = OnnxEmbedder(model_dir=str(export.directory)).embed(TEXTS)
    monkeypatch.setattr(ort, "get_available_providers", lambda: [CUDA_PROVIDER, CPU_PROVIDER])
    real_session = ort.InferenceSession
    asked: list[list[str]] = []

    def no_cuda(path: str, options: object, providers: list[str]) -> object:
        asked.append(list(providers))
        if CUDA_PROVIDER in providers:
            raise RuntimeError("libcudart.so.12: cannot open shared object file")
        return real_session(path, options, providers=providers)

    monkeypatch.setattr(ort, "InferenceSession", no_cuda)
    clear_runtime_cache()
    embedder = OnnxEmbedder(model_dir=str(export.directory))
    assert np.allclose(embedder.embed(TEXTS), reference, atol=1e-6)
    assert asked == [[CUDA_PROVIDER, CPU_PROVIDER], [CPU_PROVIDER]]
    assert embedder.providers == [CPU_PROVIDER]
    clear_runtime_cache()
