"""Search over the current chunks: dense (pgvector), lexical (BM25 inside PostgreSQL) or both
fused, each hit with its parent and neighbours, optionally packed into a reader's token budget.

One job per module; each imports only modules above it in this list:

- `query`: a query's text checked and capped, the kinds of search, the query embedder's shape;
- `fusion`, `sentence_rerank`, `context_budget`: ranking arithmetic without a database (the
  hybrid score, the best-sentence re-score, packing hits into a token budget);
- `hits`: what a search returns;
- `lexical`: BM25 queries; `lexical_index`: the BM25 index, updated in the publishing transaction;
- `dense`: the index's mode and model, the nearest current chunk vectors, exact distances and
  the best-sentence re-score, in SQL;
- `hit_context`: ranked chunk keys to hits with their parent and neighbours, in SQL;
- `pool`: a query's candidate pool, both sides scored, and the order that ranks it;
- `engine`: the entry points (`search_response`, `search`, `candidates`, `search_vector`), and
  a search's two steps apart: `read_search` (what it reads) and `ranked_response` (the answer
  from that reading at a fusion weight and a budget).
"""

from seams.storage.search.context_budget import ContextSpan
from seams.storage.search.engine import (
    SearchReading,
    candidates,
    ranked_response,
    read_search,
    search,
    search_response,
    search_vector,
)
from seams.storage.search.fusion import LEXICAL_WEIGHT, fuse_scores
from seams.storage.search.hits import SearchHit, SearchResponse
from seams.storage.search.lexical import DEFAULT_TEXT_SEARCH_CONFIG, check_config
from seams.storage.search.pool import CandidatePool, PoolEntry, pool_size, ranked_candidates
from seams.storage.search.query import MAX_QUERY_CHARS, QueryEmbedder, SearchKind
from seams.storage.search.sentence_rerank import SENTENCE_WEIGHT

__all__ = [
    "DEFAULT_TEXT_SEARCH_CONFIG",
    "LEXICAL_WEIGHT",
    "MAX_QUERY_CHARS",
    "SENTENCE_WEIGHT",
    "CandidatePool",
    "ContextSpan",
    "PoolEntry",
    "QueryEmbedder",
    "SearchHit",
    "SearchKind",
    "SearchReading",
    "SearchResponse",
    "candidates",
    "check_config",
    "fuse_scores",
    "pool_size",
    "ranked_candidates",
    "ranked_response",
    "read_search",
    "search",
    "search_response",
    "search_vector",
]
