"""Candidates: sentences and structural units with exact character offsets (stage 1).

A candidate is the smallest unit the chunker may place a boundary around. Offsets are exact:
`text[c.start_char:c.end_char]` is the candidate, candidates are in order, never overlap, start
and end at non-whitespace, and everything between two candidates is whitespace. So anyone can
rebuild the text from the offsets, and "no text lost" is checkable.

One block-level regex finds the Markdown structure (code, headings, tables, list items, rules);
the prose between goes through one sentence-end regex, and Python looks only at potential ends.

Sentence rules: a sentence ends at `.`, `!`, `?` (plus closing quotes/brackets) followed by
whitespace and the next word (in lower case only where the rules allow it, as English does for
web text; any word when the terminator stands apart, as in tokenised text: "end . next"), at a
smiley standing as a word, or at CJK `。！？` (no space needed).
Not at abbreviations (Dr., e.g., U.S., No. 5), single-letter initials, ellipses, inside brackets
or quotes that close soon after, nor at `.` without following whitespace (decimals, versions,
URLs, e-mail addresses). A single line break is not a sentence end (hard-wrapped text); a blank
line ends a paragraph. Sentences shorter than `min_sentence_length` characters are joined to a
neighbour in the same paragraph, never dropped. These are the English rules (`language="en"`,
the default); German, French, Spanish and Italian add their abbreviations, ordinal dates ("am 1.
Januar") and quotation marks („…“, « … »): see `chunking.sentence_rules`.

A unit over the limit (`chunk_size_max`, or `max_candidate_chars`) is split into pieces flagged
`split=True`: tables by rows (each later piece records the header span), code by lines,
sentences at clause punctuation, then whitespace, then between characters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields

from seams.chunking.config import ChunkingConfig
from seams.chunking.pieces import PieceSplitter, Span, TokenCounterFn, skip_space, trim
from seams.chunking.sentence_rules import (
    DOTTED_ABBREVIATION,
    EMOTICON,
    SentenceRules,
    inside_enclosure,
    sentence_rules,
)
from seams.chunking.tokens import count_tokens, resolve_token_counter

KINDS = ("sentence", "heading", "list_item", "table", "code", "rule", "fragment", "lead_in")

INTRODUCED = frozenset({"list_item", "table", "code"})
"""Blocks a line ending in a colon introduces: that line (kind "lead_in") and the block are
one unit for boundaries, so a reader never gets "Three parameters control it:" without them."""

BINDS_NEXT = frozenset({"heading", "lead_in"})
"""Kinds that belong with what follows them: no boundary right after one."""


def introduced_gaps(candidates: Sequence[Candidate]) -> list[bool]:
    """Per gap i (before candidate i; index 0 unused, n + 1 entries): whether it lies inside a
    block a lead-in introduced (between two of its list items, table pieces or code pieces).
    With the gap after the lead-in itself, these make the lead-in and its block one unit for
    boundaries; only a size cap may cut inside (never right after the lead-in)."""
    n = len(candidates)
    inside = [False] * (n + 1)
    for i in range(1, n):
        if candidates[i - 1].kind == "lead_in":
            kind = candidates[i].kind
            j = i + 1
            while j < n and candidates[j].kind == kind:
                inside[j] = True
                j += 1
    return inside


@dataclass(frozen=True, slots=True)
class Candidate:
    """One sentence or structural unit: `text[start_char:end_char]`.

    `section` is the heading path ("Intro > Setup", "" before the first heading); `paragraph`
    counts blocks and blank-line paragraphs, so a change of value means a paragraph break before
    this candidate. `split` marks a piece of a longer unit cut to fit the size limit; for a piece
    of a table after the first, `header_start:header_end` is the table header it belongs under.
    """

    index: int
    start_char: int
    end_char: int
    kind: str
    section: str
    token_count: int
    paragraph: int
    split: bool = False
    header_start: int | None = None
    header_end: int | None = None

    def text_of(self, text: str) -> str:
        """This candidate's text in the document it came from."""
        return text[self.start_char : self.end_char]


# Candidates are made in bulk (one per sentence), and a frozen dataclass's __init__ sets each
# field through object.__setattr__, several times slower than the slots' own setters used here.
_CANDIDATE_FIELDS = (
    "index",
    "start_char",
    "end_char",
    "kind",
    "section",
    "token_count",
    "paragraph",
    "split",
    "header_start",
    "header_end",
)
if tuple(f.name for f in fields(Candidate)) != _CANDIDATE_FIELDS:  # pragma: no cover
    raise RuntimeError("Candidate's fields changed: update _CANDIDATE_FIELDS and _candidate")
_new_object = object.__new__
(
    _set_index,
    _set_start,
    _set_end,
    _set_kind,
    _set_section,
    _set_tokens,
    _set_paragraph,
    _set_split,
    _set_header_start,
    _set_header_end,
) = (getattr(Candidate, name).__set__ for name in _CANDIDATE_FIELDS)


def _candidate(
    index: int,
    start: int,
    end: int,
    kind: str,
    section: str,
    tokens: int,
    paragraph: int,
    split: bool = False,
    header_start: int | None = None,
    header_end: int | None = None,
) -> Candidate:
    """`Candidate(...)` with the same arguments, made faster (see `_CANDIDATE_FIELDS`)."""
    candidate = _new_object(Candidate)
    _set_index(candidate, index)
    _set_start(candidate, start)
    _set_end(candidate, end)
    _set_kind(candidate, kind)
    _set_section(candidate, section)
    _set_tokens(candidate, tokens)
    _set_paragraph(candidate, paragraph)
    _set_split(candidate, split)
    _set_header_start(candidate, header_start)
    _set_header_end(candidate, header_end)
    return candidate


def candidate_texts(text: str, candidates: Sequence[Candidate]) -> list[str]:
    """The candidates' texts, in order."""
    return [text[c.start_char : c.end_char] for c in candidates]


# --- block structure -------------------------------------------------------------------------
_FENCE = r"""(?P<fence>^[ ]{0,3}(?P<fchar>`{3,}|~{3,})[^\r\n]*
        (?:\r?\n(?:(?s:.*?)\r?\n)?[ ]{0,3}(?P=fchar)[`~]*[ \t]*(?=\r?$)|(?s:.*)\Z))"""
_HEADING = r"(?P<heading>^[ ]{0,3}\#{1,6}(?:[ \t][^\r\n]*)?(?=\r?$))"
_TABLE = r"(?P<table>^[ ]{0,3}\|[^\r\n]*(?:\r?\n[ ]{0,3}\|[^\r\n]*)+)"
_GFM_TABLE = r"""(?P<gfmtable>^[ ]{0,3}[^\s|][^\r\n]*\|[^\r\n]*\r?\n
        [ ]{0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)+\|?[ \t]*(?=\r?$)
        (?:\r?\n(?![ \t]*\r?$)[^\r\n]*\|[^\r\n]*)*)"""
_RULE = r"(?P<rule>^[ ]{0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})(?=\r?$))"
_ITEM = r"""(?P<item>^[ \t]*(?:[-*+•‣◦]|\d{1,3}[.)])[ \t]+\S[^\r\n]*
        (?:\r?\n
           (?![ \t]*\r?$)
           (?![ \t]*(?:[-*+•‣◦]|\d{1,3}[.)])[ \t]+\S)
           (?![ ]{0,3}(?:\#{1,6}(?:[ \t]|\r?$)|`{3}|~{3}|\|))
           (?![ ]{0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})\r?$)
           [^\r\n]*)*)"""
_SETEXT = r"(?P<setext>^[ ]{0,3}\S[^\r\n]*\r?\n[ ]{0,3}(?:=+|-+)[ \t]*(?=\r?$))"
_INDENTED = r"""(?P<indented>^(?:[ ]{4}|[ ]{0,3}\t)[^\r\n]*\S[^\r\n]*
        (?:\r?\n(?:(?:[ ]{4}|[ ]{0,3}\t)[^\r\n]*|[ \t]*(?=\r?\n(?:[ ]{4}|[ ]{0,3}\t))))*)"""
# Tried at the start of a line that looks structural (see _LINE_HINT), in this order.
_BLOCK = re.compile(
    "|".join((_FENCE, _HEADING, _TABLE, _RULE, _ITEM, _SETEXT, _INDENTED)),
    re.MULTILINE | re.VERBOSE,
)
# Blocks whose marker is on their second line: tried at the line before a structural-looking one.
_TWO_LINE_BLOCK = re.compile("|".join((_GFM_TABLE, _SETEXT)), re.MULTILINE | re.VERBOSE)
# Lines that may start a block: a marker character after indentation, or code indentation.
# Scanning for these (a literal newline first, so the regex engine skips fast) instead of trying
# the block regex at every position keeps segmentation linear and quick on prose.
_LINE_HINT = re.compile(r"\n(?=[ \t]*[#`~|*+_•‣◦=:\d-]|[ ]{4}|[ ]{0,3}\t)")
_TABLE_DELIMITER = re.compile(r"[ ]{0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*\r?")
_HEADING_TITLE = re.compile(r"^[ \t]*#{1,6}[ \t]*|[ \t]+#+[ \t]*$|[ \t]*$")
_BLANK_BEFORE = re.compile(r"(?:\A|\n)[^\S\n]*\n[^\S\n]*\Z")

# --- sentences (the rules per language live in chunking.sentence_rules) ----------------------
_PARA_BREAK = re.compile(r"\n[^\S\n]*\n")
_NON_SPACE = re.compile(r"\S")


@dataclass(slots=True)
class _Raw:
    start: int
    end: int
    kind: str
    section: str
    paragraph: int
    header: Span | None = None


def segment(
    text: str,
    config: ChunkingConfig | None = None,
    token_counter: TokenCounterFn | None = None,
) -> list[Candidate]:
    """Split `text` into candidates (sentences and structural units) with exact offsets.

    `token_counter` counts tokens without special tokens (see `chunking.tokens`); without one the
    conservative heuristic is used. Empty or whitespace-only text gives no candidates.
    """
    config = config or ChunkingConfig()
    counter = resolve_token_counter(token_counter, config)
    raws = _Segmenter(text, config).run()
    if not raws:
        return []
    counts = count_tokens(counter, [text[r.start : r.end] for r in raws])
    return _bound_sizes(text, raws, counts, config, counter)


class _Segmenter:
    """Block structure first, then sentences inside prose blocks."""

    def __init__(self, text: str, config: ChunkingConfig):
        self.text = text
        self.config = config
        self.raws: list[_Raw] = []
        self.paragraph = -1
        self.headings: list[tuple[int, str]] = []
        self.section = ""
        self.rules: SentenceRules = sentence_rules(config.language, text)
        self.term_group = self.rules.sentence_end.groupindex["term"]
        self.abbreviations = self.rules.abbreviations | {
            a.strip().rstrip(".").lower() for a in config.extra_abbreviations
        }
        self.last_block_kind = ""

    def run(self) -> list[_Raw]:
        text = self.text
        pos = 0  # end of the last accepted block
        line_starts = [0, *(m.end() for m in _LINE_HINT.finditer(text))] if text else []
        for line_start in line_starts:
            if line_start < pos:
                continue
            match = None
            if line_start > 0:
                previous = text.rfind("\n", 0, line_start - 1) + 1
                if previous >= pos:
                    two_line = _TWO_LINE_BLOCK.match(text, previous)
                    if two_line and self._accept(two_line.lastgroup or "", two_line, pos):
                        match = two_line
            if match is None:
                one = _BLOCK.match(text, line_start)
                if one and self._accept(one.lastgroup or "", one, pos):
                    match = one
            if match is None:
                continue
            if match.start() > pos:
                self._prose(pos, match.start())
            self._block(match.lastgroup or "", match)
            pos = match.end()
        if pos < len(text):
            self._prose(pos, len(text))
        return self.raws

    # -- structural blocks ------------------------------------------------------------------
    def _accept(self, kind: str, match: re.Match[str], pos: int) -> bool:
        config = self.config
        if kind == "fence":
            return config.detect_code
        if kind in {"heading", "setext"}:
            if not config.detect_headings:
                return False
            if kind == "heading" or self._blank_before(match.start()):
                return True
            # Directly under another block (a rule, a table): nothing of a paragraph above it.
            return bool(self.raws) and not _NON_SPACE.search(self.text, pos, match.start())
        if kind in {"table", "gfmtable"}:
            return config.detect_tables
        if kind == "item":
            return config.detect_lists
        if kind == "rule":
            return True
        if kind == "indented":
            if not (config.detect_code and config.indented_code):
                return False
            if not self._blank_before(match.start()):
                return False
            after_item = self.last_block_kind == "list_item" and not _NON_SPACE.search(
                self.text, pos, match.start()
            )
            if after_item:
                return False  # an indented paragraph continuing a list item
            # A paragraph whose first line is indented goes on in the next, unindented line.
            return _next_line_blank(self.text, match.end())
        return False

    def _blank_before(self, start: int) -> bool:
        return start == 0 or bool(_BLANK_BEFORE.search(self.text, max(0, start - 64), start))

    def _block(self, kind: str, match: re.Match[str]) -> None:
        text = self.text
        start, end = trim(text, match.start(), match.end())
        if start >= end:
            return
        self.paragraph += 1
        if kind in {"heading", "setext"}:
            line_end = text.find("\n", start, end)
            first_line = text[start : line_end if line_end != -1 else end]
            if kind == "heading":
                marks = first_line.lstrip(" ")
                level = len(marks) - len(marks.lstrip("#"))
            else:
                level = 1 if text[line_end + 1 : end].strip().startswith("=") else 2
            title = _HEADING_TITLE.sub("", first_line).strip()
            while self.headings and self.headings[-1][0] >= level:
                self.headings.pop()
            if title:
                self.headings.append((level, title))
            self.section = " > ".join(t for _, t in self.headings)
            self._emit(start, end, "heading")
        elif kind == "fence" or kind == "indented":
            self._emit(start, end, "code")
        elif kind in {"table", "gfmtable"}:
            self._emit(start, end, "table", header=_table_header(text, start, end))
        elif kind == "item":
            self._emit(start, end, "list_item")
        else:
            self._emit(start, end, "rule")
        self.last_block_kind = self.raws[-1].kind if self.raws else ""

    def _emit(self, start: int, end: int, kind: str, header: Span | None = None) -> None:
        before = self.raws[-1] if self.raws else None
        if (
            kind in INTRODUCED
            and before is not None
            and before.kind == "sentence"
            and self.text[before.end - 1] == ":"
        ):
            before.kind = "lead_in"
        self.raws.append(_Raw(start, end, kind, self.section, self.paragraph, header))

    # -- prose ------------------------------------------------------------------------------
    def _prose(self, begin: int, stop: int) -> None:
        """Sentences of the prose between two blocks (may hold several paragraphs).

        The sentence-end regex finds every possible end in C (see `chunking.sentence_rules`);
        Python looks only at those, and `_is_sentence_end` settles the common one (a period
        attached to a word, whitespace, a capital) with a handful of string operations.
        """
        text = self.text
        first = _NON_SPACE.search(text, begin, stop)
        if first is None:
            return
        self.last_block_kind = "sentence"
        min_len = self.config.min_sentence_length
        raws = self.raws
        section = self.section
        sentence_start = first.start()
        self.paragraph += 1
        paragraph = self.paragraph
        paragraph_first = len(raws)  # index of this paragraph's first sentence

        def close(cut: int, next_start: int) -> None:
            nonlocal sentence_start
            end = cut
            while end > sentence_start and text[end - 1].isspace():
                end -= 1
            if end > sentence_start:
                if end - sentence_start < min_len and len(raws) > paragraph_first:
                    raws[-1].end = end  # too short: join the previous sentence
                else:
                    raws.append(_Raw(sentence_start, end, "sentence", section, paragraph))
            sentence_start = next_start

        spaced_closers = bool(self.rules.spaced_closers)
        sentence_end = self.rules.sentence_end
        # Groups by number: a name costs a dictionary lookup per call.
        group_number = sentence_end.groupindex
        close_group, ws_group = group_number["close"], group_number["ws"]
        spaced_group = group_number.get("spaced", 0)
        is_sentence_end = self._is_sentence_end
        find = text.find
        para_break = _PARA_BREAK.search
        for match in sentence_end.finditer(text, sentence_start, stop):
            group = match.lastgroup
            if group == "para":
                close(match.start(), match.end())
                if match.end() >= stop:
                    break
                paragraph += 1
                paragraph_first = len(raws)
                continue
            if group == "cjk" or group == "emo":
                cut = match.end()
                if cut - sentence_start >= min_len:
                    close(cut, skip_space(text, cut, stop))
                continue
            # group == "term": punctuation, closing quotes/brackets, whitespace
            cut = match.end(close_group)
            next_start = match.end()
            if spaced_closers and match.start(spaced_group) >= 0:
                mark = match.start(spaced_group)
                if text[mark] == '"' and text.count('"', sentence_start, match.start()) % 2 == 0:
                    cut, next_start = mark - 1, mark  # it opens the next sentence's quotation
            ws_start, ws_end = match.span(ws_group)
            if find("\n", ws_start, ws_end) >= 0 and para_break(text, ws_start, ws_end):
                close(cut, next_start)
                if next_start >= stop:
                    break
                paragraph += 1
                paragraph_first = len(raws)
                continue
            if next_start >= stop or cut - sentence_start < min_len:
                continue
            if is_sentence_end(match, sentence_start, cut, next_start, stop):
                close(cut, next_start)
        close(stop, stop)
        self.paragraph = paragraph

    def _is_sentence_end(
        self, match: re.Match[str], sentence_start: int, cut: int, next_start: int, stop: int
    ) -> bool:
        text = self.text
        rules = self.rules
        start = match.start()
        punct = text[start : match.end(self.term_group)]
        ellipsis = "…" in punct or punct.startswith("..")
        if ellipsis and not rules.ellipsis_ends:
            return False  # ellipses do not end a sentence
        # The next word: skip opening quotes and brackets.
        j = next_start
        openers = rules.openers
        while j < stop and text[j] in openers:
            j += 1
        following = text[j] if j < stop else ""
        if following in ":;" and EMOTICON.match(text, j, stop):
            return False  # "I love her. :) I have" ends after the smiley
        if ellipsis:
            # Before a capital, unless it marks an elision: "[…]", "(...)", "x_1, ..., X_n".
            before = text[start - 1] if start > 0 else ""
            listed = before.isspace() and text[max(0, start - 4) : start].rstrip()[-1:] == ","
            if not following.isupper() or before in ("[", "(") or listed:
                return False
        # A terminator set off by whitespace ("end . next", tokenised text) ends the sentence
        # whatever follows; attached to a word, a lower-case continuation means it does not.
        detached = start > sentence_start and text[start - 1].isspace()
        before_lower = following.islower() and not detached
        if before_lower and not (rules.lower_starts and cut == match.end(self.term_group)):
            return False
        if punct == "." and not (
            text[cut - 1] == ")" and rules.bracket_ends_abbreviation and following.isupper()
        ):  # "(Gruau par ex.) Ainsi": the bracket closes a sentence that ends in an abbreviation
            # The word before the period: back to whitespace, within the sentence and 40 chars.
            if detached or start == sentence_start:
                word_start, word = start, ""
            else:  # the last whitespace-free run (str.split and isspace agree on whitespace)
                word = text[max(sentence_start, start - 40) : start].rsplit(None, 1)[-1]
                word_start = start - len(word)
            word = word.lstrip(openers)
            if rules.elision and ("'" in word or "’" in word):
                word = word.replace("’", "'").rpartition("'")[2]  # "l'art.", "dell'art."
            lower = word.lower()
            if lower in self.abbreviations:
                return False
            if lower in rules.end_before_capital:
                return following.isupper()
            if lower in rules.number_abbreviations and following.isdigit():
                return False
            if before_lower and rules.abbreviation_before_lower(lower):
                return False
            if len(word) == 1 and word.isalpha():
                return False  # an initial: "J. R. R. Tolkien"
            if "." in word and DOTTED_ABBREVIATION.fullmatch(word):
                return False  # "e.g", "U.S", "Ph.D", "a.m"
            if rules.number_labels and word.isdigit():
                if word_start == sentence_start:
                    return False  # a label opening its sentence: "977. Enfiteusi", "2. Die"
                if rules.ordinal_after and self._is_ordinal(word, word_start, j, following):
                    return False
        # Inside brackets or quotes that close soon after: not the end of the outer sentence.
        if rules.opening.search(text, sentence_start, cut) is None:
            return True
        return not inside_enclosure(rules, text, sentence_start, cut, stop)

    def _is_ordinal(self, number: str, number_start: int, next_word: int, following: str) -> bool:
        """Whether "<number>." is an ordinal: "am 1. Januar", "im 19. Jahrhundert", "der 2.
        Weltkrieg", "1. 3. 2024"; not "im Jahr 2020." nor "Kapitel 3." (see `SentenceRules`)."""
        if len(number) > 3:
            return False  # a year
        rules = self.rules
        text = self.text
        if following.isdigit():
            return len(number) <= 2  # a date written with spaces
        end = next_word
        while end < len(text) and text[end].isalpha():
            end += 1
        if text[next_word:end].lower() in rules.ordinal_next:
            return True
        previous_end = number_start
        while previous_end > 0 and text[previous_end - 1] in " \t":
            previous_end -= 1
        previous_start = previous_end
        while previous_start > 0 and text[previous_start - 1].isalpha():
            previous_start -= 1
        return text[previous_start:previous_end].lower() in rules.ordinal_after


def _next_line_blank(text: str, pos: int) -> bool:
    """Whether the line after the one ending at `pos` is blank or absent."""
    newline = text.find("\n", pos)
    if newline == -1:
        return True
    following = text.find("\n", newline + 1)
    return not text[newline + 1 : following if following != -1 else len(text)].strip()


def _table_header(text: str, start: int, end: int) -> Span | None:
    """Header row + delimiter row of a pipe table, when the second line is a delimiter row."""
    first_nl = text.find("\n", start, end)
    if first_nl == -1:
        return None
    second_nl = text.find("\n", first_nl + 1, end)
    second_end = end if second_nl == -1 else second_nl
    if _TABLE_DELIMITER.fullmatch(text, first_nl + 1, second_end):
        return trim(text, start, second_end)
    return None


# --- size bounds -----------------------------------------------------------------------------
def _bound_sizes(
    text: str,
    raws: list[_Raw],
    counts: list[int],
    config: ChunkingConfig,
    counter: TokenCounterFn,
) -> list[Candidate]:
    """Candidates from raw spans, splitting any unit bigger than the limits."""
    unit = config.size_unit
    limit = config.chunk_size_max if config.chunk_size_max is not None else 2**62
    max_chars = min(config.max_candidate_chars, config.effective_chars_max() or 2**62)
    if unit == "chars":
        max_chars = min(max_chars, limit)
    candidates: list[Candidate] = []
    for raw, count in zip(raws, counts, strict=True):
        length = raw.end - raw.start
        too_big = length > max_chars or (unit == "tokens" and count > limit)
        if not too_big:
            candidates.append(
                _candidate(
                    len(candidates),
                    raw.start,
                    raw.end,
                    raw.kind,
                    raw.section,
                    count,
                    raw.paragraph,
                )
            )
            continue
        splitter = PieceSplitter(text, unit, limit, max_chars, counter)
        prose = raw.kind in {"sentence", "lead_in"}
        pieces = splitter.split(raw.start, raw.end, "sentence" if prose else raw.kind, raw.header)
        piece_counts = count_tokens(counter, [text[s:e] for s, e in pieces])
        for number, ((s, e), piece_count) in enumerate(zip(pieces, piece_counts, strict=True)):
            header = raw.header if raw.kind == "table" and number > 0 else None
            kind = "fragment" if prose else raw.kind
            if raw.kind == "lead_in" and number == len(pieces) - 1:
                kind = "lead_in"  # the piece that ends in the colon stays with its block
            candidates.append(
                _candidate(
                    len(candidates),
                    s,
                    e,
                    kind,
                    raw.section,
                    piece_count,
                    raw.paragraph,
                    split=True,
                    header_start=header[0] if header else None,
                    header_end=header[1] if header else None,
                )
            )
    return candidates
