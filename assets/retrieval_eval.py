"""`retrieval_eval`: recall of the current search on the user's own questions, after every index
change, with a check that fails below the floor the user set.

`seams eval QUESTIONS.jsonl` answers "how much of the answers does a reader of `seams search
--budget B` get?" when someone asks; this asset asks it every time the index or the search
settings change, so the figure is a plot over time in the UI (numeric metadata under stable
labels, `recall@250`, ...) and a drop shows red (`recall_above_floor`) before anyone ships it.
The figures are `seams eval`'s own (`storage.search.evaluation.evaluate`, the current settings'
row of `seams eval --json`'s `recall`).

One unpartitioned asset downstream of the partitioned `chunk_index`: what it measures is the
whole published index, every batch at once (each question's answer may be in any of them), so
Dagster's "all partitions of the upstream" mapping is the true dependency. It is not part of the
per-batch job (a backfill of N batches would otherwise evaluate N times, or not at all when the
batch plan names partitions): `seams run`/`seams backfill` refresh it once after their backfill,
and under a daemon its own automation condition requests it when any batch's index was
published since it last ran, or when its code version changed (questions or search settings
edited and the definitions reloaded), once no batch's index is still being written.

Present only when seams.yaml names a questions file (`evaluation.questions`); the composition
root then builds it with the code version `evaluation_code_version` gives.
"""

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from seams.assets.display import asset_attributes, numbers
from seams.assets.versions import code_version
from seams.errors import ConfigError, InputError, SeamsError, counted
from seams.models.model_store import load_manifest
from seams.resources.embedder import OnnxEmbedderResource
from seams.resources.postgres import PostgresResource
from seams.storage.search.budget_recall import mean, read_questions
from seams.storage.search.evaluation import evaluate, indexed_sources, located

EVAL_GROUP = "evaluation"
EVAL_KEY = dg.AssetKey("retrieval_eval")
EVAL_VERSION = "1"
FLOOR_CHECK = "recall_above_floor"
EVAL_SENSOR = "seams_retrieval_eval"
AUTOMATION_LABEL = "index or search settings changed"
INDEX_KEY = dg.AssetKey("chunk_index")


def recall_label(budget: int) -> str:
    """The metadata label of the figure at `budget` (stable: the UI plots it across runs)."""
    return f"recall@{budget}"


@dataclass(frozen=True)
class EvalSetup:
    """What the asset measures and how, fixed when the definitions are built."""

    questions: Path
    """The questions file, absolute."""
    questions_sha256: str
    """Its content's sha256 when the definitions were built (part of the code version)."""
    budgets: tuple[int, ...]
    floor: Mapping[int, float]
    search: str
    lexical_weight: float
    sentence_weight: float

    @classmethod
    def of(
        cls,
        questions: Path,
        budgets: Sequence[int],
        floor: Mapping[int, float],
        search: str,
        lexical_weight: float,
        sentence_weight: float,
    ) -> "EvalSetup":
        """The setup for the questions file at `questions` (absolute), hashed now: a file that
        cannot be read is a `ConfigError` naming `evaluation.questions`."""
        try:
            digest = hashlib.sha256(questions.read_bytes()).hexdigest()
        except FileNotFoundError:
            raise ConfigError(
                f"evaluation.questions: {questions} does not exist: give a JSON Lines file of "
                "questions (see docs/evaluation.md), or set it to null"
            ) from None
        except IsADirectoryError:
            raise ConfigError(
                f"evaluation.questions: {questions} is a folder: give a JSON Lines file"
            ) from None
        except OSError as exc:
            raise ConfigError(
                f"evaluation.questions: cannot read {questions}: {exc.strerror or exc}"
            ) from None
        return cls(
            questions, digest, tuple(budgets), dict(floor), search, lexical_weight, sentence_weight
        )


def evaluation_code_version(setup: EvalSetup, index_code_version: str) -> str:
    """What the figures depend on: the index (its code version folds in every setting that
    shapes it), the search settings, the budgets and the questions' content. The floor is not
    among them: it changes the verdict, not the figures (execute the check again)."""
    return code_version(
        EVAL_VERSION,
        index_code_version,
        f"search:{setup.search}",
        f"lexical_weight:{setup.lexical_weight!r}",
        f"sentence_weight:{setup.sentence_weight!r}",
        "budgets:" + ",".join(map(str, setup.budgets)),
        f"questions:{setup.questions_sha256}",
    )


def eval_condition() -> dg.AutomationCondition:
    """Request `retrieval_eval` once some batch's index was written since it last ran (or its
    code version changed), when no batch's index is being written and it is not running."""
    changed = (
        dg.AutomationCondition.any_deps_updated() | dg.AutomationCondition.code_version_changed()
    )
    return (
        changed.since_last_handled()
        & ~dg.AutomationCondition.any_deps_in_progress()
        & ~dg.AutomationCondition.in_progress()
    ).with_label(AUTOMATION_LABEL)


def measure(
    setup: EvalSetup, postgres: PostgresResource, embedder: OnnxEmbedderResource
) -> dict[str, object]:
    """The current settings' recall per budget on the questions, as `seams eval --json` reports
    it (`recall`, rounded alike), with what it was measured on."""
    questions, digest = read_questions(setup.questions)
    try:  # a fresh install has no model: say what to run rather than fail deep inside
        load_manifest(embedder.resolved_model_dir())
    except SeamsError as exc:
        raise InputError(f"retrieval_eval needs the embedding model and an index: {exc}") from exc
    sources, published = indexed_sources(
        postgres, questions, str(setup.questions), str(setup.questions.parent)
    )
    questions = located(questions, sources, str(setup.questions))
    result = evaluate(
        postgres,
        embedder,
        questions,
        sources,
        budgets=setup.budgets,
        weights=[setup.lexical_weight],
        lexical_weight=setup.lexical_weight,
        sentence_weight=setup.sentence_weight,
        count_tokens=embedder.count_tokens,
        published_seq=published,
        kinds=(setup.search,),  # only the current settings' way of ranking is measured
    )
    figures = result.figures(setup.search, setup.lexical_weight)
    return {
        "recall": {budget: round(mean(values), 4) for budget, values in figures.items()},
        "questions": len(questions),
        "sources": len({sources[q.source].document_id for q in questions}),
        "published_seq": published,
        "questions_sha256": digest,
    }


def build_eval_asset(
    setup: EvalSetup,
    index_code_versions: Mapping[dg.AssetKey, str],
    automation_condition: dg.AutomationCondition | None = None,
) -> dg.AssetsDefinition:
    """`retrieval_eval` for `setup`, downstream of every batch of every collection's
    `chunk_index` (`index_code_versions`: each index's key and code version). It measures the
    search readers run, over every collection."""

    @dg.asset(
        key=EVAL_KEY,
        deps=sorted(index_code_versions, key=lambda key: key.path),
        group_name=EVAL_GROUP,
        **asset_attributes("retrieval_eval", stage="evaluation", kinds=("postgres", "onnx")),
        code_version=evaluation_code_version(setup, _joined(index_code_versions)),
        automation_condition=automation_condition,
        retry_policy=dg.RetryPolicy(max_retries=2, delay=2, backoff=dg.Backoff.EXPONENTIAL),
        description=f"Recall of `seams search --budget B` on the questions in {setup.questions} "
        "with the current settings (what `seams eval` reports as `recall`), per budget: "
        "the share of the answers' characters inside the packed context.",
    )
    def retrieval_eval(
        context: dg.AssetExecutionContext,
        seams_postgres: PostgresResource,
        seams_embedder: OnnxEmbedderResource,
    ) -> dg.MaterializeResult:
        try:
            found = measure(setup, seams_postgres, seams_embedder)
        except InputError as exc:  # the questions or the index as they are: a retry won't help
            raise dg.Failure(description=str(exc), allow_retries=False) from exc
        if found["questions_sha256"] != setup.questions_sha256:
            context.log.warning(
                f"{setup.questions} changed since the definitions were loaded: measured the "
                "file as it is now; reload the definitions so the code version follows it"
            )
        recall: dict[int, float] = found["recall"]  # type: ignore[assignment]
        metadata: dict[str, object] = {
            recall_label(b): dg.MetadataValue.float(float(r)) for b, r in recall.items()
        }
        metadata.update(
            {
                "questions": dg.MetadataValue.int(int(found["questions"])),  # type: ignore[arg-type]
                "sources": dg.MetadataValue.int(int(found["sources"])),  # type: ignore[arg-type]
                "search": setup.search,
                "lexical_weight": dg.MetadataValue.float(float(setup.lexical_weight)),
                "sentence_weight": dg.MetadataValue.float(float(setup.sentence_weight)),
                "questions_file": dg.MetadataValue.path(str(setup.questions)),
                "questions_sha256": str(found["questions_sha256"]),
            }
        )
        if found["published_seq"] is not None:
            metadata["published_seq"] = dg.MetadataValue.int(int(found["published_seq"]))  # type: ignore[arg-type]
        shown = ", ".join(f"{recall_label(b)} {r:.3f}" for b, r in recall.items())
        context.log.info(f"{counted(found['questions'], 'question')}: {shown}")
        return dg.MaterializeResult(metadata=metadata)

    return retrieval_eval


def floor_problems(
    measured: Mapping[str, object], floor: Mapping[int, float]
) -> tuple[list[str], dict[str, float]]:
    """Per budget with a floor, a problem when the latest measured recall (asset metadata by
    `recall_label`) is below it or was not measured; and the numbers looked at."""
    problems, checked = [], {}
    for budget, minimum in sorted(floor.items()):
        label = recall_label(budget)
        value = measured.get(label)
        value = getattr(value, "value", value)
        checked[f"floor@{budget}"] = float(minimum)
        if not isinstance(value, int | float):
            problems.append(f"{label} was not measured: run retrieval_eval with budget {budget}")
            continue
        checked[label] = float(value)
        if value < minimum:
            problems.append(f"{label} is {value:.4f}, below its floor {minimum:g}")
    return problems, checked


def build_floor_check(setup: EvalSetup) -> dg.AssetChecksDefinition:
    """`recall_above_floor`: the latest `retrieval_eval` figures against `setup.floor`. A check
    of its own (not one the asset yields) so that a changed floor can be checked again from the
    UI without measuring again."""

    @dg.asset_check(
        asset=EVAL_KEY,
        name=FLOOR_CHECK,
        description="Recall at each budget with a floor (evaluation.floor in seams.yaml) is at "
        "least that floor: "
        + ", ".join(f"{recall_label(b)} >= {f:g}" for b, f in sorted(setup.floor.items())),
    )
    def recall_above_floor(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        event = context.instance.get_latest_materialization_event(EVAL_KEY)
        materialization = event.asset_materialization if event is not None else None
        if materialization is None:
            return dg.AssetCheckResult(
                passed=False,
                description="retrieval_eval was never materialized: materialize it first",
            )
        problems, checked = floor_problems(materialization.metadata, setup.floor)
        metadata: dict[str, dg.MetadataValue] = numbers(checked)
        if problems:
            metadata["problems"] = dg.MetadataValue.md("\n".join(f"- {p}" for p in problems))
        return dg.AssetCheckResult(
            passed=not problems,
            metadata=metadata,
            description="; ".join(problems) or None,
        )

    return recall_above_floor


def _joined(index_code_versions: Mapping[dg.AssetKey, str]) -> str:
    """One code version for every index: the one index's own (a project without collections
    keeps the version it always had), else each key's, in key order."""
    if len(index_code_versions) == 1:
        return next(iter(index_code_versions.values()))
    return ",".join(
        f"{key.to_user_string()}={version}"
        for key, version in sorted(index_code_versions.items(), key=lambda item: item[0].path)
    )


def build_evaluation(
    setup: EvalSetup, index_code_versions: Mapping[dg.AssetKey, str]
) -> tuple[list[dg.AssetsDefinition], list[dg.AssetChecksDefinition], list[dg.SensorDefinition]]:
    """The asset, its floor check (when a floor is set) and the sensor that evaluates its
    automation condition (running by default: it only requests work after an index change)."""
    asset = build_eval_asset(setup, index_code_versions, eval_condition())
    checks = [build_floor_check(setup)] if setup.floor else []
    sensor = dg.AutomationConditionSensorDefinition(
        EVAL_SENSOR,
        target=dg.AssetSelection.assets(EVAL_KEY),
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Measures retrieval_eval again after an index change (evaluation.questions "
        "in seams.yaml).",
    )
    return [asset], checks, [sensor]
