"""One search as asked: every option validated once, into an immutable `SearchRequest` that the
pool, the reading and the answer all read from.

`SearchRequest.of` is the one constructor the entry points use: it checks each option in a
fixed order (k, kind, weights, budget and its token counter, collections, pool size, then the
query text), so a bad option is one `InputError` before anything is embedded or connected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from seams.errors import InputError
from seams.storage.search.context_budget import TokenCounter, check_budget
from seams.storage.search.dense import MAX_FETCH, MIN_FETCH
from seams.storage.search.fusion import LEXICAL_WEIGHT, check_lexical_weight
from seams.storage.search.query import (
    PreparedQuery,
    SearchKind,
    check_collections,
    check_kind,
    prepare_query,
)
from seams.storage.search.sentence_rerank import SENTENCE_WEIGHT, check_sentence_weight

MAX_K = 100
PARENT_CHARS = 4000


def check_k(k: object) -> int:
    """`k` itself when it is an integer from 1 to `MAX_K`, else an `InputError`."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InputError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
    return k


def check_token_counter(count_tokens: TokenCounter | None) -> TokenCounter:
    """The counter a token budget needs, else an `InputError`."""
    if count_tokens is None:
        raise InputError("a token budget needs a token counter: pass count_tokens")
    return count_tokens


def check_pool(pool: object) -> int:
    """`pool` itself when it is an integer from 1 to `dense.MAX_FETCH`, else an `InputError`."""
    if isinstance(pool, bool) or not isinstance(pool, int) or not 1 <= pool <= MAX_FETCH:
        raise InputError(f"pool must be an integer from 1 to {MAX_FETCH}, got {pool!r}")
    return pool


def pool_size(k: int) -> int:
    """How many nearest chunk vectors a top-`k` search fetches first (and re-scores)."""
    return max(MIN_FETCH, 4 * k)


def exact_size(pool: int) -> int:
    """How many of a pool's best chunks by BM25 are proven to be the exhaustive ones: a quarter
    of it, which covers the search's k (`pool_size(k)` >= 4 k). The rest of the pool has exact
    scores too; proving its order as well would cost several times more (the last ranks'
    scores are close to many chunks' bounds)."""
    return max(1, pool // 4)


@dataclass(frozen=True)
class SearchRequest:
    """A search's options, validated (build it with `of`). The options mean what they mean in
    `engine.search_response`; `pool` is how many chunks each signal puts in the candidate pool
    and `exact_k` how many of the BM25 side's best are proven to be the exhaustive ones."""

    query: PreparedQuery
    k: int = 5
    kind: SearchKind = "hybrid"
    lexical_weight: float = LEXICAL_WEIGHT
    sentence_weight: float = SENTENCE_WEIGHT
    mode: str | None = None
    model_id: str | None = None
    parent_chars: int = PARENT_CHARS
    budget: int | None = None
    count_tokens: TokenCounter | None = field(default=None, compare=False, repr=False)
    passages: bool = True
    collections: tuple[str, ...] | None = None
    pool: int = MIN_FETCH
    exact_k: int = 1

    @classmethod
    def of(
        cls,
        query: object,
        k: int = 5,
        *,
        search: SearchKind = "hybrid",
        lexical_weight: float = LEXICAL_WEIGHT,
        sentence_weight: float = SENTENCE_WEIGHT,
        mode: str | None = None,
        model_id: str | None = None,
        parent_chars: int = PARENT_CHARS,
        budget: int | None = None,
        count_tokens: TokenCounter | None = None,
        passages: bool = True,
        collections: Sequence[str] | None = None,
        pool: int | None = None,
    ) -> SearchRequest:
        """The request for these options, each checked (an `InputError` for the first bad
        one). `pool` None: the top-`k` search's own (`pool_size(k)`, its first `k` by BM25
        proven, or with a budget the pool's `exact_size`); given, a pool read for itself."""
        check_k(k)
        check_kind(search)
        check_lexical_weight(lexical_weight)
        check_sentence_weight(sentence_weight)
        if budget is not None:
            check_budget(budget)
            count_tokens = check_token_counter(count_tokens)
        among = check_collections(collections)
        if pool is None:
            size = pool_size(k)
            exact_k = k if budget is None else exact_size(size)
        else:
            size = check_pool(pool)
            exact_k = exact_size(size)
        return cls(
            query=prepare_query(query),
            k=k,
            kind=search,
            lexical_weight=lexical_weight,
            sentence_weight=sentence_weight,
            mode=mode,
            model_id=model_id,
            parent_chars=parent_chars,
            budget=budget,
            count_tokens=count_tokens,
            passages=passages,
            collections=among,
            pool=size,
            exact_k=exact_k,
        )
