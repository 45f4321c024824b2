"""`seams eval QUESTIONS.jsonl`: how much of the answers a reader of `seams search --budget B`
gets, on the user's own questions, for each way of ranking; `--apply` writes the
`retrieval.lexical_weight` that cross-validation picks into seams.yaml.

The questions, the figures and the choice are `seams.storage.search.budget_recall`'s; the run
against the index is `seams.storage.search.evaluation`'s; this module reads the file, prints
the result (`--json`: `report_dict`) and writes the settings.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from seams.environment import PROJECT_SETTINGS
from seams.errors import InputError, SeamsError, counted
from seams.models.model_store import load_manifest
from seams.orchestration.cli.context import definitions
from seams.orchestration.cli.terminal import printable, printable_json
from seams.orchestration.runner import seams_command
from seams.orchestration.settings_file import write_value
from seams.paths import packaged_default
from seams.resources.keys import EMBEDDER_KEY, POSTGRES_KEY
from seams.storage.search.budget_recall import (
    EvalQuestion,
    WeightChoice,
    cross_validate,
    mean,
    read_questions,
    weight_grid,
)
from seams.storage.search.evaluation import (
    Evaluation,
    SourceDocument,
    evaluate,
    indexed_sources,
    located,
)


def run(args: argparse.Namespace) -> int:
    """Measure recall at each budget on the questions; with `--apply`, write the weight."""
    path = Path(args.questions)
    questions, _ = read_questions(path)  # before the definitions, the model and the database
    retrieval = args.settings.retrieval
    current = float(retrieval.lexical_weight)
    weights = sorted({*(args.weights or weight_grid(current)), current})
    resources = definitions(args).resources
    embedder = resources[EMBEDDER_KEY]
    try:  # a fresh install has no model and nothing indexed: say what to run
        load_manifest(embedder.resolved_model_dir())
    except SeamsError as exc:
        raise InputError(
            f"nothing to evaluate yet: chunk the questions' files first with `{seams_command()} "
            "run PATH`"
        ) from exc
    sources, published = indexed_sources(
        resources[POSTGRES_KEY],
        questions,
        str(path),
        str(_project_dir(args)),
        f"{seams_command()} run",
    )
    questions = located(questions, sources, str(path))
    result = evaluate(
        resources[POSTGRES_KEY],
        embedder,
        questions,
        sources,
        budgets=args.budgets,
        weights=weights,
        lexical_weight=current,
        sentence_weight=retrieval.sentence_weight,
        count_tokens=embedder.count_tokens,
        published_seq=published,
        progress=_progress if sys.stderr.isatty() else _logged_progress(len(questions)),
    )
    documents = [sources[q.source].document_id for q in questions]  # one per file, however named
    choice = None
    if len(questions) >= 2:
        scores = {w: _objective(per_budget) for w, per_budget in result.by_weight.items()}
        choice = cross_validate(scores, documents, current)
    elif args.apply:
        raise InputError(
            f"{path}: --apply picks a weight on half of the questions and checks it on the "
            "other half: it needs at least 2 questions"
        )
    applied = _apply(args, choice) if args.apply and choice is not None else None
    report = report_dict(documents, result, retrieval.search, current, choice, applied)
    report["misses"] = misses(questions, sources, result, retrieval.search, args.misses)
    if args.json:
        print(printable_json(json.dumps(report, ensure_ascii=False)))
    else:
        print(format_report(report, str(path)))
    return 0


def _objective(per_budget: dict[int, list[float]]) -> list[float]:
    """Per question, its mean recall over the budgets: what the weight is chosen by."""
    columns = list(per_budget.values())
    return [mean(values) for values in zip(*columns, strict=True)]


def _project_dir(args: argparse.Namespace) -> Path:
    """The folder relative names count from: the working directory (or `SEAMS_PROJECT_DIR`) as
    the environment resolved it when the command started."""
    project = args.environment.project_dir
    if project is None:  # only an environment built by hand lacks one
        raise InputError("no project folder: set SEAMS_PROJECT_DIR to the folder to work in")
    return project


def _apply(args: argparse.Namespace, choice: WeightChoice) -> dict[str, Any]:
    """Write the chosen weight into the settings file the command read (a new seams.yaml in
    the project folder when it read the packaged defaults); what was done."""
    environment = args.environment
    target = environment.config_path
    if target is None:
        target = _project_dir(args) / PROJECT_SETTINGS
    if not choice.change:
        return {"path": str(target), "written": False, "lexical_weight": choice.current}
    initial = packaged_default(PROJECT_SETTINGS).read_text(encoding="utf-8")
    edited = write_value(target, "retrieval", "lexical_weight", choice.weight, initial=initial)
    return {
        "path": str(target),
        "written": True,
        "lexical_weight": choice.weight,
        "comments_kept": edited.kept_comments,
    }


def _figures(per_budget: dict[int, list[float]]) -> dict[str, float]:
    return {str(budget): round(mean(values), 4) for budget, values in per_budget.items()}


def report_dict(
    documents: list[str],
    result: Evaluation,
    search: str,
    current: float,
    choice: WeightChoice | None,
    applied: dict[str, Any] | None,
) -> dict[str, Any]:
    """What `seams eval --json` prints (contract: `questions`, `search`, `lexical_weight`,
    `recall` per budget at the current settings, `by_weight`; the rest adds to it).
    `documents`: per question, the document it is about."""
    by_search = {"hybrid": result.by_weight[current], **result.by_search}
    report: dict[str, Any] = {
        "questions": len(documents),
        "sources": len(set(documents)),
        "search": search,
        "lexical_weight": current,
        "budgets": list(result.budgets),
        "recall": _figures(by_search[search]),
        "by_search": {kind: _figures(values) for kind, values in by_search.items()},
        "by_weight": {str(w): _figures(values) for w, values in sorted(result.by_weight.items())},
        "published_seq": result.published_seq,
    }
    if choice is not None:
        report["cross_validation"] = {
            "folds": [
                {
                    "picked_on": fold.picked_on,
                    "lexical_weight": fold.weight,
                    "scored_on": fold.scored_on,
                    "score": round(fold.score, 4),
                    "current_score": round(fold.current_score, 4),
                }
                for fold in choice.folds
            ],
            "halves_by_source": choice.by_source,
            "held_out": round(choice.held_out, 4),
            "current": round(choice.current_score, 4),
            "best_lexical_weight": choice.weight,
            "best_score": round(choice.score, 4),
            "change": choice.change,
        }
    if applied is not None:
        report["applied"] = applied
    return report


def format_report(report: dict[str, Any], name: str) -> str:
    """`report_dict` for a person: one table of recall per budget, then the cross-validation."""
    budgets = [str(b) for b in report["budgets"]]
    current, search = report["lexical_weight"], report["search"]
    lines = [
        f"{printable(name)}: {counted(report['questions'], 'question')} over "
        f"{counted(report['sources'], 'file')}; "
        f"share of the answers' characters inside the context `seams search --budget B` packs",
        "",
        f"{'':22}" + "".join(f"{'B=' + b:>9}" for b in budgets),
    ]

    def row(label: str, figures: dict[str, float], mark: bool) -> str:
        label = f"{label}{'  *' if mark else ''}"
        return f"{label:22}" + "".join(f"{figures[b]:>9.3f}" for b in budgets)

    for kind, figures in report["by_search"].items():
        shown = f"hybrid ({current:g})" if kind == "hybrid" else kind
        lines.append(row(shown, figures, kind == search))
    lines.append("hybrid, lexical_weight")
    for weight, figures in report["by_weight"].items():
        lines.append(row(f"  {float(weight):g}", figures, float(weight) == current))
    lines.append(f"(* the current settings: retrieval.search {search}, lexical_weight {current:g})")
    cv = report.get("cross_validation")
    if cv is not None:
        halves = "each file's questions in one half" if cv["halves_by_source"] else "alternate"
        lines += [
            "",
            "lexical_weight by cross-validation (two halves of the questions, "
            f"{halves}; score: mean recall over the budgets):",
        ]
        for fold in cv["folds"]:
            lines.append(
                f"  picked on {counted(fold['picked_on'], 'question')}: "
                f"{fold['lexical_weight']:g}, which scores {fold['score']:.3f} on the other "
                f"{fold['scored_on']} "
                f"(the current {current:g}: {fold['current_score']:.3f})"
            )
        lines.append(
            f"  held out: {cv['held_out']:.3f} against {cv['current']:.3f} for the current "
            f"weight; the best on all questions: {cv['best_lexical_weight']:g} "
            f"({cv['best_score']:.3f})"
        )
        if report["questions"] < 20:
            lines.append("  few questions: the figures are noisy; add questions to trust them")
        applied = report.get("applied")
        if not cv["change"]:
            lines.append(
                f"  keep lexical_weight {current:g}: picking another wins nothing held out"
            )
        elif applied is None:
            lines.append(
                f"  `seams eval --apply` writes lexical_weight {cv['best_lexical_weight']:g} "
                "into seams.yaml"
            )
        if applied is not None and applied["written"]:
            kept = "" if applied["comments_kept"] else " (rewritten: its comments are gone)"
            lines.append(
                f"  wrote retrieval.lexical_weight {applied['lexical_weight']:g} into "
                f"{printable(applied['path'])}{kept}"
            )
        if search != "hybrid":
            lines.append(f"  (retrieval.search is {search}: lexical_weight ranks hybrid search)")
    missed = report.get("misses") or []
    if missed:
        largest = budgets[-1] if budgets else ""
        lines += ["", f"missed at B={largest} ({len(missed)} shown, worst first):"]
        for miss in missed:
            recall = " / ".join(f"{miss['recall'][b]:.2f}" for b in budgets)
            lines.append(
                f"  line {miss['line']}: {printable(miss['question'])}  "
                f"[{printable(miss['source'])}; recall {recall}]"
            )
            for span in miss["packed"][:3]:
                text = " ".join((span["text"] or "").split())
                text = text if len(text) <= 70 else text[:67] + "..."
                lines.append(
                    f"    packed {printable(span['source'])} {span['start']}:{span['end']}: "
                    f"{printable(text)}"
                )
    return "\n".join(lines)


def misses(
    questions: list[EvalQuestion],
    sources: dict[str, SourceDocument],
    result: Evaluation,
    search: str,
    limit: int,
) -> list[dict[str, Any]]:
    """Up to `limit` questions, worst first, whose answer was not all inside the context the
    largest budget packs under the current settings: each with its recall per budget and the
    spans packed instead (with their text where the document is one the questions name)."""
    if limit <= 0 or search not in result.packed:
        return []
    largest = max(result.budgets)
    per_budget = result.figures(search, result.lexical_weight)
    texts = {s.document_id: s for s in sources.values()}
    order = sorted(range(len(questions)), key=lambda i: (per_budget[largest][i], i))
    out = []
    for i in order[:limit]:
        if per_budget[largest][i] >= 1.0:
            break
        question = questions[i]
        packed = []
        for document_id, start, end in result.packed[search][largest][i]:
            source = texts.get(document_id)
            packed.append(
                {
                    "source": source.path if source else document_id,
                    "start": start,
                    "end": end,
                    "text": source.text[start:end] if source else None,
                }
            )
        out.append(
            {
                "line": question.line,
                "question": question.question,
                "source": question.source,
                "recall": {str(b): round(per_budget[b][i], 4) for b in result.budgets},
                "packed": packed,
            }
        )
    return out


def _progress(done: int, total: int) -> None:
    end = "\n" if done == total else ""
    line = f"\rseams eval: {done}/{counted(total, 'question')}"
    print(line, end=end, file=sys.stderr, flush=True)


def _logged_progress(total: int, lines: int = 20) -> Callable[[int, int], None]:
    """Progress for a log or a pipe (no terminal to redraw a line on): one line each twentieth
    of the questions, so a long evaluation says how far it got."""
    step = max(1, -(-total // lines))

    def progress(done: int, total: int) -> None:
        if done % step == 0 or done == total:
            print(f"seams eval: {done}/{counted(total, 'question')}", file=sys.stderr, flush=True)

    return progress
