"""`chunk_text`: the whole algorithm for one document, composed from the public stages.

The Dagster assets call the stages one by one (`segment` -> `embedding_texts` + embedder ->
`gap_similarities` -> `detect_boundaries` -> `assemble_chunks`); `chunk_text` calls the very same
functions in the same order, so the CLI, the library and the pipeline share one code path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from seams.chunking.assemble import Chunk, assemble_chunks
from seams.chunking.boundaries import detect_boundaries
from seams.chunking.config import ChunkingConfig
from seams.chunking.fallback import jaccard_similarities
from seams.chunking.segment import Candidate, segment
from seams.chunking.similarity import (
    candidate_vectors,
    embedding_texts,
    expected_rows,
    gap_similarities,
    normalise_rows,
)
from seams.chunking.tokens import counter_name, resolve_token_counter
from seams.errors import InputError

logger = logging.getLogger(__name__)

DEFAULT_CONFIG = ChunkingConfig()


@runtime_checkable
class Embedder(Protocol):
    """What `chunk_text(embed=...)` accepts besides a bare callable: an embedding model that
    carries its own token counter, so chunks are sized in the tokens of the model that reads
    them (`seams.OnnxEmbedder`, `seams.StaticEmbedder`, or your own)."""

    def embed(self, texts: list[str], /) -> Any:
        """(len(texts), d) float32 rows (normalised here if they are not)."""
        ...

    @property
    def count_tokens(self) -> Callable[[list[str]], list[int]]:
        """Tokens per text without special tokens; a `name` attribute names it in provenance."""
        ...

    @property
    def model_id(self) -> str: ...


def embedder_token_counter(embed: object) -> Callable[[list[str]], list[int]] | None:
    """The token counter an embedder object carries (`count_tokens`), or None for a bare
    callable or None."""
    counter = getattr(embed, "count_tokens", None)
    return counter if callable(counter) else None


def embed_candidates(
    text: str, candidates: Sequence[Candidate], config: ChunkingConfig, embed: Embedder | Any
) -> np.ndarray | None:
    """Unit vectors for `embedding_texts(...)`, or None (logged) when `embed` is missing, raises
    or returns something unusable (wrong shape, NaN/inf) -- the caller then falls back to
    lexical similarity. Never raises because of the embedder."""
    if embed is None:  # asked for (the documented lexical mode): said at info, not warned
        logger.info(
            "no embedder given: using lexical (Jaccard) boundaries; chunks record "
            'boundary_method="jaccard"'
        )
        return None
    call = embed if callable(embed) else getattr(embed, "embed", None)
    texts = embedding_texts(text, candidates, config)
    try:
        if call is None:
            raise TypeError(f"{type(embed).__name__} is neither callable nor has .embed()")
        vectors = np.asarray(call(texts), dtype=np.float32)
    except Exception as exc:
        logger.warning(
            "embedding %d texts failed (%s: %s); using lexical (Jaccard) boundaries instead",
            len(texts),
            type(exc).__name__,
            exc,
        )
        return None
    if vectors.ndim != 2 or vectors.shape[0] != expected_rows(len(candidates), config):
        logger.warning(
            "embedder returned shape %s for %d texts; using lexical (Jaccard) boundaries instead",
            vectors.shape,
            len(texts),
        )
        return None
    if not np.isfinite(vectors).all():
        logger.warning("embedder returned NaN/inf; using lexical (Jaccard) boundaries instead")
        return None
    return normalise_rows(vectors)


def chunk_text(
    text: str,
    *,
    document_id: str,
    config: ChunkingConfig = DEFAULT_CONFIG,
    embed: Embedder | Callable[[list[str]], Any] | None = None,
    token_counter: Callable[[list[str]], list[int]] | None = None,
    page_spans: Sequence[tuple[int, int, int]] | None = None,
) -> list[Chunk]:
    """Chunk one document (contract).

    `embed`: an `Embedder` object (`seams.OnnxEmbedder()`, `seams.StaticEmbedder()`), whose
    `count_tokens` then sizes the chunks, or a bare callable `list[str] -> (n, d)` rows; None or
    a failing embedder gives the lexical fallback, recorded as `boundary_method="jaccard"`.
    `token_counter(list[str]) -> list[int]` (tokens without special tokens, see
    `chunking.tokens.load_token_counter`) overrides the embedder's counter; with neither, the
    conservative heuristic sizes chunks. The counter used is named in each chunk's
    `metadata["token_counter"]`. With `config.tokenizer="cl100k_base"` sizes are counted in
    cl100k_base tokens instead, and `token_counter` (the model's) only checks each chunk against
    the model's window (metadata `model_tokens`, `exceeds_model_window`). `page_spans`:
    `(page, start_char, end_char)` per page. Empty or whitespace-only text gives [].
    Deterministic: the same inputs give the same chunks.
    """
    if not isinstance(text, str):
        raise InputError(f"text must be str, got {type(text).__name__}")
    if not isinstance(document_id, str) or not document_id:
        raise InputError("document_id must be a non-empty string")
    config = config if config is not None else DEFAULT_CONFIG
    if token_counter is None:
        token_counter = embedder_token_counter(embed)
    candidates = segment(text, config, token_counter)
    if not candidates:
        return []
    n = len(candidates)
    if embed is not None and n == 1:
        vectors, method = None, "semantic"  # one candidate: no gap to judge, skip the model
    else:
        vectors = embed_candidates(text, candidates, config, embed)
        method = "semantic" if vectors is not None else "jaccard"
    if vectors is not None:
        similarities = gap_similarities(vectors, n, config)
    else:
        similarities = jaccard_similarities(text, candidates, config)
    own = candidate_vectors(vectors, n, config) if vectors is not None else None
    boundaries = detect_boundaries(similarities, candidates, config, method=method, vectors=own)
    return assemble_chunks(
        text,
        candidates,
        boundaries,
        config,
        document_id=document_id,
        embeddings=own,
        page_spans=page_spans,
        boundary_method=method,
        token_counter_name=counter_name(resolve_token_counter(token_counter, config)),
        window_counter=token_counter,
    )
