"""The loaders and metrics of the public benchmarks (Choi, SQuAD), on tiny hand-made inputs.

A wrong loader or metric would rank every chunker wrong on the public sets, so each is checked
where the right answer can be worked out by hand. No model and no peer library is needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.choi import evaluate_choi
from benchmarks.public_data import (
    boundary_recall,
    choi_folder,
    load_squad,
    merge_spans,
    parse_choi,
    parse_squad,
    retrieval_scores,
    segmentation_scores,
    spans_from_starts,
    starts_to_boundaries,
    unbounded,
)

CHOI = (
    "==========\n"
    "The cat sat . \n"
    "It purred . \n"
    "\n"
    "==========\n"
    "Stocks fell sharply . \n"
    "==========\n"
    "Rain is due . \n"
    "Take a coat . \n"
    "==========\n"
)


def test_choi_file_becomes_space_joined_text_with_sentence_offsets_and_segments() -> None:
    doc = parse_choi("x.ref", CHOI)
    assert doc.sentences == (
        "The cat sat .",
        "It purred .",
        "Stocks fell sharply .",
        "Rain is due .",
        "Take a coat .",
    )
    assert doc.text == "The cat sat . It purred . Stocks fell sharply . Rain is due . Take a coat ."
    assert doc.segment_starts == (0, 2, 3)
    assert doc.boundaries == (2, 3)
    for sentence, start in zip(doc.sentences, doc.sentence_starts, strict=True):
        assert doc.text[start : start + len(sentence)] == sentence


def test_choi_file_without_sentences_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"empty\.ref"):
        parse_choi("empty.ref", "==========\n==========\n")


def test_choi_set_1_is_never_read(tmp_path: Path) -> None:
    (tmp_path / "choi" / "1" / "3-11").mkdir(parents=True)
    with pytest.raises(ValueError, match="set 1"):
        choi_folder(tmp_path, "1/3-11")
    with pytest.raises(FileNotFoundError, match="--data"):
        choi_folder(tmp_path, "2/3-11")


def test_chunk_starts_map_to_the_nearest_sentence_start() -> None:
    sentence_starts = [0, 10, 20, 30]
    assert starts_to_boundaries([0, 10, 30], sentence_starts) == [1, 3]
    assert starts_to_boundaries([13], sentence_starts) == [1]  # nearer to 10 than to 20
    assert starts_to_boundaries([17], sentence_starts) == [2]
    assert starts_to_boundaries([15], sentence_starts) == [1]  # a tie goes to the earlier
    assert starts_to_boundaries([3, 10, 11], sentence_starts) == [1]  # 0 is no boundary
    assert starts_to_boundaries([38], sentence_starts) == [3]  # inside the last sentence


def test_pk_and_windowdiff_over_sentences_match_hand_counts() -> None:
    # 10 sentences, one boundary before sentence 5: 2 segments of 5, k = round(2.5) = 2,
    # 8 probe pairs (i, i+2); the reference separates the pairs at i = 3 and i = 4.
    perfect = segmentation_scores(10, [5], [5])
    assert perfect == {"pk": 0.0, "windowdiff": 0.0, "recall_exact": 1.0, "recall_within_1": 1.0}
    none = segmentation_scores(10, [5], [])
    assert none["pk"] == pytest.approx(2 / 8) and none["windowdiff"] == pytest.approx(2 / 8)
    late = segmentation_scores(10, [5], [6])  # disagrees at i = 3 and i = 5
    assert late["pk"] == pytest.approx(2 / 8) and late["windowdiff"] == pytest.approx(2 / 8)
    assert late["recall_exact"] == 0.0 and late["recall_within_1"] == 1.0
    extra = segmentation_scores(10, [5], [5, 6])  # Pk: i = 5; WindowDiff also i = 4 (1 vs 2)
    assert extra["pk"] == pytest.approx(1 / 8) and extra["windowdiff"] == pytest.approx(2 / 8)


def test_boundary_recall_counts_reference_boundaries_hit() -> None:
    assert boundary_recall([3, 8, 12], [3, 9, 20], 0) == pytest.approx(1 / 3)
    assert boundary_recall([3, 8, 12], [3, 9, 20], 1) == pytest.approx(2 / 3)
    assert boundary_recall([], [4], 0) == 1.0


def _write_choi(data: Path, choi_set: str, documents: dict[str, str]) -> None:
    folder = data / "choi" / choi_set
    folder.mkdir(parents=True)
    for name, content in documents.items():
        (folder / name).write_text(content, encoding="utf-8")


def test_evaluate_choi_scores_a_segmenter_per_set(tmp_path: Path) -> None:
    second = CHOI.replace("Stocks fell sharply", "Bonds rose")
    _write_choi(tmp_path, "2/3-5", {"0.ref": CHOI, "1.ref": second, "10.ref": CHOI})
    docs = {parse_choi("", c).text: parse_choi("", c) for c in (CHOI, second)}

    def perfect(text: str) -> list[int]:
        doc = docs[text]
        return [doc.sentence_starts[i] for i in doc.segment_starts]

    def every_sentence(text: str) -> list[int]:
        return list(docs[text].sentence_starts)

    scores = evaluate_choi(perfect, sets=["2/3-5"], data=tmp_path)["2/3-5"]
    assert scores["pk"] == 0.0 and scores["recall_exact"] == 1.0
    assert scores["docs"] == 3 and scores["chunks_per_doc"] == 3 and scores["segments_per_doc"] == 3
    over = evaluate_choi(every_sentence, sets=["2/3-5"], data=tmp_path, limit=2)["2/3-5"]
    assert over["docs"] == 2 and over["chunks_per_doc"] == 5 and over["recall_exact"] == 1.0
    assert over["pk"] > 0.0


SQUAD = {
    "version": "v2.0",
    "data": [
        {
            "title": "Cats",
            "paragraphs": [
                {
                    "context": "Cats purr. Dr. Smith owns three cats. They sleep a lot.",
                    "qas": [
                        {
                            "id": "q1",
                            "question": "How many cats?",
                            "answers": [{"text": "three", "answer_start": 26}],
                            "is_impossible": False,
                        },
                        {
                            "id": "q2",
                            "question": "Who owns dogs?",
                            "answers": [],
                            "is_impossible": True,
                        },
                    ],
                },
                {
                    "context": "Dogs bark. Rex is loud.",
                    "qas": [
                        {
                            "id": "q3",
                            "question": "Who is loud?",
                            "answers": [{"text": "Rex", "answer_start": 11}],
                        },
                    ],
                },
            ],
        }
    ],
}


def test_squad_article_is_one_document_and_references_are_answer_sentences() -> None:
    documents, questions = parse_squad(SQUAD)
    (doc,) = documents
    assert doc.title == "Cats"
    assert doc.text == (
        "Cats purr. Dr. Smith owns three cats. They sleep a lot.\n\nDogs bark. Rex is loud."
    )
    assert doc.paragraph_starts == (0, 57)
    assert [q.id for q in questions] == ["q1", "q3"]  # the unanswerable one is skipped
    q1, q3 = questions
    assert doc.text[slice(*q1.answer)] == "three"
    assert doc.text[slice(*q1.reference)] == "Dr. Smith owns three cats."  # "Dr." ends nothing
    assert doc.text[slice(*q3.answer)] == "Rex"
    assert doc.text[slice(*q3.reference)] == "Rex is loud."


def test_squad_answer_offset_that_misses_its_text_is_refused(tmp_path: Path) -> None:
    broken = json.loads(json.dumps(SQUAD))
    broken["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 3
    (tmp_path / "squad.json").write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(ValueError, match="q1"):
        load_squad(tmp_path, "squad.json")
    with pytest.raises(FileNotFoundError, match="--data"):
        load_squad(tmp_path, "missing.json")


def test_retrieval_scores_by_hand() -> None:
    retrieved = [("A", (0, 15)), ("A", (5, 12)), ("B", (0, 10))]
    scores = retrieval_scores("A", (10, 20), (12, 15), retrieved)
    # Retrieved: A's union (0, 15) = 15 chars + B's 10 = 25; covered: 10..15 = 5 of 10.
    assert scores["recall"] == pytest.approx(0.5)
    assert scores["precision"] == pytest.approx(5 / 25)
    assert scores["iou"] == pytest.approx(5 / (25 + 10 - 5))
    assert scores["answer_inside"] == 1.0
    split = retrieval_scores("A", (10, 20), (12, 18), [("A", (10, 15)), ("A", (15, 20))])
    assert split["recall"] == 1.0 and split["iou"] == 1.0
    assert split["answer_inside"] == 0.0  # covered, but by no single chunk
    elsewhere = retrieval_scores("A", (10, 20), (12, 15), [("B", (10, 20))])
    assert elsewhere == {"recall": 0.0, "precision": 0.0, "iou": 0.0, "answer_inside": 0.0}


def test_spans_merge_and_come_from_starts_trimmed() -> None:
    assert merge_spans([(5, 8), (0, 3), (3, 4), (7, 9), (10, 10)]) == [(0, 4), (5, 9)]
    text = "One two.  Three four.\n\n   "
    assert spans_from_starts(text, [10, 0]) == [(0, 8), (10, 21)]
    assert spans_from_starts(text, [0, 21]) == [(0, 21)]  # a whitespace-only piece is dropped


def test_unbounded_config_has_no_effective_size_limit() -> None:
    from seams.chunking import ChunkingConfig

    config = unbounded(ChunkingConfig.preset("fast"))
    assert config.chunk_size_max is None
    assert config.boundary_model == "static"  # the rest of the preset is kept


def test_evaluate_squad_retrieves_with_the_real_model(tmp_path: Path, exported_model) -> None:
    """One chunk per paragraph; each question's top-1 chunk is its own paragraph, so the whole
    answer sentence is retrieved and precision is sentence length / paragraph length."""
    from benchmarks.squad import evaluate_squad

    payload = json.loads(json.dumps(SQUAD))
    payload["data"].append(
        {
            "title": "Volcanoes",
            "paragraphs": [
                {
                    "context": "Volcanoes erupt molten lava. Mount Etna is in Sicily.",
                    "qas": [
                        {
                            "id": "q4",
                            "question": "Where is the volcano Mount Etna?",
                            "answers": [{"text": "Sicily", "answer_start": 46}],
                        }
                    ],
                }
            ],
        }
    )
    (tmp_path / "squad-dev-5.json").write_text(json.dumps(payload), encoding="utf-8")

    def paragraphs(text: str) -> list[int]:
        return [0, *(i + 2 for i in range(len(text)) if text.startswith("\n\n", i))]

    scores = evaluate_squad(paragraphs, data=tmp_path, k=1, cache_dir=None)
    assert scores["questions"] == 3 and scores["documents"] == 2 and scores["chunks"] == 3
    assert scores["recall_at_k"] == 1.0 and scores["char_recall"] == 1.0
    expected = (26 / 55 + 12 / 23 + len("Mount Etna is in Sicily.") / 53) / 3
    assert scores["char_precision"] == pytest.approx(expected)
    as_spans = evaluate_squad(
        lambda text: [(0, 55), (57, 80)] if text.startswith("Cats") else [(0, 53)],
        data=tmp_path,
        k=1,
        cache_dir=None,
    )
    assert as_spans == scores
