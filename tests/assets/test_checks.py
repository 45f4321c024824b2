"""The invariant checks catch deliberately broken data (and pass on good data)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from seams.assets import checks
from seams.chunking import chunk_text

TEXT = (
    "Bees live in colonies. A colony has one queen.\n\n"
    "Sourdough needs a starter. The starter ferments flour and water.\n"
)
KEY = ("b1", "doc")


def _chunks_frame(text: str = TEXT) -> pd.DataFrame:
    from seams.assets.frames import chunk_rows

    made = chunk_text(text, document_id="doc")
    rows = chunk_rows("b1", made, {"run_id": "r", "config_hash": "c", "model_id": "m",
                                   "source_sha256": "s", "code_version": "v"})  # fmt: skip
    return pd.DataFrame(rows)


def test_good_chunks_pass_every_check() -> None:
    df = _chunks_frame()
    assert checks.exact_slices({KEY: TEXT}, df) == []
    assert checks.nothing_lost({KEY: TEXT}, df) == []
    assert checks.sizes_within_bounds(df, 254) == []
    assert checks.unique_ids(df) == []


def test_a_chunk_that_is_not_its_slice_fails() -> None:
    df = _chunks_frame()
    df.loc[0, "text"] = df.loc[0, "text"] + "!"
    assert checks.exact_slices({KEY: TEXT}, df)


def test_lost_text_fails() -> None:
    df = _chunks_frame()
    assert checks.nothing_lost({KEY: TEXT + "\nA sentence no chunk covers."}, df)


def test_oversized_unflagged_chunk_fails_and_flagged_passes() -> None:
    df = _chunks_frame()
    assert checks.sizes_within_bounds(df, 3)
    df["metadata"] = [{**m, "oversized": True} for m in df["metadata"]]
    assert checks.sizes_within_bounds(df, 3) == []


def test_duplicate_ids_fail() -> None:
    df = _chunks_frame()
    doubled = pd.concat([df, df.iloc[[0]]], ignore_index=True)
    assert checks.unique_ids(doubled)


def test_embedding_rows_and_vectors() -> None:
    candidates = pd.DataFrame({"batch_key": ["b1"] * 2, "document_id": ["doc"] * 2,
                               "candidate_index": [0, 1]})  # fmt: skip
    unit = np.array([1.0, 0.0], dtype=np.float32)
    good = candidates.assign(embedding=[unit, unit])
    assert checks.one_row_per_candidate(candidates, good) == []
    assert checks.unit_vectors(good) == []
    assert checks.one_row_per_candidate(candidates, good.iloc[[1]])  # row 0 missing
    bad = candidates.assign(embedding=[unit * 2, np.array([np.nan, 0], dtype=np.float32)])
    assert len(checks.unit_vectors(bad)) == 2
    fallback = candidates.assign(embedding=[None, None])
    assert checks.unit_vectors(fallback) == []
