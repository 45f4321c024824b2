"""Write docs/configuration.md from the settings models, so the reference cannot drift.

    .venv/bin/python docs/gen_config.py          # rewrite docs/configuration.md
    .venv/bin/python docs/gen_config.py --check  # exit 1 if the committed page is stale

Types, defaults, bounds, the presets and the packaged seams.yaml come from the code:
`seams.settings.SeamsSettings` and its sections, `seams.extraction.ExtractionLimits` (the
`extraction:` keys) and `seams.chunking.ChunkingConfig` (the `chunking.overrides:` keys), and
`seams.collections.CollectionSettings` (one entry of `collections:`). A
field's meaning is its attribute docstring in the code, else its entry in `MEANINGS` below, else
the `#` comment right above it in the code. A field with none of them, or an entry here for a
field that no longer exists or already has a docstring, stops the generator.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import sys
import textwrap
import types
import typing
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from seams.chunking.config import ChunkingConfig
from seams.collections import (
    NAME_RULE,
    OVERRIDABLE,
    PROJECT_WIDE,
    PROJECT_WIDE_FIELDS,
    CollectionSettings,
)
from seams.extraction.limits import ExtractionLimits
from seams.settings import SeamsSettings
from seams.targets import TargetSettings

PAGE = Path(__file__).resolve().parent / "configuration.md"
COMMAND = ".venv/bin/python docs/gen_config.py"

#: Meanings of fields whose class gives them no docstring, keyed "section.field" (overrides:
#: "chunking.overrides.<field>"). A docstring in the code wins: move a meaning there, drop it here.
MEANINGS: dict[str, str] = {
    "chunking.preset": "The named starting point: `default`, `technical_docs`, `narrative` or "
    "`fast` (see [Presets](#presets)).",
    "chunking.overrides": "Any `ChunkingConfig` field, set on top of the preset "
    "(see [chunking.overrides](#chunkingoverrides)).",
    "extraction": "Per-document limits: a document over one fails alone, with an error "
    "naming the limit, and the rest of its batch goes on.",
    "embedder.variant": "Which exported ONNX model embeds: `fp32`, or the dynamically "
    "quantized `int8`.",
    "embedder.batch_size": "Texts per inference call; batches are sorted by length, and small "
    "batches are faster on a CPU.",
    "embedder.threads": "onnxruntime intra-op threads; 0 lets onnxruntime decide.",
    "inbox.path": "The folder the inbox sensor watches, or an `s3://bucket/prefix` (see "
    "[Collections](collections.md#object-storage)); null: `<data dir>/inbox`.",
    "inbox.endpoint_url": "The endpoint of an S3-compatible store (MinIO, Ceph, R2, ...) for "
    "`s3://` sources; null: the environment's S3 configuration (`AWS_ENDPOINT_URL`, "
    "`~/.aws/config`), else AWS. Credentials never go here: see [Collections]"
    "(collections.md#object-storage).",
    "inbox.min_files": "The sensor registers a batch when this many new file versions wait...",
    "inbox.max_wait_minutes": "...or when the oldest of them has waited this long.",
    "inbox.seal_cron": "When the schedule seals whatever is pending into a batch "
    "(a 5-field cron expression).",
    "retrieval.mode": "How `chunk_index` makes a chunk's vector: `pooled` (the token-weighted "
    "mean of its candidates' embeddings, no model call), `text` (embed the chunk's text) or "
    "`late` (late chunking: token embeddings of a longer context, pooled per chunk).",
    "retrieval.late_overlap_tokens": "`late` mode: tokens by which the model-sized windows over "
    "a long document overlap.",
    "retrieval.sentence_weight": "`seams search` scores a chunk by its vector and by its best "
    "sentence's stored vector: the sentence's share (0: the chunk vector alone). Set 0 with "
    "`window_mode: text`, whose stored vectors reach past a chunk's end.",
    "execution.executor": "How a run's steps execute: `in_process` (every step in the run's "
    "own process: the chain's steps run one after another anyway, so this saves a process "
    "start per step), `multiprocess` (Dagster's default, a process per step), or `celery` "
    "(steps on `seams worker`s; see [Scaling out](scaling-out.md)).",
    "execution.celery_queue": "The Celery queue runs are sent to and `seams worker` listens on.",
    "backfill.automatic": 'true: after a settings change and "Reload definitions", the daemon '
    "backfills the assets the change made unsynced by itself.",
    "backfill.max_batches_per_run": "null: a backfill is one run over all its batches; k: runs "
    "of k batches each (`BackfillPolicy.multi_run(k)`), so N workers get N runs.",
    "collections.NAME.source": "The folder (or `s3://bucket/prefix`) `seams run` (without a "
    "path) and the collection's inbox sensor read; relative: from the settings file's folder. "
    "Sources may nest: a file goes to the collection whose source is nearest above it.",
    "collections.NAME.match": "Which files of the source are the collection's: globs on the "
    "path relative to the source (`*.pdf` matches a file name at any depth, `signed/**/*.pdf` "
    "the whole path); null: every file the extractor reads.",
    "collections.NAME.tenant": "The tenant that may read the collection: `seams db url "
    "--tenant NAME` prints the URL of a read-only PostgreSQL role that sees only its "
    "collections' rows.",
    "collections.NAME.chunking": "Merged field by field into the top-level `chunking` "
    "(`overrides` key by key), e.g. `{preset: technical_docs}`.",
    "collections.NAME.extraction": "Merged key by key into the top-level `extraction` limits.",
    "collections.NAME.retrieval": "Merged field by field into the top-level `retrieval`, "
    "except `model`, `query_prompt` and `document_prompt` (one vector space for every "
    "collection).",
    "collections.NAME.inbox": "Merged field by field into the top-level `inbox`, except "
    "`path` (the collection's `source` is its inbox).",
    "chunking.overrides.size_unit": "What chunk sizes count: `tokens` (of `tokenizer`), "
    "`chars` or `sentences`.",
    "chunking.overrides.chunk_size_min": "Smallest chunk, in `size_unit`: shorter pieces merge "
    "into a neighbour (a hard floor for the optimal segmenter).",
    "chunking.overrides.overlap_tokens": "Overlap: whole candidates from the end of the previous "
    "chunk, up to this many tokens, while the chunk stays within the maximum and never across a "
    "heading (recorded as overlap offsets).",
    "chunking.overrides.overlap_ratio": "Overlap as a share of the previous chunk's tokens instead "
    "(set at most one of the two).",
    "chunking.overrides.target_pull": "Threshold segmenter: when a segment over the maximum is "
    "split, a preference for pieces close to `chunk_size_target`.",
    "chunking.overrides.tokenizer": "Which tokens `size_unit: tokens` counts: the embedding "
    "model's (`model`) or an LLM's (`cl100k_base`, for LLM context budgets).",
    "chunking.overrides.threshold_type": "Threshold segmenter: how the cut threshold is derived "
    "from a document's gap similarities.",
    "chunking.overrides.boundary_threshold": "Threshold segmenter, `fixed`: cut where the "
    "similarity falls below this.",
    "chunking.overrides.percentile": "Threshold segmenter, `percentile`: cut below this "
    "percentile of the document's gap similarities.",
    "chunking.overrides.stddev_factor": "Threshold segmenter, `stddev`: cut below the mean minus "
    "this many standard deviations.",
    "chunking.overrides.iqr_factor": "Threshold segmenter, `interquartile`: cut below the first "
    "quartile minus this many interquartile ranges.",
    "chunking.overrides.gradient_percentile": "Threshold segmenter, `gradient`: cut where the "
    "drop in similarity is above this percentile.",
    "chunking.overrides.local_minima": "Threshold segmenter: cut only at local minima of the "
    "similarity curve.",
    "chunking.overrides.window_mode": "What a gap's similarity compares: `single` candidates, "
    "`pooled` means of `window_size` neighbours (embedded once), or `text` windows (embedded "
    "as joined text, ~3x the cost).",
    "chunking.overrides.window_size": "Candidates on each side of a gap in a window.",
    "chunking.overrides.min_sentence_length": "Sentences shorter than this many characters join a "
    "neighbour in the same paragraph (never dropped).",
    "chunking.overrides.max_candidate_chars": "Longest candidate, in characters: a bigger unit "
    "splits (tables by rows, code by lines, sentences at clause punctuation, then at whitespace).",
    "chunking.overrides.detect_headings": "Recognise headings as structural units (chunks carry "
    "their section path).",
    "chunking.overrides.detect_lists": "Keep each list item as one unit.",
    "chunking.overrides.detect_tables": "Keep a table as one unit (a table over the size limit "
    "splits by rows, each piece recording the header).",
    "chunking.overrides.detect_code": "Keep fenced code blocks whole.",
    "chunking.overrides.indented_code": "Also treat indented blocks as code.",
    "chunking.overrides.split_on_headings": "The gap before a heading is a boundary; a heading "
    "stays with what follows it.",
    "chunking.overrides.extra_abbreviations": "More words whose trailing period does not end a "
    "sentence, e.g. `[approx, Fig]`.",
}

INTRO = """\
# Configuration

<!-- Generated by `{command}` from the settings models; do not edit by hand. -->

Seams reads one settings file: `$SEAMS_CONFIG`, else `./seams.yaml`, else the packaged defaults
(shown at the end of this page). Every field is optional; an unknown key, a wrong type or a
value out of range stops every command with one line naming the file, the field and what is
allowed.

Each asset's code version includes the fingerprint of the settings it reads. After an edit,
reload the definitions (or restart `seams dev`): the assets that read a changed field show as
unsynced, and `seams backfill` recomputes exactly those (see [Operations](operations.md)).

## Environment variables
"""

#: The variables Seams reads, beside the file.
ENVIRONMENT = (
    ("`SEAMS_CONFIG`", "the settings file to read"),
    (
        "`SEAMS_PROJECT_DIR`",
        "the folder whose `seams.yaml` and `.seams` count (default: the working directory); "
        "`seams dev` hands its own to the UI's processes",
    ),
    (
        "`SEAMS_DATA_DIR`",
        "where data lives; else `./.seams` when that folder exists (settings never move the data), "
        "else `$XDG_DATA_HOME/seams` (`~/.local/share/seams`)",
    ),
    (
        "`SEAMS_DATABASE_URL`",
        "an existing PostgreSQL for the data; unset: the embedded server in the data dir",
    ),
    ("`SEAMS_DAGSTER_DATABASE_URL`", "Dagster's run storage; unset: the same database"),
    (
        "`DAGSTER_HOME`",
        "a Dagster deployment's own home, whose instance then records Seams' runs (see "
        "[In your own Dagster](dagster.md)); unset: `dagster_home` under the data dir",
    ),
    (
        "`SEAMS_CELERY_BROKER_URL`, `SEAMS_CELERY_BACKEND_URL`",
        "the Celery broker and result backend (`execution.executor: celery`)",
    ),
    (
        "`SEAMS_API_KEYS`",
        "the file of `seams serve`'s API keys, one `TENANT KEY` per line (see "
        "[Search as a service](serving.md#keys-and-tenants)); unset: no keys, loopback only",
    ),
)


def _field_notes(cls: type) -> tuple[dict[str, str], dict[str, str]]:
    """The class body's attribute docstrings (a string literal right after `name: type = ...`)
    and field comments (`#` lines right above it), each as {name: one-line text}."""
    try:
        lines = textwrap.dedent(inspect.getsource(cls)).splitlines()
    except (OSError, TypeError):
        return {}, {}
    body = ast.parse("\n".join(lines)).body[0].body  # type: ignore[attr-defined]
    docstrings, comments = {}, {}
    for statement, after in itertools.pairwise([*body, None]):
        if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
            continue
        name = statement.target.id
        if (
            isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docstrings[name] = " ".join(inspect.cleandoc(after.value.value).split())
        above = []
        for line in reversed(lines[: statement.lineno - 1]):
            if not line.strip().startswith("#"):
                break
            above.insert(0, line.strip().lstrip("#:").strip())
        if above:
            comments[name] = " ".join(" ".join(above).split())
    return docstrings, comments


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return " | ".join(f"`{value}`" for value in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        name = " or ".join(_type_name(a) for a in args)
        return f"{name} or null" if len(args) < len(typing.get_args(annotation)) else name
    if origin is tuple or origin is list:
        return "list of " + _type_name(typing.get_args(annotation)[0]) + "s"
    if origin is dict:
        return "mapping"
    return {int: "integer", float: "number", str: "string", bool: "boolean"}.get(
        annotation, getattr(annotation, "__name__", str(annotation))
    )


def _bounds(info: FieldInfo) -> str:
    low = high = pattern = None
    for item in info.metadata:
        low = getattr(item, "ge", low)
        high = getattr(item, "le", high)
        pattern = getattr(item, "pattern", pattern)
    if pattern:
        return f" matching `{pattern}`"
    if low is None and high is None:
        return ""
    return f", {low if low is not None else '…'} to {high if high is not None else '…'}"


def _value(value: Any) -> str:
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple | list):
        return f"`[{', '.join(map(str, value))}]`"
    if isinstance(value, dict):
        return "`{}`" if not value else f"`{value}`"
    return f"`{value}`"


def _default(info: FieldInfo) -> Any:
    if info.default is not PydanticUndefined:
        return info.default
    return info.default_factory() if info.default_factory else None  # type: ignore[call-arg]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


class _Meanings:
    """Each field's meaning: its docstring in the code, else `MEANINGS`, else its comment."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.problems: list[str] = []

    def __call__(self, key: str, docstring: str | None, comment: str | None = None) -> str:
        if docstring and key in MEANINGS:
            self.problems.append(f"{key}: documented in the code; drop it from MEANINGS")
        if docstring:
            return docstring
        if key in MEANINGS:
            self.used.add(key)
            return MEANINGS[key]
        if comment:
            return comment
        self.problems.append(f"{key}: no docstring or comment in the code, no entry in MEANINGS")
        return ""

    def check(self) -> None:
        stale = sorted(set(MEANINGS) - self.used)
        problems = self.problems + [f"{key}: in MEANINGS but not a field" for key in stale]
        if problems:
            raise SystemExit("docs/gen_config.py:\n  " + "\n  ".join(problems))


def _model_table(model: type[BaseModel], prefix: str, meaning: _Meanings) -> list[str]:
    docs, comments = _field_notes(model)
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for name, info in model.model_fields.items():
        kind = _type_name(info.annotation) + _bounds(info)
        text = meaning(f"{prefix}{name}", docs.get(name), comments.get(name))
        default = "required" if info.is_required() else _value(_default(info))
        rows.append(f"| `{name}` | {_cell(kind)} | {default} | {_cell(text)} |")
    return rows


def _limits_table(meaning: _Meanings) -> list[str]:
    docs, comments = _field_notes(ExtractionLimits)
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for spec in dataclasses.fields(ExtractionLimits):
        text = meaning(f"extraction.{spec.name}", docs.get(spec.name), comments.get(spec.name))
        kind = {"int": "integer", "float": "number"}.get(str(spec.type), str(spec.type))
        rows.append(f"| `{spec.name}` | {kind}, > 0 | {_value(spec.default)} | {_cell(text)} |")
    return rows


def _presets_table() -> list[str]:
    default = ChunkingConfig()
    rows = ["| preset | differs from `default` in |", "|---|---|"]
    for name in ChunkingConfig.PRESETS:
        config = ChunkingConfig.preset(name)
        changed = [
            f"`{field}: {_value(getattr(config, field)).strip('`')}`"
            for field in ChunkingConfig.model_fields
            if getattr(config, field) != getattr(default, field)
        ]
        rows.append(f"| `{name}` | {', '.join(changed) or '(the defaults below)'} |")
    return rows


def _listed(names: typing.Iterable[str]) -> str:
    """`a`, `b` and `c`."""
    quoted = [f"`{name}`" for name in names]
    return ", ".join(quoted[:-1]) + f" and {quoted[-1]}" if len(quoted) > 1 else "".join(quoted)


def _collections_section(meaning: _Meanings) -> list[str]:
    """The `collections:` block: where it goes, what a collection may set, the fields of one
    entry (`CollectionSettings`), and the page that explains routing and tenants."""
    blocks = _listed(OVERRIDABLE)
    wide = _listed(
        [
            *PROJECT_WIDE,
            *(f"{key}.{f}" for key, names in PROJECT_WIDE_FIELDS.items() for f in names),
        ]
    )
    return [
        "Several sources in one project, each with its own settings and, optionally, a tenant. "
        "The block goes at the top level of `seams.yaml`, beside `chunking:`; each key is a "
        f"collection name ({NAME_RULE}), each value a mapping with the fields below. Without "
        "it the project is one collection, `default`, that reads `inbox.path`.\n",
        "```yaml\ncollections:\n  handbook:\n    source: docs/handbook\n"
        "    chunking: {preset: technical_docs}\n  contracts:\n    source: docs/contracts\n"
        '    match: ["*.pdf", "*.docx"]\n    tenant: acme\n'
        "    chunking: {overrides: {chunk_size_max: 512}}\n```\n",
        f"A collection's {blocks} blocks override the top-level ones field by field; {wide} "
        "are set at the top level only. Routing, the lineage each collection gets in "
        "Dagster, and tenants: [Collections](collections.md).\n",
        *_model_table(CollectionSettings, "collections.NAME.", meaning),
        "",
    ]


def _targets_section(meaning: _Meanings) -> list[str]:
    """The `targets:` block: the vector stores that mirror the published chunks."""
    return [
        "Vector stores that mirror the published current chunks, one record per chunk with "
        "its vector, text and provenance. Each key is a target name, each value a mapping with "
        "the fields below; without it nothing leaves Seams' PostgreSQL.\n",
        "```yaml\ntargets:\n  app_pg: {kind: pgvector, table: rag_chunks, "
        "url_env: APP_DATABASE_URL}\n  app_lance: {kind: lancedb, table: rag_chunks, "
        "path: lance}\n```\n",
        "What readers see during changes and model switches, `seams sync` and tenants: "
        "[Targets](targets.md).\n",
        *_model_table(TargetSettings, "targets.NAME.", meaning),
        "",
    ]


def render() -> str:
    """The whole page, as the models define it today."""
    meaning = _Meanings()
    out = [INTRO.format(command=COMMAND)]
    out.extend(["| variable | meaning |", "|---|---|"])
    out.extend([f"| {name} | {text} |" for name, text in ENVIRONMENT] + [""])
    for section, info in SeamsSettings.model_fields.items():
        model = info.annotation
        out.append(f"## {section}\n")
        if section == "collections":
            out.extend(_collections_section(meaning))
            continue
        if section == "targets":
            out.extend(_targets_section(meaning))
            continue
        if section == "extraction":
            out.append(
                f"{meaning('extraction', None)} Keys (all optional, e.g. "
                "`extraction: {chars_max: 20000000}`):\n"
            )
            out.extend([*_limits_table(meaning), ""])
            continue
        assert isinstance(model, type) and issubclass(model, BaseModel), section
        out.extend([*_model_table(model, f"{section}.", meaning), ""])
        if section == "chunking":
            out.append("### Presets\n")
            out.extend([*_presets_table(), ""])
            out.append("### chunking.overrides\n")
            out.append(
                "Every field of `seams.chunking.ChunkingConfig` (the same object "
                "`chunk_text` takes), e.g. `overrides: {cut_cost: 1.25, chunk_size_max: null}`. "
                "Sizes are in `size_unit`. Fields marked *threshold segmenter* act only with "
                "`segmenter: threshold`; with the default `optimal` segmenter they shape the "
                "per-gap evidence stored in `semantic_boundaries`, not where chunks are cut. "
                "Relations are checked too: `chunk_size_min` <= `chunk_size_target` <= "
                "`chunk_size_max`, and at most one of `overlap_tokens` and `overlap_ratio`. "
                "A size you leave out never blocks one you set: sizes not in `overrides` (the "
                "defaults, and the preset's own) follow those that are, so "
                "`overrides: {chunk_size_max: 150}` alone brings `chunk_size_target` down to "
                "150, and a `chunk_size_min` above 254 raises the cap with it. Only sizes set "
                "together can conflict, and the error names them.\n"
            )
            out.extend([*_model_table(ChunkingConfig, "chunking.overrides.", meaning), ""])
    meaning.check()
    defaults = files("seams.defaults").joinpath("seams.yaml").read_text(encoding="utf-8")
    out.append("## The packaged defaults\n")
    out.append("What Seams reads when there is no settings file (`seams/defaults/seams.yaml`):\n")
    out.append(f"```yaml\n{defaults.rstrip()}\n```\n")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    page = render()
    if "--check" in argv:
        if PAGE.read_text(encoding="utf-8") != page:
            print(f"{PAGE} is stale: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
