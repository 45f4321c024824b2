"""A public question set as `seams eval` reads it: its documents as .txt files and a questions
file (JSON Lines, `{"question", "source", "spans"}`), so the command can be run on text nobody
here wrote and its figures compared with `benchmarks/qa_budget.py`'s.

The sets and their evidence are `benchmarks/long_qa.py`'s (SQuAD: the sentence holding the first
answer; COVID-QA: the answer span; QASPER: the evidence paragraphs), so a question's `spans` are
the very reference `qa_budget` scores, and `seams eval`'s hybrid row at the default weight is
its `seams/hybrid-packed-passages` row. A document's .txt file holds its text exactly (UTF-8,
`\\n` line ends), which is what extraction gives back for a .txt, so the offsets hold.

    .venv/bin/python -m benchmarks.eval_questions /tmp/squad-eval
    cd /tmp/squad-eval/squad && seams run docs && seams eval questions.jsonl

writes, per set, `OUT/<set>/docs/<document>.txt` and `OUT/<set>/questions.jsonl` (sources by
file name).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.long_qa import QaSet, load_covid_qa, load_qasper, load_squad_set  # noqa: E402
from benchmarks.public_data import DEFAULT_DATA  # noqa: E402

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def file_names(qa: QaSet) -> dict[str, str]:
    """Per document id, a distinct, portable .txt file name."""
    names: dict[str, str] = {}
    for document in qa.documents:
        stem = _UNSAFE.sub("_", document.id).strip("._") or "document"
        name, number = f"{stem}.txt", 2
        while name in names.values():
            name, number = f"{stem}-{number}.txt", number + 1
        names[document.id] = name
    return names


def write_set(qa: QaSet, folder: Path, limit: int | None = None) -> int:
    """The set's documents under `folder/docs` and its questions (the first `limit`, in the
    set's order) in `folder/questions.jsonl`; the number of questions written."""
    docs = folder / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    names = file_names(qa)
    texts = {}
    for document in qa.documents:
        (docs / names[document.id]).write_text(document.text, encoding="utf-8", newline="\n")
        texts[document.id] = document.text
    questions = qa.questions[:limit] if limit else qa.questions
    lines = []
    for question in questions:
        for start, end in question.evidence:
            if not 0 <= start < end <= len(texts[question.document]):
                raise ValueError(f"{qa.name} {question.id}: evidence {start}:{end} out of range")
        lines.append(
            json.dumps(
                {
                    "question": question.question,
                    "source": names[question.document],
                    "spans": [list(span) for span in question.evidence],
                    "id": question.id,
                },
                ensure_ascii=False,
            )
        )
    (folder / "questions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write each set into")
    parser.add_argument("--data", default=DEFAULT_DATA, help="folder of squad-dev-5.json")
    parser.add_argument("--no-squad", action="store_true", help="leave SQuAD out")
    parser.add_argument("--covid-qa", type=Path, help="folder or file of COVID-QA (long_qa)")
    parser.add_argument("--covid-docs", type=int, default=40, help="COVID-QA articles (40)")
    parser.add_argument("--qasper", type=Path, help="QASPER sample file (long_qa)")
    parser.add_argument("--qasper-docs", type=int, default=None, help="QASPER papers (all)")
    parser.add_argument("--limit", type=int, help="only the first N questions of each set")
    args = parser.parse_args(argv)
    sets = [] if args.no_squad else [load_squad_set(args.data)]
    if args.covid_qa:
        sets.append(load_covid_qa(args.covid_qa, args.covid_docs))
    if args.qasper:
        sets.append(load_qasper(args.qasper, args.qasper_docs))
    for qa in sets:
        count = write_set(qa, args.out / qa.name, args.limit)
        where = args.out / qa.name
        print(f"{qa.name}: {len(qa.documents)} document(s), {count} question(s) -> {where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
