"""English sentence rules for web text: lower-case starts (Italian's too), ellipses, smileys,
quoted letters; German unit abbreviations before numbers. One case per rule, plus exact offsets
on generated text made of the pieces these rules look at."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seams.chunking import ChunkingConfig, candidate_texts, segment
from tests.support.invariants import check_exact


def sentences(text: str, language: str = "en", minimum: int = 1) -> list[str]:
    config = ChunkingConfig(min_sentence_length=minimum, language=language)
    return candidate_texts(text, check_exact(text, segment(text, config)))


@pytest.mark.parametrize(
    "expected",
    [
        # a sentence may start in lower case after a word that is no abbreviation
        ["call them at home.", "they haven't heard from you."],
        ["is it still open?", "it closed on Sunday."],
        ["Great trip!", "we loved it."],
        ["Cells were lysed with RIPA buffer.", "mRNA was then extracted."],
        # an ellipsis before a capital ends a sentence
        ["It closed on Sunday...", "You voted on the site."],
        # a smiley ends its sentence, and one after a terminator belongs to that sentence
        ["I love her. :)", "I have a cat too."],
        ["Hope you find out soon :)", "you should ask them first."],
        ["What a day! :-(", "Nothing worked."],
        # a quoted letter of several sentences splits at its sentence ends
        ['He wrote: "Jen, you have great friends.', 'In fact we all agree."', "Then he left."],
    ],
    ids=lambda case: case[0][:24],
)
def test_english_web_text_splits_here(expected):
    assert sentences(" ".join(expected)) == expected


@pytest.mark.parametrize(
    "sentence",
    [
        "It takes approx. three days and 5 min. later it is done.",
        "Bring fruit, e.g. apples, i.e. something sweet, etc. and more.",
        "Count the no. of cells in vol. two of the report.",
        "Isolate Bacillus sp. strain 7 on plates.",
        "Read chap. two, sect. four and pg. ten of the guide.",
        "See https://www.ncbi. nlm.nih.gov/geo for the data.",
        "It was good... maybe too good.",
        "Take the substring <X_i, X_i+1, ... X_j> of the paragraph.",
        '"Why?" he asked.',
        'He said "Stop. Now." and walked away.',
        "The result (see the appendix. It is long.) was clear.",
        "Meet me at 10:30 or at 11:45 today.",
        "The price is max. 4 dollars, min. 2 dollars.",
    ],
)
def test_english_keeps_these_whole(sentence):
    assert sentences(sentence) == [sentence]


def test_a_quotation_that_closes_with_its_sentence_keeps_the_closing_mark():
    text = "Il a dit : « Je viens demain. » Puis il est parti."
    assert sentences(text) == ["Il a dit : « Je viens demain. » Puis il est parti."]
    assert sentences(text, "fr") == ["Il a dit : « Je viens demain. »", "Puis il est parti."]


def test_lower_case_starts_are_english_and_italian_only():
    text = "Er kam um 5 Uhr. danach ging er."
    assert sentences(text, "de") == [text]
    assert sentences(text) == ["Er kam um 5 Uhr.", "danach ging er."]
    italian = "Tudjman, l'arte della vendetta. messo in ginocchio dai serbi."
    assert sentences(italian, "it") == [
        "Tudjman, l'arte della vendetta.",
        "messo in ginocchio dai serbi.",
    ]
    assert sentences("Frutta, verdura ecc. e altro.", "it") == ["Frutta, verdura ecc. e altro."]


@pytest.mark.parametrize(
    "sentence",
    [
        "Die Frist beträgt max. 4 Wochen ab heute.",
        "Es dauert min. 3 Tage und kostet ca. 20 Euro.",
        "Es gibt insg. 40 Plätze und zzgl. 3 Stehplätze.",
        "Es kostet durchschn. 3 Euro pro Stk. im Laden.",
        "Wir brauchen mind. 10 Stk. davon.",
        "Siehe Nr. 5 bzw. Nr. 6 im Anhang.",
        "Das Auto hat Bj. 2010 und Gr. 42 passt.",
    ],
)
def test_german_units_before_numbers_end_no_sentence(sentence):
    assert sentences(sentence, "de") == [sentence]


def test_short_sentences_still_join_a_neighbour():
    text = "Thanks! :) see you at the game tonight."
    assert sentences(text, minimum=12) == [text]


PIECES = [
    "word", "Word", "mRNA", "approx.", "e.g.", "U.S.", "max.", ":)", ":-(", ";D", ":", ";",
    "10:30", ".", "!", "?", "...", "…", '"', "“", "”", "«", "»", "(", ")", " ", " ", " ", "\n",
    "\n\n", "- item\n", "\u00a0",
]  # fmt: skip
texts = st.lists(st.sampled_from(PIECES), max_size=50).map("".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, language=st.sampled_from(["en", "de", "fr"]), minimum=st.integers(1, 15))
def test_offsets_stay_exact_with_smileys_and_lower_case_starts(text, language, minimum):
    config = ChunkingConfig(language=language, min_sentence_length=minimum, max_candidate_chars=60)
    check_exact(text, segment(text, config))
