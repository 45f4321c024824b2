"""Where sentences end, per language: abbreviations, ordinal numbers, quotation marks.

`segment` asks one `SentenceRules` object (chosen by `ChunkingConfig.language`) whether a
terminator ends a sentence. English is the default (a configuration without `language` keeps the
fingerprint it always had). German, French, Spanish and Italian add, on top of the English
abbreviations that are not ordinary words of the language:

- their own abbreviations ("Abs.", "Nr.", "bzw.", "p. ex.", "Sra.", "Dott."), and number
  abbreviations that are words elsewhere ("Art. 5" but "auf diese Art. Dann");
- German ordinal numbers: "am 1. Januar", "im 19. Jahrhundert" ("im Jahr 2020. Danach" ends);
- a number that opens a sentence is a label, not a sentence ("2. Die Regel");
- their quotation marks („…“, »…«, « … », «…»): a closing mark after the terminator stays with
  its sentence, an opening one before the next word is skipped when reading that word;
- an ellipsis followed by a capital ends a sentence (English too), except "[…]" and "(...)".

English and Italian let a sentence start in lower case after a word that is no abbreviation
(web and newspaper text: "call them. they haven't"); in English a smiley ends its sentence and
a quotation of several sentences splits at their ends unless the outer sentence goes on.

`language="auto"` picks the rules per text by the function words in its first 1,000 characters:
deterministic, one pass, and English when the evidence is thin or tied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

LANGUAGES = ("en", "de", "fr", "es", "it")

# --- English (the default) ------------------------------------------------------------------
# The pattern starts with a character class (the first character of every alternative) so that
# the regex engine skips to the next possible end in C instead of trying the whole pattern at every
# position; each alternative then checks by a lookbehind which character that was. So `term`
# holds the terminator's characters after its first (the terminator is
# `text[match.start():match.end("term")]`), `para` and `cjk` theirs after the first. Matches are
# those of the plain alternation `(?P<para>\n[^\S\n]*\n\s*)|(?P<term>\.{2,}|…+|[.!?‼⁇⁈⁉]+)...`,
# alternative for alternative and in the same order of backtracking. `emo` is a smiley standing
# as a word after whitespace (":)", ":-(", ";D"): it ends its sentence as a terminator would.
_EMOTICON_END = r"(?<=\s[:;])(?P<emo>-?[()DPp]+(?=\s|\Z))"
_SENTENCE_END = re.compile(
    rf"""
    [\n.!?…‼⁇⁈⁉。！？｡:;]
    (?:(?<=\n)(?P<para>[^\S\n]*\n\s*)
    |(?P<term>(?<=\.)\.+|(?<=…)…*|(?<=[.!?‼⁇⁈⁉])[.!?‼⁇⁈⁉]*)(?P<close>["'”’»)\]}}›]*)(?P<ws>\s+)
    |(?<=[。！？｡])(?P<cjk>[。！？｡]*[」』”’）】〕〉》"']*)
    |{_EMOTICON_END})
    """,
    re.VERBOSE,
)
#: A smiley (see `emo` above) where the next word would start: it belongs to the sentence before.
EMOTICON = re.compile(r"[:;]-?[()DPp]+(?=\s|\Z)")
_OPENERS = "\"'“‘([{«¿¡‹"
_ABBREVIATIONS_WORDS = """
mr mrs ms mx dr prof sr jr st mt ft gen col lt maj sgt capt cmdr adm gov rev hon pres
sen rep messrs mme mlle esq vs cf viz approx ca dept est inc ltd co corp llc bros al ed
eds trans jan feb mar apr jun jul aug sep sept oct nov dec
"""
_ABBREVIATIONS = frozenset(_ABBREVIATIONS_WORDS.split())
# Abbreviations that are ordinary words unless a number follows ("No. 5", "p. 12", "Fig. 3").
_NUMBER_ABBREVIATIONS_WORDS = """
no nos nr fig figs p pp vol vols ch sec eq art op ref max min
"""
_NUMBER_ABBREVIATIONS = frozenset(_NUMBER_ABBREVIATIONS_WORDS.split())
# Abbreviations that are ordinary words before a capital ("I paid in min. The") but not before
# a lower-case word ("approx. three", "5 min. later", "Bacillus sp. strain").
_LOWER_ABBREVIATIONS_WORDS = """
incl excl esp min mins max avg govt univ assn natl intl mgmt misc yr yrs hr hrs sec secs
lb lbs oz tbsp tsp sq mi cu pt qt gal wt ht resp ibid cit abbr orig repr var subsp spp sp
ssp fl approx dept ref refs suppl vs ave blvd rd ext tel assoc acad proc wk wks mos pg pgs ex
illus eqs chap sect para paras kg
"""
_LOWER_ABBREVIATIONS = frozenset(_LOWER_ABBREVIATIONS_WORDS.split())
_BRACKETS = (("(", ")"), ("[", "]"), ("“", "”"), ("«", "»"))
_OPENING = re.compile(r'[(\[“«"]')

_QUOTATION_MARKS = '"”»“'
#: Dotted abbreviations of any language: "e.g", "U.S", "Ph.D", "a.m", "z.B", "S.p.A".
DOTTED_ABBREVIATION = re.compile(r"(?:[^\W\d_]{1,3}\.)+[^\W\d_]{1,3}")
#: How far ahead a quotation mark or bracket may close to keep a terminator inside it.
LOOKAHEAD_CHARS = 300


@dataclass(frozen=True, slots=True)
class SentenceRules:
    """What one language's sentence ends look like (see the module docstring).

    `abbreviations` never end a sentence; `end_before_capital` ("etc.", "usw.") ends one only
    before a capital; `number_abbreviations` do not end one before a digit. `ordinal_next` and
    `ordinal_after` make "<number>. Word" an ordinal (by the word after, by the word before);
    with `number_labels` a number opening its sentence is a label; `spaced_closers` may close a
    quotation after a space («… »); with `elision` "l'art." is read as "art.". With
    `lower_starts` a sentence may begin in lower case (web text): a terminator attached to a word
    ends one before a lower-case word too, unless it closes a quotation or bracket, follows an
    ellipsis, or the word is an abbreviation (`abbreviation_before_lower`).
    """

    language: str
    sentence_end: re.Pattern[str]
    openers: str
    abbreviations: frozenset[str]
    number_abbreviations: frozenset[str]
    end_before_capital: frozenset[str]
    brackets: tuple[tuple[str, str], ...]
    opening: re.Pattern[str]
    ordinal_next: frozenset[str] = frozenset()
    ordinal_after: frozenset[str] = frozenset()
    number_labels: bool = False
    ellipsis_ends: bool = False
    bracket_ends_abbreviation: bool = False
    spaced_closers: str = ""
    elision: bool = False
    lower_starts: bool = False
    lower_abbreviations: frozenset[str] = frozenset()
    quoted_sentences: bool = False

    def abbreviation_before_lower(self, word: str) -> bool:
        """Whether `word` (lower case, its period removed) before a lower-case word is an
        abbreviation, not a sentence that ends: any of the lists, or no letter in it."""
        return (
            word in self.number_abbreviations
            or word in self.lower_abbreviations
            or word in self.end_before_capital
            or not any(c.isalpha() for c in word)
            or "/" in word  # a link cut by a space: "https://www.ncbi. nlm.nih.gov"
        )


def inside_enclosure(rules: SentenceRules, text: str, start: int, cut: int, stop: int) -> bool:
    """Whether the sentence end at `cut` lies inside brackets or a quotation opened in
    `text[start:cut]` that closes within `LOOKAHEAD_CHARS`: then it ends no outer sentence. With
    `rules.quoted_sentences`, a quotation keeps it only when the outer sentence goes on after the
    closing mark ('He said "Stop. Now." and left'), not when the quotation ends it (a quoted
    letter of several sentences)."""
    segment = text[start:cut]
    horizon = min(stop, cut + LOOKAHEAD_CHARS)
    enclosures = [*rules.brackets, ('"', '"')]
    for opener, closer in enclosures:
        if opener == closer:
            opened = segment.count(opener) % 2 == 1
        else:
            opened = segment.count(opener) > segment.count(closer)
        close = text.find(closer, cut, horizon) if opened else -1
        if close < 0:
            continue
        if not (rules.quoted_sentences and closer in _QUOTATION_MARKS):
            return True
        if not text[cut:close].strip() or _goes_on(text, close + 1, stop):
            return True  # it closes right here ('"Stop. "'), or the outer sentence goes on
    return False


def _goes_on(text: str, position: int, stop: int) -> bool:
    """Whether a sentence continues at `position`: its next character (past whitespace and
    closing marks) is lower case or punctuation inside a sentence."""
    while position < stop and (text[position].isspace() or text[position] in _CLOSERS):
        position += 1
    return position < stop and (text[position].islower() or text[position] in ",;:-–—")


ENGLISH = SentenceRules(
    language="en",
    sentence_end=_SENTENCE_END,
    openers=_OPENERS,
    abbreviations=_ABBREVIATIONS,
    number_abbreviations=_NUMBER_ABBREVIATIONS,
    end_before_capital=frozenset({"etc"}),
    brackets=_BRACKETS,
    opening=_OPENING,
    ellipsis_ends=True,
    lower_starts=True,
    lower_abbreviations=_LOWER_ABBREVIATIONS,
    quoted_sentences=True,
)

# --- German, French, Spanish, Italian --------------------------------------------------------
_CLOSERS = "\"'“”‘’«»‹›)\\]}"


def _sentence_end(spaced_closers: str) -> re.Pattern[str]:
    """The sentence-end regex (as English's, see `_SENTENCE_END`) with every quotation mark as a
    possible closer after the terminator (an opening mark would follow whitespace), and
    optionally one closer after a space."""
    spaced = f"(?:[^\\S\\n](?P<spaced>[{spaced_closers}])(?=\\s))?" if spaced_closers else ""
    return re.compile(
        rf"""
        [\n.!?…‼⁇⁈⁉。！？｡:;]
        (?:(?<=\n)(?P<para>[^\S\n]*\n\s*)
        |(?P<term>(?<=\.)\.+|(?<=…)…*|(?<=[.!?‼⁇⁈⁉])[.!?‼⁇⁈⁉]*)
         (?P<close>[{_CLOSERS}]*{spaced})(?P<ws>\s+)
        |(?<=[。！？｡])(?P<cjk>[。！？｡]*[」』”’）】〕〉》"']*)
        |{_EMOTICON_END})
        """,
        re.VERBOSE,
    )


_MONTHS_DE = """
januar jänner februar feber märz april mai juni juli august september oktober november
dezember jan jän feb febr mär apr jun jul aug sep sept okt nov dez
"""
_LANGUAGE_DATA: dict[str, dict[str, str]] = {
    "de": {
        "abbreviations": """
            abs nr nrn mio mrd tsd ca bzw evtl ggf inkl exkl zzgl vgl bspw sog ggü bzgl allg
            ehem einschl gem lt jh jhd jhdt hrsg bd bde aufl ziff abschn anm str tel fa hr
            hrn fr dipl ing univ geb gest verh std min sek rd urspr usf ebd bsp dt engl franz
            lat griech ev kath mwst zt jän feb febr mär apr jun jul aug sep sept okt nov dez
            mo di mi do sa abt abg akad anl ausg bearb beil betr bes dgl dr dres entspr erg erw
            gegr gez hl hptst jhs lfd lkr mind mtl nachf od ord orig pfd pkt priv prof rel reg
            resp röm schr sen sr stellv stv tägl verf verw vorm vors wg wiss zb zit zus zzt
            ggfs stk stck insg insges durchschn anh lfg whg gew pers hausnr rdnr ztr
        """,
        "number_abbreviations": "art kap abb tab fn rn bd nr max jg kl gr bj rz pos zi bl hs",
        "end_before_capital": "etc usw uvm",
        "ordinal_next": _MONTHS_DE
        + """
            jahrhundert jahrhunderts jahrhunderte jahrhunderten jahrtausend jahrtausends jh
            jhd jhdt geburtstag geburtstags todestag todestags jahrestag jahrestags
        """,
        "ordinal_after": """
            am im vom zum zur beim ins der die das den dem des ein eine einem einen einer
            eines sein seine seinem seinen seiner seines ihr ihre ihrem ihren ihrer ihres
            unser unsere unserem unseren unserer unseres jeden jedem jeder jedes
        """,
        # A first name among the English abbreviations: "Das ist Jan."
        "not_abbreviations": "jan",
    },
    "fr": {
        "abbreviations": """
            ex env av apr mm mgr pr ste vol chap éd al coll janv févr fév avr juil oct
            nov déc lun ven dim resp réf tél bd boul cie ibid id cit sq sqq suiv c.-à-d dép
            éts gén cdt sté adj fam trad préf hôp univ anc ms mss min nb
        """,
        "number_abbreviations": "art t n chap",
        "end_before_capital": "etc",
        # Ordinary French words among the English abbreviations: "Ils sont sept." "à l'est."
        "not_abbreviations": "sept est col",
    },
    "es": {
        "abbreviations": """
            sra srta sres sras dra dres dña ud uds vd vds lic ing arq mtro mtra gral cnel tte
            sto sta pág págs pag núm num arts cap caps aprox ej av avda cía cia tel tlf admón
            adm depto dpto dcha izq izda sig sigs ilmo ilma excmo excma mons fdo máx mín
            ene abr may ago dic lun mié jue vie sáb dom esq ntra ntro nro pza prov coord cit
            trad
        """,
        "number_abbreviations": "art cap",
        "end_before_capital": "etc hab",
        # Ordinary Spanish words among the English abbreviations: "Fuimos al mar."
        "not_abbreviations": "mar col",
    },
    "it": {
        "abbreviations": """
            sig sigg dott ing avv arch geom rag on egr gent spett mons cav comm ecc es pag pagg
            artt capp cfr nn sez par lett segg sgg cit trad cod reg dir min gg mld mln tab
            fasc vd ved gen feb apr mag giu lug ago sett ott nov dic lun mer gio ven sab dom
            dr prof
        """,
        "number_abbreviations": "art cap n pag",
        "end_before_capital": "etc ecc",
        # An ordinary Italian word among the English abbreviations: "Si trova a est."
        "not_abbreviations": "est",
    },
}
_BRACKETS_BY_LANGUAGE: dict[str, tuple[tuple[str, str], ...]] = {
    # Not ("“", "”"): “ closes German quotations.
    "de": (("(", ")"), ("[", "]"), ("„", "“"), ("»", "«"), ("«", "»"), ("‚", "‘")),
    "fr": (("(", ")"), ("[", "]"), ("«", "»"), ("“", "”"), ("‹", "›")),
    "es": (("(", ")"), ("[", "]"), ("«", "»"), ("“", "”")),
    "it": (("(", ")"), ("[", "]"), ("«", "»"), ("“", "”")),
}
_SPACED_CLOSERS = {"fr": '»›”"'}
#: Languages that elide articles onto the next word: the abbreviation of "l'art." is "art".
_ELISION = ("fr", "it")
#: Languages whose texts start sentences in lower case often enough to split there (Italian
#: newspaper text: "Tudjman, l'arte della vendetta. messo in ginocchio dai serbi").
_LOWER_STARTS = ("it",)


@cache
def rules_for_language(language: str) -> SentenceRules:
    """The sentence rules of one of `LANGUAGES` (built once per process)."""
    if language == "en":
        return ENGLISH
    if language not in _LANGUAGE_DATA:
        raise ValueError(f"language={language!r}: choose one of {', '.join(LANGUAGES)} or auto")
    data = _LANGUAGE_DATA[language]
    words = {key: frozenset(value.split()) for key, value in data.items()}
    end_before_capital = words["end_before_capital"]
    # English abbreviations that are ordinary words here end a sentence, except before a number.
    ordinary = words["not_abbreviations"]
    abbreviations = ((_ABBREVIATIONS - ordinary) | words["abbreviations"]) - end_before_capital
    brackets = _BRACKETS_BY_LANGUAGE[language]
    opening_marks = "".join(dict.fromkeys(o for o, _ in brackets)) + '"'
    spaced = _SPACED_CLOSERS.get(language, "")
    return SentenceRules(
        language=language,
        sentence_end=_sentence_end(re.escape(spaced)),
        openers=_OPENERS + "„‚»›",
        abbreviations=abbreviations,
        number_abbreviations=_NUMBER_ABBREVIATIONS | words["number_abbreviations"] | ordinary,
        end_before_capital=end_before_capital,
        brackets=brackets,
        opening=re.compile("[" + re.escape(opening_marks) + "]"),
        ordinal_next=words.get("ordinal_next", frozenset()),
        ordinal_after=words.get("ordinal_after", frozenset()),
        number_labels=True,
        ellipsis_ends=True,
        bracket_ends_abbreviation=True,
        spaced_closers=spaced,
        elision=language in _ELISION,
        lower_starts=language in _LOWER_STARTS,
    )


# --- language="auto" --------------------------------------------------------------------------
#: Frequent function words that tell the languages apart (words shared by two count for both).
_FUNCTION_WORDS: dict[str, str] = {
    "en": "the and of to is was that with for are this be have from which were not",
    "de": "der die und das ist nicht mit den dem des sich auf ein eine auch wird werden für "
    "von zu im bei wir",
    "fr": "le les et des est une du que dans pour pas qui sur au aux avec sont ce cette nous "
    "mais il",
    "es": "el los las y del es por una con para se que lo como más pero su sus al fue está",
    "it": "il di che è e per una non del della con sono gli nel nella alla anche come più ma dei",
}
_FUNCTION_WORD_SETS = {
    language: frozenset(words.split()) for language, words in _FUNCTION_WORDS.items()
}
AUTO_SAMPLE_CHARS = 1_000
_AUTO_MIN_EVIDENCE = 4


def detect_language(text: str) -> str:
    """The most likely of `LANGUAGES` for `text`: the one with the most different function words
    in its first 1,000 characters; "en" when it has fewer than 4 or two languages tie
    (deterministic)."""
    present = set(text[:AUTO_SAMPLE_CHARS].lower().split())  # function words stand alone
    votes = [(len(present & words), language) for language, words in _FUNCTION_WORD_SETS.items()]
    best = max(count for count, _ in votes)
    winners = [language for count, language in votes if count == best]
    if best < _AUTO_MIN_EVIDENCE or len(winners) > 1:
        return "en"
    return winners[0]


def sentence_rules(language: str, text: str) -> SentenceRules:
    """The rules for `text` under `ChunkingConfig.language` ("auto" looks at the text)."""
    if language == "auto":
        language = detect_language(text)
    return rules_for_language(language)
