"""Invariants every materialization must keep, as pure functions over the stored frames.

The assets run these and report them as blocking asset checks: a violation stops downstream
steps before bad rows flow on. Each returns a list of human-readable problems (empty = pass),
capped so a badly broken batch still gives a readable check result.

Checks are evaluated per batch: a run may materialize many batches (a single-run backfill), and a
check result that pooled them would put one batch's numbers on every batch's page and make the
check's history jump between run sizes. `batch_check_specs` partitions a check like its asset, and
`evaluated_per_batch` turns each batch's results into that partition's evaluation.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterable, Iterator, Mapping

import dagster as dg
import numpy as np
import pandas as pd

from seams.assets.display import numbers
from seams.assets.frames import by_document

MAX_REPORTED = 20
_NON_SPACE = re.compile(r"\S")


def _capped(problems: list[str]) -> list[str]:
    if len(problems) > MAX_REPORTED:
        return [*problems[:MAX_REPORTED], f"... and {len(problems) - MAX_REPORTED} more"]
    return problems


def check_result(
    name: str, problems: list[str], checked: Mapping[str, float | int] | None = None
) -> dg.AssetCheckResult:
    """A Dagster check result: passed when there are no problems, else they are listed.

    `checked` holds the numbers the check looked at (rows, documents, the bound it held them to),
    so a result says what "passed" covered.
    """
    metadata: dict[str, dg.MetadataValue] = numbers(checked or {})
    if problems:
        metadata["problems"] = dg.MetadataValue.md("\n".join(f"- {p}" for p in problems))
    return dg.AssetCheckResult(check_name=name, passed=not problems, metadata=metadata)


def batch_check_specs(
    asset: dg.AssetKey,
    described: Mapping[str, str],
    partitions_def: dg.PartitionsDefinition,
    *,
    blocking: bool,
) -> list[dg.AssetCheckSpec]:
    """One check spec per (name, description), partitioned like `asset` so each batch has its
    own result. (Partitioned checks are a Dagster preview: its warning says nothing to users.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return [
            dg.AssetCheckSpec(
                name,
                asset=asset,
                description=text,
                blocking=blocking,
                partitions_def=partitions_def,
            )
            for name, text in described.items()
        ]


def evaluated_per_batch(
    context: dg.AssetExecutionContext,
    results: Iterable[tuple[str, Iterable[dg.AssetCheckResult]]],
) -> Iterator[dg.AssetCheckEvaluation | dg.Output]:
    """Each batch's check results as that partition's evaluations, then the checks' outputs.

    Dagster 1.13 gives an `AssetCheckResult` the step's partition only when the step has exactly
    one; in a ranged run it would have none. So the results are yielded as evaluations naming
    their batch and the batch's materialization they judged (`latest_materialization_of`: call
    this after the step's output, so that is this step's), a failed blocking one still stopping
    the step after every batch was reported, plus the empty output each selected check needs so
    downstream steps may depend on it.
    """
    specs = context.assets_def.check_specs_by_output_name
    output_of = {spec.key: name for name, spec in specs.items()}
    selected = context.selected_asset_check_keys
    targets: dict[tuple[dg.AssetKey, str], object | None] = {}
    for batch, batch_results in results:
        for result in batch_results:
            key = dg.AssetCheckKey(result.asset_key or context.asset_key, result.check_name)
            if key not in selected:
                continue
            if (key.asset_key, batch) not in targets:
                targets[(key.asset_key, batch)] = latest_materialization_of(
                    context.instance, key.asset_key, batch
                )
            yield dg.AssetCheckEvaluation(
                asset_key=key.asset_key,
                check_name=key.name,
                passed=result.passed,
                metadata=result.metadata,
                severity=result.severity,
                description=result.description,
                blocking=specs[output_of[key]].blocking,
                partition=batch,
                target_materialization_data=targets[(key.asset_key, batch)],
            )
    for key in sorted(selected, key=lambda k: k.name):
        if key in output_of:
            yield dg.Output(None, output_name=output_of[key])


TARGET_TYPE = "AssetCheckEvaluationTargetMaterializationData"


def latest_materialization_of(
    instance: dg.DagsterInstance, asset_key: dg.AssetKey, batch: str
) -> object | None:
    """The latest materialization of `asset_key`'s partition `batch`, as the target an evaluation
    of that partition names (None: never materialized).

    The UI counts a partition's check result only while it targets the partition's latest
    materialization: an evaluation without a target, recorded after the step materialized the
    batch, shows as "Missing" on the check's Partitions tab although it passed. Dagster fills the
    target for an `AssetCheckResult` only in a single-partition step; here it is named the same
    way (the partition's newest materialization record). Its type is not exported, so the
    value is built from its serialized form, the one Dagster's event log stores and reads back.
    """
    found = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=[batch]), limit=1
    ).records
    if not found:
        return None
    record = found[0]
    return dg.deserialize_value(
        json.dumps(
            {
                "__class__": TARGET_TYPE,
                "storage_id": record.storage_id,
                "run_id": record.run_id,
                "timestamp": record.timestamp,
            }
        )
    )


def exact_slices(texts: dict[tuple[str, str], str], chunks: pd.DataFrame) -> list[str]:
    """Every chunk's text equals `source[start_char:end_char]`."""
    problems = []
    for row in chunks.itertuples(index=False):
        source = texts.get((row.batch_key, row.document_id))
        if source is None or source[row.start_char : row.end_char] != row.text:
            problems.append(f"{row.document_id} chunk {row.chunk_index}: text is not its slice")
    return _capped(problems)


def nothing_lost(texts: dict[tuple[str, str], str], chunks: pd.DataFrame) -> list[str]:
    """Every non-whitespace character of every document lies in some chunk's core span."""
    problems = []
    by_doc = dict(by_document(chunks))
    for key, text in texts.items():
        covered = np.zeros(len(text) + 1, dtype=np.int32)
        group = by_doc.get(key)
        if group is not None:
            np.add.at(covered, group["overlap_end"].to_numpy(), 1)
            np.add.at(covered, group["end_char"].to_numpy(), -1)
        inside = np.cumsum(covered)[:-1] > 0
        for match in _NON_SPACE.finditer(text):
            if not inside[match.start()]:
                problems.append(f"{key[1]}: character {match.start()} is in no chunk")
                break
    return _capped(problems)


def sizes_within_bounds(
    chunks: pd.DataFrame, size_max: int | None, chars_max: int | None = None
) -> list[str]:
    """No chunk is over the size cap (None: unbounded) or the character cap unless it is flagged
    oversized (one unsplittable unit)."""
    problems = []
    for row in chunks.itertuples(index=False):
        if (row.metadata or {}).get("oversized"):
            continue
        size = (row.metadata or {}).get("size", row.token_count)
        chars = row.end_char - row.start_char
        if size_max is not None and size > size_max:
            problems.append(f"{row.document_id} chunk {row.chunk_index}: size {size} > {size_max}")
        elif chars_max is not None and chars > chars_max:
            problems.append(
                f"{row.document_id} chunk {row.chunk_index}: {chars} characters > {chars_max}"
            )
    return _capped(problems)


def unique_ids(chunks: pd.DataFrame) -> list[str]:
    duplicated = chunks[chunks.duplicated(["batch_key", "chunk_id"], keep=False)]
    return _capped([f"chunk_id {cid} is not unique" for cid in duplicated["chunk_id"].unique()])


def one_row_per_candidate(candidates: pd.DataFrame, embeddings: pd.DataFrame) -> list[str]:
    """Every document has exactly one embedding row per candidate, indexed 0..n-1."""
    problems = []
    expected = {key: len(group) for key, group in by_document(candidates)}
    for key, group in by_document(embeddings):
        indexes = np.sort(group["candidate_index"].to_numpy())
        if not np.array_equal(indexes, np.arange(expected.get(key, len(indexes)))):
            problems.append(
                f"{key[1]}: embedding rows are not indexed 0..{expected.get(key, 0) - 1}"
            )
    missing = set(expected) - {k for k, _ in by_document(embeddings)}
    problems += [f"{doc}: candidates but no embedding rows" for _, doc in sorted(missing)]
    return _capped(problems)


def unit_vectors(embeddings: pd.DataFrame, tolerance: float = 1e-3) -> list[str]:
    """Every stored vector is finite with unit length (NULL rows mean the lexical fallback)."""
    problems = []
    for row in embeddings.itertuples(index=False):
        if row.embedding is None:
            continue
        vector = np.asarray(row.embedding, dtype=np.float64)
        if not np.isfinite(vector).all() or abs(np.linalg.norm(vector) - 1.0) > tolerance:
            problems.append(
                f"{row.document_id} row {row.candidate_index}: not a finite unit vector"
            )
    return _capped(problems)
