"""Seams' own work per word: the non-model path and the `fast` preset on one thread.

Where the embedding model is cheap (a GPU, or the `fast` preset's static model), what is left is
Seams' own Python: sentence candidates, token counting, similarities, the optimal segmenter,
assembly and ids. This measures it on held-out prose -- the five SQuAD articles of
`../shared/data` (paragraphs joined by a blank line, ~16.5k words; `--corpus manifesto` for two
party manifestos, ~43k words) -- with one thread (BLAS and OpenMP threads 1, the process pinned
to one CPU), in interleaved rounds, best and median of `--runs`:

- non-model path: `chunk_text` with the default config, the embedder a lookup of precomputed
  vectors (all-MiniLM-L6-v2 through `OnnxEmbedder` when its export is in the data dir, else
  fixed pseudo-random 384-d unit rows: the model's shape), the MiniLM token counter with a warm
  word cache. Goal >= 500k words/s.
- `fast` preset end to end: `chunk_text` with `ChunkingConfig.preset("fast")` and
  `StaticEmbedder` (warm caches). Goal <= 0.025 s per 10k words.
- reference, in the same rounds: one raw `StaticEmbedder` encode of the `fast` preset's
  candidate texts; ratios are medians of per-round ratios to it, so they compare across runs
  and machine loads. `--onnx` adds one raw `OnnxEmbedder` encode of the default config's texts
  and `chunk_text` with `OnnxEmbedder` (their ratio is Seams' own share on top of the model it
  calls), and one sentence-transformers `encode` of the same texts on one torch thread (batch
  32, the peers' way to embed them): goal for the default `chunk_text` <= 0.9x that encode.
  Slow on one thread.
- the non-model path's stages (segment with token counting, token counting alone,
  similarities, boundaries, assembly), best process CPU time of `--runs`.

The goals are stated in wall time; on a shared machine the best-of and the CPU column are the
steadier readings, and the load average is printed with them.

`--reference REV` loads `chunking/` of git revision REV beside the working tree's (under another
module name) and measures both in the same rounds, so "before" and "after" see the same load;
`--current-files` keeps the named files of the working tree in the reference, to isolate a
change from others made at the same time. The reference's `fast` preset embeds with REV's
`models/static_runtime.py` (over the same model files), and its raw encode is measured too.

    .venv/bin/python -m benchmarks.own_work
    .venv/bin/python -m benchmarks.own_work --reference 87368f0 \\
        --current-files segment.py sentence_rules.py config.py pages.py __init__.py \\
        --json benchmarks/results/own_work.json

The static model (and with `--onnx` the ONNX export) come from the data dir (`SEAMS_DATA_DIR`,
default ./.seams), distilled or exported first if missing (needs the `export` extra).
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")  # before numpy loads: one thread, as the goals are set
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.header import write_result  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data"
REFERENCE_MODULE = "_seams_reference_chunking"
REFERENCE_STATIC_MODULE = "_seams_reference_static_runtime"
DIMS = 384
NON_MODEL_GOAL_WORDS_PER_SECOND = 500_000
FAST_GOAL_SECONDS_PER_10K = 0.025
ST_GOAL_RATIO = 0.9
PATHS = ("non-model path", "fast preset")


# --- corpus -------------------------------------------------------------------------------------
def squad_prose(data: Path) -> str:
    """The five SQuAD articles, paragraphs joined by a blank line, articles likewise."""
    path = data / "squad-dev-5.json"
    if not path.is_file():
        raise SystemExit(f"{path} not found: pass the folder holding squad-dev-5.json with --data")
    payload = json.loads(path.read_text(encoding="utf-8"))
    return "\n\n".join(
        "\n\n".join(p["context"] for p in article["paragraphs"]) for article in payload["data"]
    )


def manifesto_prose(data: Path) -> str:
    """Two party manifestos (one sentence per line, coded units separated by `==========`):
    sentences joined by a space, units by a blank line."""
    texts = []
    for name in ("61320_200811", "61320_201211"):
        path = data / "manifesto" / f"{name}.txt"
        if not path.is_file():
            raise SystemExit(f"{path} not found: pass the folder holding manifesto/ with --data")
        units: list[list[str]] = [[]]
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line == "==========":
                units.append([])
            elif line:
                units[-1].append(line)
        texts.append("\n\n".join(" ".join(u) for u in units if u))
    return "\n\n".join(texts)


# --- the code under test -------------------------------------------------------------------------
def _git(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """`git ARGS` in the checkout, its output captured as text."""
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=check)


def load_reference(revision: str, current_files: Sequence[str]) -> ModuleType:
    """`chunking/` of git `revision` as the package `REFERENCE_MODULE` (its imports of
    `seams.chunking` rewritten), with `current_files` taken from the working tree instead."""
    listed = _git("ls-tree", "--name-only", f"{revision}:chunking")
    if listed.returncode != 0:
        raise SystemExit(f"--reference {revision}: {listed.stderr.strip() or 'not a revision'}")
    names = {n for n in listed.stdout.split() if n.endswith(".py")} | set(current_files)
    folder = Path(tempfile.mkdtemp(prefix="seams-reference-")) / REFERENCE_MODULE
    folder.mkdir()
    for name in sorted(names):
        if name in current_files:
            source = (ROOT / "chunking" / name).read_text(encoding="utf-8")
        else:
            source = _git("show", f"{revision}:chunking/{name}", check=True).stdout
        source = source.replace("seams.chunking", REFERENCE_MODULE)
        (folder / name).write_text(source, encoding="utf-8")
    sys.path.insert(0, str(folder.parent))
    return importlib.import_module(REFERENCE_MODULE)


def load_reference_static(revision: str) -> Callable[[list[str]], np.ndarray]:
    """An embed function over git `revision`'s `models/static_runtime.py` (loaded under another
    module name) and the current static model files: what the reference's `fast` preset ran."""
    from seams.models.embedders import StaticEmbedder
    from seams.models.inputs import check_texts

    shown = _git("show", f"{revision}:models/static_runtime.py")
    if shown.returncode != 0:
        raise SystemExit(f"--reference {revision}: {shown.stderr.strip() or 'no static runtime'}")
    folder = Path(tempfile.mkdtemp(prefix="seams-reference-static-"))
    (folder / f"{REFERENCE_STATIC_MODULE}.py").write_text(shown.stdout, encoding="utf-8")
    sys.path.insert(0, str(folder))
    module = importlib.import_module(REFERENCE_STATIC_MODULE)
    manifest = StaticEmbedder().manifest
    runtime = module.load_static_runtime(
        manifest.embeddings_path, manifest.tokenizer_path, cache=False
    )

    def embed(texts: list[str]) -> np.ndarray:
        check_texts(texts)  # as StaticEmbedder.embed does
        return runtime.embed(texts)

    return embed


def sentence_transformer() -> Any:
    """The packaged all-MiniLM-L6-v2 in sentence-transformers on one torch thread (the
    reference `encode`; needs the `export` extra)."""
    import torch
    from sentence_transformers import SentenceTransformer

    from seams.models.model_export import packaged_model_dir

    torch.set_num_threads(1)
    return SentenceTransformer(str(packaged_model_dir()), device="cpu")


def provision(onnx: bool) -> tuple[Any, Any | None]:
    """(StaticEmbedder, OnnxEmbedder on one thread or None), distilling/exporting if missing."""
    from seams.models.embedders import OnnxEmbedder, StaticEmbedder
    from seams.models.model_store import default_model_dir, default_static_dir

    if not (default_static_dir() / "manifest.json").is_file():
        from seams.models.distill import distill_static_model

        distill_static_model()
    onnx_embedder = None
    if onnx or (default_model_dir() / "manifest.json").is_file():
        if not (default_model_dir() / "manifest.json").is_file():
            from seams.models.model_export import export_model

            export_model(quantize=False)
        onnx_embedder = OnnxEmbedder(intra_op_threads=1)
    return StaticEmbedder(), onnx_embedder


def pseudo_vectors(texts: Sequence[str]) -> np.ndarray:
    """Fixed 384-d unit rows seeded by each text's sha256 (when the ONNX export is absent)."""
    rows = []
    for text in texts:
        seed = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8])
        rows.append(np.random.default_rng(seed).standard_normal(DIMS))
    array = np.asarray(rows, dtype=np.float32)
    return array / np.linalg.norm(array, axis=1, keepdims=True)


# --- timing --------------------------------------------------------------------------------------
def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def interleaved(systems: dict[str, Callable[[], object]], runs: int) -> dict[str, dict]:
    """Each system once per round, the order rotated every round so that drifting load hits
    all alike; one untimed warm-up call each first."""
    for fn in systems.values():
        fn()
    names = list(systems)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for number in range(runs):
        shift = number % len(names)
        for name in names[shift:] + names[:shift]:
            w, c = timed(systems[name])
            wall[name].append(w)
            cpu[name].append(c)
    return {n: {"wall": wall[n], "cpu": cpu[n]} for n in names}


def best_of(fn: Callable[[], object], runs: int) -> float:
    """Best process CPU seconds of `runs` calls (after one warm-up): a stage's own work, which
    other processes on a busy machine disturb far less than its wall time."""
    fn()
    return min(timed(fn)[1] for _ in range(runs))


# --- the measurement ---------------------------------------------------------------------------
def measure(args: argparse.Namespace) -> dict[str, Any]:
    import seams.chunking as current
    from seams.models.model_store import default_static_dir

    logging.getLogger("seams.chunking").setLevel(logging.ERROR)
    logging.getLogger(REFERENCE_MODULE).setLevel(logging.ERROR)
    doc = squad_prose(args.data) if args.corpus == "squad" else manifesto_prose(args.data)
    words = len(doc.split())
    static, onnx = provision(args.onnx)
    tokenizer_json = default_static_dir() / "tokenizer.json"
    impls: dict[str, ModuleType] = {"current": current}
    embedders: dict[str, Any] = {"current": static}
    if args.reference:
        impls["reference"] = load_reference(args.reference, args.current_files)
        embedders["reference"] = load_reference_static(args.reference)

    # What each implementation embeds, and one lookup table for the non-model path.
    counters = {key: impl.load_token_counter(tokenizer_json) for key, impl in impls.items()}
    default_texts: dict[str, list[str]] = {}
    for key, impl in impls.items():
        candidates = impl.segment(doc, impl.ChunkingConfig(), counters[key])
        default_texts[key] = impl.embedding_texts(doc, candidates, impl.ChunkingConfig())
    distinct = sorted({t for texts in default_texts.values() for t in texts})
    if onnx is not None:
        vectors, source = onnx.embed(distinct), "all-MiniLM-L6-v2 (OnnxEmbedder fp32)"
    else:
        vectors, source = pseudo_vectors(distinct), "pseudo-random 384-d unit rows"
    table = dict(zip(distinct, np.asarray(vectors, dtype=np.float32), strict=True))

    def lookup(texts: list[str]) -> np.ndarray:
        return np.stack([table[t] for t in texts])

    fast_current = current.ChunkingConfig.preset("fast")
    static_texts = current.embedding_texts(
        doc, current.segment(doc, fast_current, counters["current"]), fast_current
    )
    systems: dict[str, Callable[[], object]] = {
        "static encode (reference)": lambda: static.embed(static_texts),
    }
    if args.reference:
        reference_static = embedders["reference"]
        systems["reference: static encode"] = lambda: reference_static(static_texts)
    for key, impl in impls.items():
        default, fast, counter = (
            impl.ChunkingConfig(),
            impl.ChunkingConfig.preset("fast"),
            counters[key],
        )

        def non_model(impl=impl, default=default, counter=counter) -> object:
            return impl.chunk_text(
                doc, document_id="bench", config=default, embed=lookup, token_counter=counter
            )

        def fast_preset(impl=impl, fast=fast, counter=counter, embed=embedders[key]) -> object:
            return impl.chunk_text(
                doc, document_id="bench", config=fast, embed=embed, token_counter=counter
            )

        systems[f"{key}: non-model path"] = non_model
        systems[f"{key}: fast preset"] = fast_preset
    if onnx is not None and args.onnx:
        systems["onnx encode (reference)"] = lambda: onnx.embed(default_texts["current"])
        st_model = sentence_transformer()
        systems["sentence-transformers encode (reference)"] = lambda: st_model.encode(
            default_texts["current"], batch_size=32, normalize_embeddings=True
        )
        for key, impl in impls.items():

            def with_onnx(impl=impl, counter=counters[key]) -> object:
                return impl.chunk_text(
                    doc,
                    document_id="bench",
                    config=impl.ChunkingConfig(),
                    embed=onnx,
                    token_counter=counter,
                )

            systems[f"{key}: default with OnnxEmbedder"] = with_onnx

    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if affinity:
        os.sched_setaffinity(0, {min(affinity)})
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    try:
        times = interleaved(systems, args.runs)
        stages = {}
        for key, impl in impls.items():
            stages[key] = stage_times(impl, doc, counters[key], lookup, args.runs)
    finally:
        if affinity:
            os.sched_setaffinity(0, affinity)
    load_after = os.getloadavg() if hasattr(os, "getloadavg") else None
    return summarise(
        times, stages, words, args, source, load_before, load_after, len(default_texts["current"])
    )


def stage_times(
    impl: ModuleType, doc: str, counter: Any, lookup: Callable, runs: int
) -> dict[str, float]:
    """Best-of-`runs` seconds of each stage of the non-model path."""
    from importlib import import_module

    similarity = import_module(f"{impl.__name__}.similarity")
    config = impl.ChunkingConfig()
    candidates = impl.segment(doc, config, counter)
    texts = [doc[c.start_char : c.end_char] for c in candidates]
    n = len(candidates)
    vectors = impl.embed_candidates(doc, candidates, config, lookup)
    sims = impl.gap_similarities(vectors, n, config)
    own = similarity.candidate_vectors(vectors, n, config)
    boundaries = impl.detect_boundaries(sims, candidates, config, vectors=own)
    return {
        "segment (with token counting)": best_of(lambda: impl.segment(doc, config, counter), runs),
        "token counting alone": best_of(lambda: counter(texts), runs),
        "embed (table lookup, checks)": best_of(
            lambda: impl.embed_candidates(doc, candidates, config, lookup), runs
        ),
        "similarities": best_of(lambda: impl.gap_similarities(vectors, n, config), runs),
        "boundaries (optimal segmenter)": best_of(
            lambda: impl.detect_boundaries(sims, candidates, config, vectors=own), runs
        ),
        "assembly (ids, cohesion)": best_of(
            lambda: impl.assemble_chunks(
                doc,
                candidates,
                boundaries,
                config,
                document_id="bench",
                embeddings=own,
                token_counter_name=getattr(counter, "name", "counter"),
            ),
            runs,
        ),
    }


def summarise(
    times: dict[str, dict],
    stages: dict[str, dict[str, float]],
    words: int,
    args: argparse.Namespace,
    source: str,
    load_before: tuple[float, float, float] | None,
    load_after: tuple[float, float, float] | None,
    candidates: int,
) -> dict[str, Any]:
    reference = times["static encode (reference)"]["wall"]
    rows = {}
    for name, t in times.items():
        wall, cpu = t["wall"], t["cpu"]
        rows[name] = {
            "best_s": min(wall),
            "median_s": statistics.median(wall),
            "best_cpu_s": min(cpu),
            "seconds_per_10k_words_best": min(wall) * 10_000 / words,
            "words_per_second_best": words / min(wall),
            "vs_static_encode": statistics.median(
                w / r for w, r in zip(wall, reference, strict=True)
            ),
            "all_wall_s": wall,
            "all_cpu_s": cpu,
        }
        for key, reference_name in (
            ("vs_onnx_encode", "onnx encode (reference)"),
            ("vs_st_encode", "sentence-transformers encode (reference)"),
        ):
            if reference_name in times:
                rows[name][key] = statistics.median(
                    w / r for w, r in zip(wall, times[reference_name]["wall"], strict=True)
                )
    load = ", ".join(f"{x:.1f}" for x in load_before) if load_before else "n/a"
    print(
        f"\n### Seams' own work: {args.corpus} prose, {words} words, {candidates} candidates, "
        f"one thread, {args.runs} interleaved rounds (load average {load})\n"
    )
    print(f"vectors for the non-model path: {source}\n")
    print(
        "| system | best s / 10k words | median s / 10k words | best words/s "
        "| best CPU s / 10k words | vs static encode |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, row in rows.items():
        print(
            f"| {name} | {row['seconds_per_10k_words_best']:.4f} "
            f"| {row['median_s'] * 10_000 / words:.4f} | {row['words_per_second_best']:,.0f} "
            f"| {row['best_cpu_s'] * 10_000 / words:.4f} | {row['vs_static_encode']:.2f}x |"
        )
    if "reference: non-model path" in rows:
        print()
        pairs = {path: (f"reference: {path}", f"current: {path}") for path in PATHS}
        if "reference: static encode" in rows:
            pairs["static encode"] = ("reference: static encode", "static encode (reference)")
        for path, (old, new) in pairs.items():
            before, after = rows[old], rows[new]
            paired = zip(before["all_wall_s"], after["all_wall_s"], strict=True)
            rounds = statistics.median(b / a for b, a in paired)
            print(
                f"{path}: current vs reference, best {before['best_s'] / after['best_s']:.2f}x "
                f"faster, median of rounds {rounds:.2f}x, "
                f"best CPU {before['best_cpu_s'] / after['best_cpu_s']:.2f}x"
            )
    if "current: default with OnnxEmbedder" in rows:
        print(
            "\ndefault chunk_text with OnnxEmbedder vs one sentence-transformers encode of its "
            f"texts: {rows['current: default with OnnxEmbedder']['vs_st_encode']:.2f}x wall "
            "(median of rounds); vs one OnnxEmbedder encode (Seams' own share): "
            f"{rows['current: default with OnnxEmbedder']['vs_onnx_encode']:.2f}x"
        )
    goals = {
        "non-model path >= 500k words/s": rows["current: non-model path"]["words_per_second_best"]
        >= NON_MODEL_GOAL_WORDS_PER_SECOND,
        "fast <= 0.025 s / 10k words": rows["current: fast preset"]["seconds_per_10k_words_best"]
        <= FAST_GOAL_SECONDS_PER_10K,
    }
    if "current: default with OnnxEmbedder" in rows:
        goals["default chunk_text <= 0.9x one sentence-transformers encode"] = (
            rows["current: default with OnnxEmbedder"]["vs_st_encode"] <= ST_GOAL_RATIO
        )
    print("\ngoals: " + "; ".join(f"{g}: {'met' if ok else 'MISSED'}" for g, ok in goals.items()))
    print(f"\n{'stage, best CPU s (non-model path)':40s} " + " ".join(f"{k:>10s}" for k in stages))
    for stage in next(iter(stages.values())):
        print(f"{stage:40s} " + " ".join(f"{stages[k][stage]:10.4f}" for k in stages))
    return {
        "corpus": args.corpus,
        "words": words,
        "candidates": candidates,
        "runs": args.runs,
        "reference_revision": args.reference,
        "reference_current_files": list(args.current_files),
        "non_model_vectors": source,
        "load_average": {"before": load_before, "after": load_after},
        "systems": rows,
        "stages_best_cpu_s": stages,
        "goals_met": goals,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="interleaved rounds (best, median)")
    parser.add_argument("--corpus", choices=("squad", "manifesto"), default="squad")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="../shared/data")
    parser.add_argument("--onnx", action="store_true", help="also chunk_text with OnnxEmbedder")
    parser.add_argument("--reference", help="git revision whose chunking/ to measure beside")
    parser.add_argument(
        "--current-files",
        nargs="*",
        default=[],
        help="files of chunking/ the reference takes from the working tree",
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    results = measure(args)
    write_result(args.json, results, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
