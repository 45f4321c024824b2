"""Collections: several sources in one project, each with its own settings and, optionally, a
tenant (the `collections:` block of seams.yaml; docs/collections.md describes it for users).

The rules this module owns (the pipeline, the sensors and the CLI call it; nothing else decides
them): which names a collection may take (`default` is the collection of a project without
`collections:`, keeping its asset keys, partitions and stored rows); how a collection's
`chunking`, `extraction`, `retrieval` and `inbox` blocks override the top-level ones, field by
field (`execution`, `backfill`, `embedder`, `retrieval.model` and `evaluation` are top-level
only); which collection a file or object key belongs to, at most one: the nearest source above
it whose `match` globs accept it, two such on one source being an error; and what a `match`
pattern matches.

Every error is one line that names `collections.<name>.<field>` and what is allowed; the caller
that read the file puts the file's name in front.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError, field_validator

from seams.chunking.config import Section, unknown_field
from seams.errors import ConfigError
from seams.storage.object_store import ObjectPrefix, is_object_uri

Settings = TypeVar("Settings", bound=BaseModel)
"""The project's settings model (`seams.settings.SeamsSettings`, which reads this module: the
merge works on whatever model it is given, so the rules need not import it)."""

DEFAULT_COLLECTION = "default"
"""The one collection of a project without `collections:` (and the column default of every
stored row), whose assets keep their unprefixed keys."""

NAME_RULE = "1-40 characters of a-z, 0-9 and _, starting with a letter, without '__'"
"""A collection name (a Dagster asset-key prefix and group name as it is, and a SQL value) and
a tenant (the fragment of its PostgreSQL role's name, `seams.storage.tenants.tenant_role`)."""

OVERRIDABLE = ("chunking", "extraction", "retrieval", "inbox")
"""The top-level blocks a collection may override, field by field."""
PROJECT_WIDE = ("execution", "backfill", "embedder", "evaluation")
"""Blocks set at the top level only: how the whole project runs, the boundary model (one
embedding cache and one resource per code location), and the evaluation of the search readers
run (over every collection)."""
PROJECT_WIDE_FIELDS = {"retrieval": ("model", "query_prompt", "document_prompt")}
"""Fields set at the top level only: every collection's vectors live in one space, so a query
is embedded once and its scores compare across collections."""


class CollectionSettings(Section):
    """One entry of `collections:` as written (its blocks are partial: validated merged)."""

    source: str = Field(min_length=1, max_length=4096)
    match: tuple[str, ...] | None = Field(None, min_length=1, max_length=100)
    tenant: str | None = None
    chunking: dict[str, Any] | None = None
    extraction: dict[str, Any] | None = None
    retrieval: dict[str, Any] | None = None
    inbox: dict[str, Any] | None = None

    @field_validator("match")
    @classmethod
    def _patterns(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for pattern in value or ():
            problem = _pattern_problem(pattern)
            if problem:
                raise ValueError(f"match={pattern!r}: {problem}")
        return value

    @field_validator("tenant")
    @classmethod
    def _tenant(cls, value: str | None) -> str | None:
        if value is not None and not is_safe_name(value):
            raise ValueError(f"tenant={value!r}: a tenant is {NAME_RULE}")
        return value

    @field_validator("inbox")
    @classmethod
    def _no_inbox_path(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value and "path" in value:
            raise ValueError(
                "inbox.path: a collection's inbox is its `source`: set `source` instead"
            )
        return value


@dataclass(frozen=True)
class Collection:
    """A validated collection: its name, absolute source folder (or object prefix), patterns
    and tenant."""

    name: str
    source: Path | ObjectPrefix
    """A folder absolute and resolved (symlinks followed), so two spellings of one folder are
    one; or an `s3://bucket/prefix`."""
    match: tuple[str, ...] | None
    tenant: str | None
    blocks: Mapping[str, Mapping[str, Any]]
    """The overriding blocks as written (`chunking`, `retrieval`, ...), only those given."""

    def accepts(self, relative: PurePosixPath) -> bool:
        """Whether a file at `relative` (to `source`) is one of this collection's files."""
        if self.match is None:
            return True
        return any(_pattern_regex(p).fullmatch(_subject(p, relative)) for p in self.match)


def parse_collections(raw: Any, *, base: Path | None) -> dict[str, Collection]:
    """The `collections:` block validated, sources resolved against `base` (the folder of the
    settings file); {} for no block. Raises a one-line `ConfigError` naming the field."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"collections={_short(raw)}: expected a mapping of collection names to blocks"
        )
    if not raw:
        raise ConfigError(
            "collections={}: name at least one collection, or remove the key "
            "(one collection, `default`)"
        )
    parsed: dict[str, Collection] = {}
    for name, block in raw.items():
        if not isinstance(name, str) or not is_safe_name(name):
            raise ConfigError(f"collections.{name}: a collection name is {NAME_RULE}")
        if not isinstance(block, Mapping):
            raise ConfigError(
                f"collections.{name}={_short(block)}: expected a mapping with at least `source`"
            )
        for key in PROJECT_WIDE:
            if key in block:
                raise ConfigError(
                    f"collections.{name}.{key}: `{key}` applies to the whole project: set it "
                    "at the top level of seams.yaml"
                )
        for key, fields in PROJECT_WIDE_FIELDS.items():
            for field in fields:
                if isinstance(block.get(key), Mapping) and field in block[key]:
                    raise ConfigError(
                        f"collections.{name}.{key}.{field}: one {key} model serves every "
                        f"collection (their vectors are compared): set {key}.{field} at the "
                        "top level of seams.yaml"
                    )
        try:
            settings = CollectionSettings.model_validate(dict(block))
        except ValidationError as exc:
            raise ConfigError(_problems(exc, f"collections.{name}", CollectionSettings)) from None
        if is_object_uri(settings.source):
            try:
                source: Path | ObjectPrefix = ObjectPrefix.parse(settings.source)
            except ConfigError as exc:
                raise ConfigError(f"collections.{name}.source={exc}") from None
            parsed[name] = Collection(
                name=name,
                source=source,
                match=settings.match,
                tenant=settings.tenant,
                blocks=_given(settings),
            )
            continue
        source = Path(settings.source).expanduser()
        if not source.is_absolute():
            if base is None:
                raise ConfigError(
                    f"collections.{name}.source={settings.source!r}: a relative source counts "
                    "from the settings file's folder, and there is none: give an absolute path"
                )
            source = base / source
        parsed[name] = Collection(
            name=name,
            source=source.resolve(),
            match=settings.match,
            tenant=settings.tenant,
            blocks=_given(settings),
        )
    _no_certain_overlap(parsed.values())
    return parsed


def effective_settings(
    top: Settings, raw_collections: Any, *, base: Path | None
) -> dict[str, Settings]:
    """One settings object per collection: the top-level settings with the collection's blocks
    merged in field by field, and `inbox.path` set to its source.

    No `collections:` (None) gives `{"default": top}`, the very object passed in: a project
    without collections gets exactly today's settings, so today's code versions.
    """
    collections = (
        raw_collections
        if _is_parsed(raw_collections)
        else parse_collections(raw_collections, base=base)
    )
    if not collections:
        return {DEFAULT_COLLECTION: top}
    inbox_path = getattr(getattr(top, "inbox", None), "path", None)
    if inbox_path:
        raise ConfigError(
            f"inbox.path={inbox_path!r}: with `collections:` each collection's inbox is its "
            "`source`: remove inbox.path (or make it a collection's source)"
        )
    return {name: _merged(top, c) for name, c in collections.items()}


def route(path: Path | str, collections: Mapping[str, Collection]) -> str | None:
    """The collection `path` (a file, or an object's `s3://` URI) belongs to, or None when no
    collection takes it.

    Nearest source first; a file that two collections on that same source both accept is a
    one-line `ConfigError` naming the file and both collections."""
    if is_object_uri(path):
        return _route_object(str(path), collections)
    file = Path(path).expanduser().resolve()
    by_source: dict[Path, list[Collection]] = {}
    for collection in collections.values():
        source = collection.source
        if isinstance(source, Path) and file != source and file.is_relative_to(source):
            by_source.setdefault(source, []).append(collection)
    nearest_first = sorted(by_source, key=lambda folder: len(folder.parts), reverse=True)
    relative = {s: PurePosixPath(file.relative_to(s).as_posix()) for s in nearest_first}
    return _first_taker(str(file), [(str(s), relative[s], by_source[s]) for s in nearest_first])


def _route_object(uri: str, collections: Mapping[str, Collection]) -> str | None:
    by_prefix: dict[ObjectPrefix, list[Collection]] = {}
    for collection in collections.values():
        source = collection.source
        if isinstance(source, ObjectPrefix) and source.holds(uri):
            by_prefix.setdefault(source, []).append(collection)
    nearest_first = sorted(by_prefix, key=lambda prefix: len(prefix.uri), reverse=True)
    return _first_taker(uri, [(p.uri, p.relative(uri), by_prefix[p]) for p in nearest_first])


def _first_taker(
    name: str, candidates: list[tuple[str, PurePosixPath, list[Collection]]]
) -> str | None:
    """The one collection of the nearest source that accepts the file (`relative` to it)."""
    for source, relative, those in candidates:
        taken = sorted(c.name for c in those if c.accepts(relative))
        if len(taken) > 1:
            raise ConfigError(
                f"{name}: matched by collections.{taken[0]} and collections.{taken[1]} (both "
                f"read {source}): narrow their `match` patterns so each file belongs to one"
            )
        if taken:
            return taken[0]
    return None


def is_safe_name(value: str) -> bool:
    """Whether `value` is a valid collection or tenant name (`NAME_RULE`)."""
    return bool(re.fullmatch(r"[a-z][a-z0-9_]{0,39}", value)) and "__" not in value


def tenants(collections: Mapping[str, Collection]) -> dict[str, str | None]:
    """Collection -> tenant (None: no tenant reads it), what `seams.storage.tenants` syncs."""
    return {name: c.tenant for name, c in collections.items()}


# --- internals -------------------------------------------------------------------------------


def _given(settings: CollectionSettings) -> dict[str, Mapping[str, Any]]:
    """The overriding blocks a collection names (those it leaves out are inherited)."""
    blocks = {key: getattr(settings, key) for key in OVERRIDABLE}
    return {k: v for k, v in blocks.items() if v is not None}


def _merged(top: Settings, collection: Collection) -> Settings:
    # `collections` itself (once the settings carry the block) is the project's, not the
    # collection's: left out of each collection's settings.
    data = top.model_dump(exclude={"collections"})
    for key, block in collection.blocks.items():
        data[key] = _deep_merge(data.get(key), block)
    data["inbox"] = {**data["inbox"], "path": str(collection.source)}
    where = f"collections.{collection.name}"
    try:
        settings = type(top).model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_problems(exc, where, type(top))) from None
    try:
        settings.chunking_config()
    except ConfigError as exc:
        raise ConfigError(f"{where}.chunking: {exc}") from None
    return settings


def _deep_merge(base: Any, override: Any) -> Any:
    """`override` over `base`: mappings merge key by key, anything else replaces."""
    if isinstance(base, Mapping) and isinstance(override, Mapping):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = _deep_merge(base.get(key), value)
        return merged
    return override


def _no_certain_overlap(collections: Iterable[Collection]) -> None:
    """Two collections on one folder where one has no `match`, or both the same patterns,
    would make every file they share ambiguous: refused when the settings are read, not at
    the first file."""
    ordered = sorted(collections, key=lambda c: c.name)
    for i, first in enumerate(ordered):
        for second in ordered[i + 1 :]:
            if first.source != second.source:
                continue
            if first.match is None or second.match is None or set(first.match) == set(second.match):
                raise ConfigError(
                    f"collections.{second.name}.source={str(second.source)!r}: "
                    f"collections.{first.name} reads the same folder and every file would "
                    "match both: give them different `match` patterns or different sources"
                )


def _is_parsed(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and bool(value)
        and all(isinstance(v, Collection) for v in value.values())
    )


def _pattern_problem(pattern: str) -> str | None:
    if not pattern or not pattern.strip():
        return "a pattern cannot be empty"
    if pattern.startswith("/") or "\\" in pattern:
        return "a pattern is relative to the source, with '/' between folders"
    parts = pattern.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "a pattern cannot have empty, '.' or '..' parts"
    if any("**" in part and part != "**" for part in parts):
        return "'**' stands alone between slashes (e.g. 'signed/**/*.pdf')"
    return None


def _subject(pattern: str, relative: PurePosixPath) -> str:
    """What a pattern is matched against: the file name for one without '/', else the path."""
    return relative.as_posix() if "/" in pattern else relative.name


@functools.lru_cache(maxsize=1024)
def _pattern_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(_translate(pattern))


def _translate(pattern: str) -> str:
    """A glob as a regex: `*`/`?` within one folder level, `[...]` a character, `**` any
    number of whole levels."""
    out: list[str] = []
    parts = pattern.split("/")
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        out.append(_translate_part(part))
        if not last:
            out.append("/")
    return "".join(out)


def _translate_part(part: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(part):
        char = part[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (end := part.find("]", i + 2)) != -1:
            body = part[i + 1 : end]
            negate = body.startswith("!")
            body = re.escape(body[1:] if negate else body).replace(r"\-", "-")
            out.append(f"[^/{body}]" if negate else f"(?!/)[{body}]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def _problems(exc: ValidationError, where: str, model: type[BaseModel]) -> str:
    """Pydantic's errors as one line, each naming `where.<field>` (a validator's own message
    names the bare field: it gets its section in front, as in `settings`)."""
    problems = []
    for error in exc.errors():
        parts = [str(part) for part in error.get("loc", ())]
        message = error.get("msg", "invalid value").removeprefix("Value error, ")
        if error.get("type") == "missing":
            problems.append(f"{'.'.join([where, *parts])}: required")
            continue
        if error.get("type") == "extra_forbidden":
            field = ".".join([where, *parts])
            problems.append(f"{field}: {unknown_field(model, parts)}")
            continue
        if error.get("type") not in {"value_error", "assertion_error"}:
            field = ".".join([where, *parts])
            problems.append(f"{field}={_short(error.get('input'))}: {message}")
            continue
        named = re.match(r"^([A-Za-z_]\w*)[=.:]", message)
        if named is None:
            problems.append(f"{'.'.join([where, *parts])}: {message}")
            continue
        section = parts[:-1] if parts and parts[-1] == named.group(1) else parts
        problems.append(".".join([where, *section, message]))
    return "; ".join(problems)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
