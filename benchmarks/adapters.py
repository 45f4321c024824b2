"""What the LangChain and LlamaIndex adapters cost on top of `chunk_text` (target: < 5 %).

On ~10k words of prose (`benchmarks/texts.py`), one core (the process is pinned to one CPU,
onnxruntime gets one thread), the same embedder object for every system, everything warm (model
loaded, the embedders' per-word caches filled by a first untimed pass). Each round runs, back to
back and in rotating order: `chunk_text`; `SeamsTextSplitter.split_documents` on one LangChain
`Document`; `SeamsNodeParser.get_nodes_from_documents` on one LlamaIndex `Document`; and the
parser inside an `IngestionPipeline`.

Two measures. **Wrapping cost** (the verdict): inside each adapter call, the time spent in
`chunk_text` is clocked (the adapters' one call site, `seams.integrations.chunker.chunk_text`,
is wrapped with a timer), and the rest of the call is what the adapter adds: building
Documents/TextNodes, copying metadata, relationships (and, for the pipeline, LlamaIndex's own
bookkeeping). It is measured within one call, so machine load between calls cannot blur it.
**End to end**: each system's time divided by `chunk_text`'s in the same round (paired), median
over rounds; on a shared 2-core machine this carries several percent of noise either way.
Two settings: the default preset with `OnnxEmbedder` (the transformer: embedding is nearly all
the time) and the `fast` preset with `StaticEmbedder` (~0.03-0.3 s per 10k words: the adapters'
own Python is most visible there).

    .venv/bin/python benchmarks/adapters.py
    .venv/bin/python benchmarks/adapters.py --runs 9 --json benchmarks/results/adapters.json

Needs the `langchain` and `llama-index` extras and the exported models in the data dir
(`seams model export`).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from benchmarks.header import write_result  # noqa: E402
from benchmarks.texts import prose  # noqa: E402
from seams.chunking import ChunkingConfig, chunk_text  # noqa: E402

TARGET_OVERHEAD = 0.05
DOCUMENT_ID = "benchmark-prose"
REFERENCE = "chunk_text"
ADAPTER_PREFIXES = ("LangChain SeamsTextSplitter", "LlamaIndex SeamsNodeParser")
"""The verdict is on the adapters themselves; the IngestionPipeline row adds LlamaIndex's own
machinery (document hashing, transformation bookkeeping) and is reported for information."""


def systems(config: ChunkingConfig, embedder: object, text: str) -> dict[str, Callable[[], int]]:
    """Each system chunks `text` once and returns how many chunks it made."""
    from langchain_core.documents import Document
    from llama_index.core import Document as LlamaDocument
    from llama_index.core.ingestion import IngestionPipeline

    from seams.integrations.langchain import SeamsTextSplitter
    from seams.integrations.llama_index import SeamsNodeParser

    splitter = SeamsTextSplitter(config, embedder=embedder)
    parser = SeamsNodeParser(config, embedder=embedder)
    metadata = {"document_id": DOCUMENT_ID, "source": "benchmarks/texts.py:prose"}
    return {
        REFERENCE: lambda: len(
            chunk_text(text, document_id=DOCUMENT_ID, config=config, embed=embedder)
        ),
        "LangChain SeamsTextSplitter.split_documents": lambda: len(
            splitter.split_documents([Document(page_content=text, metadata=metadata)])
        ),
        "LlamaIndex SeamsNodeParser.get_nodes_from_documents": lambda: len(
            parser.get_nodes_from_documents([LlamaDocument(text=text, metadata=metadata)])
        ),
        "LlamaIndex IngestionPipeline([SeamsNodeParser])": lambda: len(
            IngestionPipeline(transformations=[parser]).run(
                documents=[LlamaDocument(text=text, metadata=metadata)]
            )
        ),
    }


@contextmanager
def one_core() -> Iterator[None]:
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if affinity:
        os.sched_setaffinity(0, {min(affinity)})
    try:
        yield
    finally:
        if affinity:
            os.sched_setaffinity(0, affinity)


class ChunkTextClock:
    """Wraps the adapters' call site of `chunk_text` and adds up the time spent inside it."""

    def __init__(self) -> None:
        self.inside = 0.0

    @contextmanager
    def installed(self) -> Iterator[None]:
        import seams.integrations.chunker as site

        original = site.chunk_text

        def timed(*args: object, **kwargs: object) -> object:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.inside += time.perf_counter() - started

        site.chunk_text = timed
        try:
            yield
        finally:
            site.chunk_text = original


def measure(name: str, config: ChunkingConfig, embedder: object, text: str, runs: int) -> dict:
    """Interleaved, rotating rounds; every system must give the same number of chunks."""
    funcs = systems(config, embedder, text)
    counts = {system: fn() for system, fn in funcs.items()}  # warm-up, untimed
    if len(set(counts.values())) != 1:
        raise AssertionError(f"{name}: systems disagree on the chunk count: {counts}")
    order = list(funcs)
    times: dict[str, list[float]] = {system: [] for system in funcs}
    wrapping: dict[str, list[float]] = {system: [] for system in funcs}
    clock = ChunkTextClock()
    with one_core(), clock.installed():
        for round_ in range(runs):
            shift = round_ % len(order)
            for system in order[shift:] + order[:shift]:
                clock.inside = 0.0
                started = time.perf_counter()
                funcs[system]()
                total = time.perf_counter() - started
                times[system].append(total)
                # chunk_text itself is called directly, not through the adapters' call site.
                inside = clock.inside if system != REFERENCE else total
                wrapping[system].append((total - inside) / inside)
    reference = times[REFERENCE]
    words = len(text.split())
    rows = {}
    for system, values in times.items():
        rows[system] = {
            "median_seconds": statistics.median(values),
            "seconds_per_10k_words": statistics.median(values) * 10_000 / words,
            "wrapping_cost": statistics.median(wrapping[system]),
            "paired_ratio": statistics.median(
                v / r for v, r in zip(values, reference, strict=True)
            ),
            "seconds": values,
        }
    return {"setting": name, "words": words, "chunks": counts[REFERENCE], "systems": rows}


def report(result: dict, runs: int) -> list[str]:
    """Print the table; return the adapters over the target in this setting."""
    print(
        f"\n### {result['setting']}: {result['words']} words, {result['chunks']} chunks, "
        f"one core, median of {runs} interleaved rounds\n"
    )
    print("| system | s / 10k words | wrapping cost (in-call) | end to end vs chunk_text |")
    print("|---|---:|---:|---:|")
    missed = []
    for system, row in result["systems"].items():
        print(
            f"| {system} | {row['seconds_per_10k_words']:.4f} | {row['wrapping_cost']:+.2%} "
            f"| {row['paired_ratio']:.3f}x |"
        )
        if system.startswith(ADAPTER_PREFIXES) and row["wrapping_cost"] >= TARGET_OVERHEAD:
            missed.append(f"{system} ({result['setting']})")
    return missed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="rounds, fast preset (median)")
    parser.add_argument(
        "--model-runs", type=int, default=3, help="rounds, OnnxEmbedder (~10 s per call here)"
    )
    parser.add_argument("--words", type=int, default=10_000, help="length of the prose text")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)

    from seams.models.embedders import OnnxEmbedder, StaticEmbedder

    text = prose(args.words)
    settings = [
        ("fast preset, StaticEmbedder", ChunkingConfig.preset("fast"), StaticEmbedder(),
         args.runs),
        ("default preset, OnnxEmbedder (fp32, 1 thread)", ChunkingConfig(),
         OnnxEmbedder(intra_op_threads=1), args.model_runs),
    ]  # fmt: skip
    results, missed = [], []
    for name, config, embedder, runs in settings:
        result = measure(name, config, embedder, text, runs)
        missed += report(result, runs)
        results.append(result)
    met = not missed
    verdict = "met" if met else "MISSED by " + "; ".join(missed)
    print(f"\nadapters' wrapping cost < {TARGET_OVERHEAD:.0%} of chunk_text: {verdict}")
    if args.json:
        payload = {
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
            "runs": {"fast": args.runs, "model": args.model_runs},
            "target_overhead": TARGET_OVERHEAD,
            "target_met": met,
            "results": results,
        }
        write_result(args.json, payload, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
