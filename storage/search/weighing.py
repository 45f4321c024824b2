"""The sentences of an answer's hits weighed at any fusion weight (`Weighing`).

An answer weighs each hit's sentences by the search's evidence rule (the cosines and the lexical
scores of all the answer's sentences, each min-max scaled, `sentence_rerank.sentence_scales`,
mixed by `lexical_weight`, `fusion.fuse_normalised`) and joins a heading or a lead-in to the
sentence after it (`context_budget.bound_runs`), so no passage is a heading alone. Only the mix
depends on the weight: the scaling is over the set of hits, whatever their order, and the joins
are the sentences' kinds. So a reading answered at many weights (`seams eval`) scales and joins
once, and each weight only mixes.
"""

from __future__ import annotations

from collections.abc import Sequence

from seams.chunking.segment import BINDS_NEXT
from seams.storage.search.context_budget import Sentence, bound_runs
from seams.storage.search.fusion import fuse_normalised
from seams.storage.search.hit_context import HitRow
from seams.storage.search.reading import SearchReading
from seams.storage.search.sentence_rerank import sentence_scales
from seams.storage.search.signals import ChunkKey

FIXED_WEIGHT = {"dense": 0.0, "lexical": 1.0}
"""The sentence weight of a search that ranks by one signal: its own."""


class Weighing:
    """The sentences of a set of hits (`rows`, any order) of one reading, scaled and joined once:
    `sentences` weighs them at a `lexical_weight` as an answer holding exactly these hits
    does."""

    def __init__(self, reading: SearchReading, rows: Sequence[HitRow]) -> None:
        if reading.sentences is None:
            raise ValueError("the reading holds no sentences: read it with passages=True")
        self.fixed = FIXED_WEIGHT.get(reading.pool.kind)
        per_hit = [reading.sentences[row.key] for row in rows]
        flat = [sentence for sentences in per_hit for sentence in sentences]
        self._dense, self._lexical = sentence_scales(
            [s.cosine for s in flat], [s.idf for s in flat]
        )
        self._units: dict[ChunkKey, list[tuple[int, int, int, int]]] = {}
        """Per hit: its units as (start, end, first, stop): the source span and the positions
        of its sentences among all (`flat[first:stop]`)."""
        position = 0
        for row, sentences in zip(rows, per_hit, strict=True):
            runs = bound_runs([s.kind in BINDS_NEXT for s in sentences])
            self._units[row.key] = [
                (sentences[a].start, sentences[b].end, position + a, position + b + 1)
                for a, b in runs
            ]
            position += len(sentences)

    @property
    def keys(self) -> frozenset[ChunkKey]:
        """The hits weighed."""
        return frozenset(self._units)

    def sentences(
        self, rows: Sequence[HitRow], lexical_weight: float
    ) -> list[tuple[Sentence, ...]]:
        """Per hit of `rows` (weighed here), its units with their evidence at `lexical_weight`
        (the search's own weight for a dense or lexical reading): a unit's evidence is its best
        sentence's."""
        weight = lexical_weight if self.fixed is None else self.fixed
        evidence = fuse_normalised(self._dense, self._lexical, weight).tolist()
        return [
            tuple(
                Sentence(
                    start, end, max(evidence[first:stop]) if stop - first > 1 else evidence[first]
                )
                for start, end, first, stop in self._units[row.key]
            )
            for row in rows
        ]
