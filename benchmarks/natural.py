"""Chunks a person would draw: segmentation of natural documents, and paragraphs respected.

Choi's documents are ten unrelated passages glued together; these are texts whose topic structure
occurred naturally, scored the way `benchmarks/choi.py` scores Choi (Pk and WindowDiff over
sentence positions, k = half the mean reference segment length; boundary precision, recall and
F1 exactly and within one sentence; chunks per document):

- `manifesto`: the six US party manifestos of `../shared/data/manifesto/` (Manifesto Project
  coded units, from koomri/text-segmentation; 178-807 short segments per document);
- `clinical`: 227 chapters of a clinical medical textbook split at its own sections (Malioutov
  & Barzilay 2006, as distributed in jacobeisenstein/bayes-seg at commit 490ddec3, GPL-2 repo;
  see `../shared/data/clinical/SOURCE.md`). Its punctuation was stripped by the distributors, so
  each sentence line gets a final period before the lines are joined (the same text for every
  system).

- `sections`: each clinical section fed alone (one topic, no topic change inside, mostly over the
  cap): chunks per section against the fewest the cap needs, and the share of those under the
  cap left whole.

Both come as one sentence per line without paragraph breaks, so they say nothing about
paragraphs. Structure is measured on SQuAD's five articles (`squad-dev-5.json`, paragraphs
joined by a blank line):

- `articles`: the share of cuts that fall at a paragraph break (a blank line in the gap before
  the chunk), and chunks per article against the fewest the size cap needs (Seams' own
  sentence candidates packed greedily under `chunk_size_max` tokens: no split can use fewer);
- `paragraphs`: each of the 173 paragraphs fed alone (one subject; 169 under the cap): the
  share that comes back as one chunk, among the paragraphs the cap lets stay whole.

Systems (all on the same all-MiniLM-L6-v2 through Seams' cached `OnnxEmbedder`): Seams default
with its default sizes and with no size limit, LangChain's and chonkie's SemanticChunker at their
defaults, and a fixed 200-token split (`benchmarks/public_data.make_system`).

    .venv/bin/python -m benchmarks.natural --limit 40 --json benchmarks/results/natural.json
    .venv/bin/python -m benchmarks.natural --sets manifesto --systems seams_default fixed_200
    .venv/bin/python -m benchmarks.natural --sets clinical --limit 40 --seams cut_cost=2.0
"""

from __future__ import annotations

import argparse
import functools
import itertools
import re
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.public_data import (
    DEFAULT_DATA,
    ChoiDocument,
    Segmenter,
    Span,
    SquadDocument,
    add_common_arguments,
    cached_embedder,
    document_scores,
    load_squad,
    make_system,
    parse_arguments,
    parse_choi,
    run_and_report,
)

SETS: tuple[str, ...] = ("manifesto", "clinical", "sections", "articles", "paragraphs")
SEGMENTATION_SETS = ("manifesto", "clinical")
SYSTEMS: tuple[str, ...] = (
    "seams_default",
    "seams_default_unbounded",
    "langchain",
    "chonkie",
    "fixed_200",
)
__all__ = [
    "SETS",
    "SYSTEMS",
    "boundary_f1",
    "evaluate_natural",
    "evaluate_structure",
    "fewest_pieces",
    "load_natural_set",
]
_TERMINAL = re.compile(r"[.!?][\"')\]]*$")


# --- data -------------------------------------------------------------------------------------
def load_natural_set(
    data: Path | str, name: str, limit: int | None = None
) -> tuple[ChoiDocument, ...]:
    """The documents of `manifesto` (`<data>/manifesto/*.txt`) or `clinical`
    (`<data>/clinical/*.ref`), in file-name order, in Choi's format; `limit` keeps the first N."""
    return _load_natural_set(str(data), name, limit)


@functools.lru_cache(maxsize=8)
def _load_natural_set(data: str, name: str, limit: int | None) -> tuple[ChoiDocument, ...]:
    if name not in SEGMENTATION_SETS:
        raise ValueError(f"unknown set {name!r}; choose from {', '.join(SEGMENTATION_SETS)}")
    folder = Path(data) / name
    pattern = "*.txt" if name == "manifesto" else "*.ref"
    paths = sorted(folder.glob(pattern))
    if not paths:
        raise FileNotFoundError(
            f"{name}: no {pattern} files in {folder}; pass the data folder that holds {name}/ "
            "with --data (see ../shared/data/README.md and ../shared/data/clinical/SOURCE.md)"
        )
    if limit is not None:
        paths = paths[:limit]
    documents = []
    for path in paths:
        content = path.read_text(encoding="utf-8", errors="replace")
        if name == "clinical":
            content = "\n".join(_punctuated(line) for line in content.splitlines())
        documents.append(parse_choi(f"{name}/{path.name}", content))
    return tuple(documents)


def _punctuated(line: str) -> str:
    """A sentence line whose punctuation was stripped, ended with a period (separators and blank
    lines unchanged; inner runs of spaces, left where punctuation was, squeezed)."""
    text = " ".join(line.split())
    if not text or text == "==========" or _TERMINAL.search(text):
        return text
    return text + "."


# --- segmentation metrics ---------------------------------------------------------------------
def boundary_f1(
    reference: Sequence[int], hypothesis: Sequence[int], tolerance: int = 0
) -> dict[str, float]:
    """Boundary precision, recall and F1, a hypothesised boundary matching at most one reference
    boundary at most `tolerance` sentences away (greedy in order, which is optimal on a line).
    Both empty: all 1.0."""
    ref, hyp = sorted(set(reference)), sorted(set(hypothesis))
    if not ref and not hyp:
        return {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    matched, j = 0, 0
    for boundary in ref:
        while j < len(hyp) and hyp[j] < boundary - tolerance:
            j += 1
        if j < len(hyp) and hyp[j] <= boundary + tolerance:
            matched += 1
            j += 1
    precision = matched / len(hyp) if hyp else 0.0
    recall = matched / len(ref) if ref else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def evaluate_natural(segmenter: Segmenter, documents: Sequence[ChoiDocument]) -> dict[str, Any]:
    """Mean per-document Pk / WindowDiff / recall (as `public_data.score_segmenter`), plus
    boundary precision / recall / F1 pooled over the set (exact and within one sentence)."""
    rows, counts = [], {0: [0, 0, 0], 1: [0, 0, 0]}  # tolerance -> [matched, hyp, ref]
    for doc in documents:
        row, hypothesis = document_scores(segmenter, doc)
        rows.append(row)
        for tolerance, total in counts.items():
            scores = boundary_f1(doc.boundaries, hypothesis, tolerance)
            total[0] += round(scores["recall"] * len(set(doc.boundaries)))
            total[1] += len(set(hypothesis))
            total[2] += len(set(doc.boundaries))
    result: dict[str, Any] = {
        key: statistics.mean(r[key] for r in rows) for key in ("pk", "windowdiff")
    }
    for tolerance, (matched, hyp, ref) in counts.items():
        precision = matched / hyp if hyp else 0.0
        recall = matched / ref if ref else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        suffix = "" if tolerance == 0 else "_within_1"
        result |= {f"precision{suffix}": precision, f"recall{suffix}": recall, f"f1{suffix}": f1}
    result["chunks_per_doc"] = statistics.mean(r["chunks"] for r in rows)
    result["segments_per_doc"] = statistics.mean(len(d.segment_starts) for d in documents)
    result["docs"] = len(documents)
    return result


# --- structure on SQuAD -------------------------------------------------------------------------
def paragraph_breaks(text: str) -> list[int]:
    """Offsets where a paragraph (after a blank line) starts."""
    return [m.end() for m in re.finditer(r"\n[ \t]*\n\s*", text)]


def at_paragraph_break(text: str, start: int) -> bool:
    """Whether a chunk starting at `start` begins a paragraph: the whitespace around `start`
    (a peer may start a chunk on the whitespace itself) holds a blank line."""
    a = start
    while a > 0 and text[a - 1].isspace():
        a -= 1
    b = start
    while b < len(text) and text[b].isspace():
        b += 1
    return bool(re.search(r"\n[ \t]*\n", text[a:b]))


def fewest_pieces(sizes: Sequence[int], cap: int) -> int:
    """The fewest contiguous pieces of at most `cap` that `sizes` (units that cannot be split,
    in order) can be cut into; a unit over the cap is a piece of its own. Greedy is optimal."""
    pieces, used = 0, 0
    for size in sizes:
        if used and used + size > cap:
            pieces += 1
            used = 0
        used += size
    return pieces + (1 if used else 0)


def evaluate_structure(
    spans: Callable[[str], list[Span]],
    documents: Sequence[SquadDocument],
    candidate_sizes: Callable[[str], list[int]],
    cap: int,
) -> dict[str, Any]:
    """On SQuAD's articles: share of cuts at paragraph breaks, chunks per article and its ratio
    to the fewest pieces the cap needs; on each paragraph alone: the share left whole among those
    that fit under the cap (and over all paragraphs)."""
    cuts = at_break = 0
    ratios, chunks = [], []
    for doc in documents:
        starts = sorted(a for a, _ in spans(doc.text))
        inner = [s for s in starts if s > 0]
        cuts += len(inner)
        at_break += sum(at_paragraph_break(doc.text, s) for s in inner)
        chunks.append(len(starts))
        ratios.append(len(starts) / max(1, fewest_pieces(candidate_sizes(doc.text), cap)))
    whole = whole_fitting = fitting = total = 0
    for doc in documents:
        bounds = [*doc.paragraph_starts, len(doc.text) + 2]
        for a, b in itertools.pairwise(bounds):
            paragraph = doc.text[a : b - 2]
            pieces = [s for s in spans(paragraph) if paragraph[s[0] : s[1]].strip()]
            fits = fewest_pieces(candidate_sizes(paragraph), cap) == 1
            total += 1
            fitting += fits
            whole += len(pieces) == 1
            whole_fitting += fits and len(pieces) == 1
    return {
        "cuts": cuts,
        "cuts_at_paragraph_breaks": at_break,
        "share_at_paragraph_breaks": at_break / cuts if cuts else 1.0,
        "chunks_per_article": statistics.mean(chunks),
        "chunks_vs_fewest": statistics.mean(ratios),
        "paragraphs": total,
        "paragraphs_fitting": fitting,
        "share_whole": whole_fitting / fitting if fitting else 1.0,
        "share_whole_all": whole / total if total else 1.0,
    }


def evaluate_sections(
    spans: Callable[[str], list[Span]],
    documents: Sequence[ChoiDocument],
    candidate_sizes: Callable[[str], list[int]],
    cap: int,
) -> dict[str, Any]:
    """Each reference segment fed alone (one topic, no topic change inside): chunks per segment
    against the fewest pieces the cap needs, for the segments over the cap (and the share of
    those under it left whole)."""
    ratios, whole, under = [], 0, 0
    for doc in documents:
        bounds = [*doc.segment_starts, len(doc.sentences)]
        for a, b in itertools.pairwise(bounds):
            text = " ".join(doc.sentences[a:b])
            pieces = [s for s in spans(text) if text[s[0] : s[1]].strip()]
            fewest = fewest_pieces(candidate_sizes(text), cap)
            if fewest > 1:
                ratios.append(len(pieces) / fewest)
            else:
                under += 1
                whole += len(pieces) == 1
    return {
        "segments_over_cap": len(ratios),
        "chunks_vs_fewest": statistics.mean(ratios) if ratios else 1.0,
        "within_1_5x": sum(r <= 1.5 for r in ratios) / len(ratios) if ratios else 1.0,
        "segments_under_cap": under,
        "share_whole": whole / under if under else 1.0,
    }


def seams_candidate_sizes(counter: Any) -> Callable[[str], list[int]]:
    """Token counts of Seams' default candidates (sentences and blocks) of a text."""
    from seams.chunking import ChunkingConfig
    from seams.chunking.segment import segment

    config = ChunkingConfig()

    def sizes(text: str) -> list[int]:
        return [c.token_count for c in segment(text, config, counter)]

    return sizes


# --- CLI ----------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    from seams import ChunkingConfig

    embedder = cached_embedder(args.cache_dir, "natural")
    counter = embedder.count_tokens
    cap = ChunkingConfig().chunk_size_max or 254
    results: dict[str, dict[str, Any]] = {s: {} for s in args.sets}
    systems: dict[str, Any] = {}
    squad_docs: list[SquadDocument] = []
    if {"articles", "paragraphs"} & set(args.sets):
        squad_docs = load_squad(args.data)[0]
    sizes = seams_candidate_sizes(counter)
    for key in args.systems:
        system = make_system(key, embedder, dict(args.seams))
        systems[key] = {"label": system.label, "settings": system.settings}
        for name in args.sets:
            started = time.perf_counter()
            if name in SEGMENTATION_SETS:
                documents = load_natural_set(args.data, name, args.limit)
                row = evaluate_natural(system.starts, documents)
                summary = f"Pk {row['pk']:.3f} F1 {row['f1']:.3f} F1+-1 {row['f1_within_1']:.3f}"
            elif name == "sections":
                documents = load_natural_set(args.data, "clinical", args.limit)
                row = evaluate_sections(system.spans, documents, sizes, cap)
                summary = (
                    f"x fewest {row['chunks_vs_fewest']:.2f} (within 1.5x "
                    f"{row['within_1_5x']:.2f}), whole {row['share_whole']:.2f}"
                )
            elif name == "articles":
                row = evaluate_structure(system.spans, squad_docs, sizes, cap)
                row = {k: v for k, v in row.items() if "paragraphs" not in k or "cuts" in k}
                row.pop("share_whole", None)
                row.pop("share_whole_all", None)
                summary = (
                    f"at breaks {row['share_at_paragraph_breaks']:.2f}, chunks/fewest "
                    f"{row['chunks_vs_fewest']:.2f}"
                )
            else:
                row = _paragraph_rows(evaluate_structure(system.spans, squad_docs, sizes, cap))
                summary = f"whole {row['share_whole']:.3f} ({row['paragraphs_fitting']} fit)"
            row["seconds"] = round(time.perf_counter() - started, 1)
            results[name][key] = row
            embedder.save()
            print(f"{name:10s} {system.label:45s} {summary} ({row['seconds']:.0f} s)", flush=True)
    return {
        "benchmark": "natural",
        "data": str(args.data),
        "sets": list(args.sets),
        "limit": args.limit,
        "cap_tokens": cap,
        "model": {"name": "all-MiniLM-L6-v2", "onnx_sha256": embedder.model_id},
        "systems": systems,
        "results": results,
        "texts_embedded": embedder.embedded,
    }


def _paragraph_rows(row: dict[str, Any]) -> dict[str, Any]:
    keep = ("paragraphs", "paragraphs_fitting", "share_whole", "share_whole_all")
    return {k: row[k] for k in keep}


def print_tables(payload: dict[str, Any]) -> None:
    labels = {k: v["label"] for k, v in payload["systems"].items()}
    for name, rows in payload["results"].items():
        if not rows:
            continue
        print()
        if name in SEGMENTATION_SETS:
            docs = next(iter(rows.values()))["docs"]
            print(f"{name} ({docs} documents; Pk / WD lower is better, F1 higher)\n")
            print(
                f"{'system':45s} {'Pk':>6s} {'WD':>6s} {'P':>5s} {'R':>5s} {'F1':>5s} "
                f"{'F1+-1':>6s} {'chunks/doc':>10s} {'segments/doc':>12s}"
            )
            for key, row in rows.items():
                print(
                    f"{labels[key]:45s} {row['pk']:6.3f} {row['windowdiff']:6.3f} "
                    f"{row['precision']:5.2f} {row['recall']:5.2f} {row['f1']:5.2f} "
                    f"{row['f1_within_1']:6.2f} {row['chunks_per_doc']:10.1f} "
                    f"{row['segments_per_doc']:12.1f}"
                )
        elif name == "sections":
            print("clinical sections fed alone (one topic each): chunks vs the fewest needed\n")
            print(
                f"{'system':45s} {'over cap':>8s} {'x fewest':>8s} {'<= 1.5x':>7s} "
                f"{'under cap':>9s} {'whole':>6s}"
            )
            for key, row in rows.items():
                print(
                    f"{labels[key]:45s} {row['segments_over_cap']:8d} "
                    f"{row['chunks_vs_fewest']:8.2f} {row['within_1_5x']:7.2f} "
                    f"{row['segments_under_cap']:9d} {row['share_whole']:6.2f}"
                )
        elif name == "articles":
            print(
                "SQuAD articles (5): cuts at paragraph breaks, chunks vs the fewest the cap needs\n"
            )
            print(
                f"{'system':45s} {'cuts':>5s} {'at breaks':>10s} {'chunks/art':>10s} "
                f"{'x fewest':>8s}"
            )
            for key, row in rows.items():
                print(
                    f"{labels[key]:45s} {row['cuts']:5d} {row['share_at_paragraph_breaks']:10.2f} "
                    f"{row['chunks_per_article']:10.1f} {row['chunks_vs_fewest']:8.2f}"
                )
        else:
            print("SQuAD paragraphs fed alone: share returned as one chunk\n")
            print(f"{'system':45s} {'fit cap':>7s} {'whole (fit)':>11s} {'whole (all)':>11s}")
            for key, row in rows.items():
                print(
                    f"{labels[key]:45s} {row['paragraphs_fitting']:7d} {row['share_whole']:11.3f} "
                    f"{row['share_whole_all']:11.3f}"
                )
    print(f"\n{payload['texts_embedded']} texts embedded, {payload['seconds']:.0f} s.")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help="folder holding manifesto/, clinical/ and squad",
    )
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument(
        "--systems", nargs="+", default=list(SYSTEMS), choices=[*SYSTEMS, "seams_fast", "fixed_400"]
    )
    add_common_arguments(parser, limit_help="documents per segmentation set (first N)")
    return run_and_report(parse_arguments(parser, argv), argv, run, print_tables)


if __name__ == "__main__":
    raise SystemExit(main())
