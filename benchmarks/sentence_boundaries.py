"""Sentence boundaries on Universal Dependencies: Seams' rules against pysbd and sentencex.

For English, German, French, Spanish and Italian, each treebank's sentences (the `# text =`
lines) are joined by one space into documents (at `# newdoc` marks where the treebank has them,
else every 30 sentences), and every system splits the documents again. The score is
sentence-boundary F1 over character positions: a boundary is where a sentence other than a
document's first begins; precision, recall and F1 are micro-averaged over the documents.

Systems, in the same run on the same text:

- `seams (en rules)`: `segment()` with the default `ChunkingConfig()` (English rules, what every
  configuration without `language` gets);
- `seams (language)`: the same with `ChunkingConfig(language=LANG)`;
- `seams (auto)`: `ChunkingConfig(language="auto")`, the rules picked per document;
- `pysbd` (`Segmenter(language=LANG, clean=False)`) and `sentencex` (`segment(LANG, text)`),
  from the `bench` extra; their sentences are mapped back onto the text in order.

Seams runs its product defaults, so a sentence shorter than `min_sentence_length` (12 characters)
joins a neighbour and counts as a missed boundary; `--min-sentence-length 1` shows the rules alone.

Data: the treebanks' train and dev files only (the test files are never opened: they are kept for
independent checks). The table reports the dev files; its `dev 2nd half` column is the half of
each dev file that played no part in choosing the rules. Treebanks and licences:

| language | treebank | licence |
|---|---|---|
| en | UD_English-EWT | CC BY-SA 4.0 |
| de | UD_German-GSD | CC BY-SA 4.0 |
| fr | UD_French-GSD | CC BY-SA 4.0 |
| es | UD_Spanish-GSD | CC BY-SA 4.0 |
| it | UD_Italian-ISDT | CC BY-NC-SA 3.0 |

Where the data is expected: one folder per treebank under `--ud-dir` (default
`~/.cache/seams/ud`), named as the repository, either a clone or a bare git directory (read
with `git show HEAD:FILE`). Nothing is downloaded by this script; fetch once with

    mkdir -p ~/.cache/seams/ud && cd ~/.cache/seams/ud
    for t in English-EWT German-GSD French-GSD Spanish-GSD Italian-ISDT; do
        git clone --depth 1 https://github.com/UniversalDependencies/UD_$t; done

Run:

    .venv/bin/pip install pysbd==0.3.4 sentencex==1.0.32   # not in the bench extra: pysbd
                                                           # installs a package `benchmarks`
    .venv/bin/python benchmarks/sentence_boundaries.py
    .venv/bin/python benchmarks/sentence_boundaries.py \
        --json benchmarks/results/sentence_boundaries.json
    .venv/bin/python benchmarks/sentence_boundaries.py --split train --languages de fr
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.header import with_header  # noqa: E402
from seams.chunking import ChunkingConfig, segment  # noqa: E402

#: language -> (repository, file prefix, licence)
TREEBANKS: dict[str, tuple[str, str, str]] = {
    "en": ("UD_English-EWT", "en_ewt", "CC BY-SA 4.0"),
    "de": ("UD_German-GSD", "de_gsd", "CC BY-SA 4.0"),
    "fr": ("UD_French-GSD", "fr_gsd", "CC BY-SA 4.0"),
    "es": ("UD_Spanish-GSD", "es_gsd", "CC BY-SA 4.0"),
    "it": ("UD_Italian-ISDT", "it_isdt", "CC BY-NC-SA 3.0"),
}
SPLITS = ("train", "dev")
SENTENCES_PER_DOCUMENT = 30
DEFAULT_UD_DIR = Path.home() / ".cache" / "seams" / "ud"
SPEED_CHARS = 300_000

Splitter = Callable[[str], list[int]]


@dataclass
class Score:
    """Boundary counts, micro-averaged: true positives, predicted and gold boundaries."""

    hits: int = 0
    predicted: int = 0
    gold: int = 0
    seconds: float = 0.0
    errors: list[dict[str, Any]] = field(default_factory=list)

    def add(self, gold: set[int], predicted: set[int]) -> None:
        self.hits += len(gold & predicted)
        self.predicted += len(predicted)
        self.gold += len(gold)

    def __add__(self, other: Score) -> Score:
        return Score(
            self.hits + other.hits,
            self.predicted + other.predicted,
            self.gold + other.gold,
            self.seconds + other.seconds,
            self.errors + other.errors,
        )

    @property
    def precision(self) -> float:
        return self.hits / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return self.hits / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "f1": round(self.f1, 4),
            "boundaries_gold": self.gold,
            "boundaries_predicted": self.predicted,
            "boundaries_correct": self.hits,
            "seconds": round(self.seconds, 3),
        }


def read_treebank_file(folder: Path, name: str) -> str:
    """One file of a treebank folder: a work tree's file, else `git show HEAD:name`."""
    if name.endswith("-test.conllu"):
        raise SystemExit(f"{name}: test files are kept for independent checks; use train or dev")
    if (folder / name).is_file():
        return (folder / name).read_text(encoding="utf-8")
    git_dir = folder / ".git" if (folder / ".git").exists() else folder
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"HEAD:{name}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"{folder / name}: not found ({done.stderr.strip() or 'no such file'}); "
            "clone the treebank as this script's docstring shows, or pass --ud-dir"
        )
    return done.stdout


def conllu_documents(conllu: str) -> list[list[str]]:
    """Sentences grouped into documents: at `# newdoc` marks; sentences under no mark (a
    treebank without them, or the part before its first) in documents of 30 sentences."""
    documents: list[list[str]] = []
    current: list[str] = []
    marked = False  # inside a document opened by a `# newdoc` mark
    for line in conllu.splitlines():
        if line.startswith("# newdoc"):
            if current:
                documents.append(current)
            current, marked = [], True
        elif line.startswith("# text ="):
            current.append(line.removeprefix("# text =").strip())
            if not marked and len(current) == SENTENCES_PER_DOCUMENT:
                documents.append(current)
                current = []
    if current:
        documents.append(current)
    return [[s for s in doc if s] for doc in documents if any(doc)]


def load(ud_dir: Path, language: str, split: str) -> list[list[str]]:
    """The documents of one language's treebank file (`split`: train or dev)."""
    if split not in SPLITS:
        raise SystemExit(f"--split {split!r}: choose one of {', '.join(SPLITS)}")
    repository, prefix, _ = TREEBANKS[language]
    return conllu_documents(read_treebank_file(ud_dir / repository, f"{prefix}-ud-{split}.conllu"))


def gold_boundaries(sentences: Sequence[str]) -> tuple[str, set[int]]:
    """The document text (sentences joined by a space) and where its later sentences start."""
    starts = []
    position = 0
    for sentence in sentences:
        starts.append(position)
        position += len(sentence) + 1
    return " ".join(sentences), set(starts[1:])


def starts_of(text: str, pieces: Iterable[str]) -> list[int]:
    """Start offsets of consecutive `pieces` of `text`, found in order (peers return strings)."""
    starts = []
    cursor = 0
    for piece in pieces:
        stripped = piece.strip()
        if not stripped:
            continue
        found = text.find(stripped, cursor)
        if found < 0:
            continue  # a peer that rewrote its input: the piece cannot be placed
        starts.append(found)
        cursor = found + len(stripped)
    return starts


def seams_splitter(config: ChunkingConfig) -> Splitter:
    def split(text: str) -> list[int]:
        return [c.start_char for c in segment(text, config)]

    return split


def peer_splitters(language: str) -> dict[str, Splitter]:
    """pysbd and sentencex for `language`, where installed (the `bench` extra)."""
    splitters: dict[str, Splitter] = {}
    try:
        import pysbd

        segmenter = pysbd.Segmenter(language=language, clean=False)
        splitters["pysbd"] = lambda text: starts_of(text, segmenter.segment(text))
    except ImportError:
        print("pysbd is not installed: pip install pysbd==0.3.4", file=sys.stderr)
    try:
        import sentencex

        splitters["sentencex"] = lambda text: starts_of(text, sentencex.segment(language, text))
    except ImportError:
        print("sentencex is not installed: pip install sentencex", file=sys.stderr)
    return splitters


def evaluate(documents: Sequence[Sequence[str]], split: Splitter, keep_errors: int = 0) -> Score:
    score = Score()
    for sentences in documents:
        text, gold = gold_boundaries(sentences)
        began = time.perf_counter()
        predicted = {s for s in split(text) if s > 0}
        score.seconds += time.perf_counter() - began
        score.add(gold, predicted)
        if len(score.errors) < keep_errors:
            for position in sorted(gold ^ predicted):
                kind = "missed" if position in gold else "extra"
                snippet = text[max(0, position - 50) : position] + " ‖ " + text[position:][:40]
                score.errors.append({"kind": kind, "at": snippet})
    return score


def systems_for(language: str, min_sentence_length: int) -> dict[str, Splitter]:
    base = ChunkingConfig(min_sentence_length=min_sentence_length)
    systems = {"seams (en rules)": seams_splitter(base)}
    if language != "en":
        systems["seams (language)"] = seams_splitter(base.with_overrides(language=language))
    systems["seams (auto)"] = seams_splitter(base.with_overrides(language="auto"))
    systems.update(peer_splitters(language))
    return systems


def segmentation_speed(
    documents: Sequence[Sequence[str]], configs: dict[str, ChunkingConfig], runs: int
) -> dict[str, float]:
    """Candidates per CPU second of `segment()` under each config, on about 300 KB of the
    documents' text (repeated as needed), one document per call; the configs take turns within
    each run (so load on the machine hits them alike), median of `runs`. CPU time, not wall
    time: on a shared machine other processes' load inflates wall time."""
    texts: list[str] = []
    size = 0
    while size < SPEED_CHARS:
        for sentences in documents:
            texts.append(" ".join(sentences))
            size += len(texts[-1])
            if size >= SPEED_CHARS:
                break
    timings: dict[str, list[float]] = {name: [] for name in configs}
    produced: dict[str, int] = {}
    for _ in range(runs):
        for name, config in configs.items():
            began = time.process_time()
            produced[name] = sum(len(segment(text, config)) for text in texts)
            timings[name].append(time.process_time() - began)
    return {name: produced[name] / statistics.median(timings[name]) for name in configs}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ud-dir", type=Path, default=DEFAULT_UD_DIR, help="treebank folders")
    parser.add_argument("--languages", nargs="+", default=list(TREEBANKS), choices=TREEBANKS)
    parser.add_argument("--split", default="dev", choices=SPLITS)
    parser.add_argument("--min-sentence-length", type=int, default=12)
    parser.add_argument("--errors", type=int, default=0, help="print this many errors per system")
    parser.add_argument("--speed-runs", type=int, default=7, help="0: skip the speed table")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)

    results: dict[str, Any] = {}
    rows = []
    for language in args.languages:
        documents = load(args.ud_dir, language, args.split)
        half = len(documents) // 2
        systems = systems_for(language, args.min_sentence_length)
        per_system = {}
        for name, split in systems.items():
            # Errors are shown from the first half only: the second stays unseen.
            first = evaluate(documents[:half], split, keep_errors=args.errors)
            second = evaluate(documents[half:], split)
            whole = first + second
            per_system[name] = {**whole.as_dict(), "second_half": second.as_dict()}
            rows.append((language, name, whole, second))
            for error in whole.errors:
                print(f"  {language} {name} {error['kind']}: {error['at']!r}", file=sys.stderr)
        repository, _, licence = TREEBANKS[language]
        results[language] = {
            "treebank": repository,
            "licence": licence,
            "split": args.split,
            "documents": len(documents),
            "sentences": sum(len(d) for d in documents),
            "systems": per_system,
        }
        if args.speed_runs:
            base = ChunkingConfig(min_sentence_length=args.min_sentence_length)
            configs = {"seams (en rules)": base}
            if language != "en":
                configs["seams (language)"] = base.with_overrides(language=language)
            configs["seams (auto)"] = base.with_overrides(language="auto")
            speeds = segmentation_speed(documents, configs, args.speed_runs)
            results[language]["candidates_per_second"] = {k: round(v) for k, v in speeds.items()}

    second_label = f"{args.split} 2nd half F1"
    print(f"Sentence-boundary F1, UD {args.split} files (sentences joined by a space)\n")
    print(f"| language | system | precision | recall | F1 | {second_label} |")
    print("|---|---|---:|---:|---:|---:|")
    for language, name, whole, second in rows:
        print(
            f"| {language} | {name} | {whole.precision:.3f} | {whole.recall:.3f} "
            f"| **{whole.f1:.3f}** | {second.f1:.3f} |"
        )
    if args.speed_runs:
        names = ("seams (en rules)", "seams (language)", "seams (auto)")
        print(f"\nCandidates per CPU second, {SPEED_CHARS // 1000} KB of each language's documents")
        print(f"(median of {args.speed_runs} interleaved runs)\n")
        print("| language | " + " | ".join(names) + " |")
        print("|---|---:|---:|---:|")
        for language in args.languages:
            speeds = results[language]["candidates_per_second"]
            cells = [f"{speeds[n]:,}" if n in speeds else "-" for n in names]
            print(f"| {language} | " + " | ".join(cells) + " |")
    if args.json:
        payload = with_header({"split": args.split, "languages": results}, argv)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
