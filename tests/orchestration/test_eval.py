"""`seams eval QUESTIONS.jsonl` as a user runs it: a file it cannot use is one line naming the
file (and the line); against a real index (PostgreSQL + pgvector, the real ONNX model, the
pipeline run by Dagster) its figures are those of `search_response` with a budget, recomputed
here character by character, and `--apply` writes a seams.yaml that loads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from seams.models.model_store import ModelManifest
from seams.orchestration import cli
from seams.paths import packaged_default
from seams.settings import load_settings
from seams.storage.search import search_response
from seams.storage.search.budget_recall import MAX_QUESTIONS, MAX_QUESTIONS_BYTES
from tests.support.cli import one_error_line, run_seams, seams_env
from tests.support.databases import rows
from tests.support.samples import SAMPLE_CORPUS, copy_samples
from tests.support.search_index import Indexed, indexed_database

FILES = ("kitchen_science.md", "field_notes.md", "platform_handbook.md")
# (file, question, the text of the answer in the file)
QUESTIONS = [
    ("platform_handbook.md", "LEDGER_WORKERS",
     'raise ValueError("LEDGER_WORKERS must be at least 1")'),
    ("platform_handbook.md", "v2.4.1", "The current release of the Ledger service is v2.4.1."),
    ("platform_handbook.md", "pg_dump weekly",
     "Logical dumps made with `pg_dump` are also taken once a week."),
    ("kitchen_science.md", "Who was the Maillard reaction named after?",
     "It is named after Louis-Camille Maillard, a French chemist who described it in the early "
     "twentieth century."),
    ("kitchen_science.md", "How is a broken mayonnaise rescued?",
     'The standard advice is to "start again with a fresh yolk and whisk the broken sauce into it '
     'slowly, as if it were the oil."'),
    ("field_notes.md", "What do drones do?",
     "Drones exist to mate with queens from other colonies"),
]  # fmt: skip
BUDGETS = (40, 150)
WEIGHTS = (0.0, 0.5, 1.0)


def _questions() -> list[dict[str, object]]:
    out = []
    for name, question, answer in QUESTIONS:
        text = (SAMPLE_CORPUS / name).read_text(encoding="utf-8")
        start = text.index(answer)
        out.append({"question": question, "source": name, "spans": [[start, start + len(answer)]]})
    # Two sentences far apart: a small budget may give one of them, never both.
    text = (SAMPLE_CORPUS / "field_notes.md").read_text(encoding="utf-8")
    first, second = "The queen lays the eggs.", "Most beekeepers in Europe and North America"
    out.append(
        {
            "question": "What does the queen bee do, and which hive do beekeepers use?",
            "source": "field_notes.md",
            "spans": [
                [text.index(first), text.index(first) + len(first)],
                [text.index(second), text.index(second) + len(second)],
            ],
        }
    )
    return out


def _write_questions(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# --- what it refuses, before any database ------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "{path} does not exist: give a JSON Lines file of questions"),
        ("", "{path}: no questions in it: write one JSON object per line"),
        ('{"question": "a", "source": "b.md", "spans": [[0, 1]]}\n\n{"question": "a",\n',
         "{path}, line 3: not valid JSON (Expecting property name enclosed in double quotes at "
         "column 18)"),
        ('{"question": "a", "spans": [[0, 1]]}\n', "{path}, line 1: missing 'source'"),
        (b"\xff\xfe\n", "{path}: not UTF-8 text (invalid start byte): save it as UTF-8"),
    ],
    ids=["missing", "empty", "not-json", "no-source", "not-utf8"],
)  # fmt: skip
def test_a_questions_file_it_cannot_use_is_one_line(
    content: str | bytes | None, says: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "questions.jsonl"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    assert cli.main(["eval", str(path)]) == cli.EXIT_ERROR
    out, err = capfd.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith(f"seams: error: {says.format(path=path)}"), err


def test_a_questions_file_over_the_limits_is_one_line_before_any_work(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    huge = tmp_path / "huge.jsonl"
    with huge.open("wb") as out:  # sparse: the size is what is refused, before reading
        out.truncate(MAX_QUESTIONS_BYTES + 1)
    many = tmp_path / "many.jsonl"
    line = '{"question": "q", "source": "a.md", "spans": [[0, 1]]}\n'
    many.write_text(line * (MAX_QUESTIONS + 1), encoding="utf-8")
    for path, says in (
        (huge, f"{huge}: 16.0 MiB, more than seams eval reads (16 MiB, about 20,000 questions)"),
        (many, f"{many}: 20,001 questions, more than seams eval takes (20,000)"),
    ):
        assert cli.main(["eval", str(path)]) == cli.EXIT_ERROR
        out, err = capfd.readouterr()
        assert out == "" and err.count("\n") == 1, err
        assert err.startswith(f"seams: error: {says}: evaluate a sample"), err


def test_eval_is_a_command_with_its_flags() -> None:
    args = cli.build_parser().parse_args(
        ["eval", "q.jsonl", "--budgets", "100,250", "--weights", "0,0.5", "--json", "--apply"]
    )
    assert (args.command, args.questions, args.budgets, args.weights) == (
        "eval", "q.jsonl", (100, 250), (0.0, 0.5)
    )  # fmt: skip
    assert args.json and args.apply
    assert cli.build_parser().parse_args(["eval", "q.jsonl"]).budgets == (250, 500, 1000)
    for bad in (["--budgets", "0,250"], ["--budgets", "a"], ["--weights", "1.5"]):
        with pytest.raises(SystemExit):
            cli.build_parser().parse_args(["eval", "q.jsonl", *bad])


# --- against a real index ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def indexed(
    pg_server_url: str, exported_model: ModelManifest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Indexed]:
    folder = copy_samples(tmp_path_factory.mktemp("eval") / "docs", FILES)
    with indexed_database(pg_server_url, folder) as built:
        yield built


HYBRID = "retrieval:\n  search: hybrid\n"


def _env(
    indexed: Indexed, manifest: ModelManifest, config: Path, settings: str = HYBRID
) -> dict[str, str]:
    """`seams eval`'s environment over the indexed database, with `settings` written as its
    seams.yaml at `config`."""
    config.write_text(settings, encoding="utf-8")
    return seams_env(
        SEAMS_DATABASE_URL=indexed.url,
        SEAMS_DATA_DIR=str(manifest.directory.parents[1]),  # where the exported model is
        SEAMS_CONFIG=str(config),
    )


def _share(spans: list[tuple[str, int, int]], document_id: str, reference: list) -> float:
    """The share of the reference characters inside the spans of the question's document,
    counted character by character."""
    wanted = {i for a, b in reference for i in range(a, b)}
    given = {i for doc, a, b in spans if doc == document_id for i in range(a, b)}
    return len(wanted & given) / len(wanted)


def test_eval_figures_are_those_of_search_with_a_budget_and_apply_writes_settings(
    indexed: Indexed, exported_model: ModelManifest, tmp_path: Path
) -> None:
    questions = _write_questions(tmp_path / "questions.jsonl", _questions())
    config = tmp_path / "seams.yaml"
    # BM25 finds the exact names (LEDGER_WORKERS, v2.4.1, pg_dump) that dense search misses:
    # starting from dense alone, cross-validation should move the weight.
    packaged = packaged_default("seams.yaml").read_text(encoding="utf-8")
    dense = packaged.replace("lexical_weight: 0.75", "lexical_weight: 0.0 ")
    env = _env(indexed, exported_model, config, dense)
    budgets, weights = ",".join(map(str, BUDGETS)), ",".join(map(str, WEIGHTS))
    done = run_seams(
        "eval", str(questions), "--json", "--budgets", budgets, "--weights", weights, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # No terminal (a pipe, a log): progress comes as lines, the last one the whole file's.
    assert done.stderr.rstrip().endswith("seams eval: 7/7 questions"), done.stderr
    report = json.loads(done.stdout)
    retrieval = load_settings(config).retrieval
    assert (report["questions"], report["search"], report["lexical_weight"]) == (7, "hybrid", 0.0)

    # The same figures, straight from search_response and counted here.
    documents = rows(
        indexed.url,
        "SELECT b.source_uri, c.document_id FROM seams.current_documents c "
        "JOIN seams.batch_documents b USING (batch_key, document_id)",
    )
    by_name = {uri.rsplit("/", 1)[-1]: doc for uri, doc in documents}
    records = _questions()

    def figures(kind: str, weight: float) -> dict[str, float]:
        out = {}
        for budget in BUDGETS:
            shares = []
            for record in records:
                response = search_response(
                    indexed.postgres, indexed.embedder, str(record["question"]), 5,
                    search=kind, lexical_weight=weight,  # type: ignore[arg-type]
                    sentence_weight=retrieval.sentence_weight, budget=budget,
                )  # fmt: skip
                assert response.context is not None
                spans = [(s.document_id, s.start_char, s.end_char) for s in response.context.spans]
                document = by_name[str(record["source"])]
                shares.append(_share(spans, document, record["spans"]))  # type: ignore[arg-type]
            out[str(budget)] = sum(shares) / len(shares)
        return out

    def close(reported: dict[str, float], expected: dict[str, float]) -> bool:
        return reported.keys() == expected.keys() and all(
            abs(reported[b] - expected[b]) < 1e-4 for b in expected
        )

    assert list(report["by_weight"]) == ["0.0", "0.5", "1.0"]
    for weight in WEIGHTS:
        assert close(report["by_weight"][str(weight)], figures("hybrid", weight)), weight
    for kind in ("dense", "lexical"):
        assert close(report["by_search"][kind], figures(kind, 0.0)), kind
    assert report["recall"] == report["by_weight"]["0.0"] == report["by_search"]["hybrid"]
    values = {v for row in report["by_weight"].values() for v in row.values()}
    assert len(values) > 1, report  # the case tells weights and budgets apart

    cv = report["cross_validation"]
    assert [f["picked_on"] + f["scored_on"] for f in cv["folds"]] == [7, 7]
    assert "applied" not in report

    # --apply: the weight cross-validation picked goes into the seams.yaml the command read.
    applied = run_seams(
        "eval", str(questions), "--json", "--apply", "--budgets", budgets, "--weights", weights,
        env=env,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stdout + applied.stderr
    result = json.loads(applied.stdout)
    assert result["cross_validation"] == cv  # the same run, the same choice
    assert cv["change"], cv  # dense alone loses held out to a weight that uses BM25
    assert result["applied"] == {
        "path": str(config),
        "written": True,
        "lexical_weight": cv["best_lexical_weight"],
        "comments_kept": True,
    }
    assert cv["best_lexical_weight"] > 0.0
    assert load_settings(config).retrieval.lexical_weight == cv["best_lexical_weight"]
    before = packaged.splitlines()
    after = config.read_text(encoding="utf-8").splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert [b.split("#")[0].split() for _, b in changed] == [
        ["lexical_weight:", format(cv["best_lexical_weight"], "g")]
    ]


def test_eval_names_a_source_that_is_not_indexed_and_spans_outside_one(
    indexed: Indexed, exported_model: ModelManifest, tmp_path: Path
) -> None:
    config = tmp_path / "seams.yaml"
    env = _env(indexed, exported_model, config)
    good = _questions()[0]
    missing = _write_questions(
        tmp_path / "missing.jsonl",
        [good, {"question": "Where?", "source": "history_of_maps.txt", "spans": [[0, 5]]}],
    )
    line = one_error_line(run_seams("eval", str(missing), env=env))
    assert line.startswith(
        f"seams: error: {missing}, line 2: history_of_maps.txt is not indexed (no current "
        "document has that name or path): `"
    ), line
    assert " run PATH` it first" in line

    size = len((SAMPLE_CORPUS / "field_notes.md").read_text(encoding="utf-8"))
    outside = _write_questions(
        tmp_path / "outside.jsonl",
        [good, {"question": "Bees?", "source": "field_notes.md", "spans": [[10, size + 1]]}],
    )
    line = one_error_line(run_seams("eval", str(outside), env=env))
    assert line == (
        f"seams: error: {outside}, line 2: span [10, {size + 1}] lies outside field_notes.md, "
        f"whose extracted text has {size} characters: offsets count characters of the "
        "extracted text (for .txt and .md, of the file's text)"
    )
    assert config.read_text(encoding="utf-8") == "retrieval:\n  search: hybrid\n"


def test_the_report_for_a_person_marks_the_current_settings_and_says_what_apply_did() -> None:
    from seams.orchestration.cli.eval import format_report

    figures = {"250": 0.5, "1000": 0.75}
    report = {
        "questions": 4, "sources": 2, "search": "hybrid", "lexical_weight": 0.75,
        "budgets": [250, 1000], "recall": figures,
        "by_search": {"hybrid": figures, "dense": {"250": 0.25, "1000": 0.5}, "lexical": figures},
        "by_weight": {"0.0": {"250": 0.25, "1000": 0.5}, "0.75": figures},
        "cross_validation": {
            "folds": [
                {"picked_on": 2, "lexical_weight": 0.0, "scored_on": 2, "score": 0.4,
                 "current_score": 0.6},
                {"picked_on": 2, "lexical_weight": 0.75, "scored_on": 2, "score": 0.7,
                 "current_score": 0.7},
            ],
            "halves_by_source": False, "held_out": 0.55, "current": 0.65,
            "best_lexical_weight": 0.75, "best_score": 0.65, "change": False,
        },
        "applied": {"path": "/p/seams.yaml", "written": False, "lexical_weight": 0.75},
    }  # fmt: skip
    lines = format_report(report, "q.jsonl").splitlines()
    assert lines[0].startswith("q.jsonl: 4 questions over 2 files; ")
    assert [line.split() for line in lines[2:5]] == [
        ["B=250", "B=1000"],
        ["hybrid", "(0.75)", "*", "0.500", "0.750"],
        ["dense", "0.250", "0.500"],
    ]
    assert "  0.75  *" in "\n".join(lines) and "  0 " in "\n".join(lines)
    assert "  picked on 2 questions: 0, which scores 0.400 on the other 2 (the current 0.75: " \
        "0.600)" in lines  # fmt: skip
    assert lines[-2:] == [
        "  few questions: the figures are noisy; add questions to trust them",
        "  keep lexical_weight 0.75: picking another wins nothing held out",
    ]


def test_eval_takes_answer_quotes_and_names_the_questions_it_missed(
    indexed: Indexed, exported_model: ModelManifest, tmp_path: Path
) -> None:
    config = tmp_path / "seams.yaml"
    env = _env(indexed, exported_model, config)
    quoted = [{"question": q, "source": name, "answer": a} for name, q, a in QUESTIONS]
    answers = _write_questions(tmp_path / "answers.jsonl", quoted)
    spans = _write_questions(tmp_path / "spans.jsonl", _questions()[: len(QUESTIONS)])
    flags = ("--budgets", "40", "--weights", "0.75", "--misses", "3")
    reports = []
    for path in (answers, spans):
        done = run_seams("eval", str(path), "--json", *flags, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        reports.append(json.loads(done.stdout))
    assert reports[0]["recall"] == reports[1]["recall"]  # a quote is located where spans point
    misses = reports[0]["misses"]
    assert misses == reports[1]["misses"] and len(misses) <= 3
    for miss in misses:
        assert miss["recall"]["40"] < 1.0
        assert QUESTIONS[miss["line"] - 1][1] == miss["question"]
        for span in miss["packed"]:
            assert span["end"] > span["start"] and span["text"]
    shown = run_seams("eval", str(answers), *flags, env=env).stdout
    if misses:
        assert f"missed at B=40 ({len(misses)} shown, worst first):" in shown
        assert f"line {misses[0]['line']}: " in shown

    twice = _write_questions(
        tmp_path / "twice.jsonl",
        [quoted[0], {"question": "Bees?", "source": "field_notes.md", "answer": "the"}],
    )
    line = one_error_line(run_seams("eval", str(twice), env=env))
    assert line.startswith(f"seams: error: {twice}, line 2: the answer 'the' is in field_notes.md ")
