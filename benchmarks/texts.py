"""The three texts every chunker is compared on: prose, technical with code, hard-wrapped.

All three are built deterministically (no randomness that is not seeded, no network) from
files in this repository: the topic passages of `benchmarks/corpus/topics` (self-written prose),
the bundled sample corpus `orchestration/sample_corpus` and a seeded generator of technical
Markdown (headings, paragraphs with inline code, version numbers, abbreviations and URLs,
lists, tables and fenced code blocks). Each text is cut to about `words` words at a paragraph
boundary, so "seconds per 10k words" compares like with like.
"""

from __future__ import annotations

import random
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOPICS = ROOT / "benchmarks" / "corpus" / "topics"
SAMPLE = ROOT / "orchestration" / "sample_corpus"
KINDS = ("prose", "technical", "hard_wrapped")
SEED = 1010


def _passages() -> dict[str, str]:
    return {p.stem: p.read_text(encoding="utf-8").strip() for p in sorted(TOPICS.glob("*.txt"))}


def _take(blocks: list[str], words: int) -> str:
    """Join blocks with blank lines until about `words` words (whole blocks only)."""
    out: list[str] = []
    count = 0
    for block in blocks:
        if count >= words:
            break
        out.append(block)
        count += len(block.split())
    return "\n\n".join(out) + "\n"


def prose(words: int = 10_000) -> str:
    """Topic passages in a seeded order, then three sample-corpus essays (one of them
    unwrapped): one paragraph per line, blank lines between, a few Markdown headings."""
    passages = _passages()
    names = sorted(passages)
    random.Random(f"{SEED}:prose").shuffle(names)
    blocks = [passages[n] for n in names]
    for name in ("field_notes.md", "kitchen_science.md", "history_of_maps.txt", "city_notes.txt"):
        essay = (SAMPLE / name).read_text(encoding="utf-8").strip()
        if name.endswith(".txt"):  # these come hard-wrapped: one paragraph per line here
            essay = "\n\n".join(" ".join(p.split()) for p in essay.split("\n\n"))
        blocks.append(essay)
    return _take(blocks, words)


def _wrap_block(block: str, width: int = 72) -> str:
    """Hard-wrap one paragraph; headings, list items and short lines are left alone."""
    lines = block.splitlines()
    if block.lstrip().startswith(("#", "-", "*", "|", "```")) or max(map(len, lines)) <= width:
        return block
    return textwrap.fill(" ".join(block.split()), width=width)


def hard_wrapped(words: int = 10_000) -> str:
    """Prose with a newline every ~72 columns, as plain-text books, e-mails and RFCs have.

    Three sample-corpus essays, then the topic passages (in another seeded order than `prose`),
    wrapped with `textwrap` paragraph by paragraph (a paragraph that comes wrapped stays so)."""
    blocks: list[str] = []
    for name in ("history_of_maps.txt", "city_notes.txt", "kitchen_science.md"):
        essay = (SAMPLE / name).read_text(encoding="utf-8").strip()
        blocks += [_wrap_block(b) for b in essay.split("\n\n")]
    passages = _passages()
    names = sorted(passages)
    random.Random(f"{SEED}:wrapped").shuffle(names)
    for name in names:
        blocks += [_wrap_block(p) for p in passages[name].split("\n\n")]
    return _take(blocks, words)


# --- technical Markdown ------------------------------------------------------------------------
_SERVICES = [
    "ledger",
    "billing",
    "catalog",
    "search",
    "ingest",
    "notifier",
    "scheduler",
    "auth",
    "gateway",
    "reports",
    "inventory",
    "payments",
]
_NOUNS = [
    "request",
    "worker",
    "queue",
    "replica",
    "index",
    "cache",
    "token",
    "schema",
    "batch",
    "partition",
    "snapshot",
    "connection",
    "timeout",
    "retry",
    "lease",
    "checkpoint",
]
_VERBS = [
    "validates",
    "retries",
    "flushes",
    "rotates",
    "compacts",
    "replays",
    "drains",
    "throttles",
    "serialises",
    "migrates",
    "caches",
    "rebuilds",
]


def _identifier(rng: random.Random) -> str:
    return f"{rng.choice(_NOUNS)}_{rng.choice(_NOUNS)}"


def _tech_sentence(rng: random.Random, service: str) -> str:
    noun, other = rng.sample(_NOUNS, 2)
    templates = [
        f"The {service} service {rng.choice(_VERBS)} each {noun} before the {other} is "
        f"committed, so a crash never leaves a half-written {other}.",
        f"Set `{service.upper()}_{noun.upper()}_LIMIT` to at most {rng.randint(2, 512)} when "
        f"the {other} pool is shared, e.g. on a single node.",
        f"Since v{rng.randint(1, 4)}.{rng.randint(0, 19)}.{rng.randint(0, 9)}, "
        f"`{_identifier(rng)}()` returns a {noun} object instead of a dict.",
        f"A {noun} that takes longer than {rng.randint(1, 9)}.{rng.randint(0, 9)} s is "
        f"cancelled and logged at WARNING level, i.e. it is not retried.",
        f"See https://docs.example.com/{service}/{noun} for the full list of {other} options.",
        f"The default of {rng.randint(2, 64)} {noun}s per {other} was chosen after load tests; "
        f"raising it rarely helps.",
        f"Errors from the {other} layer are wrapped in `{service.title()}Error` with the "
        f"original {noun} attached.",
        f"Dr. Ada Novak's review found that the {noun} path spends {rng.randint(10, 90)}% of "
        f"its time waiting on the {other}.",
        f"Why does the {noun} {rng.choice(_VERBS)[:-1]} at all? Because the {other} may have "
        f"moved since the last checkpoint.",
    ]
    return rng.choice(templates)


def _code_block(rng: random.Random, service: str) -> str:
    kind = rng.choice(["python", "bash", "yaml"])
    if kind == "python":
        name = _identifier(rng)
        lines = [
            f"def {name}(config: dict, *, limit: int = {rng.randint(1, 99)}) -> list[str]:",
            f'    """Return the {rng.choice(_NOUNS)}s of {service} that need a {name}."""',
            "    found = []",
            f"    for item in config.get('{rng.choice(_NOUNS)}s', []):",
            f"        if item.get('{rng.choice(_NOUNS)}') is None:",
            "            continue",
            "        found.append(item['name'])",
            "        if len(found) >= limit:",
            "            break",
            "    return found",
        ]
    elif kind == "bash":
        lines = [
            "#!/usr/bin/env bash",
            "set -euo pipefail",
            f'{service.upper()}_URL="${{1:?usage: {service}.sh <url>}}"',
            f'curl --fail --silent "${{{service.upper()}_URL}}/healthz"',
            f"kubectl rollout status deployment/{service} --timeout={rng.randint(2, 15)}m",
            f"echo 'drained {rng.randint(1, 64)} {rng.choice(_NOUNS)}s'",
        ]
    else:
        lines = [f"{service}:"]
        for _ in range(rng.randint(3, 7)):
            lines.append(f"  {_identifier(rng)}: {rng.randint(1, 5000)}")
        lines.append(f"  {rng.choice(_NOUNS)}_mode: {rng.choice(['strict', 'lenient', 'off'])}")
    return f"```{kind}\n" + "\n".join(lines) + "\n```"


def _table(rng: random.Random) -> str:
    rows = ["| setting | default | meaning |", "|---|---|---|"]
    for _ in range(rng.randint(3, 6)):
        rows.append(
            f"| `{_identifier(rng)}` | {rng.randint(1, 900)} | how many {rng.choice(_NOUNS)}s "
            f"one {rng.choice(_NOUNS)} may hold |"
        )
    return "\n".join(rows)


def _technical_section(rng: random.Random) -> list[str]:
    service = rng.choice(_SERVICES)
    blocks = [f"## {service.title()}: {rng.choice(_NOUNS)} handling"]
    for _ in range(rng.randint(2, 4)):
        roll = rng.random()
        if roll < 0.55:
            blocks.append(" ".join(_tech_sentence(rng, service) for _ in range(rng.randint(3, 6))))
        elif roll < 0.75:
            blocks.append(_code_block(rng, service))
        elif roll < 0.9:
            items = [f"- {_tech_sentence(rng, service)}" for _ in range(rng.randint(2, 5))]
            blocks.append("\n".join(items))
        else:
            blocks.append(_table(rng))
    return blocks


def technical(words: int = 10_000) -> str:
    """The sample corpus' platform handbook, then seeded technical sections to ~`words`."""
    blocks = [(SAMPLE / "platform_handbook.md").read_text(encoding="utf-8").strip()]
    rng = random.Random(f"{SEED}:technical")
    while sum(len(b.split()) for b in blocks) < words + 500:
        blocks += _technical_section(rng)
    return _take(blocks, words)


def build(kind: str, words: int = 10_000) -> str:
    """One of `KINDS`, about `words` words long."""
    makers = {"prose": prose, "technical": technical, "hard_wrapped": hard_wrapped}
    if kind not in makers:
        raise ValueError(f"kind: unknown text kind {kind!r}; choose one of {', '.join(KINDS)}")
    return makers[kind](words)
