"""The loaders and the fusion study of `benchmarks/qa_budget.py`, on tiny hand-made inputs.

A loader that puts evidence at the wrong offsets, or a cross-validation that peeks at the held-out
set, would make the retrieval table and the chosen fusion weight wrong without any error. No
model, no database.
"""

from __future__ import annotations

import json

import pytest

from benchmarks.long_qa import QaQuestion, QaSet, parse_covid_qa, parse_qasper, sample_order
from benchmarks.qa_budget import (
    FUSION_VARIANTS,
    cross_validate,
    fuse,
    fusion_variants,
    goal_bars,
    package_dirs,
    read_pools,
    variant_lines,
    write_pools,
)
from seams.storage.search import fuse_scores


def test_covid_qa_answers_are_located_even_with_a_wrong_offset() -> None:
    context = "Title\r\n\r\nThe virus binds ACE2. It spreads fast. The virus binds ACE2."
    payload = {
        "data": [
            {
                "paragraphs": [
                    {
                        "document_id": 7,
                        "context": context,
                        "qas": [
                            {"id": 1, "question": "What does it bind?", "is_impossible": False,
                             "answers": [{"text": "The virus binds ACE2.", "answer_start": 50}]},
                            {"id": 2, "question": "Speed?", "is_impossible": False,
                             "answers": [{"text": "It spreads fast. ", "answer_start": 0}]},
                            {"id": 3, "question": "Gone?", "is_impossible": False,
                             "answers": [{"text": "not in the text", "answer_start": 3}]},
                        ],
                    }
                ]
            }
        ]
    }  # fmt: skip
    qa = parse_covid_qa(payload)
    (doc,) = qa.documents
    assert doc.id == "covid-7" and "\r" not in doc.text
    spans = {q.id: q.evidence for q in qa.questions}
    assert set(spans) == {"1", "2"}  # an answer that does not occur is dropped
    # Offset 50 is nearer the second occurrence (the file's offsets count \r\n as two chars).
    (a, b), = spans["1"]  # fmt: skip
    assert doc.text[a:b] == "The virus binds ACE2." and a > 30
    (a, b), = spans["2"]  # fmt: skip
    assert doc.text[a:b] == "It spreads fast."  # trimmed


PAPER = {
    "id": "p1",
    "title": "A Paper",
    "abstract": "We study things.",
    "full_text": [
        {"section_name": "Intro", "paragraphs": ["First paragraph.", "Second paragraph."]},
        {"section_name": "Method", "paragraphs": ["We use BM25."]},
    ],
    "qas": [
        {
            "question": "What do they use?",
            "question_id": "q1",
            "answers": [
                {"answer": {"unanswerable": True, "evidence": []}},
                {"answer": {"unanswerable": False, "evidence": ["FLOAT SELECTED: Table 1"]}},
                {"answer": {"unanswerable": False,
                            "evidence": ["We use BM25.", "First paragraph."]}},
            ],
        },
        {"question": "Unanswerable?", "question_id": "q2",
         "answers": [{"answer": {"unanswerable": True, "evidence": []}}]},
    ],
}  # fmt: skip


def _hf_row(paper: dict) -> dict:
    """The same paper in Hugging Face's columnar layout."""
    return {
        "id": paper["id"],
        "title": paper["title"],
        "abstract": paper["abstract"],
        "full_text": {
            "section_name": [s["section_name"] for s in paper["full_text"]],
            "paragraphs": [s["paragraphs"] for s in paper["full_text"]],
        },
        "qas": {
            "question": [q["question"] for q in paper["qas"]],
            "question_id": [q["question_id"] for q in paper["qas"]],
            "answers": [{"answer": [a["answer"] for a in q["answers"]]} for q in paper["qas"]],
        },
    }


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"p1": {k: v for k, v in PAPER.items() if k != "id"}}),  # allenai layout
        json.dumps(_hf_row(PAPER), indent=2) + "\n" + json.dumps(_hf_row({**PAPER, "id": "p2"})),
    ],
)
def test_qasper_evidence_paragraphs_in_both_layouts(text: str) -> None:
    qa = parse_qasper(text)
    doc = qa.documents[0]
    assert doc.text == (
        "A Paper\n\nWe study things.\n\nIntro\n\nFirst paragraph.\n\nSecond paragraph.\n\n"
        "Method\n\nWe use BM25."
    )
    q = qa.questions[0]
    assert q.id == "q1" and q.document == "qasper-p1"
    # The first answer with evidence in the body text; the caption-only one is skipped.
    assert [doc.text[a:b] for a, b in q.evidence] == ["First paragraph.", "We use BM25."]
    assert all(q.id != "q2" for q in qa.questions)


def test_sample_order_is_stable_and_independent_of_input_order() -> None:
    ids = [str(i) for i in range(50)]
    assert sample_order(ids) == sample_order(list(reversed(ids)))
    assert sample_order(ids)[:10] != ids[:10]
    assert sample_order(ids, seed=1) != sample_order(ids)


def test_fuse_orders_the_pool_as_the_product_ranks_it() -> None:
    pool = [
        (("d", (0, 1)), 0.9, 0.0, "c1"),
        (("d", (1, 2)), 0.5, 10.0, "c2"),
        (("d", (2, 3)), 0.1, 5.0, "c3"),
        (("d", (3, 4)), 0.5, 10.0, "c0"),  # the same scores as c2: chunk_id breaks the tie
    ]
    order = lambda w: [h[1] for h in fuse(pool, w, fuse_scores)]  # noqa: E731
    assert order(0.0) == [(0, 1), (3, 4), (1, 2), (2, 3)]  # dense alone
    assert order(1.0) == [(3, 4), (1, 2), (2, 3), (0, 1)]  # BM25 alone
    # 0.5: c1 .5*1 + 0 = .5; c0/c2 .5*.5 + .5*1 = .75; c3 0 + .5*.5 = .25
    assert order(0.5) == [(3, 4), (1, 2), (0, 1), (2, 3)]
    assert fuse([], 0.5, fuse_scores) == []


def test_cross_validation_never_looks_at_the_held_out_set() -> None:
    # Set "a" peaks at 0.0, "b" and "c" at 1.0: held out, "a" gets the others' weight.
    curves = {
        "a": lambda w: 1.0 - w,
        "b": lambda w: w,
        "c": lambda w: 0.5 + 0.5 * w,
    }
    out = cross_validate(curves, grid=(0.0, 0.5, 1.0))
    assert out["folds"]["a"]["chosen_weight"] == 1.0
    assert out["folds"]["a"]["held_out_score"] == 0.0
    assert out["folds"]["a"]["own_best_weight"] == 0.0
    assert out["folds"]["b"]["chosen_weight"] == 0.0  # a and c: mean .75 at 0.0, .5 at 1.0
    assert out["folds"]["b"]["held_out_score"] == 0.0
    assert out["default_weight"] == 1.0
    assert out["flat"] == [1.0]


def test_package_dirs_follow_pyproject() -> None:
    pyproject = """
[tool.setuptools.package-dir]
"seams.chunking" = "chunking"
"seams.models" = "models"
"other" = "elsewhere"
"""
    assert package_dirs(pyproject) == ["chunking", "models"]
    assert package_dirs("[tool.setuptools]\n") == []


POOL = [
    (("d", (0, 10)), 0.9, 0.0, "c1"),  # dense only
    (("d", (10, 20)), 0.5, 9.0, "c2"),
    (("d", (20, 30)), 0.2, 8.0, "c3"),
    (("d", (30, 40)), 0.1, 7.0, "c4"),
]


def test_pools_survive_the_round_trip(tmp_path) -> None:
    question = QaQuestion("q", "what?", "d", ((12, 18),))
    qa = QaSet("s", (), (question,), "")
    path = tmp_path / "pools.json"
    write_pools(path, {"s": (qa, [POOL], {"d": [0, 5, 10]})})
    (questions, pools, starts), = read_pools(path).values()  # fmt: skip
    assert pools == [POOL]
    assert starts == {"d": [0, 5, 10]}
    assert [(q.document, q.evidence) for q in questions] == [("d", ((12, 18),))]


def test_fusion_variants_rank_by_each_side_at_the_ends_of_the_weight() -> None:
    dense_order = [(0, 10), (10, 20), (20, 30), (30, 40)]
    lexical_order = [(10, 20), (20, 30), (30, 40), (0, 10)]
    for label, rule in FUSION_VARIANTS.items():
        if label.startswith("min-max for the first"):
            continue
        assert [h[1] for h in fuse(POOL, 0.0, rule)] == dense_order, label
        assert [h[1] for h in fuse(POOL, 1.0, rule)] == lexical_order, label


def test_fused_head_keeps_the_fused_top_and_then_follows_bm25() -> None:
    rule = FUSION_VARIANTS["min-max for the first 3 hits, then BM25 order"]
    pool = [*POOL, (("d", (40, 50)), 0.95, 0.5, "c5")]
    # w 0: the dense top 3 (c5, c1, c2), then the rest by BM25 (c3 8.0 before c4 7.0).
    assert [h[1] for h in fuse(pool, 0.0, rule)] == [
        (40, 50),
        (0, 10),
        (10, 20),
        (20, 30),
        (30, 40),
    ]


def test_goal_bars_leave_hybrid_out_and_variants_report_them() -> None:
    def row(r5: float, r500: float, r1000: float) -> dict:
        return {"recall@5": r5, "recall@500t": r500, "recall@1000t": r1000}

    results = {
        "s": {
            "systems": {
                "fixed_200/bm25": row(0.2, 0.1, 0.3),
                "seams/lexical": row(0.3, 0.2, 0.9),
                "seams/hybrid": row(0.9, 0.9, 0.95),  # never its own bar
                "seams-chunks/bm25": row(0.9, 0.9, 0.99),  # diagnostic, not a system
            }
        }
    }
    assert goal_bars(results) == {"s": {"recall@500t": 0.2, "recall@1000t": 0.9, "recall@5": 0.2}}
    qa = (QaQuestion("q", "", "d", ((12, 18),)),)
    starts = {"d": list(range(0, 50, 2))}
    refuse = {"s": (qa, [POOL], starts), "t": (qa, [POOL], starts)}
    out = fusion_variants(refuse, fuse_scores, {"s": goal_bars(results)["s"]})
    assert next(iter(out)) == "min-max (the product)" and len(out) == 1 + len(FUSION_VARIANTS)
    first = out["min-max (the product)"]
    assert first["sets"]["s"]["recall@500t"] == 1.0  # the evidence chunk is in any top 2
    assert first["sets"]["s"]["goal_met"] is True and "goal_met" not in first["sets"]["t"]
    lines = variant_lines(out)
    assert any(line.startswith("| min-max (the product) |") for line in lines)


def test_packed_recall_counts_only_the_question_documents_evidence_once() -> None:
    from benchmarks.qa_budget import packed_recall

    questions = [
        QaQuestion("1", "q", "a", ((10, 20), (15, 30))),  # 20 evidence characters
        QaQuestion("2", "q", "b", ((0, 10),)),
    ]
    contexts = [
        [["a", 0, 12], ["a", 11, 15], ["b", 10, 30], ["a", 25, 40]],  # 5 + 5 of 20
        [["a", 0, 10]],  # another document's text is no evidence
    ]
    assert packed_recall(questions, contexts) == pytest.approx((10 / 20 + 0.0) / 2)
