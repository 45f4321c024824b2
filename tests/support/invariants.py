"""The chunk invariants, checked independently of the product's own asset checks."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from seams.chunking.segment import Candidate

_NON_SPACE = re.compile(r"\S")


def invariant_problems(text: str, chunks: Sequence[dict[str, Any]], size_max: int) -> list[str]:
    """The chunk invariants, checked independently of `assets/checks.py`.

    `chunks` are one document's chunks in order, with the `seams.chunks` columns text,
    start_char, end_char, overlap_end, chunk_index, total_chunks, token_count, metadata. The
    cores (`overlap_end:end_char`) must tile the text in order with every non-space character
    in one; a chunk's size (metadata "size", else token_count) may pass `size_max` only when
    the chunk is flagged oversized.
    """
    problems = []
    covered = [False] * len(text)
    previous_end = 0
    for position, chunk in enumerate(chunks):
        start, end = chunk["start_char"], chunk["end_char"]
        if text[start:end] != chunk["text"]:
            problems.append(f"chunk {position}: text is not source[{start}:{end}]")
        if chunk["chunk_index"] != position or chunk["total_chunks"] != len(chunks):
            problems.append(
                f"chunk {position}: index/total {chunk['chunk_index']}/{chunk['total_chunks']}"
            )
        core_start = chunk["overlap_end"]
        if core_start < previous_end:
            problems.append(f"chunk {position}: core starts at {core_start} < {previous_end}")
        previous_end = end
        for i in range(core_start, end):
            covered[i] = True
        metadata = chunk.get("metadata") or {}
        size = metadata.get("size", chunk["token_count"])
        if size > size_max and not metadata.get("oversized"):
            problems.append(f"chunk {position}: size {size} > {size_max}, not flagged")
    lost = next((m.start() for m in _NON_SPACE.finditer(text) if not covered[m.start()]), None)
    if lost is not None:
        problems.append(f"character {lost} ({text[lost]!r}) is in no chunk")
    return problems


def check_exact(text: str, candidates: list[Candidate]) -> list[Candidate]:
    """The offset contract: ordered, non-overlapping, trimmed, gaps are whitespace only."""
    position = 0
    for number, c in enumerate(candidates):
        assert c.index == number
        assert position <= c.start_char < c.end_char <= len(text)
        assert text[position : c.start_char].strip() == ""
        body = c.text_of(text)
        assert body == body.strip() and body
        position = c.end_char
    assert text[position:].strip() == ""
    return candidates
