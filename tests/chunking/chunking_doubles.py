"""Test doubles for the chunking engine: a deterministic fake embedder and simple counters.

The fake embedder hashes words into a fixed-size vector (bag of words, L2-normalised). It is a
legitimate stand-in for the pure algorithm: texts sharing vocabulary are similar, texts on
disjoint vocabularies are nearly orthogonal, and results are identical in every process.
(Imported by the tests as `chunking_doubles`; the name avoids clashes in pytest's rootdir mode.)
"""

from __future__ import annotations

import re
import zlib

import numpy as np

DIMS = 256
_WORD = re.compile(r"\w+")
_STOPWORDS = frozenset(
    ["a", "an", "and", "at", "by", "in", "is", "its", "of", "on", "the", "to", "when"]
)


def fake_embed(texts: list[str]) -> np.ndarray:
    """Hashed bag-of-words unit vectors (zero-free: a text without words gets a fixed vector)."""
    out = np.zeros((len(texts), DIMS), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in _WORD.findall(text.lower()):
            if word not in _STOPWORDS:
                out[row, zlib.crc32(word.encode("utf-8")) % DIMS] += 1.0
        if not out[row].any():
            out[row, 0] = 1.0
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def word_counter(texts: list[str]) -> list[int]:
    """One token per whitespace-separated word: makes sizes easy to reason about in tests."""
    return [len(t.split()) for t in texts]


# Every sentence of a topic shares its topic words, as real topical text does.
CATS = [
    "The cat purrs when the cat is content and kneads soft blankets.",
    "A cat grooms its fur with a rough cat tongue covered in hooks.",
    "Every young cat learns to hunt by pouncing on toys in play.",
    "The house cat sleeps most of the day and hunts at dusk.",
    "A cat uses its whiskers to sense openings in the dark.",
    "The cat marks territory by rubbing its cheeks on furniture.",
]
ROCKETS = [
    "The rocket burns liquid oxygen and kerosene to produce launch thrust.",
    "The first rocket stage separates after launch when its fuel is spent.",
    "An orbital rocket launch needs a speed of nearly eight kilometres per second.",
    "Engineers test every rocket engine on stands before a launch campaign.",
    "Reusable rocket boosters land on barges at sea after each launch.",
    "Guidance computers steer the rocket during launch by gimballing nozzles.",
]


def topic_text(paragraph_break: bool = False) -> str:
    """Six sentences about cats, then six about rockets: one clear topic seam."""
    joiner = "\n\n" if paragraph_break else " "
    return " ".join(CATS) + joiner + " ".join(ROCKETS)
