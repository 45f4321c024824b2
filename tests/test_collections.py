"""The `collections:` block: names, field-by-field overrides, and which collection a file is in."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seams.collections import (
    DEFAULT_COLLECTION,
    effective_settings,
    parse_collections,
    route,
    tenants,
)
from seams.errors import ConfigError
from seams.settings import SeamsSettings

BASE = Path("/srv/project")

EXAMPLE = {
    "handbook": {
        "source": "/data/handbook",
        "tenant": "acme",
        "chunking": {"preset": "technical_docs"},
        "retrieval": {"text_search_config": "simple"},
    },
    "contracts": {
        "source": "/data/contracts",
        "match": ["*.pdf", "*.docx"],
        "tenant": "acme",
        "chunking": {"preset": "default", "overrides": {"chunk_size_max": 512}},
    },
}


def top_settings() -> SeamsSettings:
    return SeamsSettings.model_validate(
        {
            "chunking": {"preset": "narrative", "overrides": {"chunk_size_min": 40}},
            "retrieval": {"lexical_weight": 0.25, "search": "dense"},
            "inbox": {"min_files": 7},
            "extraction": {"chars_max": 1000000},
        }
    )


def test_no_collections_is_the_top_level_settings_themselves() -> None:
    top = top_settings()
    assert effective_settings(top, None, base=BASE) == {DEFAULT_COLLECTION: top}
    assert effective_settings(top, None, base=BASE)[DEFAULT_COLLECTION] is top


def test_the_issue_example_gets_each_collection_its_own_settings() -> None:
    top = top_settings()
    per = effective_settings(top, EXAMPLE, base=BASE)
    assert list(per) == ["handbook", "contracts"]
    handbook, contracts = per["handbook"], per["contracts"]
    assert handbook.chunking.preset == "technical_docs"
    assert handbook.retrieval.text_search_config == "simple"
    assert contracts.chunking.preset == "default"
    assert contracts.chunking_config().chunk_size_max == 512
    # What a collection leaves out is inherited, mappings key by key.
    assert contracts.chunking.overrides == {"chunk_size_min": 40, "chunk_size_max": 512}
    assert handbook.chunking.overrides == {"chunk_size_min": 40}
    assert contracts.retrieval.lexical_weight == 0.25 == handbook.retrieval.lexical_weight
    assert contracts.retrieval.text_search_config == top.retrieval.text_search_config
    assert contracts.inbox.min_files == 7
    assert contracts.extraction == {"chars_max": 1000000}
    # Each collection's inbox is its source.
    assert handbook.inbox.path == str(Path("/data/handbook").resolve())
    assert contracts.inbox.path == str(Path("/data/contracts").resolve())
    # The top-level object is untouched.
    assert top.chunking.preset == "narrative" and top.inbox.path is None
    assert tenants(parse_collections(EXAMPLE, base=BASE)) == {
        "handbook": "acme",
        "contracts": "acme",
    }


def test_relative_sources_count_from_the_settings_folder(tmp_path: Path) -> None:
    parsed = parse_collections({"notes": {"source": "docs/notes"}}, base=tmp_path)
    assert parsed["notes"].source == (tmp_path / "docs" / "notes").resolve()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ([], "collections=[]: expected a mapping"),
        ({}, "collections={}: name at least one collection"),
        ({"Hand-book": {"source": "x"}}, "collections.Hand-book: a collection name is"),
        ({"a__b": {"source": "x"}}, "collections.a__b: a collection name is"),
        ({"a": None}, "collections.a=None: expected a mapping"),
        ({"a": {}}, "collections.a.source: required"),
        ({"a": {"source": "x", "bogus": 1}}, "collections.a.bogus: no such field"),
        (
            {"a": {"source": "x", "mach": ["*.md"]}},
            "collections.a.mach: no such field; did you mean match?",
        ),
        ({"a": {"source": "x", "tenant": "Acme"}}, "collections.a.tenant='Acme': a tenant is"),
        ({"a": {"source": "x", "match": ["../*.pdf"]}}, "collections.a.match='../*.pdf':"),
        ({"a": {"source": "x", "match": []}}, "collections.a.match=[]:"),
        ({"a": {"source": "x", "execution": {}}}, "collections.a.execution: `execution` applies"),
        ({"a": {"source": "x", "inbox": {"path": "y"}}}, "collections.a.inbox.path: a collection"),
        (
            {"a": {"source": "x", "chunking": {"preset": "nope"}}},
            "collections.a.chunking: preset: unknown preset 'nope'",
        ),
        (
            {"a": {"source": "x", "retrieval": {"lexical_weight": 2}}},
            "collections.a.retrieval.lexical_weight=2:",
        ),
        ({"a": {"source": "x", "chunking": {"sizes": 1}}}, "collections.a.chunking.sizes: no such"),
        (
            {"a": {"source": "x", "inbox": {"seal_cron": "often"}}},
            "collections.a.inbox.seal_cron='often': not a valid 5-field cron",
        ),
        (
            {"a": {"source": "x"}, "b": {"source": "x", "match": ["*.pdf"]}},
            "collections.b.source='/srv/project/x': collections.a reads the same folder",
        ),
        (
            {"a": {"source": "x", "match": ["*.md"]}, "b": {"source": "./x", "match": ["*.md"]}},
            "collections.b.source='/srv/project/x': collections.a reads the same folder",
        ),
    ],
)
def test_every_mistake_is_one_line_naming_the_field(raw: object, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        effective_settings(top_settings(), raw, base=BASE)
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message


def test_routing_nearest_source_first_then_patterns() -> None:
    collections = parse_collections(
        {
            "everything": {"source": "/data"},
            "contracts": {"source": "/data/contracts", "match": ["*.pdf", "signed/**/*.docx"]},
            "tickets": {"source": "/data/tickets", "match": ["*.md"]},
            "ticket_mail": {"source": "/data/tickets", "match": ["*.eml", "mail/*"]},
        },
        base=BASE,
    )
    expected = {
        "/data/contracts/a.pdf": "contracts",
        "/data/contracts/2024/b.pdf": "contracts",  # a name pattern: any depth
        "/data/contracts/signed/c.docx": "contracts",  # `**` is zero levels too
        "/data/contracts/signed/x/y/c.docx": "contracts",
        "/data/contracts/c.docx": "everything",  # not the contracts' class: next folder up
        "/data/tickets/t1.md": "tickets",
        "/data/tickets/mail/t1.txt": "ticket_mail",
        "/data/tickets/t1.txt": "everything",
        "/data/notes.md": "everything",
        "/elsewhere/a.pdf": None,
        "/data": None,  # the folder itself is no file of it
    }
    assert {path: route(path, collections) for path in expected} == expected


def test_a_file_two_collections_on_one_folder_accept_is_one_error() -> None:
    collections = parse_collections(
        {
            "pdfs": {"source": "/data", "match": ["*.pdf"]},
            "contracts": {"source": "/data", "match": ["contract*"]},
        },
        base=BASE,
    )
    assert route("/data/report.pdf", collections) == "pdfs"
    assert route("/data/contract.docx", collections) == "contracts"
    with pytest.raises(ConfigError) as caught:
        route("/data/contract-7.pdf", collections)
    assert str(caught.value) == (
        f"{Path('/data/contract-7.pdf').resolve()}: matched by collections.contracts and "
        f"collections.pdfs (both read {Path('/data').resolve()}): narrow their `match` "
        "patterns so each file belongs to one"
    )


def test_symlinked_spellings_of_one_folder_are_one_source(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    with pytest.raises(ConfigError, match="reads the same folder"):
        parse_collections({"a": {"source": "real"}, "b": {"source": "alias"}}, base=tmp_path)
    parsed = parse_collections({"a": {"source": "alias"}}, base=tmp_path)
    assert route(real / "x.md", parsed) == "a"


# --- properties ----------------------------------------------------------------------------

FOLDERS = ["/d", "/d/a", "/d/a/b", "/d/c"]
PATTERNS = ["*.pdf", "*.md", "a*", "b/*", "**/*.md", "x/**/y.pdf", "[ab]*.txt", "?.md"]
NAMES = ["c1", "c2", "c3", "c4", "c5"]
FILES = st.builds(
    lambda folder, parts, name: "/".join([folder, *parts, name]),
    st.sampled_from(FOLDERS),
    st.lists(st.sampled_from(["a", "b", "x", "y"]), max_size=3),
    st.sampled_from(["a.pdf", "b.md", "y.pdf", "a1.txt", "c.md", "z.docx"]),
)
BLOCKS = st.fixed_dictionaries(
    {"source": st.sampled_from(FOLDERS)},
    optional={"match": st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=3, unique=True)},
)


def _parsed_or_none(raw: dict) -> dict | None:
    try:
        return parse_collections(raw, base=BASE)
    except ConfigError:
        return None


@settings(max_examples=60, deadline=None)
@given(
    blocks=st.lists(BLOCKS, min_size=1, max_size=5),
    files=st.lists(FILES, min_size=1, max_size=10),
)
def test_a_file_is_in_at_most_one_collection_whatever_the_order(
    blocks: list[dict], files: list[str]
) -> None:
    raw = dict(zip(NAMES, blocks, strict=False))
    collections = _parsed_or_none(raw)
    if collections is None:
        return
    for path in files:
        outcomes = set()
        for order in itertools.islice(itertools.permutations(raw), 6):
            reordered = {name: collections[name] for name in order}
            try:
                outcomes.add(route(path, reordered))
            except ConfigError as exc:
                outcomes.add(("error", str(exc)))
        assert len(outcomes) == 1, (path, outcomes)  # the block's order never decides
        (outcome,) = outcomes
        accepting = [
            c
            for c in collections.values()
            if Path(path).resolve().is_relative_to(c.source)
            and c.accepts(Path(path).resolve().relative_to(c.source))
        ]
        if isinstance(outcome, tuple):  # ambiguous: two collections of one folder accept it
            nearest = max(len(c.source.parts) for c in accepting)
            assert sum(len(c.source.parts) == nearest for c in accepting) >= 2
        elif outcome is None:
            assert not accepting
        else:  # taken by an accepting collection no nearer collection competes with
            taker = collections[outcome]
            assert taker in accepting
            assert all(len(c.source.parts) <= len(taker.source.parts) for c in accepting)
            assert [c for c in accepting if c.source == taker.source] == [taker]


CHUNKING_FIELDS = {
    "preset": st.sampled_from(["default", "technical_docs", "narrative"]),
    "overrides": st.fixed_dictionaries(
        {},
        optional={
            "chunk_size_max": st.integers(min_value=230, max_value=254),
            "chunk_size_min": st.integers(min_value=20, max_value=60),
        },
    ),
}
RETRIEVAL_FIELDS = {
    "lexical_weight": st.floats(min_value=0, max_value=1),
    "sentence_weight": st.floats(min_value=0, max_value=1),
    "search": st.sampled_from(["hybrid", "dense", "lexical"]),
    "text_search_config": st.sampled_from(["english", "simple", "german"]),
}


@settings(max_examples=40, deadline=None)
@given(
    chunking=st.fixed_dictionaries({}, optional=CHUNKING_FIELDS),
    retrieval=st.fixed_dictionaries({}, optional=RETRIEVAL_FIELDS),
)
def test_overrides_replace_exactly_the_fields_they_name(chunking: dict, retrieval: dict) -> None:
    top = top_settings()
    raw = {"c": {"source": "/d", "chunking": chunking, "retrieval": retrieval}}
    mine = effective_settings(top, raw, base=BASE)["c"]
    for name in RETRIEVAL_FIELDS:
        expected = retrieval.get(name, getattr(top.retrieval, name))
        assert getattr(mine.retrieval, name) == expected
    assert mine.chunking.preset == chunking.get("preset", top.chunking.preset)
    assert mine.chunking.overrides == {**top.chunking.overrides, **chunking.get("overrides", {})}
    untouched = ("embedder", "execution", "backfill", "evaluation", "extraction")
    assert all(getattr(mine, block) == getattr(top, block) for block in untouched)
    assert mine.inbox.model_copy(update={"path": None}) == top.inbox


@pytest.mark.parametrize(
    ("block", "named"),
    [
        ({"embedder": {"batch_size": 8}}, "collections.c.embedder"),
        ({"retrieval": {"model": "packaged"}}, "collections.c.retrieval.model"),
        ({"retrieval": {"query_prompt": "q: "}}, "collections.c.retrieval.query_prompt"),
    ],
)
def test_the_models_are_the_projects_not_a_collections(block: dict, named: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{re.escape(named)}: .*top level"):
        parse_collections({"c": {"source": "/d", **block}}, base=BASE)


def test_a_settings_file_counts_relative_sources_from_its_folder(tmp_path: Path) -> None:
    from seams.settings import load_settings

    (tmp_path / "project").mkdir()
    path = tmp_path / "project" / "seams.yaml"
    path.write_text(
        "chunking: {preset: narrative}\n"
        "collections:\n"
        "  notes: {source: docs/notes, chunking: {preset: technical_docs}}\n"
        "  mail: {source: /srv/mail}\n",
        encoding="utf-8",
    )
    settings = load_settings(path)
    per = settings.collection_settings()
    assert per["notes"].inbox.path == str(tmp_path / "project" / "docs" / "notes")
    assert per["notes"].chunking.preset == "technical_docs"
    assert per["mail"].chunking.preset == "narrative"
    assert settings.declared_collections()["mail"].source == Path("/srv/mail").resolve()


def test_a_settings_file_error_in_a_collection_names_the_file(tmp_path: Path) -> None:
    from seams.settings import load_settings

    path = tmp_path / "seams.yaml"
    path.write_text("collections:\n  Bad: {source: x}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: collections.Bad: "):
        load_settings(path)


def test_settings_without_a_file_refuse_a_relative_source() -> None:
    settings = SeamsSettings.model_validate({"collections": {"notes": {"source": "docs"}}})
    with pytest.raises(ConfigError, match=r"^collections.notes.source='docs': .*absolute"):
        settings.collection_settings()


def test_a_copy_with_other_fields_has_its_own_collection_settings() -> None:
    top = top_settings()
    assert top.collection_settings()["default"].retrieval.mode == "pooled"
    copy = top.model_copy(update={"retrieval": top.retrieval.model_copy(update={"mode": "text"})})
    assert copy.collection_settings()["default"].retrieval.mode == "text"


def test_a_top_level_inbox_path_beside_collections_is_refused() -> None:
    top = SeamsSettings.model_validate({"inbox": {"path": "/srv/inbox"}})
    with pytest.raises(ConfigError, match=r"^inbox.path='/srv/inbox': with `collections:` each"):
        effective_settings(top, {"c": {"source": "/d"}}, base=BASE)


def test_a_smaller_cap_alone_is_accepted_and_the_untouched_target_follows(tmp_path: Path) -> None:
    """`chunk_size_max: 150` alone, at the top level or in a collection, is not refused for the
    default `chunk_size_target: 200` nobody set: the target follows the cap."""
    from seams.settings import load_settings

    path = tmp_path / "seams.yaml"
    path.write_text(
        "chunking: {overrides: {chunk_size_max: 150}}\n"
        "collections:\n"
        "  notes:\n"
        "    source: /srv/notes\n"
        "    chunking: {preset: narrative, overrides: {chunk_size_max: 120}}\n",
        encoding="utf-8",
    )
    settings = load_settings(path)
    config = settings.chunking_config()
    assert (config.chunk_size_target, config.chunk_size_max) == (150, 150)
    notes = settings.collection_settings()["notes"].chunking_config()
    assert (notes.chunk_size_min, notes.chunk_size_target, notes.chunk_size_max) == (40, 120, 120)
