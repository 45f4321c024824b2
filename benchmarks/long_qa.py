"""Question sets with evidence spans for the context-budget evaluation (`benchmarks/qa_budget.py`).

Three public sets, one shape (`QaSet`: documents, and questions whose evidence is a list of char
spans in their document), so every system is scored by the same code:

- **squad**: the five SQuAD 2.0 dev articles of `../shared/data/squad-dev-5.json` (CC BY-SA 4.0),
  loaded by `public_data.load_squad`; evidence = the sentence(s) holding the first answer.
- **covid-qa**: COVID-QA (Möller et al., 2020), long scientific articles from CORD-19 with
  questions written by biomedical experts and answers marked as spans in SQuAD format, usually a
  whole sentence: evidence = the answer span. Source: github.com/deepset-ai/COVID-QA, file
  `data/question-answering/200423_covidQA.json` at commit
  fb2eb5e249618457e5359806601086c635c8eb8f (98 articles, 1,380 questions; the repository is
  Apache-2.0, each article carries its own licence line, mostly CC BY). 234 `answer_start`
  offsets of that file are off; the answer is then taken at its occurrence nearest the stated
  offset, and dropped if it does not occur.
- **qasper**: QASPER (Dasigi et al., 2021, CC BY 4.0), NLP papers with information-seeking
  questions whose annotators marked evidence paragraphs. The file read is the first ten papers
  of QASPER's train split as exported from Hugging Face `allenai/qasper` (parquet conversion) by
  github.com/rajsr-p/qasper-personal, `qasper-original-sample.json` at commit
  d40559b9f8468dc3c94620503a9d83075df07016 (concatenated JSON objects; the original allenai
  layout, a dict of papers as in `qasper-dev-v0.3.json`, is read too: the whole dev split is
  plain text in github.com/wideyard/timeaware at commit ba2f3d3639a09fd36725a3212b5037bc94eaa1eb,
  `data/qasper/qasper-dev-v0.3.json`, 281 papers, an LFS pointer in its later commits; not used
  by the committed results, see docs/benchmarks-retrieval.md). Evidence = the paragraphs
  of the first answer that has any in the body text ("FLOAT SELECTED" table/figure captions are
  not in the text and are skipped); unanswerable questions are dropped.

Nothing is shipped with Seams: the files are fetched into a cache folder outside the checkout
(see benchmarks/results/README.md, "Retrieval at a fixed context budget") and passed by path.
Subsampling is deterministic: documents ordered by sha256 of "seed:id".
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.public_data import DEFAULT_DATA, load_squad

Span = tuple[int, int]
COVID_QA_FILE = "200423_covidQA.json"
QASPER_FILE = "qasper-original-sample.json"
FLOAT_EVIDENCE = "FLOAT SELECTED"


@dataclass(frozen=True)
class QaDocument:
    id: str
    text: str


@dataclass(frozen=True)
class QaQuestion:
    id: str
    question: str
    document: str  # QaDocument.id
    evidence: tuple[Span, ...]  # char spans in the document's text


@dataclass(frozen=True)
class QaSet:
    name: str
    documents: tuple[QaDocument, ...]
    questions: tuple[QaQuestion, ...]
    source: str


def sample_order(ids: list[str], seed: int = 0) -> list[str]:
    """`ids` in a fixed pseudo-random order (sha256 of "seed:id"): a subsample that does not
    depend on file order and does not change when the limit does."""
    return sorted(ids, key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())


def load_squad_set(data: Path | str = DEFAULT_DATA) -> QaSet:
    documents, questions = load_squad(data)
    return QaSet(
        "squad",
        tuple(QaDocument(d.title, d.text) for d in documents),
        tuple(QaQuestion(q.id, q.question, q.document, (q.reference,)) for q in questions),
        "../shared/data/squad-dev-5.json (SQuAD 2.0 dev, 5 articles; CC BY-SA 4.0)",
    )


def _locate(context: str, text: str, start: int) -> Span | None:
    """The answer's span: at `start` if it is there, else its occurrence nearest `start`; the
    span is trimmed of surrounding whitespace. None if the text does not occur."""
    needle = text.strip()
    if not needle:
        return None
    if context[start : start + len(text)] == text:
        offset = start + len(text) - len(text.lstrip())
        return offset, offset + len(needle)
    found, at = [], context.find(needle)
    while at >= 0:
        found.append(at)
        at = context.find(needle, at + 1)
    if not found:
        return None
    best = min(found, key=lambda a: (abs(a - start), a))
    return best, best + len(needle)


def parse_covid_qa(payload: dict[str, Any], limit: int | None = None, seed: int = 0) -> QaSet:
    """COVID-QA's SQuAD-layout json -> one document per article, its answerable questions."""
    articles: dict[str, dict[str, Any]] = {}
    for entry in payload["data"]:
        for paragraph in entry["paragraphs"]:
            articles[str(paragraph["document_id"])] = paragraph
    chosen = sample_order(list(articles), seed)[:limit] if limit else sorted(articles)
    documents, questions = [], []
    for doc_id in sorted(chosen, key=lambda i: int(i) if i.isdigit() else i):
        paragraph = articles[doc_id]
        text = paragraph["context"].replace("\r\n", "\n").replace("\r", "\n")
        documents.append(QaDocument(f"covid-{doc_id}", text))
        for qa in paragraph["qas"]:
            if qa.get("is_impossible") or not qa.get("answers"):
                continue
            answer = qa["answers"][0]
            span = _locate(text, answer["text"], int(answer["answer_start"]))
            if span is not None:
                questions.append(
                    QaQuestion(str(qa["id"]), qa["question"], f"covid-{doc_id}", (span,))
                )
    return QaSet(
        "covid-qa",
        tuple(documents),
        tuple(questions),
        "deepset-ai/COVID-QA@fb2eb5e2 data/question-answering/200423_covidQA.json (Apache-2.0)",
    )


def _qa_file(path: Path | str, name: str, label: str, flag: str) -> Path:
    """`path`, or the file `name` in the folder `path`; a missing file says where to get it."""
    path = Path(path)
    if path.is_dir():
        path = path / name
    if not path.is_file():
        raise FileNotFoundError(
            f"{label} file {path} not found; fetch it as benchmarks/results/README.md says "
            f"(section 'Retrieval at a fixed context budget') and pass it with {flag}"
        )
    return path


def load_covid_qa(path: Path | str, limit: int | None = 40, seed: int = 0) -> QaSet:
    path = _qa_file(path, COVID_QA_FILE, "COVID-QA", "--covid-qa")
    return parse_covid_qa(json.loads(path.read_text(encoding="utf-8")), limit, seed)


def _papers(text: str) -> list[dict[str, Any]]:
    """QASPER papers from either layout: the original dict {paper_id: paper} or a stream of
    Hugging Face rows (concatenated JSON objects, `full_text` and `qas` columnar)."""
    decoder, position, rows = json.JSONDecoder(), 0, []
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            break
        row, position = decoder.raw_decode(text, position)
        rows.append(row)
    if len(rows) == 1 and isinstance(rows[0], dict) and "full_text" not in rows[0]:
        return [{"id": key, **paper} for key, paper in rows[0].items()]  # original layout
    return [r for row in rows for r in (row if isinstance(row, list) else [row])]


def _sections(paper: dict[str, Any]) -> list[tuple[str, list[str]]]:
    full = paper["full_text"]
    if isinstance(full, dict):  # Hugging Face: columns
        return list(zip(full["section_name"], full["paragraphs"], strict=True))
    return [(s["section_name"], s["paragraphs"]) for s in full]


def _qas(paper: dict[str, Any]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(question id, question, [answer dicts]) per question, from either layout."""
    qas = paper["qas"]
    if isinstance(qas, dict):  # Hugging Face: columns; answers[i]["answer"] is a list
        return [
            (qid, question, list(answers["answer"]))
            for qid, question, answers in zip(
                qas["question_id"], qas["question"], qas["answers"], strict=True
            )
        ]
    return [(q["question_id"], q["question"], [a["answer"] for a in q["answers"]]) for q in qas]


def parse_qasper(
    text: str, limit: int | None = None, seed: int = 0, name: str = QASPER_FILE
) -> QaSet:
    """QASPER papers -> one document per paper (title, abstract, then each section's name and
    paragraphs, blank-line separated) and the questions with evidence paragraphs in the text.
    `name`: the file's name, for the set's source line."""
    papers = {str(p["id"]): p for p in _papers(text)}
    chosen = sample_order(list(papers), seed)[:limit] if limit else list(papers)
    documents, questions = [], []
    for paper_id in sorted(chosen):
        paper = papers[paper_id]
        parts = [paper["title"].strip(), paper["abstract"].strip()]
        for name, paragraphs in _sections(paper):
            parts.append((name or "").strip())
            parts += [p.strip() for p in paragraphs or [] if p and p.strip()]
        body = "\n\n".join(p for p in parts if p)
        doc_id = f"qasper-{paper_id}"
        documents.append(QaDocument(doc_id, body))
        for qid, question, answers in _qas(paper):
            for answer in answers:
                if answer.get("unanswerable"):
                    continue
                spans = []
                for evidence in answer.get("evidence") or []:
                    evidence = evidence.strip()
                    if not evidence or evidence.startswith(FLOAT_EVIDENCE):
                        continue
                    at = body.find(evidence)
                    if at >= 0:
                        spans.append((at, at + len(evidence)))
                if spans:
                    questions.append(QaQuestion(qid, question, doc_id, tuple(sorted(spans))))
                    break
    source = (
        "rajsr-p/qasper-personal@d40559b9 qasper-original-sample.json "
        "(QASPER train, 10 papers; CC BY 4.0)"
        if name == QASPER_FILE
        else f"{name} (QASPER, {len(documents)} papers; CC BY 4.0)"
    )
    return QaSet("qasper", tuple(documents), tuple(questions), source)


def load_qasper(path: Path | str, limit: int | None = None, seed: int = 0) -> QaSet:
    path = _qa_file(path, QASPER_FILE, "QASPER", "--qasper")
    return parse_qasper(path.read_text(encoding="utf-8"), limit, seed, path.name)
