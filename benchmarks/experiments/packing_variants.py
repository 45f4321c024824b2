"""Two ways of packing a context budget compared on the same readings of three public sets.

`seams search --budget B` answers from one reading of the index (`engine.read_search`) through
`engine.ranked_response`, which packs with `context_budget.pack_passages`. Given the readings
pickled by `passage_growth.py read` (one per set, hybrid at the settings' weight), this script
answers every question at 250 / 500 / 1,000 tokens once per packer and scores the packed context
with `budget_recall.context_recall` (as `seams eval` does): a packer is a `context_budget.py`
file (say, `git show REV:storage/search/context_budget.py > old.py`) or `current`, the one
imported. Chunks and ranking are the readings', so any difference is the packer's alone.

    .venv/bin/python benchmarks/experiments/packing_variants.py READINGS/*.pkl \\
        --packer before=old.py --packer after=current --sets SETS --questions 150

`--questions N` scores each set's first N questions by sha256 of their ids (`long_qa.sample_order`,
what `benchmarks.qa_budget --questions N` scores), read from `SETS/<set>/questions.jsonl`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pickle
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from benchmarks.experiments.passage_growth import BUDGETS, token_counter  # noqa: E402
from benchmarks.long_qa import sample_order  # noqa: E402


def load_packer(name: str, spec: str) -> Callable[..., Any]:
    """`pack_passages` of a `context_budget.py` file, or the imported one for "current"."""
    if spec == "current":
        from seams.storage.search.context_budget import pack_passages

        return pack_passages
    module_name = f"_packer_{name}"
    found = importlib.util.spec_from_file_location(module_name, spec)
    if found is None or found.loader is None:
        raise SystemExit(f"--packer {name}={spec}: not a Python file")
    module = importlib.util.module_from_spec(found)
    sys.modules[module_name] = module
    found.loader.exec_module(module)
    return module.pack_passages


def sample(data: dict[str, Any], sets: Path | None, limit: int | None) -> list[int]:
    """Positions of the questions to score: all, or the first `limit` by `sample_order` of ids."""
    positions = list(range(len(data["questions"])))
    if limit is None:
        return positions
    if sets is None:
        raise SystemExit("--questions needs --sets (the ids are in SETS/<set>/questions.jsonl)")
    lines = (sets / data["set"] / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    if [r["question"] for r in rows] != [q for q, _, _ in data["questions"]]:
        raise SystemExit(f"{data['set']}: the readings' questions differ from questions.jsonl")
    chosen = set(sample_order([r["id"] for r in rows])[:limit])
    return [i for i, r in enumerate(rows) if r["id"] in chosen]


def recalls(
    data: dict[str, Any],
    positions: Sequence[int],
    pack: Callable[..., Any],
    count: Callable[[list[str]], list[int]],
) -> dict[int, float]:
    """Mean recall per budget of the questions at `positions`, hybrid, packed by `pack`."""
    from seams.storage.search import engine
    from seams.storage.search.budget_recall import context_recall
    from seams.storage.search.evaluation import EVAL_K

    original = engine.pack_passages
    engine.pack_passages = pack
    try:
        out: dict[int, list[float]] = {b: [] for b in BUDGETS}
        for i in positions:
            _, document, spans = data["questions"][i]
            reading = data["readings"]["hybrid"][i]
            for budget in BUDGETS:
                response = engine.ranked_response(
                    reading,
                    EVAL_K,
                    lexical_weight=data["lexical_weight"],
                    budget=budget,
                    count_tokens=count,
                )
                context = response.context.spans if response.context is not None else []
                given = [(s.document_id, s.start_char, s.end_char) for s in context]
                out[budget].append(context_recall(given, document, spans))
    finally:
        engine.pack_passages = original
    return {b: sum(v) / len(v) if v else 0.0 for b, v in out.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("readings", type=Path, nargs="+")
    parser.add_argument("--packer", action="append", required=True, help="NAME=FILE|current")
    parser.add_argument("--sets", type=Path, help="the sets' folder (eval_questions.py's OUT)")
    parser.add_argument("--questions", type=int, help="score a sample of N questions per set")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    packers = {}
    for given in args.packer:
        name, _, spec = given.partition("=")
        packers[name] = load_packer(name, spec or name)
    count = token_counter()
    table: dict[str, dict[str, dict[str, float]]] = {}
    for path in args.readings:
        with path.open("rb") as handle:
            data = pickle.load(handle)
        positions = sample(data, args.sets, args.questions)
        for name, pack in packers.items():
            figures = recalls(data, positions, pack, count)
            rounded = {str(b): round(v, 4) for b, v in figures.items()}
            table.setdefault(data["set"], {})[name] = rounded
            print(
                f"{data['set']:>9} ({len(positions)} q) {name:>12}: "
                + " / ".join(f"{v:.3f}" for v in figures.values()),
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
