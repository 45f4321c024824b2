"""Seams' chunking engine: exact, structure-aware semantic chunking (pure Python + numpy).

Stages (each public, composed by `chunk_text`): `segment` -> `embedding_texts` (+ an injected
embedder) -> `gap_similarities` (or `jaccard_similarities`) -> `detect_boundaries` ->
`assemble_chunks`. No Dagster, no database, no model files: callers inject the embedder and the
token counter.
"""

from chunking.assemble import Chunk, Segment, assemble_chunks, plan_segments
from chunking.boundaries import Boundary, detect_boundaries, gap_thresholds
from chunking.chunker import chunk_text, embed_candidates
from chunking.config import CONFIG_SECTIONS, ChunkingConfig
from chunking.errors import ConfigError, EmbeddingError, InputError, SeamsError, StorageError
from chunking.fallback import jaccard_similarities
from chunking.ids import assign_chunk_ids, chunk_id, normalise_text
from chunking.pages import PageSpan
from chunking.profiles import ChunkingProfiles, ProfileRule
from chunking.segment import Candidate, candidate_texts, segment
from chunking.similarity import (
    candidate_vectors,
    embedding_texts,
    gap_similarities,
    window_texts,
)
from chunking.tokens import HeuristicTokenCounter, TokenizerCounter, load_token_counter

__all__ = [
    "CONFIG_SECTIONS",
    "Boundary",
    "Candidate",
    "Chunk",
    "ChunkingConfig",
    "ChunkingProfiles",
    "ConfigError",
    "EmbeddingError",
    "HeuristicTokenCounter",
    "InputError",
    "PageSpan",
    "ProfileRule",
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
