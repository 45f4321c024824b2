"""Tiny sentence-transformers models built from a fixed seed (no download), for the tests of
any-model support: WordPiece, SentencePiece-style Unigram and byte-level BPE tokenizers; mean,
CLS and last-token pooling; a Dense layer to 96 dimensions; query/document prompts; windows of
128 and 512. `build_model` needs the `export` extra (torch, transformers, sentence-transformers).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

CORPUS = [
    "the river bank was flooded in spring and the town rebuilt the bank",
    "a central bank raised interest rates to slow the economy",
    "the model reads each token and writes an embedding of the text",
    "spring rain made the river rise over its banks",
    "ein Modell liest die Daten schnell und schreibt Vektoren",
    "le modèle lit les données et écrit des vecteurs",
]
WORDS = sorted({w for text in CORPUS for w in text.lower().split()})


def wordpiece() -> Tokenizer:
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


def unigram() -> Tokenizer:
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


def bpe() -> Tokenizer:
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
        # Wide random weights: with the usual 0.02, a CLS-pooled model gives every text (and
        # every prompt) nearly the same vector, and no test could tell a dropped prompt.
        "initializer_range": 0.5,
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
                vocab_size=vocab,
                n_embd=32,
                n_layer=2,
                n_head=2,
                n_positions=512,
                initializer_range=0.5,
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
    "bert-mean-128": lambda f: build_model(f, tokenizer=wordpiece(), special=BERT_SPECIALS),
    "bert-cls-dense96-prompts-512": lambda f: build_model(
        f,
        tokenizer=wordpiece(),
        special=BERT_SPECIALS,
        pooling="cls",
        window=512,
        dense=96,
        prompts=PROMPTS,
    ),
    "unigram-xlmr-mean-512": lambda f: build_model(
        f, tokenizer=unigram(), special=SP_SPECIALS, kind="xlm-roberta", window=512
    ),
    "bpe-gpt2-lasttoken-128": lambda f: build_model(
        f, tokenizer=bpe(), special=BPE_SPECIALS, kind="gpt2", pooling="lasttoken"
    ),
}


def write_mean_pooling_layout(folder: Path, *, max_seq_length: int, config: str) -> None:
    """The files of a sentence-transformers folder around its weights: `modules.json` (a
    Transformer, then mean pooling), the pooling config, `sentence_bert_config.json` and
    `config.json` (`config`, as written)."""
    (folder / "1_Pooling").mkdir(parents=True, exist_ok=True)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_seq_length})
    )
    (folder / "config.json").write_text(config)


def tiny_bert_folder(
    factory: pytest.TempPathFactory, study: str, name: str, **options: Any
) -> Path:
    """A tiny WordPiece BERT (`build_model` with `options`) in a fresh folder `name` under a
    temp folder named after `study`, for a module's tests of a model folder in the pipeline;
    skipped without sentence-transformers."""
    pytest.importorskip("sentence_transformers")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder = factory.mktemp(study) / name
    return build_model(folder, tokenizer=wordpiece(), special=BERT_SPECIALS, **options)
