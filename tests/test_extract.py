"""Rule-based extraction: precision on English and Chinese statements, rules files."""

from __future__ import annotations

from pathlib import Path

import pytest

from memdiag.errors import InputError
from memdiag.extract import (
    Extraction,
    Extractor,
    Rule,
    default_extractor,
    load_extractor,
    load_rules,
    strong_facts,
)


def found(text: str) -> set[tuple[str, str]]:
    return {(e.field, e.value) for e in default_extractor().extract(text)}


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        ("Hi, I'm Mia. I'm allergic to peanuts.", "name", "Mia"),
        ("Hi, I'm Mia. I'm allergic to peanuts.", "allergy", "peanuts"),
        ("I am allergic to shellfish, so no paella.", "allergy", "shellfish"),
        ("I'm severely allergic to Peanuts and tree nuts!", "allergy", "tree nuts"),
        ("I have a peanut allergy", "allergy", "peanut"),
        ("my name is mia", "name", "mia"),
        ("My name's Tom Baker.", "name", "Tom Baker"),
        ("Call me Mia.", "name", "Mia"),
        ("I live in Berlin, Germany and I love it", "location", "Berlin"),
        ("I just moved to Lisbon.", "location", "Lisbon"),
        ("My time zone is UTC+8.", "timezone", "UTC+8"),
        ("my time zone is utc + 5:30", "timezone", "UTC+5:30"),
        ("I'm in UTC-05:00 these days", "timezone", "UTC-5"),
        ("I'm on PST", "timezone", "PST"),
        ("My timezone is Asia/Shanghai.", "timezone", "Asia/Shanghai"),
        ("My birthday is March 3rd, 1990.", "birthday", "March 3rd, 1990"),
        ("I was born on 1990-03-03", "birthday", "1990-03-03"),
        ("I'm vegetarian.", "diet", "vegetarian"),
        ("I'm a strict vegan", "diet", "vegan"),
        ("I don't eat pork.", "diet", "don't eat pork"),
        ("Never book red-eye flights, I hate them.", "prohibition", "never book red-eye flights"),
        ("Please don't use emojis.", "prohibition", "don't use emojis"),
        ("Oh, and do not call before 9am", "prohibition", "do not call before 9am"),
        ("I prefer window seats", "preference", "window seats"),
        ("I really like quiet hotels near parks.", "preference", "quiet hotels near parks"),
        ("I work as a nurse at the hospital", "job", "nurse"),
        ("Use metric units please", "units", "metric"),
        ("I prefer imperial measurements.", "units", "imperial"),
        ("I have type 2 diabetes.", "medical", "type 2 diabetes"),
        ("I'm pregnant, so no long hikes.", "medical", "pregnant"),
        # Chinese
        ("我对花生过敏", "allergy", "花生"),
        ("你好，我叫林晓。先说一下：我对花生过敏，推荐吃的时候请注意。", "name", "林晓"),
        ("你好，我叫林晓。先说一下：我对花生过敏，推荐吃的时候请注意。", "allergy", "花生"),
        ("我对花生和虾过敏", "allergy", "虾"),
        ("我的名字是王芳。", "name", "王芳"),
        ("我住在北京。", "location", "北京"),
        ("我不吃猪肉", "diet", "不吃猪肉"),
        ("我是素食者", "diet", "素食者"),
        ("不要订红眼航班", "prohibition", "不要订红眼航班"),
        ("请别给我推荐海鲜", "prohibition", "别给我推荐海鲜"),
        ("我的生日是5月12日", "birthday", "5月12日"),
        ("我喜欢靠窗的座位", "preference", "靠窗的座位"),
        ("我的时区是东八区", "timezone", "UTC+8"),
        ("我的时区是UTC+9", "timezone", "UTC+9"),
        ("请用公制单位", "units", "metric"),
        ("我有糖尿病", "medical", "糖尿病"),
    ],
)
def test_extracts(text: str, field: str, value: str) -> None:
    assert (field, value) in found(text)


@pytest.mark.parametrize(
    "text",
    [
        "I'm tired",
        "I'm Not sure about that.",
        "I'm So excited!",
        "I'm not allergic to anything",
        "My son is allergic to peanuts.",  # not the user
        "I don't know what to do",
        "Don't worry about it",
        "Never mind.",
        "I never thought about it",
        "I like it",
        "I like that idea",
        "I'd like a table for two",
        "call me tomorrow",
        "I have a meeting at noon",
        "I live in a small town",
        "The hotel is in UTC+9",
        "my birthday is coming up",
        "What time zone is Kyoto in?",
        "Peanuts are popular in Thai food.",
        "我对花生不过敏",
        "别人都去了",
        "不要紧",
        "不要客气",
        "别忘了带护照",
        "特别好吃",
        "我叫什么名字？",
        "他对花生过敏",  # not the user
    ],
)
def test_no_false_positive(text: str) -> None:
    assert found(text) == set()


def test_allergy_zh_is_strong() -> None:
    (e,) = default_extractor().extract("我对花生过敏")
    assert e == Extraction("allergy", "花生", True, (2, 4), "zh.allergy")


def test_strong_facts_skip_weak_fields() -> None:
    text = "I'm Mia, I prefer window seats and I'm allergic to peanuts. I live in Berlin."
    assert {(e.field, e.value) for e in strong_facts(text)} == {
        ("name", "Mia"),
        ("allergy", "peanuts"),
    }


def test_spans_point_at_values_and_results_are_ordered() -> None:
    text = "Hi, I'm Mia. I'm allergic to peanuts."
    out = default_extractor().extract(text)
    assert [text[e.span[0] : e.span[1]] for e in out] == ["Mia", "peanuts"]


def test_multi_valued_fields_come_from_the_rules_file() -> None:
    ex = default_extractor()
    assert ex.is_multi("allergy") and ex.is_multi("prohibition") and ex.is_multi("preference")
    assert not ex.is_multi("name") and not ex.is_multi("location") and not ex.is_multi("timezone")
    assert default_extractor() is ex  # cached


def test_extractor_from_rules_in_code() -> None:
    ex = Extractor([Rule("t.seat", "seat", [r"(?i:\bseat)\s+(?P<value>\d+[A-F])\b"], strong=True)])
    assert ex.extract("my seat 14C please") == [Extraction("seat", "14C", True, (8, 11), "t.seat")]


def test_user_rules_add_to_builtin(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(
        "version: 1\n"
        "fields:\n"
        "  loyalty: {strong: false, label: loyalty number}\n"
        "rules:\n"
        "  - id: my.loyalty\n"
        "    field: loyalty\n"
        "    keywords: [miles]\n"
        "    patterns:\n"
        "      - '(?i:miles number is)\\s+(?P<value>[A-Z0-9]+)'\n",
        encoding="utf-8",
    )
    ex = load_extractor(str(path))
    got = {(e.field, e.value) for e in ex.extract("My miles number is AB123. I'm Mia.")}
    assert got == {("loyalty", "AB123"), ("name", "Mia")}
    assert ex.label("loyalty", "AB123") == "loyalty number"
    assert load_extractor(None) is default_extractor()


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        (
            "rules:\n  - id: x\n    field: f\n    patterns:\n      - '(?P<value>['\n",
            5,
            "invalid regex",
        ),
        ("rules:\n  - id: x\n    field: f\n    patterns: ['abc']\n", 4, "named group"),
        ("rules:\n  - id: x\n    feild: f\n    patterns: ['(?P<value>a)']\n", 3, "unknown key"),
        ("version: 2\nrules: []\n", 1, "unsupported rules version"),
        ("rules:\n  - id: x\n    field: f\n    patterns: []\n", 2, "at least one pattern"),
        ("rules: [\n", 2, "invalid YAML"),
    ],
)
def test_bad_rules_file_names_file_and_line(
    tmp_path: Path, body: str, line: int, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_extractor(str(path))
    assert str(err.value).startswith(f"{path}:{line}: ")
    assert message in str(err.value)


def test_missing_rules_file() -> None:
    with pytest.raises(InputError, match="no such file"):
        load_extractor("/nonexistent/rules.yaml")


def test_shipped_rules_pass_the_checks_a_users_file_gets() -> None:
    """memdiag's own rules are compiled lazily at run time; here every one is validated as a
    user's rules file would be (valid regex, a `value` group or a fixed value)."""
    from importlib import resources

    from memdiag.extract import BUILTIN_RULES

    ref = resources.files("memdiag") / "data" / BUILTIN_RULES
    with resources.as_file(ref) as path:
        rules, _ = load_rules(path)  # not shipped=True: every pattern is compiled and checked
    assert len(rules) == len(default_extractor().rules) > 20
