"""Sentence rules per language (`ChunkingConfig.language`): German, French, Spanish and Italian
abbreviations, ordinal dates and quotation marks, `auto`, exact offsets for every setting, and
the English default's candidates pinned (digests recorded before the setting existed).
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seams.chunking import ChunkingConfig, ConfigError, candidate_texts, segment
from seams.chunking.sentence_rules import LANGUAGES, detect_language
from tests.support.invariants import check_exact

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = (*LANGUAGES, "auto")


def sentences(text: str, language: str) -> list[str]:
    config = ChunkingConfig(min_sentence_length=1, language=language)
    return candidate_texts(text, check_exact(text, segment(text, config)))


# --- one case per rule and language ----------------------------------------------------------
CASES = {
    "de": [
        # ordinal dates and numbers
        ["Die Verordnung tritt am 1. Januar 2025 in Kraft.", "Sie gilt für alle."],
        ["Wir trafen uns am 24. Dezember.", "Es war kalt."],
        ["Im 19. Jahrhundert war das anders.", "Heute nicht."],
        ["Der 2. Weltkrieg endete 1945.", "Danach kam der Wiederaufbau."],
        ["Die Frist läuft vom 1. 3. 2024 an.", "Dann nicht mehr."],
        ["Die Zahl stieg im Jahr 2020.", "Danach sank sie."],
        ["Das steht in Kapitel 3.", "Danach folgt der Anhang."],
        ["Das gilt.", "2. Die zweite Regel gilt ab dem 3. März.", "Der Rest folgt."],
        # legal and numeric abbreviations
        ["Nach § 3 Abs. 2 Satz 1 gilt das nicht.", "Abs. Drei regelt den Rest."],
        ["Siehe Nr. 5 und Nr. Sieben der Liste.", "Dann folgt mehr."],
        ["Der Umsatz stieg um 3 Mio. Euro.", "Der Gewinn sank um 1 Mrd. Dollar."],
        ["Das steht auf S. 12 des Berichts.", "Mehr nicht."],
        ["Es kamen ca. 300 Menschen.", "Alle blieben."],
        ["Die Lieferung dauert max. 4 Wochen, min. 2 Tage.", "Danach kommt die Rechnung."],
        ["Das gilt ggfs. auch morgen.", "Ich heiße Max.", "Wir sehen uns."],
        ["Viele Tiere, z. B. Hunde, sind treu.", "Katzen bzw. Kater nicht."],
        ["Gemäß Art. 5 DSGVO ist das erlaubt.", "Auf diese Art.", "Dann geht es weiter."],
        ["Äpfel, Birnen usw.", "Die Kinder aßen alles."],
        # quotation marks and ellipses
        ["Er sagte: „Ich komme morgen.“", "Dann ging er."],
        ["Sie las »Die Pest.«", "Danach schlief sie."],
        ["Er zitierte „Anfang […] Ende.“", "Dann schwieg er."],
        ["Er wartete...", "Niemand kam."],
    ],
    "fr": [
        ["Le 1er mai est férié.", "Le 2 mai non."],
        ["Plusieurs fruits, p. ex. Pommes et poires, sont mûrs.", "Mangez-les."],
        ["Il a dit : « Je viens demain. »", "Puis il est parti."],
        ["Elle a crié : « Attention ! »", "Personne n'a bougé."],
        ['Il a dit " Non. "', "Puis il est parti."],
        ["Fin.", '" Début de la citation. "', "Suite."],
        ["Ils sont sept.", "Puis ils sont partis."],
        ["Il vint de l'est.", "Ensuite il partit."],
        ["Des carrossiers (Gruau par ex.)", "Ainsi, tout va bien."],
        ["M. Dupont habite au n° 5 de la rue.", "Mme Martin aussi."],
        ["Voir l'art. 12 du code, env. Trois pages.", "Rien de plus."],
        ["Il attendit...", "Personne ne vint."],
    ],
    "es": [
        ["El Sr. García llegó ayer.", "La Sra. López vive en Madrid."],
        ["Fuimos al mar.", "Luego volvimos."],
        ["Véase la pág. 12 y el núm. 3 del anexo.", "Nada más."],
        ["Dijo: «Vendré mañana.»", "Después se fue."],
        ["El Dr. Pérez, p. ej. Médico de familia, atiende hoy.", "Ud. tiene razón."],
        ["La densidad era de 7,63 hab. / km².", "Tiene 300 hab.", "Es pequeño."],
        ["Llegaron aprox. 300 personas, etc.", "Nada más."],
        ["¿Vienes?", "¡Claro que sí!"],
    ],
    "it": [
        ["Il Sig. Rossi è arrivato.", "Poi è partito."],
        ["Il Dott. Bianchi è qui.", "La Prof.ssa Verdi insegna a Roma."],
        ["Ha detto: «Vengo domani.»", "Poi è andato via."],
        ["Frutta, verdura ecc.", "Tutto fresco."],
        ["Vale la legge.", "858. Comprensorio di bonifica.", "859. Altro articolo."],
        ["Si trova a est.", "Poi si vede."],
        ["Vedi pag. 12 e art. 3 della legge, ca. Dieci righe.", "Fine."],
        ["Il 1° maggio è festa.", "Era tardi...", "Nessuno rispose."],
    ],
}
CASE_PARAMS = [
    pytest.param(language, case, id=f"{language}-{case[0][:28]}")
    for language, cases in CASES.items()
    for case in cases
]


@pytest.mark.parametrize(("language", "expected"), CASE_PARAMS)
def test_language_rules_split_where_the_language_ends_sentences(language, expected):
    assert sentences(" ".join(expected), language) == expected


@pytest.mark.parametrize(("language", "expected"), CASE_PARAMS)
def test_auto_finds_the_language_of_a_longer_text(language, expected):
    text = " ".join(" ".join(case) for case in CASES[language])
    assert detect_language(text) == language
    assert sentences(text, "auto") == sentences(text, language)


def test_the_english_default_keeps_its_rules_for_every_text():
    text = "Die Verordnung tritt am 1. Januar 2025 in Kraft."
    assert sentences(text, "en") == ["Die Verordnung tritt am 1.", "Januar 2025 in Kraft."]
    assert sentences(text, "de") == [text]
    default = segment(text, ChunkingConfig(min_sentence_length=1))
    assert default == segment(text, ChunkingConfig(min_sentence_length=1, language="en"))


def test_auto_falls_back_to_english_on_thin_or_tied_evidence():
    assert detect_language("") == "en"
    assert detect_language("Die Katze.") == "en"  # one function word
    assert detect_language("le les et des el los las y") == "en"  # French and Spanish tie
    assert detect_language("The cat and the dog sat on the mat with the bird.") == "en"
    assert detect_language("Die Katze und der Hund sind mit dem Vogel auf der Matte.") == "de"
    # Only the first 1,000 characters count: the same verdict however long the text goes on.
    german = "Die Katze und der Hund sind mit dem Vogel auf der Matte. " * 200
    assert detect_language(german + "The cat and the dog. " * 2000) == "de"


# --- configuration ----------------------------------------------------------------------------
def test_language_is_validated_and_named_in_the_error():
    with pytest.raises(ConfigError, match="language='pt'"):
        ChunkingConfig(language="pt")


def test_default_fingerprints_stay_and_a_language_changes_only_segmentation():
    default = ChunkingConfig()
    assert ChunkingConfig(language="en").fingerprints() == default.fingerprints()
    assert "language" not in default.section_params("segmentation")
    for language in ("de", "fr", "es", "it", "auto"):
        other = ChunkingConfig(language=language)
        changed = {
            name
            for name, digest in other.fingerprints().items()
            if digest != default.fingerprints()[name]
        }
        assert changed == {"segmentation", "config"}, language
        assert other.section_params("segmentation")["language"] == language


# --- properties -------------------------------------------------------------------------------
PIECES = [
    "Abs.", "Nr.", "Mio.", "S.", "ca.", "z. B.", "p. ex.", "Sr.", "Sra.", "Dott.", "ecc.",
    "etc.", "usw.", "hab.", "1.", "19.", "2020.", "858.", "Januar", "mai", "Jahrhundert",
    "am", "der", "le", "el", "il", "Die", "Le", "Word", "word", "x", "...", "…", "[…]",
    "„", "“", "”", "»", "«", "‹", "›", '"', "'", "(", ")", "[", "]", "¿", "¡", ".", "!", "?",
    " ", " ", " ", "\n", "\n\n", "\u00a0", "# Title\n", "- item\n", "| a | b |\n",
]  # fmt: skip
texts = st.lists(st.sampled_from(PIECES), max_size=60).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, language=st.sampled_from(SETTINGS), minimum=st.integers(1, 20))
def test_offsets_stay_exact_for_every_language(text, language, minimum):
    config = ChunkingConfig(language=language, min_sentence_length=minimum, max_candidate_chars=80)
    candidates = check_exact(text, segment(text, config))
    # Only sentence ends depend on the language: structure is found the same way.
    english = segment(text, config.with_overrides(language="en"))
    structure = {"heading", "list_item", "table", "code", "rule"}
    spans = [(c.start_char, c.end_char, c.kind) for c in candidates if c.kind in structure]
    assert spans == [(c.start_char, c.end_char, c.kind) for c in english if c.kind in structure]


# --- the English default, pinned --------------------------------------------------------------
#: Texts in the four languages, read under the English default (fixed: the digests below hold
#: their candidates).
MULTILINGUAL = {
    "de": (
        "Die Verordnung tritt am 1. Januar 2025 in Kraft. Nach § 3 Abs. 2 Satz 1 gilt das "
        "nicht für Betriebe mit ca. 50 Beschäftigten, z. B. Handwerker. Der Umsatz stieg um "
        "3 Mio. Euro, siehe S. 12 und Nr. 4 der Anlage. Im 19. Jahrhundert war das anders. "
        "Er sagte: „Ich komme morgen.“ Dann ging er. Sie las »Die Pest.« Danach schlief sie. "
        "Das kostet 5 Mrd. Dollar bzw. mehr. Wir trafen uns am 24. Dezember. Es war kalt... "
        "Niemand kam. Der 1. FC Köln spielt gegen den 2. der Tabelle. Gemäß Art. 5 Abs. 1 "
        "DSGVO ist das erlaubt. Die Zahl stieg im Jahr 2020. Danach sank sie.\n\n"
        "2. Die zweite Regel gilt ab dem 3. März 2024 usw. Der Rest folgt."
    ),
    "fr": (
        "Le 1er mai est férié. Plusieurs fruits, p. ex. Pommes et poires, sont mûrs. "
        "Il a dit : « Je viens demain. » Puis il est parti. M. Dupont habite au n° 5. "
        "Mme Martin est arrivée vers 10 h. Ils sont sept. Puis ils sont partis. "
        "Elle a crié : « Attention ! » Personne n'a bougé. Voir le chap. 3, art. 12 et env. "
        "Trente pages. La ville compte 3 000 hab. Elle est ancienne. Il vint de l'est. "
        'Ensuite il partit. Il a dit " Non. " Puis il est parti.'
    ),
    "es": (
        "El Sr. García llegó ayer. La Sra. López vive en Madrid. Fuimos al mar. Luego "
        "volvimos. Véase la pág. 12 y el núm. 3 del anexo. Tiene aprox. 300 hab. Es un "
        "pueblo pequeño. Dijo: «Vendré mañana.» Después se fue. ¿Vienes? ¡Claro que sí! "
        "El Dr. Pérez, p. ej. Médico de familia, atiende los lunes. Ud. tiene razón etc. "
        "Nada más. El 1.º de mayo es fiesta."
    ),
    "it": (
        "Il Sig. Rossi è arrivato. Poi è partito. Il Dott. Bianchi è qui. La Prof.ssa Verdi "
        "insegna a Roma. Vedi pag. 12, art. 3 e cfr. Cap. 2. Sono arrivati ca. 300 ospiti. "
        "Ha detto: «Vengo domani.» Poi è andato via. Frutta, verdura ecc. Tutto fresco. "
        "Il 1° maggio è festa. 858. Comprensorio di bonifica. La S.p.A. ha chiuso. "
        "Era tardi... Nessuno rispose."
    ),
}
#: sha256 of every candidate field, per corpus, for `ChunkingConfig()` (and, for the texts above,
#: min_sentence_length=1), as the segmenter gave them before sentence rules per language existed;
#: the texts above as English reads them since it reads web text too (an ellipsis before a
#: capital ends a sentence, "bzw. mehr" and "Ud. tiene" split before a lower-case word).
PINNED = {
    ("multilingual", 1): "3653a92a05fdc1dc7b1733fe8c2ee24529b02d6a26a97006b9e86f836ce4cf8f",
    ("multilingual", 12): "f09e5ed91e581fbe1cef81222d75c687d65a8deba1292e7e31b58a656c70caf1",
    ("sample", 12): "f6425e05c2feddd5348f9adb30ca4639046fdb144944f1e2da91d19bdb3a56ba",
    ("topics", 12): "5d4e198b1a2c2e2b58724368c0578815863b3471fb090d40704ab136c79bdfe6",
}


def corpus(name: str) -> dict[str, str]:
    if name == "multilingual":
        return MULTILINGUAL
    if name == "sample":
        folder = resources.files("seams.orchestration.sample_corpus")
        return {
            entry.name: entry.read_text(encoding="utf-8")
            for entry in folder.iterdir()
            if entry.name.endswith((".txt", ".md"))
        }
    folder = ROOT / "benchmarks" / "corpus" / "topics"
    return {path.name: path.read_text(encoding="utf-8") for path in folder.glob("*.txt")}


def candidates_digest(texts: dict[str, str], config: ChunkingConfig) -> str:
    """The pin is on sentence boundaries: a lead-in (a sentence ending in a colon before a block)
    counts as the sentence it was before lead-ins had a kind of their own."""
    digest = hashlib.sha256()
    for name in sorted(texts):
        fields = [_fields(c) for c in segment(texts[name], config)]
        digest.update(json.dumps([name, fields], ensure_ascii=True).encode("ascii"))
    return digest.hexdigest()


def _fields(c) -> list:
    kind = "sentence" if c.kind == "lead_in" else c.kind
    return [c.start_char, c.end_char, kind, c.section, c.paragraph, c.split, c.token_count]


@pytest.mark.parametrize(("name", "minimum"), sorted(PINNED))
def test_english_default_candidates_are_unchanged(name, minimum):
    config = ChunkingConfig(min_sentence_length=minimum)
    assert candidates_digest(corpus(name), config) == PINNED[(name, minimum)]
