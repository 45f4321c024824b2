"""Recall at a context budget on a user's own questions, and the fusion weight they choose: the
arithmetic of `seams eval`, without a database.

A questions file (JSON Lines) holds one question per line, the file its answer is in and the
answer: a quote of that file, located in its extracted text (`locate_answer`), or its character
spans there (`parse_questions`, `check_spans`). The
figure is what a reader of `seams search --budget B` gets, measured as `benchmarks/qa_budget.py`
measures it (`packed_recall` there): per question, the share of its reference characters
(overlapping references merged, so no character counts twice) inside the spans of the packed
context that lie in the question's own document, spans of other documents counting for nothing;
then the mean over the questions (`context_recall`, `mean`).

`retrieval.lexical_weight` picked and judged on the same questions looks better than it is, so
`cross_validate` picks it on one half of the questions and scores it on the other (`halves`: two
folds, whole source files kept together where there are enough of them, as the benchmark's
document-disjoint halves), and only a weight that wins held out replaces the current one.
"""

from __future__ import annotations

import hashlib
import json
import math
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from seams.errors import InputError

Span = tuple[int, int]
"""A half-open character span, `text[start:end]`."""

WEIGHT_STEP = 0.1
"""Spacing of the default `lexical_weight` grid (0, 0.1, ..., 1): the optimum is flat (the
benchmark's sets lie within 0.005 over 0.5-0.8), so a finer grid mostly fits noise."""

MIN_SOURCES_FOR_FOLDS = 4
"""With this many distinct sources, the folds keep each source's questions together."""

MAX_QUESTIONS = 20_000
"""The most questions `seams eval` takes in one file: each is a search per weight and budget
(about 0.1 s here), so 20,000 take over half an hour; a sample of a few thousand measures the
same within noise."""
MAX_QUESTIONS_BYTES = 16 * 2**20
"""The largest question file read (checked before it is read): 20,000 questions of a few
hundred bytes each."""
FIELDS = ("question", "source")
EXAMPLE = '{"question": "...", "source": "notes.md", "answer": "a quote from notes.md"}'


@dataclass(frozen=True)
class EvalQuestion:
    """One line of a questions file."""

    line: int
    """Its line number in the file (1-based), for messages."""
    question: str
    source: str
    """The file holding the answer: its name, or a path (see `seams eval --help`)."""
    spans: tuple[Span, ...]
    """Where the answer is: character offsets into the source's extracted text (empty until
    `locate_answer` finds `answer` there)."""
    answer: str | None = None
    """The answer as a quote of the source, located in its extracted text (`locate_answer`)."""


def read_questions(path: Path) -> tuple[list[EvalQuestion], str]:
    """The questions of the file at `path` (`parse_questions`) and its content's sha256 (what a
    measurement of them is versioned by); an `InputError` naming the file when it cannot be read."""
    try:
        size = path.stat().st_size
        if size > MAX_QUESTIONS_BYTES and path.is_file():
            raise InputError(
                f"{path}: {size / 2**20:.1f} MiB, more than seams eval reads "
                f"({MAX_QUESTIONS_BYTES // 2**20} MiB, about {MAX_QUESTIONS:,} questions): "
                f"evaluate a sample of it (e.g. `shuf -n 2000 {path} > sample.jsonl`)"
            )
        data = path.read_bytes()
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise InputError(f"{path} does not exist: give a JSON Lines file of questions") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a folder: give a JSON Lines file of questions") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason}): save it as UTF-8") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    return parse_questions(text.splitlines(), str(path)), hashlib.sha256(data).hexdigest()


def parse_questions(lines: Iterable[str], name: str) -> list[EvalQuestion]:
    """The questions of a JSON Lines file (`name`, for messages), blank lines skipped; an
    `InputError` naming the line for one that is not a JSON object with a non-empty `question`
    and `source` and a non-empty list of `[start, end]` spans (integers, 0 <= start < end), and
    for a file without any question. Other fields of a line are ignored."""
    questions = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{name}, line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"{where}: not valid JSON ({exc.msg} at column {exc.colno}): write one object "
                f"per line, e.g. {EXAMPLE}"
            ) from None
        if not isinstance(record, dict):
            raise InputError(f"{where}: expected a JSON object, e.g. {EXAMPLE}")
        if "answer" in record and "spans" in record:
            raise InputError(f"{where}: give 'answer' or 'spans', not both, e.g. {EXAMPLE}")
        missing = [field for field in FIELDS if field not in record]
        if "answer" not in record and "spans" not in record:
            missing.append("answer")
        if missing:
            raise InputError(
                f"{where}: missing {', '.join(repr(f) for f in missing)}: every line needs "
                f"question, source and answer (a quote of the source; or spans, character "
                f"offsets), e.g. {EXAMPLE}"
            )
        for field in ("question", "source"):
            value = record[field]
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"{where}: {field!r} must be a non-empty string, got {value!r}")
            if "\x00" in value:
                raise InputError(f"{where}: {field!r} contains a NUL character (\\u0000)")
        if "answer" in record:
            answer = record["answer"]
            if not isinstance(answer, str) or not answer.strip():
                raise InputError(f"{where}: 'answer' must be a non-empty string, got {answer!r}")
            question = EvalQuestion(number, record["question"], record["source"], (), answer)
        else:
            question = EvalQuestion(
                number, record["question"], record["source"], _spans(record, where)
            )
        questions.append(question)
    if not questions:
        raise InputError(f"{name}: no questions in it: write one JSON object per line, {EXAMPLE}")
    if len(questions) > MAX_QUESTIONS:
        raise InputError(
            f"{name}: {len(questions):,} questions, more than seams eval takes "
            f"({MAX_QUESTIONS:,}): evaluate a sample of them (e.g. `shuf -n 2000 {name} > "
            "sample.jsonl`)"
        )
    return questions


def _spans(record: dict[str, object], where: str) -> tuple[Span, ...]:
    spans = record["spans"]
    if not isinstance(spans, list) or not spans:
        raise InputError(
            f"{where}: 'spans' must be a non-empty list of [start, end] character offsets, "
            f"got {spans!r}"
        )
    out = []
    for span in spans:
        pair = span if isinstance(span, list) and len(span) == 2 else None
        if pair is None or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair):
            raise InputError(f"{where}: span {span!r} is not a pair of integers [start, end]")
        start, end = pair
        if not 0 <= start < end:
            raise InputError(
                f"{where}: span [{start}, {end}] is empty or reversed: need 0 <= start < end"
            )
        out.append((start, end))
    return tuple(out)


def check_spans(question: EvalQuestion, text: str, name: str) -> None:
    """An `InputError` when a span of `question` reaches past the end of its source's extracted
    `text` (offsets count characters of that text, not bytes of the file)."""
    for start, end in question.spans:
        if end > len(text):
            raise InputError(
                f"{name}, line {question.line}: span [{start}, {end}] lies outside "
                f"{question.source}, whose extracted text has {len(text)} characters: offsets "
                "count characters of the extracted text (for .txt and .md, of the file's text)"
            )


def locate_answer(question: EvalQuestion, text: str, name: str) -> EvalQuestion:
    """`question` with the span of its `answer` quote in its source's extracted `text` (runs of
    whitespace match any whitespace, so a quote copied across a line break is found); an
    `InputError` naming the line when the quote is not there or is there more than once."""
    if question.answer is None:
        return question
    words = question.answer.split()
    pattern = re.compile(r"\s+".join(re.escape(word) for word in words))
    found = [m.span() for m in pattern.finditer(text)]
    where = f"{name}, line {question.line}"
    if not found:
        raise InputError(
            f"{where}: the answer {_quoted(question.answer)} is not in {question.source}: "
            "quote the source's text exactly (case and punctuation as written)"
        )
    if len(found) > 1:
        raise InputError(
            f"{where}: the answer {_quoted(question.answer)} is in {question.source} "
            f"{len(found)} times: quote more of the passage so it is found once"
        )
    return replace(question, spans=(found[0],))


def _quoted(answer: str, width: int = 60) -> str:
    short = " ".join(answer.split())
    return repr(short if len(short) <= width else short[: width - 3] + "...")


def matching_paths(source: str, paths: Sequence[str], cwd: str) -> list[int]:
    """Positions in `paths` (absolute POSIX paths of the indexed files) of the file a question's
    `source` names: an absolute path names that file; a relative one names the file it reaches
    from `cwd`, else every indexed file whose path ends with it (so a bare name, `notes.md`,
    finds the one indexed `notes.md` wherever it lies). More than one position: ambiguous."""
    if posixpath.isabs(source):
        wanted = posixpath.normpath(source)
        return [i for i, path in enumerate(paths) if path == wanted]
    relative = posixpath.normpath(source)
    here = posixpath.normpath(posixpath.join(cwd, relative))
    exact = [i for i, path in enumerate(paths) if path == here]
    if exact or relative.startswith("../"):
        return exact
    tail = "/" + relative
    return [i for i, path in enumerate(paths) if path.endswith(tail)]


def merge_spans(spans: Iterable[Span]) -> list[Span]:
    """The union of half-open spans as sorted, disjoint spans (touching spans joined)."""
    merged: list[Span] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def context_recall(
    context: Iterable[tuple[str, int, int]], document: str, reference: Iterable[Span]
) -> float:
    """The share of the `reference` characters of `document` inside the packed `context`, given
    as (document, start, end) spans; spans of other documents count for nothing."""
    wanted = merge_spans(reference)
    total = sum(end - start for start, end in wanted)
    if not total:
        return 0.0
    given = merge_spans((start, end) for doc, start, end in context if doc == document)
    inside = sum(max(0, min(end, b) - max(start, a)) for start, end in wanted for a, b in given)
    return inside / total


def mean(values: Iterable[float]) -> float:
    """The arithmetic mean (0.0 of nothing)."""
    values = list(values)
    return math.fsum(values) / len(values) if values else 0.0


def weight_grid(current: float, step: float = WEIGHT_STEP) -> tuple[float, ...]:
    """The `lexical_weight`s to try: 0 to 1 by `step`, and the current one."""
    count = round(1 / step)
    grid = {round(i / count, 6) for i in range(count + 1)} | {float(current)}
    return tuple(sorted(grid))


def halves(
    sources: Sequence[str], min_groups: int = MIN_SOURCES_FOR_FOLDS
) -> tuple[tuple[int, ...], ...]:
    """Two folds of question positions for cross-validation, deterministic.

    With at least `min_groups` distinct sources, each source's questions stay in one half (a
    weight picked on questions about a file is not scored on other questions about it), the
    sources dealt in order of first appearance to the half with fewer questions so far; else
    the questions alternate. Needs two questions; a half is never empty."""
    if len(sources) < 2:
        raise InputError(
            f"cross-validation needs at least 2 questions, got {len(sources)}: add questions"
        )
    groups: dict[str, list[int]] = {}
    for position, source in enumerate(sources):
        groups.setdefault(source, []).append(position)
    if len(groups) < min_groups:
        return tuple(range(0, len(sources), 2)), tuple(range(1, len(sources), 2))
    folds: tuple[list[int], list[int]] = ([], [])
    for members in groups.values():
        lighter = folds[0] if len(folds[0]) <= len(folds[1]) else folds[1]
        lighter.extend(members)
    return tuple(sorted(folds[0])), tuple(sorted(folds[1]))


def best_weight(
    scores: Mapping[float, Sequence[float]], positions: Iterable[int], current: float
) -> float:
    """The weight with the best mean score over the questions at `positions`; ties go to the
    weight nearest the current one, then to the smaller."""
    chosen = list(positions)

    def key(weight: float) -> tuple[float, float, float]:
        value = mean(scores[weight][i] for i in chosen)
        return (round(value, 12), -abs(weight - current), -weight)

    return max(scores, key=key)


@dataclass(frozen=True)
class Fold:
    """One direction of the cross-validation: a weight picked on one half, scored on the other."""

    picked_on: int
    """Questions the weight was picked on."""
    weight: float
    scored_on: int
    """Questions it was then scored on (the other half)."""
    score: float
    """Its mean score there."""
    current_score: float
    """The current weight's mean score on the same questions."""


@dataclass(frozen=True)
class WeightChoice:
    """What cross-validation says about `lexical_weight`."""

    current: float
    folds: tuple[Fold, ...]
    held_out: float
    """Mean over all questions of each one's score at the weight picked on the other half."""
    current_score: float
    """The current weight's mean over all questions."""
    weight: float
    """The weight with the best mean over all questions (what `--apply` writes)."""
    score: float
    """Its mean over all questions (picked and judged on the same questions: optimistic)."""
    by_source: bool
    """Whether the halves keep each source's questions together."""

    @property
    def gain(self) -> float:
        """Held-out score of picking a weight, minus the current weight's score."""
        return self.held_out - self.current_score

    @property
    def change(self) -> bool:
        """Whether to write `weight`: picking wins held out and names another weight."""
        return self.gain > 1e-9 and abs(self.weight - self.current) > 1e-9


def cross_validate(
    scores: Mapping[float, Sequence[float]], sources: Sequence[str], current: float
) -> WeightChoice:
    """Two-fold cross-validation of picking `lexical_weight` by the best mean score.

    `scores[w][i]` is question i's score at weight w (every weight scores every question; the
    current weight must be among them); `sources[i]` its source, for the folds (`halves`). Each
    half picks the weight with the best mean on it (`best_weight`), which is scored on the other
    half; `held_out` is the mean of those scores over all questions, against `current_score`,
    the current weight's mean. The weight to write is the best over all questions."""
    if current not in scores:
        raise ValueError(f"the current weight {current} is not among the scored weights")
    size = len(sources)
    if any(len(values) != size for values in scores.values()):
        raise ValueError("every weight must score every question")
    folds = halves(sources)
    held: list[float] = [0.0] * size
    out = []
    for pick, judge in ((folds[0], folds[1]), (folds[1], folds[0])):
        weight = best_weight(scores, pick, current)
        for i in judge:
            held[i] = scores[weight][i]
        out.append(
            Fold(
                picked_on=len(pick),
                weight=weight,
                scored_on=len(judge),
                score=mean(scores[weight][i] for i in judge),
                current_score=mean(scores[current][i] for i in judge),
            )
        )
    overall = best_weight(scores, range(size), current)
    return WeightChoice(
        current=current,
        folds=tuple(out),
        held_out=mean(held),
        current_score=mean(scores[current]),
        weight=overall,
        score=mean(scores[overall]),
        by_source=len(set(sources)) >= MIN_SOURCES_FOR_FOLDS,
    )
