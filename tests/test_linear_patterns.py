"""Patterns rewritten to run in linear time on long runs of one character (a tool output of
blank lines, spaces or digits), each held equal to the pattern it replaced, which stays here as
the reference; and whole commands on such inputs, under a watchdog."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from memdiag.text import _QUESTION_AT_START, _QUESTION_START, mask_non_statements
from tests.helpers import watchdog

# as it was: cubic on a run of newlines (two minutes for 1,000 blank lines)
_QUESTION_AT_START_BEFORE = re.compile(
    r"(?:^|[.!?;:]\s|\n)\s*(?:[-*•]\s*)?" + _QUESTION_START.pattern, re.I
)
QUESTION_PIECES = [
    "\n",
    " ",
    "  ",
    "\t",
    ".",
    "?",
    "!",
    ";",
    ":",
    "-",
    "*",
    "•",
    ",",
    "(",
    "'",
    "\u3000",
    "what",
    "What's",
    "do you",
    "Do I",
    "is there",
    "can we",
    "how",
    "x",
    "hello",
    "Mia",
    "_",
    "我",
    "1",
    "é",
]


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(QUESTION_PIECES), max_size=14).map("".join))
def test_question_at_start_is_the_old_pattern(text: str) -> None:
    assert (_QUESTION_AT_START.search(text) is None) == (
        _QUESTION_AT_START_BEFORE.search(text) is None
    )


def test_blank_runs_are_masked_in_linear_time() -> None:
    """Statements beside 100,000 blank lines, spaces or bullets are read (masked) at all. The
    run is followed by no question (the search's failing case, where the old pattern retried
    every newline), and the question after it has no "?" (which would end the search before
    the word order is looked for): it is blanked and the statement kept."""
    for run in ("\n", " \n", "\n- ", "\n\t"):
        text = "I'm allergic to peanuts." + run * 100_000 + "ok. What is my seat"
        with watchdog(60, f"masking a run of {run!r}"):
            masked = mask_non_statements(text)
        assert len(masked) == len(text)
        assert masked.startswith("I'm allergic to peanuts.")
        assert "What" not in masked  # the question is blanked


# the value patterns as they were: tried at every character of a whitespace run
_CLAUSE_WORDS_BEFORE = (
    r"\s+(?:but|so|because|since|though|although|which|who|when|if|while|unless|until|"
    r"except|as well|too|also|anymore|any more|please|thanks|thank you|"
    r"and (?:I|I'm|my|we|you|it|that|so|also|please|then)|or (?:I|my|we|you|so))\b.*$"
    r"|(?:但是|但|因为|所以|而且|可是|不过).*$"
)
_CLAUSE_BEFORE = re.compile(
    _CLAUSE_WORDS_BEFORE + r"|\s*[,，。；;:：!！?？(（].*$", re.IGNORECASE | re.DOTALL
)
_CLAUSE_LIST_BEFORE = re.compile(
    _CLAUSE_WORDS_BEFORE + r"|\s*[。；;:：!！?？(（].*$", re.IGNORECASE | re.DOTALL
)
_SPLIT_BEFORE = re.compile(
    r"\s*(?:,\s*(?:and|or)\s+|,|，|、|\band\b|\bor\b|&|\bplus\b|和|以及|及|跟|与)\s*"
)
VALUE_PIECES = [
    " ",
    "  ",
    "\n",
    "\t",
    "\u3000",
    ",",
    "，",
    "、",
    ";",
    ".",
    "!",
    "(",
    "&",
    "和",
    "以及",
    "但是",
    "and",
    "or",
    "plus",
    "but",
    "So",
    "I",
    "I'm",
    "you",
    "thank you",
    "peanuts",
    "x",
    "eggs",
]
value_text = st.lists(st.sampled_from(VALUE_PIECES), max_size=14).map("".join)


@settings(max_examples=1000, deadline=None)
@given(value_text)
def test_value_patterns_are_the_old_ones(text: str) -> None:
    from memdiag.extract import _CLAUSE, _CLAUSE_LIST, _SPLIT

    assert _CLAUSE.sub("", text) == _CLAUSE_BEFORE.sub("", text)
    assert _CLAUSE_LIST.sub("", text) == _CLAUSE_LIST_BEFORE.sub("", text)
    assert _SPLIT.split(text) == _SPLIT_BEFORE.split(text)


def test_values_across_long_whitespace_in_linear_time() -> None:
    """A value captured across 200,000 spaces (a rule's value runs to the sentence end) is
    trimmed and split at all."""
    from memdiag.extract import _CLAUSE, _CLAUSE_LIST, _SPLIT

    for run in (" ", "\t", " \u3000"):
        raw = "peanuts" + run * 200_000 + "x"
        with watchdog(60, f"trimming a value across a run of {run!r}"):
            assert _CLAUSE.sub("", raw + ", so what") == raw
            assert _CLAUSE_LIST.sub("", raw) == raw
            assert _SPLIT.split(raw + " and eggs") == [raw, "eggs"]


def _rules_before():  # type: ignore[no-untyped-def]
    """The built-in rules with the whitespace they had before a sentence end or line start:
    ``\\s*``, which crossed newlines (the rules now stop at one and start again after it)."""
    import dataclasses

    from memdiag.extract import Extractor, _builtin

    rules, fields = _builtin()
    changed = 0
    old = []
    for rule in rules:
        patterns = [p.replace(r"[^\S\n]*", r"\s*") for p in rule.patterns]
        changed += sum(a != b for a, b in zip(patterns, rule.patterns, strict=True))
        old.append(dataclasses.replace(rule, patterns=patterns))
    assert changed == 3  # en.prohibition's two sentence-start patterns, en.location.memory's
    return Extractor(old, dict(fields))


# a text is statements, each after a run of separators (blank lines, spaces, sentence ends,
# bullets) that the rules' starts look at
_SEPARATORS = st.lists(
    st.sampled_from(["\n", " ", "\t", "\r\n", ".", ",", ";", "-", "•", "*", "x"]), max_size=5
).map("".join)
_TRIGGERS = st.sampled_from(
    [
        "never",
        "Never",
        "Don't",
        "do not",
        "must not",
        "should never",
        "please never",
        "and don't",
        "Moved to",
        "lives in",
        "User lives in",
        "She moved to",
        "I",
        "no",
        "I'm allergic to",
    ]
)
_TAILS = st.sampled_from(
    ["", " book red-eye flights", " worry", " Lisbon", " Berlin", " eat pork", " peanuts"]
)
rule_text = st.lists(st.tuples(_SEPARATORS, _TRIGGERS, _TAILS).map("".join), max_size=4).map(
    "".join
)


@settings(max_examples=1500, deadline=None)
@given(rule_text)
def test_rules_find_what_they_found(text: str) -> None:
    """Every extraction (field, value, strength, span, rule) is what the rules found when the
    whitespace before a value crossed newlines."""
    from memdiag.extract import default_extractor

    before = _BEFORE.extract(text)
    assert default_extractor().extract(text) == before


_BEFORE = _rules_before()


def test_rules_over_blank_runs_in_linear_time() -> None:
    """A rule woken in a message with 100,000 blank lines reads it at all, and finds the rule
    after the run."""
    from memdiag.extract import default_extractor

    for run in ("\n", " \n", "\n\t"):
        text = "x." + run * 100_000 + "Don't book red-eye flights.\n- Moved to Lisbon"
        with watchdog(60, f"extracting across a run of {run!r}"):
            found = default_extractor().extract(text)
        assert {e.field for e in found} >= {"prohibition", "location"}


# the date pattern as it was: a run of numerals before 月/日/号 (quadratic in the run)
_DATE_BEFORE = re.compile(
    r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?\s+\d|\b\d{4}-\d{2}-\d{2}\b|"
    r"\b(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\b|[0-9一二三四五六七八九十]+[月日号]"
)
DATE_PIECES = [
    "1",
    "12",
    "2024",
    "-",
    "三",
    "十二",
    "月",
    "日",
    "号",
    "年",
    " ",
    "Jan",
    "Monday",
    "x",
    "\x00",
    "٣",
]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(DATE_PIECES), max_size=12).map("".join))
def test_date_feature_is_the_quadratic_pattern(text: str) -> None:
    """Whether a sentence holds a date is what the old pattern said (it tried every start in
    a run of numerals), alone and in the many-sentence scan."""
    from memdiag.strategies.summarizers import _DATE, _DATE_SCAN

    expected = _DATE_BEFORE.search(text) is not None
    assert (_DATE.search(text) is not None) == expected
    assert (_DATE_SCAN.search(text) is not None) == expected


def test_a_million_digits_are_scored() -> None:
    """A tool output of a million digits is scored, its date found (the old date pattern took
    hours on it)."""
    from memdiag.strategies.summarizers import ExtractiveSummarizer
    from memdiag.tokens import TokenCounter

    summarizer = ExtractiveSummarizer(TokenCounter())
    with watchdog(60, "scoring a million digits"):
        scores = summarizer.score_many([("user", "my log: " + "7" * 1_000_000 + " 3月 end")])
    # first person 2 + number 1 + date 1 + user 1
    assert scores == [summarizer.score("user", "my log: 7 3月 end")] == [5]
