"""`retrieval_eval`: recall of the current search on the user's questions as asset metadata, and
its floor check, against a real index (PostgreSQL + pgvector, the real ONNX model, the pipeline
run by `seams run`'s own functions on a PostgreSQL-backed Dagster instance). Without a questions
file in seams.yaml the definitions are what they were."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import dagster as dg
import pytest

from seams.assets.retrieval_eval import EVAL_KEY, EVAL_SENSOR, FLOOR_CHECK, floor_problems
from seams.environment import SeamsEnvironment
from seams.errors import ConfigError
from seams.models.model_store import ModelManifest
from seams.orchestration import cli, runner
from seams.orchestration.definitions import build_definitions
from seams.orchestration.evaluation_run import refresh_retrieval_eval, retrieval_eval_unsynced
from seams.paths import packaged_default
from seams.settings import SeamsSettings, load_settings
from tests.orchestration.test_eval import FILES, QUESTIONS
from tests.support.instances import current_definitions
from tests.support.samples import SAMPLE_CORPUS, copy_samples

BUDGETS = (40, 150)
CHECK_KEY = dg.AssetCheckKey(EVAL_KEY, FLOOR_CHECK)


def _write_questions(path: Path) -> Path:
    lines = []
    for name, question, answer in QUESTIONS:
        start = (SAMPLE_CORPUS / name).read_text(encoding="utf-8").index(answer)
        record = {"question": question, "source": name, "spans": [[start, start + len(answer)]]}
        lines.append(json.dumps(record) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _config(folder: Path, evaluation: str, retrieval: dict[str, str] | None = None) -> Path:
    """A seams.yaml in `folder`: the packaged defaults with `evaluation:` replaced and some
    retrieval lines changed."""
    text = packaged_default("seams.yaml").read_text(encoding="utf-8")
    head, _, _ = text.partition("\nevaluation:")
    for old, new in (retrieval or {}).items():
        assert old in head
        head = head.replace(old, new)
    path = folder / "seams.yaml"
    path.write_text(head.rstrip("\n") + "\n\n" + evaluation.strip("\n") + "\n", encoding="utf-8")
    return path


def _definitions(config: Path) -> dg.Definitions:
    environment = dataclasses.replace(SeamsEnvironment.from_os(), config_path=config)
    return build_definitions(load_settings(config), environment=environment)


# --- the definitions, without a database ---------------------------------------------------------
def test_without_a_questions_file_there_is_no_retrieval_eval() -> None:
    defs = build_definitions(SeamsSettings())
    graph = defs.resolve_asset_graph()
    assert EVAL_KEY not in graph.get_all_asset_keys()
    assert not [key for key in graph.asset_check_keys if key.asset_key == EVAL_KEY]
    assert EVAL_SENSOR not in {sensor.name for sensor in defs.sensors}


def test_its_code_version_follows_the_questions_and_the_search_settings(tmp_path: Path) -> None:
    questions = _write_questions(tmp_path / "questions.jsonl")
    evaluation = "evaluation:\n  questions: questions.jsonl\n  floor: {250: 0.5}"

    def version(config: Path) -> str | None:
        return _definitions(config).resolve_asset_graph().get(EVAL_KEY).code_version

    defs = _definitions(_config(tmp_path, evaluation))
    node = defs.resolve_asset_graph().get(EVAL_KEY)
    assert node.partitions_def is None and node.parent_keys == {dg.AssetKey("chunk_index")}
    assert node.automation_condition is not None
    assert EVAL_SENSOR in {sensor.name for sensor in defs.sensors}
    assert CHECK_KEY in defs.resolve_asset_graph().asset_check_keys
    # Not in the per-batch job: a backfill of N batches must not plan it N times.
    job = defs.resolve_job_def(runner.JOB_NAME)
    assert EVAL_KEY not in job.asset_layer.executable_asset_keys

    first = version(_config(tmp_path, evaluation))
    assert version(_config(tmp_path, evaluation.replace("0.5", "0.9"))) == first  # the verdict
    changed = {
        "weight": {"lexical_weight: 0.75": "lexical_weight: 0.5 "},
        "search": {"search: hybrid": "search: dense "},
        "index": {"mode: pooled": "mode: text  "},
    }
    seen = {what: version(_config(tmp_path, evaluation, edit)) for what, edit in changed.items()}
    assert len({first, *seen.values()}) == len(changed) + 1, seen
    with questions.open("a", encoding="utf-8") as out:
        out.write(questions.read_text(encoding="utf-8").splitlines()[0] + "\n")
    assert version(_config(tmp_path, evaluation)) not in {first, *seen.values()}


def test_a_missing_questions_file_is_one_line_naming_the_field(tmp_path: Path) -> None:
    config = _config(tmp_path, "evaluation:\n  questions: nowhere.jsonl")
    with pytest.raises(ConfigError, match=r"^evaluation\.questions: .*nowhere\.jsonl does not"):
        _definitions(config)


def test_the_floor_is_checked_per_budget() -> None:
    measured = {"recall@40": dg.MetadataValue.float(0.5), "recall@150": 0.9}
    assert floor_problems(measured, {40: 0.5, 150: 0.8}) == (
        [], {"floor@40": 0.5, "recall@40": 0.5, "floor@150": 0.8, "recall@150": 0.9}
    )  # fmt: skip
    problems, _ = floor_problems(measured, {40: 0.51, 500: 0.1})
    assert problems == [
        "recall@40 is 0.5000, below its floor 0.51",
        "recall@500 was not measured: run retrieval_eval with budget 500",
    ]


# --- against a real index ------------------------------------------------------------------------
def _latest_recall(instance: dg.DagsterInstance) -> dict[str, float]:
    event = instance.get_latest_materialization_event(EVAL_KEY)
    assert event is not None and event.asset_materialization is not None
    metadata = event.asset_materialization.metadata
    return {k: float(v.value) for k, v in metadata.items() if k.startswith("recall@")}


def _check_alone(instance: dg.DagsterInstance, defs: dg.Definitions) -> dg.AssetCheckEvaluation:
    """`recall_above_floor` executed by itself (the UI's Checks tab, "Execute")."""
    job = defs.resolve_implicit_global_asset_job_def()
    only_check = job.get_subset(asset_selection=set(), asset_check_selection={CHECK_KEY})
    result = only_check.execute_in_process(instance=instance)
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation


def test_a_run_measures_what_seams_eval_reports_and_the_floor_check_turns_red(
    instance: dg.DagsterInstance,
    exported_model: ModelManifest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    _write_questions(project / "questions.jsonl")
    budgets = "[" + ", ".join(map(str, BUDGETS)) + "]"
    evaluation = f"evaluation:\n  questions: questions.jsonl\n  budgets: {budgets}\n"
    config = _config(project, evaluation + f"  floor: {{{BUDGETS[0]}: 0.01}}")
    monkeypatch.setenv("SEAMS_CONFIG", str(config))
    defs = current_definitions()
    docs = copy_samples(tmp_path / "docs", FILES)

    assert retrieval_eval_unsynced(instance, defs)  # never measured
    # `seams run`: the batches' backfill, then the measurement, once.
    keys = runner.register_path(docs, print, defs=defs)
    lines: list[str] = []
    summary = runner.RunSummary(batches=keys)
    runner.materialize_batches(instance, keys, lines.append, summary, defs=defs)
    measured = [line for line in lines if line.startswith("retrieval_eval")]
    assert len(measured) == 1, lines
    recall = _latest_recall(instance)
    assert list(recall) == [f"recall@{b}" for b in BUDGETS]
    assert measured[0] == (
        "retrieval_eval: "
        + ", ".join(f"{label} {value:.3f}" for label, value in recall.items())
        + " (recall_above_floor passed)"
    )
    assert not retrieval_eval_unsynced(instance, defs)
    metadata = instance.get_latest_materialization_event(EVAL_KEY).asset_materialization.metadata
    assert metadata["questions"].value == len(QUESTIONS) and metadata["search"].value == "hybrid"
    assert metadata["lexical_weight"].value == 0.75

    # The same figures as `seams eval --json` reports for the current settings.
    capsys.readouterr()
    args = ["eval", str(project / "questions.jsonl"), "--json", "--budgets", "40,150"]
    assert cli.main([*args, "--weights", "0.75"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {f"recall@{b}": r for b, r in report["recall"].items()} == recall
    assert 0 < min(recall.values()) < 1, recall  # a floor above it can fail

    # A floor just above the measured figure: the check alone turns red, naming the budget.
    low = BUDGETS[0]
    above = round(recall[f"recall@{low}"] + 0.001, 4)
    strict = _definitions(_config(project, evaluation + f"  floor: {{{low}: {above}}}"))
    verdict = _check_alone(instance, strict)
    assert not verdict.passed
    assert verdict.description == f"recall@{low} is {recall[f'recall@{low}']:.4f}, below its " \
        f"floor {above:g}"  # fmt: skip

    # A settings change that hurts: dense search misses the exact names BM25 finds. With the
    # floor at hybrid's figure, measuring again under the new settings fails the check.
    floor = recall[f"recall@{low}"]
    dense = _definitions(
        _config(
            project,
            evaluation + f"  floor: {{{low}: {floor}}}",
            {"search: hybrid": "search: dense "},
        )
    )
    assert _check_alone(instance, dense).passed  # the hybrid figure meets its own floor
    assert retrieval_eval_unsynced(instance, dense)  # a search setting changed
    assert not retrieval_eval_unsynced(instance, strict)  # only the floor did
    outcome = refresh_retrieval_eval(instance, dense, lines.append)
    assert outcome is not None and outcome.success
    dense_recall = _latest_recall(instance)[f"recall@{low}"]
    assert dense_recall == report["by_search"]["dense"][str(low)]
    assert dense_recall < floor, (dense_recall, floor)
    assert outcome.check_passed is False and "FAILED" in lines[-1], lines

    # A question about a file that is not indexed: the measurement fails at once, saying so.
    unknown = project / "unknown.jsonl"
    unknown.write_text(
        '{"question": "q", "source": "nowhere.md", "spans": [[0, 5]]}\n', encoding="utf-8"
    )
    broken = _definitions(_config(project, "evaluation:\n  questions: unknown.jsonl"))
    outcome = refresh_retrieval_eval(instance, broken, lines.append)
    assert outcome is not None and not outcome.success
    assert f"{unknown}, line 1: nowhere.md is not indexed" in lines[-1], lines[-1]
    retried = [
        record
        for record in instance.all_logs(outcome.run_id)
        if record.dagster_event is not None
        and record.dagster_event.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY
    ]
    assert not retried


def test_its_automation_asks_for_it_after_an_index_change_not_after_its_own_run(
    tmp_path: Path,
) -> None:
    instance = dg.DagsterInstance.ephemeral()
    _write_questions(tmp_path / "questions.jsonl")
    defs = _definitions(_config(tmp_path, "evaluation:\n  questions: questions.jsonl"))
    instance.add_dynamic_partitions("document_batches", ["b1"])
    index = dg.AssetKey("chunk_index")

    def requested(cursor: object, defs: dg.Definitions = defs) -> tuple[bool, object]:
        result = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, asset_selection=dg.AssetSelection.assets(EVAL_KEY),
            cursor=cursor,
        )  # fmt: skip
        return EVAL_KEY in {r.key for r in result.results if r.true_subset.size}, result.cursor

    asked, cursor = requested(None)
    assert not asked  # nothing changed since the sensor started
    instance.report_runless_asset_event(dg.AssetMaterialization(index, partition="b1"))
    asked, cursor = requested(cursor)
    assert asked  # a batch's index was published
    # `seams run` publishes and measures between two ticks: nothing is left to do.
    instance.report_runless_asset_event(dg.AssetMaterialization(index, partition="b1"))
    instance.report_runless_asset_event(dg.AssetMaterialization(EVAL_KEY))
    asked, cursor = requested(cursor)
    assert not asked
    # The questions or a search setting edited, the definitions reloaded: measured again.
    edited = _definitions(
        _config(
            tmp_path,
            "evaluation:\n  questions: questions.jsonl",
            {"lexical_weight: 0.75": "lexical_weight: 0.5 "},
        )
    )
    asked, cursor = requested(cursor, edited)
    assert asked
