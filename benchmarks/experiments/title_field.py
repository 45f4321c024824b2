"""Does a chunk's document title (and section name) help BM25 find it? Header vs separate field.

Seams' BM25 document is a chunk's own text (`lexical_index`: `to_tsvector` of the chunk). A chunk
deep in an article never holds the article's title, and a paragraph of a paper's "Experiments"
section never says "experiments": context a reader of the whole document sees but the index does
not. Two ways to let the index see it, measured here against the text alone:

- **header**: title and section name prepended to the chunk's BM25 document (one bag of lexemes;
  the chunk's length, IDF and average length count them);
- **field**: a second BM25 over the header alone (its own length normalisation and IDF over
  the headers), added with weight `beta`: `bm25(text) + beta * bm25(header)` (BM25F-like).

Everything is computed in Python from the index's own lexemes (`seams.lexical_chunks`, the
product's `to_tsvector` with its text search configuration; headers through the same
`to_tsvector`) with the product's BM25 (`lexical.K1`, `lexical.B`, its IDF), exactly over every
current chunk, so the text-only row is the product's lexical ranking and the rows differ only by
the header. Scored on the set's questions (`seams eval`'s questions file, read via the pickles
of `passage_growth.py read`, which hold each question's document and reference spans):

- recall@5: share of the reference characters inside the top 5 chunks;
- recall at 250 / 500 / 1,000 tokens: whole chunks in rank order while they fit (a chunk that
  does not fit is skipped), the chunk's own token count;
- top document: share of questions whose best chunk is from their document.

Titles: the extracted title (`seams.extracted_text.title`, a .txt file's first line). Sections:
QASPER papers' section names, found in order in the text as written by
`benchmarks/eval_questions.py` (`--qasper` names the QASPER file); COVID-QA's .txt files have no
sections.

    SEAMS_DATA_DIR=DATA/qasper .venv/bin/python benchmarks/experiments/title_field.py \\
        /tmp/readings/qasper.pkl --qasper QASPER.json --json .../title_field_qasper.json
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # last: PYTHONPATH may name a snapshot of the product to import
    sys.path.append(str(ROOT))

BUDGETS = (250, 500, 1000)
BETAS = (0.1, 0.25, 0.5, 1.0)
CHUNKS = """
SELECT c.document_id, c.chunk_id, c.start_char, c.end_char, c.token_count,
       array(SELECT u.lexeme || ':' || cardinality(u.positions) FROM unnest(l.lexemes) AS u)
FROM seams.current_chunks AS c
JOIN seams.lexical_chunks AS l ON l.batch_key = c.batch_key AND l.chunk_id = c.chunk_id
WHERE l.text_search_config = %s
ORDER BY c.document_id, c.start_char
"""
DOCUMENTS = """
SELECT e.document_id, coalesce(e.title, ''), e.text FROM seams.extracted_text AS e
JOIN seams.current_documents AS d ON d.batch_key = e.batch_key AND d.document_id = e.document_id
WHERE e.generation <= d.generation
"""


def bag(conn: Any, config: str, text: str) -> Counter[str]:
    """The lexemes of `text` with their counts, as the index's `to_tsvector` makes them."""
    rows = conn.execute(
        "SELECT u.lexeme, cardinality(u.positions) FROM unnest(to_tsvector(%s::regconfig, %s)) u",
        (config, text),
    ).fetchall()
    return Counter({lexeme: count for lexeme, count in rows})


class Bm25:
    """Okapi BM25 over a list of bags, the product's formula and constants."""

    def __init__(self, bags: Sequence[Counter[str]]):
        from seams.storage.search.lexical import K1, B

        self.k1, self.b, self.bags = K1, B, bags
        self.lengths = [sum(b.values()) for b in bags]
        self.avgdl = (sum(self.lengths) / len(bags)) or 1.0
        df: Counter[str] = Counter()
        for b in bags:
            df.update(b.keys())
        n = len(bags)
        self.idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}

    def scores(self, terms: Sequence[str]) -> list[float]:
        out = []
        for b, length in zip(self.bags, self.lengths, strict=True):
            norm = self.k1 * (1 - self.b + self.b * length / self.avgdl)
            total = 0.0
            for t in terms:
                tf = b.get(t, 0)
                if tf:
                    total += self.idf[t] * tf * (self.k1 + 1) / (tf + norm)
            out.append(total)
        return out


def qasper_sections(path: Path) -> dict[str, list[str]]:
    """Per QASPER document id (`qasper-<paper id>`), its section names in order."""
    from benchmarks.long_qa import _papers, _sections

    papers = _papers(path.read_text(encoding="utf-8"))
    return {f"qasper-{p['id']}": [(n or "").strip() for n, _ in _sections(p)] for p in papers}


def study(readings: Path, qasper: Path | None) -> dict[str, Any]:
    from seams.orchestration.definitions import build_definitions
    from seams.settings import load_settings
    from seams.storage.search.budget_recall import context_recall

    settings = load_settings()
    config = settings.retrieval.text_search_config
    postgres = build_definitions(settings).resources["seams_postgres"]
    with readings.open("rb") as handle:
        data = pickle.load(handle)
    with postgres.connection() as conn:
        rows = conn.execute(CHUNKS, (config,)).fetchall()
        documents = {d: (t, text) for d, t, text in conn.execute(DOCUMENTS).fetchall()}
        names = qasper_sections(qasper) if qasper else {}
        section_at: dict[str, list[tuple[int, str]]] = {}
        for document_id, (_, text) in documents.items():
            found, at = [], 0
            paper = _paper_of(text, names)
            for name in names.get(paper, []) if paper else []:
                position = text.find("\n\n" + name + "\n\n", at) if name else -1
                if position >= 0:
                    found.append((position + 2, name))
                    at = position + 2
            section_at[document_id] = found
        text_bags, title_bags, section_bags = [], [], []
        title_cache: dict[str, Counter[str]] = {}
        for document_id, _, start, _, _, lexemes in rows:
            text_bags.append(
                Counter({x.rsplit(":", 1)[0]: int(x.rsplit(":", 1)[1]) for x in lexemes})
            )
            title = documents[document_id][0]
            if title not in title_cache:
                title_cache[title] = bag(conn, config, title)
            title_bags.append(title_cache[title])
            section = ""
            for position, name in section_at[document_id]:
                if position <= start:
                    section = name
            section_bags.append(bag(conn, config, section) if section else Counter())
        queries = [sorted(bag(conn, config, q)) for q, _, _ in data["questions"]]
    headers = {
        "title": title_bags,
        "title+section": [t + s for t, s in zip(title_bags, section_bags, strict=True)],
    }
    text_index = Bm25(text_bags)
    variants: dict[str, list[list[float]]] = {"text": [text_index.scores(q) for q in queries]}
    for label, header in headers.items():
        if label == "title+section" and not any(section_bags):
            continue
        joined = Bm25([t + h for t, h in zip(text_bags, header, strict=True)])
        variants[f"header: {label}"] = [joined.scores(q) for q in queries]
        field = Bm25(header)
        field_scores = [field.scores(q) for q in queries]
        for beta in BETAS:
            variants[f"field: {label}, beta {beta}"] = [
                [a + beta * h for a, h in zip(base, extra, strict=True)]
                for base, extra in zip(variants["text"], field_scores, strict=True)
            ]
    out: dict[str, Any] = {
        "set": data["set"],
        "chunks": len(rows),
        "questions": len(queries),
        "with_section": sum(bool(s) for s in section_bags),
        "variants": {},
    }
    for label, per_question in variants.items():
        r5, top_doc = [], []
        per_budget: dict[int, list[float]] = {b: [] for b in BUDGETS}
        for (_, document, spans), scores in zip(data["questions"], per_question, strict=True):
            order = sorted(range(len(rows)), key=lambda i: (-scores[i], rows[i][1]))
            top = [(rows[i][0], rows[i][2], rows[i][3]) for i in order[:5]]
            r5.append(context_recall(top, document, spans))
            top_doc.append(float(rows[order[0]][0] == document))
            for budget in BUDGETS:
                used, given = 0, []
                for i in order[:80]:
                    if used + rows[i][4] <= budget:
                        used += rows[i][4]
                        given.append((rows[i][0], rows[i][2], rows[i][3]))
                per_budget[budget].append(context_recall(given, document, spans))
        out["variants"][label] = {
            "recall@5": round(sum(r5) / len(r5), 4),
            **{str(b): round(sum(v) / len(v), 4) for b, v in per_budget.items()},
            "top_document": round(sum(top_doc) / len(top_doc), 4),
        }
        print(f"{data['set']:>9} {label:<32} {json.dumps(out['variants'][label])}", flush=True)
    return out


def _paper_of(text: str, names: dict[str, list[str]]) -> str | None:
    """The QASPER paper whose section names the text holds most of (None without QASPER)."""
    if not names:
        return None
    return max(names, key=lambda k: sum(("\n\n" + n + "\n\n") in text for n in names[k] if n))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("readings", type=Path, help="a `passage_growth.py read` pickle")
    parser.add_argument("--qasper", type=Path, help="the QASPER file (section names)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = study(args.readings, args.qasper)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
