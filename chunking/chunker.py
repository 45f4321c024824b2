"""`chunk_text`: the whole algorithm for one document, composed from the public stages.

The Dagster assets call the stages one by one (`segment` -> `embedding_texts` + embedder ->
`gap_similarities` -> `detect_boundaries` -> `assemble_chunks`); `chunk_text` calls the very same
functions in the same order, so the CLI, the benchmarks and the pipeline share one code path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from chunking.assemble import Chunk, assemble_chunks
from chunking.boundaries import detect_boundaries
from chunking.config import ChunkingConfig
from chunking.errors import InputError
from chunking.fallback import jaccard_similarities
from chunking.segment import Candidate, segment
from chunking.similarity import (
    candidate_vectors,
    embedding_texts,
    expected_rows,
    gap_similarities,
    normalise_rows,
)
from chunking.tokens import counter_name, resolve_token_counter

logger = logging.getLogger(__name__)

Embedder = Callable[[list[str]], Any]
DEFAULT_CONFIG = ChunkingConfig()


def embed_candidates(
    text: str, candidates: Sequence[Candidate], config: ChunkingConfig, embed: Embedder | Any
) -> np.ndarray | None:
    """Unit vectors for `embedding_texts(...)`, or None (logged) when `embed` is missing, raises
    or returns something unusable (wrong shape, NaN/inf) -- the caller then falls back to
    lexical similarity. Never raises because of the embedder."""
    if embed is None:
        logger.warning(
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
    embed: Embedder | Any = None,
    token_counter: Callable[[list[str]], list[int]] | None = None,
    page_spans: Sequence[tuple[int, int, int]] | None = None,
) -> list[Chunk]:
    """Chunk one document (contract).

    `embed(list[str]) -> (n, d)` array of L2-normalised float32 rows (e.g.
    `OnnxEmbedder.embed`); None or a failing embedder gives the lexical fallback, recorded as
    `boundary_method="jaccard"`. `token_counter(list[str]) -> list[int]` counts tokens without
    special tokens (see `chunking.tokens.load_token_counter`); None uses the conservative
    heuristic. With `config.tokenizer="cl100k_base"` sizes are counted in cl100k_base tokens
    instead, and `token_counter` (the model's) only checks each chunk against the model's window
    (metadata `model_tokens`, `exceeds_model_window`). `page_spans`: `(page, start_char,
    end_char)` per page. Empty or whitespace-only text gives []. Deterministic: the same inputs
    give the same chunks.
    """
    if not isinstance(text, str):
        raise InputError(f"text must be str, got {type(text).__name__}")
    if not isinstance(document_id, str) or not document_id:
        raise InputError("document_id must be a non-empty string")
    config = config if config is not None else DEFAULT_CONFIG
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
    boundaries = detect_boundaries(similarities, candidates, config, method=method)
    return assemble_chunks(
        text,
        candidates,
        boundaries,
        config,
        document_id=document_id,
        embeddings=candidate_vectors(vectors, n, config) if vectors is not None else None,
        page_spans=page_spans,
        boundary_method=method,
        token_counter_name=counter_name(resolve_token_counter(token_counter, config)),
        window_counter=token_counter,
    )
