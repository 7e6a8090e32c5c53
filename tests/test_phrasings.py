"""One fact model for every phrasing memory systems write (docs/reference.md#stores), and sentences
that state
nothing.

The matrix: every field of the built-in rules file × four phrasings (first person, third person
"User …"/"用户…", a named subject or pronoun, no subject) × English and Chinese. Each cell must
yield exactly one fact of that field with the expected value.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdiag.extract import default_extractor
from memdiag.text import as_first_person, mask_non_statements
from tests.conftest import FIXTURES

PHRASINGS = ("first", "third", "named", "bare")

# field -> language -> (expected value, {phrasing: text})
MATRIX: dict[str, dict[str, tuple[str, dict[str, str]]]] = {
    "name": {
        "en": (
            "Mia",
            {
                "first": "My name is Mia.",
                "third": "User's name is Mia.",
                "named": "The user is called Mia.",
                "bare": "Name is Mia",
            },
        ),
        "zh": (
            "小美",
            {
                "first": "我叫小美。",
                "third": "用户叫小美。",
                "named": "她叫小美。",
                "bare": "叫小美",
            },
        ),
    },
    "birthday": {
        "en": (
            "March 3",
            {
                "first": "My birthday is March 3.",
                "third": "The user's birthday is March 3.",
                "named": "Mia's birthday is March 3.",
                "bare": "Birthday is March 3",
            },
        ),
        "zh": (
            "3月5日",
            {
                "first": "我的生日是3月5日。",
                "third": "用户的生日是3月5日。",
                "named": "小美的生日是3月5日。",
                "bare": "生日是3月5日",
            },
        ),
    },
    "allergy": {
        "en": (
            "peanuts",
            {
                "first": "I'm allergic to peanuts.",
                "third": "User is allergic to peanuts.",
                "named": "Mia is allergic to peanuts.",
                "bare": "Is allergic to peanuts",
            },
        ),
        "zh": (
            "花生",
            {
                "first": "我对花生过敏。",
                "third": "用户对花生过敏。",
                "named": "小美对花生过敏。",
                "bare": "对花生过敏",
            },
        ),
    },
    "medical": {
        "en": (
            "asthma",
            {
                "first": "I have asthma.",
                "third": "User has asthma.",
                "named": "Mia has asthma.",
                "bare": "Has asthma",
            },
        ),
        "zh": (
            "糖尿病",
            {
                "first": "我有糖尿病。",
                "third": "用户有糖尿病。",
                "named": "小美有糖尿病。",
                "bare": "有糖尿病",
            },
        ),
    },
    "prohibition": {
        "en": (
            "never book Kyoto hotels",
            {
                "first": "Never book Kyoto hotels.",
                "third": "User says: never book Kyoto hotels.",
                "named": "Mia asked never to book Kyoto hotels.",
                "bare": "Asked never to book Kyoto hotels",
            },
        ),
        "zh": (
            "不要订京都的酒店",
            {
                "first": "请不要订京都的酒店。",
                "third": "用户要求不要订京都的酒店。",
                "named": "小美要求不要订京都的酒店。",
                "bare": "要求不要订京都的酒店",
            },
        ),
    },
    "timezone": {
        "en": (
            "UTC+8",
            {
                "first": "My time zone is UTC+8.",
                "third": "User's time zone is UTC+8.",
                "named": "Mia's time zone is UTC+8.",
                "bare": "Time zone is UTC+8",
            },
        ),
        "zh": (
            "UTC+8",
            {
                "first": "我的时区是东八区。",
                "third": "用户的时区是东八区。",
                "named": "小美的时区是东八区。",
                "bare": "时区是东八区",
            },
        ),
    },
    "units": {
        "en": (
            "metric",
            {
                "first": "I use metric units.",
                "third": "User uses metric units.",
                "named": "Mia uses metric units.",
                "bare": "Uses metric units",
            },
        ),
        "zh": (
            "metric",
            {
                "first": "我习惯用公制。",
                "third": "用户习惯用公制。",
                "named": "小美习惯用公制。",
                "bare": "习惯用公制",
            },
        ),
    },
    "diet": {
        "en": (
            "vegetarian",
            {
                "first": "I'm vegetarian.",
                "third": "User is vegetarian.",
                "named": "Mia is vegetarian.",
                "bare": "Is vegetarian",
            },
        ),
        "zh": (
            "吃素",
            {
                "first": "我吃素。",
                "third": "用户吃素。",
                "named": "小美吃素。",
                "bare": "吃素",
            },
        ),
    },
    "location": {
        "en": (
            "Berlin",
            {
                "first": "I live in Berlin.",
                "third": "User lives in Berlin.",
                "named": "Mia lives in Berlin.",
                "bare": "Lives in Berlin",
            },
        ),
        "zh": (
            "柏林",
            {
                "first": "我住在柏林。",
                "third": "用户住在柏林。",
                "named": "小美住在柏林。",
                "bare": "住在柏林",
            },
        ),
    },
    "job": {
        "en": (
            "nurse",
            {
                "first": "I work as a nurse.",
                "third": "User works as a nurse.",
                "named": "Mia works as a nurse.",
                "bare": "Works as a nurse",
            },
        ),
        "zh": (
            "护士",
            {
                "first": "我的工作是护士。",
                "third": "用户的工作是护士。",
                "named": "小美的工作是护士。",
                "bare": "工作是护士",
            },
        ),
    },
    "preference": {
        "en": (
            "window seats",
            {
                "first": "I prefer window seats.",
                "third": "User prefers window seats.",
                "named": "Mia prefers window seats.",
                "bare": "Prefers window seats",
            },
        ),
        "zh": (
            "靠窗的座位",
            {
                "first": "我喜欢靠窗的座位。",
                "third": "用户喜欢靠窗的座位。",
                "named": "小美喜欢靠窗的座位。",
                "bare": "喜欢靠窗的座位",
            },
        ),
    },
}

CELLS = [
    pytest.param(field, lang, phrasing, value, texts[phrasing], id=f"{field}-{lang}-{phrasing}")
    for field, langs in MATRIX.items()
    for lang, (value, texts) in langs.items()
    for phrasing in PHRASINGS
]


def test_matrix_covers_every_field_of_the_rules_file() -> None:
    assert set(MATRIX) == set(default_extractor().fields)
    assert len(CELLS) == len(default_extractor().fields) * 4 * 2


@pytest.mark.parametrize(("field", "lang", "phrasing", "value", "text"), CELLS)
def test_phrasing_matrix(field: str, lang: str, phrasing: str, value: str, text: str) -> None:
    found = default_extractor().read_memory(text)
    assert [(e.field, e.value) for e in found] == [(field, value)], as_first_person(text)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_first_person_reads_the_same_in_a_conversation(lang: str) -> None:
    """A user's own words need no rewriting: the transcript path finds the same facts."""
    ex = default_extractor()
    for field, langs in MATRIX.items():
        value, texts = langs[lang]
        assert [(e.field, e.value) for e in ex.extract(texts["first"])] == [(field, value)]


def test_a_name_in_a_conversation_is_not_the_user() -> None:
    """Only memories are about the user by default; in a chat, Mia may be a friend."""
    ex = default_extractor()
    assert ex.extract("Mia lives in Berlin.") == []
    assert ex.extract("My sister is allergic to peanuts.") == []


# --- key / category metadata --------------------------------------------------------------------


def test_metadata_key_names_the_fact() -> None:
    ex = default_extractor()
    (fact,) = ex.read_memory("User moved to Lisbon.", {"key": "home_city"})
    assert (fact.field, fact.value, fact.rule) == ("location", "Lisbon", "metadata.key")
    (fact,) = ex.read_memory("Prefers dark mode", {"key": "ui_theme", "value": "dark"})
    assert (fact.field, fact.value) == ("ui_theme", "dark")
    (fact,) = ex.read_memory("no peanuts, ever", {"key": "allergies"})
    assert fact.field == "allergy" and fact.strong


def test_category_stands_in_only_when_the_text_states_nothing() -> None:
    ex = default_extractor()
    (fact,) = ex.read_memory("peanuts and shellfish", {"category": "allergies"})
    assert (fact.field, fact.value, fact.strong) == ("allergy", "peanuts and shellfish", True)
    # the text's own fact wins over a broad category
    (fact,) = ex.read_memory("Is allergic to peanuts", {"category": "health"})
    assert (fact.field, fact.value) == ("allergy", "peanuts")
    assert ex.read_memory("Had a nice trip", {"category": "travel"}) == []


@pytest.mark.parametrize(
    "meta",
    [
        {"key": 3},
        {"key": None},
        {"key": ["home_city"], "value": True},
        {"key": ""},
        {"category": {"a": 1}},
        {"categories": []},
    ],
    ids=["int", "none", "list", "empty", "dict", "empty-list"],
)
def test_odd_metadata_types_are_ignored(meta: dict[str, object]) -> None:
    found = default_extractor().read_memory("Lives in Berlin", meta)
    assert [(e.field, e.value) for e in found] == [("location", "Berlin")]


# --- negation and questions -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (
            "You MUST NOT make any edits to the repository.",
            "MUST NOT make any edits to the repository",
        ),
        ("IMPORTANT: must not make any edits.", "must not make any edits"),
        ("You should never share my address.", "should never share my address"),
        ("I don't want you to call me before 9.", "don't want you to call me before 9"),
        (
            "If you book a hotel, never pick one next to the station.",
            "never pick one next to the station",
        ),
        ("用户要求不要订京都的酒店。", "不要订京都的酒店"),
    ],
)
def test_negation_stays_in_the_rule(text: str, value: str) -> None:
    found = default_extractor().read_memory(text)
    assert [(e.field, e.value) for e in found] == [("prohibition", value)]


def test_forgetting_is_not_negation() -> None:
    found = default_extractor().extract("Please don't forget that I'm vegetarian!")
    assert [(e.field, e.value) for e in found] == [("diet", "vegetarian")]


def test_masking_keeps_spans() -> None:
    text = 'Do you know where I live? I live in Lisbon. She said "I live in Rome".'
    masked = mask_non_statements(text)
    assert len(masked) == len(text)
    (found,) = default_extractor().extract(text)
    assert text[found.span[0] : found.span[1]] == "Lisbon"


# --- sentences that state nothing ------------------------------------------------------------


def _non_facts(path: Path) -> list[tuple[str, str]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            category, text = (x.strip() for x in line.split("|", 1))
            out.append((category, text))
    return out


NON_FACTS = _non_facts(FIXTURES / "phrasings" / "non_facts.txt")


def test_non_fact_set_is_large_and_varied() -> None:
    assert len(NON_FACTS) >= 50
    cats = {c for c, _ in NON_FACTS}
    assert {"question", "negated request", "hypothetical", "quote"} <= cats


@pytest.mark.parametrize(("category", "text"), NON_FACTS, ids=[t for _, t in NON_FACTS])
def test_sentences_that_state_nothing(category: str, text: str) -> None:
    ex = default_extractor()
    assert ex.extract(text) == [], category
    # ... also when a memory store holds them (the memory reading rewrites subjects first)
    if category != "other person":
        assert ex.read_memory(text) == [], category


@pytest.mark.parametrize(
    ("text", "fact"),
    [
        ("你好，我叫林晓，想在四月去日本玩两周，能帮我规划一下吗？", ("name", "林晓")),
        ("I'm allergic to peanuts, can you suggest a snack?", ("allergy", "peanuts")),
        ("I live in Berlin, right?", ("location", "Berlin")),
    ],
)
def test_a_statement_before_a_question_still_states(text: str, fact: tuple[str, str]) -> None:
    assert [(e.field, e.value) for e in default_extractor().extract(text)] == [fact]


def test_negation_ends_with_its_sentence() -> None:
    found = default_extractor().extract("东航那班不错。我喜欢靠窗的座位。")
    assert [(e.field, e.value) for e in found] == [("preference", "靠窗的座位")]
    assert default_extractor().extract("我不喜欢靠窗的座位。") == []


# --- invariants ------------------------------------------------------------------------------

_PIECES = st.sampled_from(
    [
        "I live in Berlin.",
        "Do you know where I live?",
        "If I were vegan,",
        " I'm allergic to",
        " peanuts",
        "我住在柏林。",
        "你知道吗？",
        '"quoted words here"',
        "'single quoted'",
        "Never book hotels.",
        " suppose",
        "\n- Lives in Lisbon",
        "？",
        "?",
        ",",
        " ",
        "、",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES | st.text(max_size=12), max_size=12).map("".join))
def test_masking_only_blanks(text: str) -> None:
    masked = mask_non_statements(text)
    assert len(masked) == len(text)
    assert all(m == t or (m == " " and t != "\n") for m, t in zip(masked, text, strict=True))


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES | st.text(max_size=12), max_size=12).map("".join))
def test_extraction_never_fails_and_spans_point_into_the_text(text: str) -> None:
    ex = default_extractor()
    for e in ex.extract(text):
        assert 0 <= e.span[0] <= e.span[1] <= len(text)
    ex.read_memory(text, {"key": text[:5], "category": text[5:9]})
    as_first_person(text)
