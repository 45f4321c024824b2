"""Lexical fallback: Jaccard word-overlap similarity across gaps, when there are no embeddings.

Used when `embed` is None, raises, or returns unusable vectors (graceful degradation: no model,
still chunks). It is weaker than embeddings (blind to synonyms and paraphrase) but keeps the same
algorithm running: the same windows, threshold types and size rules, and every chunk records
`boundary_method="jaccard"` so downstream can tell.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from seams.chunking.config import ChunkingConfig
from seams.chunking.segment import Candidate

# CJK ideographs and kana count one character per "word" (no spaces to split on); else runs of
# letters/digits.
_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W_]+")
_STOPWORDS_WORDS = """
a about above after again all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from
further had has have having he her here hers him his how i if in into is it its itself
just me more most my no nor not now of off on once only or other our out over own same
she should so some such than that the their them then there these they this those
through to too under until up very was we were what when where which while who whom why
will with would you your
"""
_STOPWORDS = frozenset(_STOPWORDS_WORDS.split())


def word_sets(text: str, candidates: Sequence[Candidate]) -> list[frozenset[str]]:
    """Each candidate's content words (lower case, stop words removed)."""
    findall = _WORD.findall
    return [
        frozenset(
            w for w in findall(text[c.start_char : c.end_char].lower()) if w not in _STOPWORDS
        )
        for c in candidates
    ]


def jaccard_similarities(
    text: str, candidates: Sequence[Candidate], config: ChunkingConfig
) -> np.ndarray:
    """One Jaccard similarity per gap; windows of `window_size` candidates on each side (fewer,
    equally many, near the edges) unless the window mode is "single". A side without words gives
    1.0 (no evidence of a shift)."""
    sets = word_sets(text, candidates)
    n = len(sets)
    w = 1 if config.window_mode == "single" else config.window_size
    out = np.ones(max(n - 1, 0), dtype=np.float64)
    for gap in range(1, n):
        k = min(w, gap, n - gap)  # symmetric near the edges, as for embeddings
        left = frozenset().union(*sets[gap - k : gap])
        right = frozenset().union(*sets[gap : gap + k])
        if left and right:
            out[gap - 1] = len(left & right) / len(left | right)
    return out
