"""`ChunkingConfig`: every parameter of the chunking algorithm in one validated, frozen object.

Why one object: the pipeline fingerprints it (whole, or one slice per stage) to decide what needs
recomputing after a change, so every knob that changes output must live here and nowhere else.

A size left at its default never blocks one that was set: sizes not given (to the constructor,
or as a preset's overrides; a preset's own sizes count as defaults) follow those given, so
`chunk_size_max=150` alone brings `chunk_size_target` down to 150, and a `chunk_size_min` or
`chunk_size_target` set above the default cap raises it. Only sizes given together can conflict,
and then the error names them (`_follow_given_sizes`).

Why each default is what it is: docs/architecture.md, "Chunking defaults".
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Collection, Sequence
from contextvars import ContextVar
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from seams.errors import ConfigError

SizeUnit = Literal["tokens", "chars", "sentences"]
ThresholdType = Literal["fixed", "percentile", "stddev", "interquartile", "gradient"]
Segmenter = Literal["optimal", "threshold"]
WindowMode = Literal["single", "pooled", "text"]
BoundaryModel = Literal["model", "static"]
TokenizerName = Literal["model", "cl100k_base"]
Language = Literal["en", "de", "fr", "es", "it", "auto"]

#: `chunk_chars_max` by default: eight times the characters an English word piece averages, so
#: only text that tokenizes pathologically (no spaces, [UNK] runs) ever meets it.
CHARS_PER_TOKEN_CAP = 32

#: The fields the user set, while `ChunkingConfig._given` validates a config built from a preset
#: or a copy (pydantic passes no validation context through a custom `__init__`); None: the
#: fields given to the constructor.
_GIVEN: ContextVar[frozenset[str] | None] = ContextVar("chunking_config_given", default=None)

#: Version of the fingerprint payload layout; bump only if the canonical form itself changes.
FINGERPRINT_SCHEMA = 1

#: Fields added after schema 1, with their defaults. A fingerprint includes such a field only
#: when it differs from its default, so configs written before the field existed keep their
#: digests (and a deployed pipeline does not go "unsynced" just because Seams grew a knob).
_LATER_FIELDS: dict[str, Any] = {
    "boundary_model": "model",
    "tokenizer": "model",
    "model_window_tokens": 254,
    # The optimal segmenter replaced the threshold rule as the default: configs that pick the
    # old rule keep their old digests, the new default gets a new one (its chunks differ).
    "segmenter": "threshold",
    "chunk_chars_max": None,
    # The optimal segmenter's knobs, at the values they were introduced with (fixed here, not
    # read from the fields: a later change of a default must change the digest).
    "cut_cost": 1.5,
    "boundary_weight": 0.0,
    "paragraph_weight": 0.0,
    "target_weight": 0.0,
    "max_chunk_candidates": 128,
    # The in-paragraph cut cost and the null model, at values that switch them off (then only
    # the size level's revision, below, marks the change).
    "paragraph_cost": 0.0,
    "null_spread": 0.0,
    # English sentence rules, as before the setting existed.
    "language": "en",
}
#: Revision of the optimal segmenter's algorithm, in every optimal config's digests: revision 2
#: splits over-cap topics into the fewest pieces, so the same knobs give other chunks than
#: revision 1, and a deployed pipeline must see "unsynced". Revision 1 is not written.
OPTIMAL_REVISION = 2
#: The optimal segmenter's own knobs: in the "boundaries" slice only when it is chosen.
_OPTIMAL_FIELDS = (
    "cut_cost",
    "paragraph_cost",
    "null_spread",
    "boundary_weight",
    "paragraph_weight",
    "target_weight",
    "max_chunk_candidates",
)
#: What the threshold rule reads (window pooling, the threshold family, headings).
_THRESHOLD_BOUNDARY_INPUTS = (
    "threshold_type",
    "boundary_threshold",
    "percentile",
    "stddev_factor",
    "iqr_factor",
    "gradient_percentile",
    "local_minima",
    "window_mode",
    "window_size",
    "split_on_headings",
)
#: What the optimal segmenter reads beyond the threshold rule's inputs (the size contract).
_OPTIMAL_BOUNDARY_INPUTS = (
    *_OPTIMAL_FIELDS,
    "size_unit",
    "tokenizer",
    "chunk_size_min",
    "chunk_size_target",
    "chunk_size_max",
    "chunk_chars_max",
)

#: Which fields shape which pipeline stage. `fingerprint(section)` hashes exactly these, so a
#: Dagster asset's code_version changes only when a parameter it reads changes. The "embedding"
#: slice is derived (see `ChunkingConfig.section_params`): pooled/single windows reuse the same
#: candidate embeddings, only text windows change what is embedded.
CONFIG_SECTIONS: dict[str, tuple[str, ...]] = {
    "segmentation": (
        "size_unit",
        "tokenizer",
        "chunk_size_max",
        "max_candidate_chars",
        "min_sentence_length",
        "detect_headings",
        "detect_lists",
        "detect_tables",
        "detect_code",
        "indented_code",
        "extra_abbreviations",
        "language",
    ),
    "embedding": ("window_mode", "window_size", "boundary_model"),
    "boundaries": (*_THRESHOLD_BOUNDARY_INPUTS, "segmenter", *_OPTIMAL_BOUNDARY_INPUTS),
    "assembly": (
        "size_unit",
        "tokenizer",
        "model_window_tokens",
        "chunk_size_min",
        "chunk_size_target",
        "chunk_size_max",
        "chunk_chars_max",
        "overlap_tokens",
        "overlap_ratio",
        "target_pull",
    ),
}


class ChunkingConfig(BaseModel):
    """All chunking parameters (contract). Immutable; invalid values raise `ConfigError`.

    Sizes are measured in `size_unit`; `overlap_tokens` is always in tokens because every chunk
    carries a token count whatever the unit. Tokens are the embedding model's word pieces
    (`tokenizer="model"`) or cl100k_base tokens (`tokenizer="cl100k_base"`, for LLM budgets).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # --- sizes -------------------------------------------------------------------------------
    size_unit: SizeUnit = "tokens"
    chunk_size_min: int = Field(32, ge=1, le=1_000_000)
    chunk_size_target: int | None = Field(200, ge=1, le=1_000_000)
    """The size the optimal segmenter pulls toward (`target_weight`); None: no pull."""
    chunk_size_max: int | None = Field(254, ge=1, le=1_000_000)
    """Hard cap on a chunk's size; None: no size limit (chunks are whole topic segments, which is
    what topic segmentation is measured on; `max_chunk_candidates` still bounds the search)."""
    chunk_chars_max: int | None = Field(None, ge=16, le=100_000_000)
    """Hard cap in characters beside the size cap, so text the tokenizer reads as few tokens (a
    long run without spaces) cannot make a chunk of hundreds of kilobytes. None: 32 characters per
    token of `chunk_size_max` for the tokens unit, `chunk_size_max` for chars, else no cap."""
    overlap_tokens: int = Field(0, ge=0, le=100_000)
    overlap_ratio: float = Field(0.0, ge=0.0, le=0.5)
    target_pull: float = Field(0.0, ge=0.0, le=1.0)
    tokenizer: TokenizerName = "model"
    model_window_tokens: int = Field(254, ge=1, le=1_000_000)
    """The embedding model's window without [CLS]/[SEP]. With `tokenizer="cl100k_base"`, chunks
    longer than this in the model's own tokens are flagged `exceeds_model_window`."""

    # --- boundaries --------------------------------------------------------------------------
    segmenter: Segmenter = "optimal"
    """"optimal": the best segmentation under the size contract (`chunking.optimal`);
    "threshold": cut where the similarity dips below `threshold_type`'s threshold, then let the
    size rules add or drop cuts."""
    cut_cost: float = Field(1.0, ge=0.0, le=1000.0)
    """Optimal segmenter: what a chunk must explain of its candidates' spread to be worth a cut
    at a paragraph break (`chunking.optimal`); a cut inside a paragraph pays `paragraph_cost` on
    top. Higher gives fewer, longer chunks."""
    boundary_weight: float = Field(0.0, ge=0.0, le=1000.0)
    """Optimal segmenter: weight of a gap's valley depth (pooled similarities) as cut evidence."""
    paragraph_cost: float = Field(0.5, ge=0.0, le=1000.0)
    """Optimal segmenter: what a topic cut *inside* a paragraph costs beyond `cut_cost` (a cut at
    a paragraph break, list item or block pays `cut_cost` alone; a document without breaks is one
    paragraph, so there every cut costs `cut_cost + paragraph_cost`). Structure as a prior on
    where a cut goes, not on how often. Size cuts avoid paragraphs anyway (fewest pieces first,
    then fewest cuts inside paragraphs)."""
    null_spread: float = Field(0.9, ge=0.0, le=2.0)
    """Optimal segmenter, the null model: the spread per candidate (1 - |mean|^2 of the unit
    embeddings, unbiased) of a single-subject text. A document that varies less has its
    coherences scaled by spread / `null_spread`, so a one-subject text is not cut apart for the
    small differences between its paragraphs (`chunking.optimal`). 0 switches it off."""
    paragraph_weight: float = Field(0.0, ge=0.0, le=1000.0)
    """Optimal segmenter: evidence for cutting at a paragraph break (on the scale of `cut_cost`).
    Off by default: it makes chunks follow paragraphs, but also cuts every paragraph of a text
    whose paragraphs are not topics."""
    target_weight: float = Field(0.0, ge=0.0, le=1000.0)
    """Optimal segmenter: pull toward `chunk_size_target` (squared relative distance)."""
    max_chunk_candidates: int = Field(128, ge=2, le=100_000)
    """Optimal segmenter: most candidates one chunk may hold (bounds the search when sizes do
    not)."""
    threshold_type: ThresholdType = "percentile"
    boundary_threshold: float = Field(1.0, ge=-1.0, le=1.0)
    percentile: float = Field(30.0, ge=0.0, le=100.0)
    stddev_factor: float = Field(0.5, ge=0.0, le=10.0)
    iqr_factor: float = Field(0.0, ge=0.0, le=10.0)
    gradient_percentile: float = Field(60.0, ge=0.0, le=100.0)
    local_minima: bool = True
    window_mode: WindowMode = "pooled"
    window_size: int = Field(4, ge=1, le=32)
    boundary_model: BoundaryModel = "model"
    """Which model embeds candidates for boundary detection: the transformer ("model") or the
    static model distilled from it ("static", see `seams.StaticEmbedder`)."""

    # --- segmentation and structure ------------------------------------------------------------
    min_sentence_length: int = Field(12, ge=1, le=10_000)
    max_candidate_chars: int = Field(2000, ge=16, le=1_000_000)
    detect_headings: bool = True
    detect_lists: bool = True
    detect_tables: bool = True
    detect_code: bool = True
    indented_code: bool = True
    split_on_headings: bool = True
    extra_abbreviations: tuple[str, ...] = ()
    language: Language = "en"
    """Sentence rules: "en" (English, the default), "de", "fr", "es" or "it" (that language's
    abbreviations such as "Abs.", "p. ex.", "Sra.", ordinal dates such as "am 1. Januar", and
    quotation marks such as „…“ and « … »); "auto" picks one of them per document from its most
    frequent function words (`chunking.sentence_rules`). Only where sentences end changes;
    structure detection is the same for every language."""

    PRESETS: ClassVar[tuple[str, ...]] = ("default", "technical_docs", "narrative", "fast")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(describe_validation_error(exc)) from None

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> ChunkingConfig:  # type: ignore[override]
        """Like pydantic's, but raising `ConfigError` (a ValueError) that names the field."""
        try:
            return super().model_validate(obj, **kwargs)
        except ValidationError as exc:
            raise ConfigError(describe_validation_error(exc)) from None

    @model_validator(mode="before")
    @classmethod
    def _no_booleans_as_numbers(cls, data: Any) -> Any:
        return reject_booleans_as_numbers(cls, data)

    @model_validator(mode="after")
    def _check_relations(self) -> ChunkingConfig:
        given = _GIVEN.get()
        given = self.model_fields_set if given is None else given
        sizes = {name: getattr(self, name) for name in SIZE_FIELDS}
        for name, value in _follow_given_sizes(sizes, given).items():
            if value != sizes[name]:  # frozen: a size not given moves before anyone sees it
                object.__setattr__(self, name, value)
        lo, target, hi = self.chunk_size_min, self.chunk_size_target, self.chunk_size_max
        if target is not None and not (lo <= target and (hi is None or target <= hi)):
            raise ValueError(
                f"chunk_size_target={target} must lie in "
                f"[chunk_size_min={lo}, chunk_size_max={hi}] (or be null for no pull)"
            )
        if hi is not None and lo > hi:
            raise ValueError(
                f"chunk_size_min={lo} must not exceed chunk_size_max={hi} "
                "(set chunk_size_max: null for no size limit)"
            )
        if self.overlap_tokens and self.overlap_ratio:
            raise ValueError(
                "set at most one of overlap_tokens (absolute) and overlap_ratio (relative); "
                f"got overlap_tokens={self.overlap_tokens}, overlap_ratio={self.overlap_ratio}"
            )
        for abbreviation in self.extra_abbreviations:
            if not abbreviation.strip() or any(ch.isspace() for ch in abbreviation.strip()):
                raise ValueError(
                    f"extra_abbreviations: {abbreviation!r} must be one non-empty word "
                    "without spaces (the trailing period is optional)"
                )
        return self

    def effective_chars_max(self) -> int | None:
        """The character cap in force (see `chunk_chars_max`)."""
        if self.chunk_chars_max is not None:
            return self.chunk_chars_max
        if self.chunk_size_max is None:
            return None
        if self.size_unit == "tokens":
            return CHARS_PER_TOKEN_CAP * self.chunk_size_max
        if self.size_unit == "chars":
            return self.chunk_size_max
        return None

    # --- presets -----------------------------------------------------------------------------
    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ChunkingConfig:
        """A named preset ("default", "technical_docs", "narrative", "fast"), optionally overridden.

        technical_docs: a larger minimum (64) so code, tables and their explanation stay
        together. narrative: no indented-code detection (indented prose paragraphs are common in
        books), a minimum of 40 and 32 tokens of overlap carried into each chunk. fast: boundaries
        from the static model (`boundary_model="static"`), with the null model scaled to its
        vectors (`null_spread=0.65`); sizes as the default.

        Their `chunk_size_target` and `percentile` shape the cuts only under
        `segmenter="threshold"` (or the target with `target_weight` > 0); under the default
        optimal segmenter they change the per-gap evidence stored in `semantic_boundaries`, not
        where chunks are cut.
        """
        try:
            base = _PRESETS[name]
        except (KeyError, TypeError):
            raise ConfigError(
                f"preset: unknown preset {name!r}; choose one of {', '.join(cls.PRESETS)}"
            ) from None
        return cls._given({**base, **overrides}, given=set(overrides))

    def with_overrides(self, **overrides: Any) -> ChunkingConfig:
        """A validated copy with some fields changed (pydantic's model_copy does not validate);
        sizes neither given to this config nor overridden follow those that were."""
        given = self.model_fields_set | set(overrides)
        return type(self)._given({**self.model_dump(), **overrides}, given=given)

    @classmethod
    def _given(cls, values: dict[str, Any], *, given: set[str]) -> ChunkingConfig:
        """A config of `values` in which only the fields named in `given` were set by the user
        (the rest are defaults, and their sizes follow the given ones)."""
        token = _GIVEN.set(frozenset(given))
        try:
            config = cls(**values)
        finally:
            _GIVEN.reset(token)
        object.__setattr__(config, "__pydantic_fields_set__", set(given) & set(values))
        return config

    # --- fingerprints ------------------------------------------------------------------------
    def section_params(self, section: str) -> dict[str, Any]:
        """The parameters one pipeline stage reads (see `CONFIG_SECTIONS`), as plain JSON data."""
        if section not in CONFIG_SECTIONS:
            raise ConfigError(
                f"section: unknown config section {section!r}; "
                f"choose one of {', '.join(CONFIG_SECTIONS)}"
            )
        if section == "embedding":
            # Pooled and single windows pool candidate embeddings after the fact: the embedded
            # texts (and so the cached vectors) do not depend on the window at all.
            if self.window_mode == "text":
                params = {"embed_input": "text_windows", "window_size": self.window_size}
            else:
                params = {"embed_input": "candidates"}
            if self.boundary_model != _LATER_FIELDS["boundary_model"]:
                params["boundary_model"] = self.boundary_model
            return params
        dumped = _stable_dump(self)
        names = CONFIG_SECTIONS[section]
        if section == "boundaries" and self.segmenter == "threshold":
            names = tuple(n for n in names if n not in _OPTIMAL_BOUNDARY_INPUTS)
        if section == "boundaries" and self.segmenter == "optimal":
            names = (*names, "optimal_revision")
        return {name: dumped[name] for name in names if name in dumped}

    def fingerprint(self, section: str | None = None) -> str:
        """Stable sha256 hex of the config (or of one section's slice).

        Canonical JSON (sorted keys, no whitespace, ASCII) of plain values, so the same config
        gives the same digest in any process and any Python version. Section digests differ from
        the whole-config digest even when the values coincide.
        """
        if section is None:
            payload: dict[str, Any] = {
                "schema": FINGERPRINT_SCHEMA,
                "config": _stable_dump(self),
            }
        else:
            payload = {
                "schema": FINGERPRINT_SCHEMA,
                "section": section,
                "params": self.section_params(section),
            }
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(canonical.encode("ascii")).hexdigest()

    def fingerprints(self) -> dict[str, str]:
        """Every section's fingerprint plus the whole config's (key "config")."""
        result = {name: self.fingerprint(name) for name in CONFIG_SECTIONS}
        result["config"] = self.fingerprint()
        return result


_PRESETS: dict[str, dict[str, Any]] = {
    "default": {},
    "technical_docs": {
        "chunk_size_min": 64,
        "chunk_size_target": 220,
        "percentile": 20.0,
    },
    "narrative": {
        "chunk_size_min": 40,
        "chunk_size_target": 160,
        "indented_code": False,
        "overlap_tokens": 32,
    },
    # Chosen on a held-out tuning split: pooled windows of 4 stay best for static vectors too,
    # and the 20th percentile cuts a little less often than the default's 30th. The static
    # model's vectors spread less than the transformer's, so its null sits lower by the same
    # ratio (0.9 * 0.66 / 0.92, the two models' spreads on the same documents).
    "fast": {
        "boundary_model": "static",
        "window_size": 4,
        "percentile": 20.0,
        "null_spread": 0.65,
    },
}


SIZE_FIELDS = ("chunk_size_min", "chunk_size_target", "chunk_size_max")


def _follow_given_sizes(sizes: dict[str, Any], given: Collection[str]) -> dict[str, Any]:
    """`sizes` (min, target, max) with those not in `given` moved to the nearest values the given
    ones allow: min <= target <= max, where a null target or max bounds nothing. Sizes given
    together are left as they are (the relations check names their conflict)."""
    lo, target, hi = (sizes[name] for name in SIZE_FIELDS)
    lo_given, target_given, hi_given = (name in given for name in SIZE_FIELDS)
    if hi is not None and lo > hi:
        if lo_given and not hi_given:
            hi = lo
        elif hi_given and not lo_given:
            lo = hi
    if target is not None:
        if target_given:
            if target < lo and not lo_given:
                lo = target
            if hi is not None and target > hi and not hi_given:
                hi = target
        elif lo <= (hi if hi is not None else lo):
            target = max(lo, target if hi is None else min(target, hi))
    return dict(zip(SIZE_FIELDS, (lo, target, hi), strict=True))


def _stable_dump(config: ChunkingConfig) -> dict[str, Any]:
    """`model_dump` without later-added fields that hold their default (see `_LATER_FIELDS`)."""
    dumped = config.model_dump(mode="json")
    for name, default in _LATER_FIELDS.items():
        if dumped.get(name) == default:
            del dumped[name]
    if config.segmenter == "optimal":
        dumped["optimal_revision"] = OPTIMAL_REVISION
    else:
        # The optimal segmenter's knobs do not shape threshold cuts: a change of their defaults
        # must not move the digest of a config that picked the threshold rule.
        for name in _OPTIMAL_FIELDS:
            if name in dumped and dumped[name] == ChunkingConfig.model_fields[name].default:
                del dumped[name]
    return dumped


def reject_booleans_as_numbers(model: type[BaseModel], data: Any) -> Any:
    """YAML `true` is not a number: pydantic would quietly read `window_size: true` as 1."""
    if isinstance(data, dict):
        for name, value in data.items():
            field = model.model_fields.get(name)
            if isinstance(value, bool) and field is not None and field.annotation in (int, float):
                raise ValueError(f"{name}={value!r}: expected a number, not true/false")
    return data


class Section(BaseModel):
    """A block of seams.yaml: unknown keys and booleans-as-numbers are errors, not ignored."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_booleans_as_numbers(cls, data: Any) -> Any:
        return reject_booleans_as_numbers(cls, data)


def unknown_field(model: type[BaseModel], loc: Sequence[str | int]) -> str:
    """The problem with a key that `model` has no field for at `loc` (pydantic's
    `extra_forbidden`), naming the nearest field there: a typo in seams.yaml is the usual cause.
    """
    current: Any = model
    for part in loc[:-1]:
        field = current.model_fields.get(str(part)) if _is_model(current) else None
        current = field.annotation if field is not None else None
    near = (
        difflib.get_close_matches(str(loc[-1]), list(current.model_fields), n=1, cutoff=0.6)
        if _is_model(current) and loc
        else []
    )
    if not near:
        return "no such field (Extra inputs are not permitted)"
    return f"no such field; did you mean {near[0]}?"


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def describe_validation_error(exc: ValidationError) -> str:
    """One line per problem: `field=value: what is allowed`, for humans and logs."""
    problems = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error.get("loc", ())) or "ChunkingConfig"
        message = error.get("msg", "invalid value").removeprefix("Value error, ")
        if error.get("type") == "extra_forbidden":
            problems.append(f"{field}: {unknown_field(ChunkingConfig, error['loc'])}")
        elif error.get("type") in {"value_error", "assertion_error"} or not error.get("loc"):
            problems.append(message)
        else:
            problems.append(f"{field}={error.get('input')!r}: {message}")
    return "invalid ChunkingConfig: " + "; ".join(problems)
