"""Search over the current chunks: dense (pgvector), lexical (BM25 inside PostgreSQL) or both
fused, each hit with its parent and neighbours, optionally packed into a reader's token budget.

A search runs in one direction: `request` (the options, validated once) -> `pool` (every
signal's best chunks, each scored by every signal, read complete in one snapshot) -> ranked
once (`pool.ranked_entries`) -> `reading` (the hit rows and sentences of the entries the answer
needs) -> `engine` (the answer, each hit built once, packed into a budget when asked).

One job per module; each imports only modules above it in this list:

- `query` (a query's text, the kinds of search), `fusion`, `sentence_rerank`, `context_budget`
  (ranking arithmetic without a database), `hits` (what a search returns);
- `lexical`, `lexical_index` (BM25 queries; its index, updated when publishing), `dense` (the
  nearest current chunk vectors and exact distances, in SQL), `snapshot` (one read-only
  snapshot per answer), `request` (the options as one validated `SearchRequest`);
- `signals`: the shape of a ranking signal; `signal_dense` and `signal_lexical` the two
  signals. **A new ranking signal** is a module `signal_<name>.py` beside them with that shape
  (its own top chunks, then a score for every pooled chunk), a score field on
  `pool.PoolEntry` and its term in `pool.ranked_entries`;
- `pool`: a query's candidate pool, read complete, and the order that ranks it;
- `hit_context`: ranked chunk keys to typed hit rows (parent, neighbours) and sentences, in SQL;
- `reading`: what a search reads beside its pool;
- `weighing`: the sentences of an answer's hits weighed at any fusion weight;
- `engine`: the readers' entry points (`search_response`; `read_search`, then
  `ranked_response` or `packed_contexts` to answer one reading at many weights and budgets).
"""

from seams.storage.search.context_budget import ContextSpan
from seams.storage.search.engine import (
    packed_contexts,
    ranked_response,
    read_search,
    search_response,
)
from seams.storage.search.fusion import LEXICAL_WEIGHT, fuse_scores
from seams.storage.search.hits import SearchHit, SearchResponse
from seams.storage.search.lexical import DEFAULT_TEXT_SEARCH_CONFIG, check_text_search_config
from seams.storage.search.query import MAX_QUERY_CHARS, QueryEmbedder, SearchKind
from seams.storage.search.reading import SearchReading
from seams.storage.search.request import MAX_K, pool_size
from seams.storage.search.sentence_rerank import SENTENCE_WEIGHT

__all__ = [
    "DEFAULT_TEXT_SEARCH_CONFIG",
    "LEXICAL_WEIGHT",
    "MAX_K",
    "MAX_QUERY_CHARS",
    "SENTENCE_WEIGHT",
    "ContextSpan",
    "QueryEmbedder",
    "SearchHit",
    "SearchKind",
    "SearchReading",
    "SearchResponse",
    "check_text_search_config",
    "fuse_scores",
    "packed_contexts",
    "pool_size",
    "ranked_response",
    "read_search",
    "search_response",
]
