"""A fixed, varied sentence set for checking that a smaller model keeps a bigger one's vectors.

The int8 gate of the ONNX export and the static model's distillation both compare two models on
these sentences; tests use them too. Deterministic for a given `n` and `seed`.
"""

from __future__ import annotations

import random

_SUBJECTS = (
    "The river",
    "A small startup",
    "Our database migration",
    "The committee",
    "Photosynthesis",
    "The compiler",
    "My grandmother",
    "The central bank",
    "This neural network",
    "The orchestra",
    "The vaccine trial",
    "A junior developer",
)
_VERBS = (
    "slowly changed",
    "failed to predict",
    "was praised for",
    "quietly improved",
    "doubled",
    "rejected",
    "explained",
    "could not survive",
    "depended on",
    "was rebuilt after",
)
_OBJECTS = (
    "the spring floods",
    "its quarterly revenue",
    "every index on the table",
    "the new housing policy",
    "sunlight into sugar",
    "the undefined behaviour",
    "her apple pie recipe",
    "interest rates",
    "the validation loss",
    "the final movement",
)
_TAILS = (
    ".",
    " in 2019.",
    ", according to the report.",
    " because nobody read the manual!",
    " — or so they said.",
    "?",
    " (see section 4.2).",
    " at 3.5% per year.",
)
_FIXED = (
    "Yes.",
    "No!",
    "Hello world",
    "ok",
    "42",
    "Thanks, see you tomorrow.",
    "Why?",
    "e.g.",
    "URL: https://example.com/a?b=c&d=1",
    "Write to user@example.com for access.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "La vie est belle quand il fait beau à Paris.",
    "El gobierno anunció nuevas medidas económicas ayer por la tarde.",
    "東京は日本の首都であり、世界最大の都市圏の一つです。",
    "Москва — столица России и крупнейший город страны.",
    "الذكاء الاصطناعي يغير طريقة عملنا كل يوم.",
    "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
    "北京的秋天非常美丽。",
    "Dzisiaj pada deszcz i jest bardzo zimno.",
    "def add(a, b):\n    return a + b",
    "SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL '7 days';",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "import numpy as np\nx = np.linspace(0, 1, 100)",
    "git rebase -i HEAD~3 && git push --force-with-lease",
    '{"key": [1, 2, 3], "nested": {"ok": true}}',
    "| name | value |\n|------|-------|\n| a    | 1     |",
    "- buy milk\n- call the plumber\n- finish the report",
)


def fidelity_sentences(n: int = 300, seed: int = 0) -> list[str]:
    """A deterministic, varied sentence set for fidelity checks (int8 gate, tests).

    Very short texts, greetings, URLs, non-Latin scripts, code, tables and multi-sentence
    paragraphs: short inputs are where quantization error shows most (few tokens to average).
    """
    rng = random.Random(seed)
    out = list(_FIXED)
    while len(out) < n:
        parts = [_sentence(rng) for _ in range(1 if rng.random() < 0.7 else rng.randint(2, 6))]
        out.append(" ".join(parts))
    return out[:n]


def _sentence(rng: random.Random) -> str:
    subject, verb, obj = rng.choice(_SUBJECTS), rng.choice(_VERBS), rng.choice(_OBJECTS)
    return f"{subject} {verb} {obj}{rng.choice(_TAILS)}"
