"""Deterministic synthetic documents for throughput benchmarks.

Real prose is in `benchmarks/corpus/`, but it is too small for 300k-word runs, and repeating it
would let the embedding cache skip repeated sentences and flatter the pipeline. These documents
are unique sentence by sentence (seeded), topic-coherent within a section, with Markdown headings
between topics, so segmentation, boundaries and assembly do real work.
"""

from __future__ import annotations

import random

TOPICS: dict[str, tuple[list[str], list[str]]] = {
    "beekeeping": (
        [
            "hive",
            "queen",
            "worker",
            "frame",
            "comb",
            "nectar",
            "pollen",
            "smoker",
            "brood",
            "colony",
            "swarm",
            "beekeeper",
            "honey",
            "wax",
            "forager",
        ],
        ["inspects", "feeds", "protects", "stores", "builds", "cools", "guards", "visits"],
    ),
    "databases": (
        [
            "index",
            "table",
            "query",
            "planner",
            "transaction",
            "replica",
            "backup",
            "schema",
            "column",
            "row",
            "lock",
            "vacuum",
            "snapshot",
            "cursor",
            "partition",
        ],
        ["scans", "updates", "locks", "replicates", "restores", "joins", "sorts", "caches"],
    ),
    "astronomy": (
        [
            "planet",
            "orbit",
            "telescope",
            "galaxy",
            "comet",
            "nebula",
            "moon",
            "star",
            "eclipse",
            "observatory",
            "spectrum",
            "asteroid",
            "crater",
            "satellite",
            "horizon",
        ],
        ["orbits", "reflects", "emits", "eclipses", "tracks", "measures", "rises", "dims"],
    ),
    "cooking": (
        [
            "dough",
            "oven",
            "sauce",
            "knife",
            "pan",
            "onion",
            "butter",
            "flour",
            "stock",
            "recipe",
            "spice",
            "crust",
            "kitchen",
            "simmer",
            "garlic",
        ],
        ["bakes", "stirs", "slices", "roasts", "seasons", "reduces", "kneads", "tastes"],
    ),
    "sailing": (
        [
            "sail",
            "hull",
            "keel",
            "mast",
            "tide",
            "harbor",
            "anchor",
            "wind",
            "rudder",
            "crew",
            "compass",
            "chart",
            "buoy",
            "current",
            "deck",
        ],
        ["trims", "steers", "anchors", "drifts", "tacks", "moors", "navigates", "heels"],
    ),
    "gardening": (
        [
            "soil",
            "seed",
            "root",
            "compost",
            "leaf",
            "bed",
            "shovel",
            "tomato",
            "weed",
            "mulch",
            "sprout",
            "greenhouse",
            "trellis",
            "bulb",
            "hedge",
        ],
        ["waters", "prunes", "plants", "harvests", "shades", "feeds", "grows", "covers"],
    ),
}
ADJECTIVES = ["small", "old", "careful", "quiet", "heavy", "bright", "steady", "early", "late",
              "narrow", "warm", "cold", "young", "busy", "clean", "rough"]  # fmt: skip
TAILS = ["in the morning", "before winter", "after the rain", "every week", "near the edge",
         "for the first time", "without much noise", "with great care", "during the season",
         "at the end of the day"]  # fmt: skip


def sentence(rng: random.Random, topic: str) -> str:
    nouns, verbs = TOPICS[topic]
    subject = f"The {rng.choice(ADJECTIVES)} {rng.choice(nouns)}"
    obj = f"the {rng.choice(ADJECTIVES)} {rng.choice(nouns)}"
    extra = f" and the {rng.choice(nouns)} number {rng.randint(2, 999)}"
    return f"{subject} {rng.choice(verbs)} {obj}{extra} {rng.choice(TAILS)}."


def document(seed: int, words: int) -> str:
    """A Markdown document of about `words` words, switching topic every few paragraphs."""
    rng = random.Random(seed)
    topics = list(TOPICS)
    parts: list[str] = []
    count = 0
    while count < words:
        topic = rng.choice(topics)
        parts.append(f"## {topic.title()} notes {rng.randint(1, 99)}")
        for _ in range(rng.randint(2, 4)):
            paragraph = " ".join(sentence(rng, topic) for _ in range(rng.randint(3, 6)))
            parts.append(paragraph)
            count += len(paragraph.split())
    return "\n\n".join(parts) + "\n"
