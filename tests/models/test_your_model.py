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
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from seams.errors import ConfigError
from seams.models.embedders import OnnxEmbedder
from seams.models.model_folder import VectorRecipe, read_modules
from seams.models.model_store import ModelManifest, file_sha256, load_manifest
from seams.models.onnx_runtime import load_runtime, special_frame, split_windows

TEXTS = [
    "the river bank was flooded in spring",
    "a bank raised its rates",
    "models read the data quickly",
    "",
    "The Token of the River",
    "data data data model embedding token river bank spring rates",
]
CORPUS = [
    "the river bank was flooded in spring and the town rebuilt the bank",
    "a central bank raised interest rates to slow the economy",
    "the model reads each token and writes an embedding of the text",
    "spring rain made the river rise over its banks",
    "ein Modell liest die Daten schnell und schreibt Vektoren",
    "le modèle lit les données et écrit des vecteurs",
]
WORDS = sorted({w for text in CORPUS for w in text.lower().split()})


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return np.einsum("nd,nd->n", a, b)


# --------------------------------------------------------------------------- tiny models


def _wordpiece() -> Tokenizer:
    from tokenizers import models, normalizers, pre_tokenizers, processors

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces = sorted({c for w in WORDS for c in w} | {f"##{c}" for w in WORDS for c in w})
    vocab = {t: i for i, t in enumerate(specials + WORDS[::2] + pieces)}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return tok


def _unigram() -> Tokenizer:
    """A SentencePiece-style Unigram tokenizer (Metaspace, <s> ... </s>), trained here."""
    from tokenizers import models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(
        vocab_size=120, special_tokens=["<s>", "<pad>", "</s>", "<unk>"], unk_token="<unk>"
    )
    tok.train_from_iterator(CORPUS * 4, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))],
    )
    return tok


def _bpe() -> Tokenizer:
    """A byte-level BPE tokenizer whose post-processor only appends an end token."""
    from tokenizers import decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS * 4, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="$A <|endoftext|>",
        special_tokens=[("<|endoftext|>", tok.token_to_id("<|endoftext|>"))],
    )
    return tok


def build_model(
    folder: Path,
    *,
    tokenizer: Tokenizer,
    special: dict[str, str],
    kind: str = "bert",
    pooling: str = "mean",
    window: int = 128,
    dense: int | None = None,
    prompts: dict[str, str] | None = None,
) -> Path:
    """Save a random-weight sentence-transformers model (seed 0) into `folder`."""
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    try:  # sentence-transformers 6; 5 has them under `models`
        from sentence_transformers.sentence_transformer import modules as st_models
    except ImportError:
        from sentence_transformers import models as st_models  # type: ignore[no-redef]

    transformers.logging.set_verbosity_error()
    hf = folder.with_name(folder.name + "-hf")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, **special)
    fast.save_pretrained(hf)
    vocab = tokenizer.get_vocab_size()
    torch.manual_seed(0)
    common = {
        "vocab_size": vocab,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
    }
    if kind == "bert":
        model = transformers.BertModel(
            transformers.BertConfig(**common, max_position_embeddings=512)
        )
    elif kind == "xlm-roberta":
        pad = tokenizer.token_to_id("<pad>")
        model = transformers.XLMRobertaModel(
            transformers.XLMRobertaConfig(
                **common, max_position_embeddings=514, pad_token_id=pad, type_vocab_size=1
            )
        )
    else:
        model = transformers.GPT2Model(
            transformers.GPT2Config(
                vocab_size=vocab, n_embd=32, n_layer=2, n_head=2, n_positions=512
            )
        )
    model.save_pretrained(hf)
    modules = [
        st_models.Transformer(str(hf), max_seq_length=window),
        st_models.Pooling(32, pooling_mode=pooling),
    ]
    if dense:
        modules.append(st_models.Dense(32, dense))
    modules.append(st_models.Normalize())
    SentenceTransformer(modules=modules, prompts=prompts or {}, device="cpu").save(str(folder))
    shutil.rmtree(hf)
    return folder


BERT_SPECIALS = {
    "unk_token": "[UNK]",
    "pad_token": "[PAD]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}
SP_SPECIALS = {"unk_token": "<unk>", "pad_token": "<pad>", "bos_token": "<s>", "eos_token": "</s>"}
BPE_SPECIALS = {"pad_token": "<|pad|>", "eos_token": "<|endoftext|>"}
PROMPTS = {"query": "query: ", "document": "passage: "}

MODELS: dict[str, Callable[[Path], Path]] = {
    "bert-mean-128": lambda f: build_model(f, tokenizer=_wordpiece(), special=BERT_SPECIALS),
    "bert-cls-dense96-prompts-512": lambda f: build_model(
        f,
        tokenizer=_wordpiece(),
        special=BERT_SPECIALS,
        pooling="cls",
        window=512,
        dense=96,
        prompts=PROMPTS,
    ),
    "unigram-xlmr-mean-512": lambda f: build_model(
        f, tokenizer=_unigram(), special=SP_SPECIALS, kind="xlm-roberta", window=512
    ),
    "bpe-gpt2-lasttoken-128": lambda f: build_model(
        f, tokenizer=_bpe(), special=BPE_SPECIALS, kind="gpt2", pooling="lasttoken"
    ),
}


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
        (_wordpiece, ["[CLS]"], ["[SEP]"]),
        (_unigram, ["<s>"], ["</s>"]),
        (_bpe, [], ["<|endoftext|>"]),
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
