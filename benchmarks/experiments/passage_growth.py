"""How a passage grows inside a context budget, measured on three public question sets at once.

`seams search --budget B` packs passages (`context_budget.pack_passages`): each hit's best
sentence, grown one sentence at a time while that step is worth more than anything else that
still fits. A growth step is worth `value * (share + (1 - share) * evidence)`: `value` the hit's
scaled ranking score, `evidence` the next sentence's fused lexical + dense evidence, `share`
(`GROWTH_HIT_SHARE`) how much growth leans on the hit rather than on the sentence. At share 0 a
passage stops growing through a paragraph whose other sentences share few words with the
question; at share 1 a strong hit grows whole before a weak hit's best sentence is given.

The index is read once per set and question (`engine.read_search`, hybrid, dense and lexical,
the settings' `sentence_weight`, `seams search -k 5`'s pool) and kept in a pickle; every variant
is then answered from those readings by `engine.ranked_response`, the function `seams search`
answers with, and scored by `budget_recall.context_recall`, as `seams eval` scores it. So the
figures are `seams search --budget`'s by construction, and a variant costs seconds, not a rerun.

Steps (each set's folder as `benchmarks/eval_questions.py` writes it, indexed by `seams run docs`
in its own data dir):

    SEAMS_DATA_DIR=DATA/squad .venv/bin/python benchmarks/experiments/passage_growth.py \\
        read SETS/squad /tmp/readings/squad.pkl          # once per set
    .venv/bin/python benchmarks/experiments/passage_growth.py \\
        growth /tmp/readings/*.pkl --json benchmarks/experiments/results/passage_growth.json
    .venv/bin/python benchmarks/experiments/passage_growth.py \\
        weights /tmp/readings/*.pkl --share S --json .../passage_growth_weights.json

`growth`: recall at each budget per set for each share, and the share chosen by leaving one set
out (the best mean over the other sets of the mean recall over the budgets). `weights`: at one
share, `seams eval`'s choice of `lexical_weight` per set (two halves, picked on one, scored on
the other, `budget_recall.cross_validate`) against the best fixed way of ranking on that set.
"""

from __future__ import annotations

import argparse
import functools
import json
import pickle
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # last: PYTHONPATH may name a snapshot of the product to import
    sys.path.append(str(ROOT))

BUDGETS = (250, 500, 1000)
SHARES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
KINDS = ("hybrid", "dense", "lexical")


def read(set_dir: Path, out: Path) -> None:
    """Every question of `set_dir/questions.jsonl` read from the current index, per way of
    ranking, pickled with what scoring needs (the settings, the questions' documents)."""
    from seams.orchestration.definitions import build_definitions
    from seams.settings import load_settings
    from seams.storage.search.budget_recall import read_questions
    from seams.storage.search.engine import read_search
    from seams.storage.search.evaluation import (
        EVAL_K,
        RememberedQueries,
        indexed_sources,
        located,
        narrowed,
    )

    settings = load_settings()
    resources = build_definitions(settings).resources
    postgres, embedder = resources["seams_postgres"], resources["seams_embedder"]
    path = set_dir / "questions.jsonl"
    questions, _ = read_questions(path)
    sources, published = indexed_sources(postgres, questions, str(path), str(set_dir))
    questions = located(questions, sources, str(path))
    remembered = RememberedQueries(embedder)
    started = time.perf_counter()
    readings: dict[str, list[Any]] = {kind: [] for kind in KINDS}
    for question in questions:  # hybrid read once, the other two are parts of it (`narrowed`)
        hybrid = read_search(
            postgres,
            remembered,
            question.question,
            EVAL_K,
            search="hybrid",
            sentence_weight=settings.retrieval.sentence_weight,
        )
        for kind in KINDS:
            readings[kind].append(narrowed(hybrid, kind))
    payload = {
        "set": set_dir.name,
        "published_seq": published,
        "lexical_weight": settings.retrieval.lexical_weight,
        "questions": [
            (q.question, sources[q.source].document_id, [tuple(s) for s in q.spans])
            for q in questions
        ],
        "readings": readings,
        "read_s": round(time.perf_counter() - started, 1),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as handle:
        pickle.dump(payload, handle)
    print(f"{set_dir.name}: {len(questions)} question(s) read in {payload['read_s']} s -> {out}")


def token_counter() -> Callable[[list[str]], list[int]]:
    """The embedder's token count (what `seams search` counts a budget in), remembered per text:
    the same spans recur across variants."""
    from seams.orchestration.definitions import build_definitions
    from seams.settings import load_settings

    count = build_definitions(load_settings()).resources["seams_embedder"].count_tokens
    seen: dict[str, int] = {}

    def counted(texts: list[str]) -> list[int]:
        missing = [t for t in texts if t not in seen]
        if missing:
            seen.update(zip(missing, count(missing), strict=True))
        return [seen[t] for t in texts]

    return counted


def recalls(
    data: dict[str, Any],
    kind: str,
    weight: float,
    share: float,
    count: Callable[[list[str]], list[int]],
    budgets: Sequence[int] = BUDGETS,
) -> dict[int, list[float]]:
    """Per budget, each question's recall with `kind` search (hybrid at `weight`) and passages
    grown at `share`: `ranked_response` with `pack_passages(hit_share=share)`."""
    from seams.storage.search import context_budget, engine
    from seams.storage.search.budget_recall import context_recall
    from seams.storage.search.evaluation import EVAL_K

    original = engine.pack_passages
    engine.pack_passages = functools.partial(context_budget.pack_passages, hit_share=share)
    try:
        out: dict[int, list[float]] = {b: [] for b in budgets}
        for (_, document, spans), reading in zip(
            data["questions"], data["readings"][kind], strict=True
        ):
            for budget in budgets:
                response = engine.ranked_response(
                    reading, EVAL_K, lexical_weight=weight, budget=budget, count_tokens=count
                )
                context = response.context.spans if response.context is not None else []
                given = [(s.document_id, s.start_char, s.end_char) for s in context]
                out[budget].append(context_recall(given, document, spans))
        return out
    finally:
        engine.pack_passages = original


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def growth(paths: Sequence[Path], shares: Sequence[float]) -> dict[str, Any]:
    """Recall per set, share and budget (hybrid at the settings' weight); leave one set out."""
    count = token_counter()
    sets = [_load(p) for p in paths]
    table: dict[str, dict[str, dict[str, float]]] = {}
    for data in sets:
        per_share = {}
        for share in shares:
            started = time.perf_counter()
            figures = recalls(data, "hybrid", data["lexical_weight"], share, count)
            per_share[str(share)] = {str(b): round(_mean(v), 4) for b, v in figures.items()}
            print(
                f"{data['set']:>9} share {share:.2f}: "
                + "  ".join(f"{b}: {per_share[str(share)][str(b)]:.3f}" for b in BUDGETS)
                + f"  ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
        table[data["set"]] = per_share

    return {"by_set": table, **choose(table)}


def choose(table: dict[str, dict[str, dict[str, float]]]) -> dict[str, Any]:
    """The share by leaving one set out: for each set, the share with the best mean over the
    other sets of the mean recall over the budgets, scored on the set left out."""
    names = list(table)
    shares = sorted({float(s) for per_share in table.values() for s in per_share})

    def objective(name: str, share: float) -> float:
        return _mean(list(table[name][str(share)].values()))

    def best(among: Sequence[str]) -> float:
        return max(shares, key=lambda s: (round(_mean([objective(n, s) for n in among]), 9), -s))

    folds = {}
    for left in names:
        chosen = best([n for n in names if n != left]) if len(names) > 1 else best(names)
        folds[left] = {
            "chosen_on_others": chosen,
            "its_score": round(objective(left, chosen), 4),
            "at_share_0": round(objective(left, 0.0), 4) if "0.0" in table[left] else None,
            "own_best": best([left]),
        }
    return {"leave_one_set_out": folds, "best_mean": best(names)}


def weights(paths: Sequence[Path], share: float) -> dict[str, Any]:
    """Per set, at `share`: `seams eval`'s cross-validated weight against the best fixed way."""
    from seams.storage.search.budget_recall import cross_validate, weight_grid

    count = token_counter()
    out: dict[str, Any] = {}
    for path in paths:
        data = _load(path)
        current = float(data["lexical_weight"])
        documents = [document for _, document, _ in data["questions"]]
        by_weight = {}
        for weight in weight_grid(current):
            figures = recalls(data, "hybrid", weight, share, count)
            by_weight[weight] = [
                _mean(per_q) for per_q in zip(*figures.values(), strict=True)
            ]  # per question, its mean over the budgets: what `seams eval` picks by
        fixed = {
            kind: [
                _mean(q)
                for q in zip(*recalls(data, kind, current, share, count).values(), strict=True)
            ]
            for kind in KINDS[1:]
        }
        choice = cross_validate(by_weight, documents, current)
        best_w = max(by_weight, key=lambda w: _mean(by_weight[w]))
        best_fixed = max(
            [(f"hybrid {best_w}", _mean(by_weight[best_w]))]
            + [(kind, _mean(v)) for kind, v in fixed.items()],
            key=lambda p: p[1],
        )
        out[data["set"]] = {
            "questions": len(documents),
            "folds": [
                {"picked_on": f.picked_on, "weight": f.weight, "score": round(f.score, 4)}
                for f in choice.folds
            ],
            "held_out": round(choice.held_out, 4),
            "current": round(choice.current_score, 4),
            "best_fixed": [best_fixed[0], round(best_fixed[1], 4)],
            "bar_met": choice.held_out >= best_fixed[1] - 0.01,
            "by_weight": {str(w): round(_mean(v), 4) for w, v in by_weight.items()},
            "dense": round(_mean(fixed["dense"]), 4),
            "lexical": round(_mean(fixed["lexical"]), 4),
        }
        print(
            json.dumps(
                {data["set"]: {k: v for k, v in out[data["set"]].items() if k != "by_weight"}}
            )
        )
    return out


def _load(path: Path) -> dict[str, Any]:
    with path.open("rb") as handle:
        return pickle.load(handle)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    reader = steps.add_parser("read", help="read a set's questions from its index, once")
    reader.add_argument("set_dir", type=Path)
    reader.add_argument("out", type=Path)
    grower = steps.add_parser("growth", help="recall per share, leave one set out")
    grower.add_argument("readings", type=Path, nargs="+")
    grower.add_argument("--shares", type=lambda s: [float(x) for x in s.split(",")])
    grower.add_argument("--json", type=Path)
    chooser = steps.add_parser("choose", help="leave one set out over `growth` JSON files")
    chooser.add_argument("tables", type=Path, nargs="+")
    chooser.add_argument("--json", type=Path)
    weigher = steps.add_parser("weights", help="seams eval's weight choice per set")
    weigher.add_argument("readings", type=Path, nargs="+")
    weigher.add_argument("--share", type=float, required=True)
    weigher.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.step == "read":
        read(args.set_dir, args.out)
        return 0
    if args.step == "growth":
        result = growth(args.readings, args.shares or SHARES)
    elif args.step == "choose":
        table: dict[str, Any] = {}
        for path in args.tables:
            table.update(json.loads(path.read_text(encoding="utf-8"))["by_set"])
        result = {"by_set": table, **choose(table)}
    else:
        result = weights(args.readings, args.share)
    text = json.dumps(result, indent=1)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
