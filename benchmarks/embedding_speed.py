"""Embedding speed per model size, and the packaged default's `chunk_text` before/after a change.

1. Texts per second of `OnnxEmbedder.embed` for all-MiniLM-L6-v2 (the packaged export: 6
   layers, hidden 384) and for tiny sentence-transformers models built from seed 0 (2 layers,
   hidden 32: WordPiece/mean/128, WordPiece/CLS/Dense 96/prompts/512, Unigram/XLM-R/mean/512;
   `tests/support/tiny_models.py`, exported to ONNX once), on the CPU with one onnxruntime
   thread and with onnxruntime's default, over the same sentences (one sentence per text, as the
   candidates are embedded). Each figure is the median of `--runs` timed calls after a warm-up.
2. The packaged default end to end: `chunk_text` with `ChunkingConfig()` and `OnnxEmbedder()`,
   in words per second, with the working tree's `models/` and, with `--reference REV`, with
   `models/` of git revision REV (loaded under another module name, the same model files), in
   interleaved rounds so both see the same machine load; the ratio is the median of per-round
   ratios. The vectors of both are compared too (they must be equal).

    .venv/bin/python -m benchmarks.embedding_speed --reference HEAD~1 \\
        --json benchmarks/results/embedding_speed.json

Needs the packaged export in the data dir (`seams model export`) and, for the tiny models, the
`export` extra (torch, sentence-transformers); with `--no-tiny` only MiniLM is measured.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.header import write_result  # noqa: E402

REFERENCE_MODULE = "_seams_reference_models"
SAMPLE = ROOT / "orchestration" / "sample_corpus"
TINY = ("bert-mean-128", "bert-cls-dense96-prompts-512", "unigram-xlmr-mean-512")


def sample_text(words: int) -> str:
    """The first `words` words of the bundled sample corpus's prose (paragraphs kept)."""
    paragraphs: list[str] = []
    count = 0
    for path in sorted(SAMPLE.glob("*.md")) + sorted(SAMPLE.glob("*.txt")):
        for paragraph in path.read_text(encoding="utf-8").split("\n\n"):
            paragraphs.append(paragraph.strip())
            count += len(paragraph.split())
            if count >= words:
                return "\n\n".join(paragraphs)
    return "\n\n".join(paragraphs)


def sentences(text: str, limit: int) -> list[str]:
    """Up to `limit` sentences of `text`, as the pipeline's candidates cut them."""
    from seams.chunking import ChunkingConfig, candidate_texts, segment
    from seams.models.embedders import OnnxEmbedder

    found = segment(text, ChunkingConfig(), OnnxEmbedder().count_tokens)
    return candidate_texts(text, found)[:limit]


def median_seconds(call: Callable[[], object], runs: int) -> float:
    call()  # warm-up: session, tokenizer, caches
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def tiny_models(folder: Path) -> dict[str, Path]:
    """The tiny models, built from seed 0 and exported once under `folder`."""
    from seams.models.model_export import export_folder
    from tests.support.tiny_models import MODELS

    out = {}
    for name in TINY:
        source = MODELS[name](folder / name)
        out[name] = export_folder(source, models_dir=folder / "exports").directory
    return out


def embedding_speed(
    texts: list[str], runs: int, *, tiny: bool, workdir: Path
) -> list[dict[str, Any]]:
    from seams.models.embedders import OnnxEmbedder
    from seams.models.model_store import default_model_dir

    models: dict[str, Path] = {"all-MiniLM-L6-v2": default_model_dir()}
    if tiny:
        models.update(tiny_models(workdir))
    rows = []
    for name, directory in models.items():
        for threads in (1, 0):
            embedder = OnnxEmbedder(model_dir=str(directory), intra_op_threads=threads)
            seconds = median_seconds(lambda e=embedder: e.embed(texts), runs)
            rows.append(
                {
                    "model": name,
                    "dims": embedder.dims,
                    "window": embedder.window_tokens,
                    "threads": "1" if threads == 1 else "default",
                    "texts": len(texts),
                    "median_seconds": round(seconds, 4),
                    "texts_per_second": round(len(texts) / seconds, 1),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


def load_reference(revision: str) -> Any:
    """`models/` of git `revision` as the package `REFERENCE_MODULE` (its imports of
    `seams.models` rewritten); everything else (chunking, errors) is the working tree's."""
    listed = _git("ls-tree", "--name-only", f"{revision}:models")
    if listed.returncode != 0:
        raise SystemExit(f"--reference {revision}: {listed.stderr.strip() or 'not a revision'}")
    folder = Path(tempfile.mkdtemp(prefix="seams-reference-models-")) / REFERENCE_MODULE
    folder.mkdir()
    for name in listed.stdout.split():
        if name.endswith(".py"):
            source = _git("show", f"{revision}:models/{name}").stdout
            source = source.replace("seams.models", REFERENCE_MODULE)
            (folder / name).write_text(source, encoding="utf-8")
    sys.path.insert(0, str(folder.parent))
    return importlib.import_module(f"{REFERENCE_MODULE}.embedders")


def end_to_end(text: str, rounds: int, reference: str | None) -> dict[str, Any]:
    """Words per second of `chunk_text` with the packaged default, current vs `reference`."""
    from seams.chunking import ChunkingConfig, chunk_text
    from seams.models.embedders import OnnxEmbedder

    words = len(text.split())
    embedders: dict[str, Any] = {"current": OnnxEmbedder()}
    if reference:
        embedders[f"reference {reference}"] = load_reference(reference).OnnxEmbedder()
    for embedder in embedders.values():  # warm-up, and the same chunks from both
        chunk_text(text, document_id="sample", config=ChunkingConfig(), embed=embedder)
    results: dict[str, list[float]] = {name: [] for name in embedders}
    for _ in range(rounds):
        for name, embedder in embedders.items():
            start = time.perf_counter()
            chunk_text(text, document_id="sample", config=ChunkingConfig(), embed=embedder)
            results[name].append(time.perf_counter() - start)
    out: dict[str, Any] = {"words": words, "rounds": rounds}
    for name, times in results.items():
        out[name] = {
            "median_seconds": round(statistics.median(times), 3),
            "words_per_second": round(words / statistics.median(times), 1),
        }
    if reference:
        name = f"reference {reference}"
        ratios = [a / b for a, b in zip(results["current"], results[name], strict=True)]
        out["time_ratio_current_to_reference"] = round(statistics.median(ratios), 3)
        probe = sentences(text, 64)
        same = np.array_equal(embedders["current"].embed(probe), embedders[name].embed(probe))
        out["same_vectors"] = bool(same)
    print(json.dumps(out), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed calls per figure (median)")
    parser.add_argument("--texts", type=int, default=256, help="sentences embedded per call")
    parser.add_argument("--words", type=int, default=1500, help="words of chunk_text's input")
    parser.add_argument("--reference", help="git revision whose models/ to compare against")
    parser.add_argument("--no-tiny", action="store_true", help="MiniLM only (no torch needed)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    text = sample_text(args.words)
    with tempfile.TemporaryDirectory(prefix="seams-embedding-speed-") as workdir:
        speed = embedding_speed(
            sentences(text * 4, args.texts), args.runs, tiny=not args.no_tiny, workdir=Path(workdir)
        )
    result = {
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "embedding_speed": speed,
        "chunk_text_packaged_default": end_to_end(text, args.runs, args.reference),
    }
    write_result(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
