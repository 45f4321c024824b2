"""Seams' chunking engine: exact, structure-aware semantic chunking (pure Python + numpy).

Stages (each public, composed by `chunk_text`): `segment` -> `embedding_texts` (+ an injected
embedder) -> `gap_similarities` (or `jaccard_similarities`) -> `detect_boundaries` ->
`assemble_chunks`. No Dagster, no database, no model files: callers inject the embedder and the
token counter.
"""

from seams.chunking.assemble import Chunk, Segment, assemble_chunks, plan_segments
from seams.chunking.boundaries import Boundary, detect_boundaries, gap_thresholds
from seams.chunking.chunker import chunk_text, embed_candidates
from seams.chunking.config import CONFIG_SECTIONS, ChunkingConfig
from seams.chunking.fallback import jaccard_similarities
from seams.chunking.ids import assign_chunk_ids, chunk_id, normalise_text
from seams.chunking.pages import PageSpan
from seams.chunking.segment import Candidate, candidate_texts, segment
from seams.chunking.similarity import (
    candidate_vectors,
    embedding_texts,
    gap_similarities,
    window_texts,
)
from seams.chunking.tokens import HeuristicTokenCounter, TokenizerCounter, load_token_counter
from seams.errors import ConfigError, EmbeddingError, InputError, SeamsError, StorageError

__all__ = [
    "CONFIG_SECTIONS",
    "Boundary",
    "Candidate",
    "Chunk",
    "ChunkingConfig",
    "ConfigError",
    "EmbeddingError",
    "HeuristicTokenCounter",
    "InputError",
    "PageSpan",
    "SeamsError",
    "Segment",
    "StorageError",
    "TokenizerCounter",
    "assemble_chunks",
    "assign_chunk_ids",
    "candidate_texts",
    "candidate_vectors",
    "chunk_id",
    "chunk_text",
    "detect_boundaries",
    "embed_candidates",
    "embedding_texts",
    "gap_similarities",
    "gap_thresholds",
    "jaccard_similarities",
    "load_token_counter",
    "normalise_text",
    "plan_segments",
    "segment",
    "window_texts",
]
