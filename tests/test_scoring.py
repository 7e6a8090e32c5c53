"""Scoring many sentences at once gives exactly the one-by-one scores (hypothesis)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdiag.extract import default_extractor
from memdiag.strategies.summarizers import ExtractiveSummarizer
from memdiag.text import fold, split_sentences, split_sentences_many
from memdiag.tokens import TokenCounter

# words and marks that switch each feature on or off, and characters at their edges
PIECES = [
    "I",
    "I'm",
    "my",
    "My",
    "me",
    "we",
    "我",
    "mine",
    "Iowa",
    "never",
    "Never",
    "don't",
    "do not",
    "must",
    "only",
    "allergic",
    "不要",
    "过敏",
    "一定",
    "3",
    "42",
    "2024-05-01",
    "May 5",
    "Monday",
    "Sunday",
    "today",
    "5月",
    "三号",
    "十日",
    "Mia",
    "Berlin",
    "Lisbon",
    "peanuts",
    "shellfish",
    "name",
    "is",
    "am",
    "live",
    "in",
    "UTC+8",
    "vegetarian",
    "prefer",
    "window",
    "seats",
    "I live in",
    "my name is",
    "I'm allergic to",
    "我叫小明",
    "我住在上海",
    "我对花生过敏",
    "时区是UTC+8",
    ",",
    ".",
    "!",
    "?",
    "(",
    ")",
    "。",
    "，",
    "！",
    "—",
    "'",
    "’",
    "-",
    "ß",
    "İ",
    "ﬁ",
    " ",
    "  ",
    "\t",
    "\n",
    "\x00",
    "é",
    "Ωmega",
    "ok",
    "thanks",
    "the",
    "a",
]
ROLES = ["user", "assistant", "tool", "system", "summary"]

sentence_text = st.lists(st.sampled_from(PIECES), min_size=0, max_size=14).map("".join)
# joined by a space or by nothing, as in running text and in CJK
sentence_spaced = st.lists(st.sampled_from(PIECES), min_size=0, max_size=14).map(" ".join)


@pytest.fixture(scope="module")
def summarizer() -> ExtractiveSummarizer:
    return ExtractiveSummarizer(TokenCounter())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(ROLES), sentence_text | sentence_spaced), max_size=12))
def test_score_many_equals_score_one_by_one(summarizer: ExtractiveSummarizer, items):  # type: ignore[no-untyped-def]
    assert summarizer.score_many(items) == [summarizer.score(r, s) for r, s in items]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(sentence_text | sentence_spaced, max_size=12))
def test_could_match_each_equals_could_match(texts):  # type: ignore[no-untyped-def]
    ex = default_extractor()
    assert ex.could_match_each(texts) == [ex.could_match(t) for t in texts]


# keyword letters that fold to ASCII from outside it (the Kelvin sign, "ſ", "ﬁ"), NUL, CJK
FOLDING_PIECES = ["\u212a", "\u017f", "ﬁ", "İ", "ALLERGIC", "Name Is", "\x00", "过敏", "素"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        sentence_text
        | sentence_spaced
        | st.lists(st.sampled_from(PIECES + FOLDING_PIECES), max_size=10).map(" ".join),
        max_size=12,
    ),
    st.booleans(),
)
def test_extract_many_equals_extract_one_by_one(texts, memoized):  # type: ignore[no-untyped-def]
    """The bulk reading (one scan per keyword over all the texts, ASCII texts apart) finds what
    reading each text finds, and a memoized extractor keeps exactly those answers."""
    plain = default_extractor()
    ex = plain.memoized() if memoized else plain
    expected = [plain.extract(t) for t in texts]
    assert ex.extract_many(texts) == expected
    assert ex.extract_many(texts) == expected  # (memoized: answered from the memo)
    assert [ex.extract(t) for t in texts] == expected
    assert ex.could_match_each(texts) == [plain.could_match(t) for t in texts]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(sentence_text | sentence_spaced, max_size=12))
def test_split_sentences_many_equals_one_by_one(texts):  # type: ignore[no-untyped-def]
    assert split_sentences_many(texts) == [split_sentences(t) for t in texts]


# boundaries and what touches them: the plain pattern (texts without 。！？；) must split where
# the full one does, whatever whitespace follows a full stop
BOUNDARY_PIECES = ["a", "Mia", ".", "!", "?", "。", "？", "；", "！", " ", "\n", "\t", "\r"]
BOUNDARY_PIECES += ["\u3000", "\xa0", "\u2028", "\x0b", "3.5", "e.g.x", "\n\n", ". \n"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.sampled_from(BOUNDARY_PIECES), max_size=10).map("".join), max_size=8))
def test_split_sentences_many_at_every_boundary(texts):  # type: ignore[no-untyped-def]
    assert split_sentences_many(texts) == [split_sentences(t) for t in texts]


# texts whose only whitespace is spaces and newlines: most take the str-method split
# (sentence_split.plain), a few (a double space, a space beside a newline) the regex one, and
# a chunk mixes both
PLAIN_PIECES = ["a", "Mia", ".", "!", "?", "。", "？", "；", "！", " ", " ", "\n", "3.5", "e.g.x"]
PLAIN_PIECES += ["...", "?!"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.lists(st.sampled_from(PLAIN_PIECES), max_size=12).map("".join), max_size=8),
    st.lists(st.lists(st.sampled_from(BOUNDARY_PIECES), max_size=6).map("".join), max_size=2),
    st.randoms(use_true_random=False),
)
def test_split_sentences_many_of_plain_texts(plain, odd, rnd):  # type: ignore[no-untyped-def]
    assert split_sentences_many(plain) == [split_sentences(t) for t in plain]
    texts = plain + odd
    rnd.shuffle(texts)
    assert split_sentences_many(texts) == [split_sentences(t) for t in texts]


@given(st.text() | st.text(alphabet=st.characters(max_codepoint=127)))
def test_fold_is_nfkc_then_casefold(text: str) -> None:
    """The ASCII shortcut (no NFKC call) folds as NFKC + casefold does."""
    import unicodedata

    assert fold(text) == unicodedata.normalize("NFKC", text).casefold()


def test_other_spaces_are_every_whitespace_character_but_space_and_newline() -> None:
    import re
    import sys

    from memdiag.sentence_split import OTHER_SPACES, OTHER_SPACES_WIDE

    every = {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}
    assert every == {chr(c) for c in range(sys.maxunicode + 1) if re.match(r"\s", chr(c))}
    assert set(OTHER_SPACES_WIDE) == every - {" ", "\n"}
    assert set(OTHER_SPACES) == {c for c in OTHER_SPACES_WIDE if c.isascii()}


def test_scores_of_known_sentences(summarizer: ExtractiveSummarizer) -> None:
    items = [
        ("user", "I'm allergic to peanuts, please remember that."),  # strong fact + constraint
        ("assistant", "Here are three options for Lisbon on May 5."),  # number, date, name
        ("user", "ok thanks"),  # too short
        ("tool", "Results: 3 flights found."),  # tool output loses 2
        ("user", "我对花生过敏，请记住。"),
    ]
    scores = summarizer.score_many(items)
    assert scores == [summarizer.score(r, s) for r, s in items]
    assert scores[0] > scores[1] > 0
    assert scores[2] == 0
    assert scores[4] >= 4 + 3  # the Chinese allergy is a strong extraction


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(ROLES), sentence_text | sentence_spaced | st.text(max_size=30)),
        min_size=1,
        max_size=8,
    ),
    st.randoms(use_true_random=False),
)
def test_summary_cost_line_by_line_equals_encoding_it_whole(encoding: str, items, rnd):  # type: ignore[no-untyped-def]
    """The exact cost the summarizer adds up per line is what encoding the summary gives,
    whatever order the chosen lines come in (the newest has no newline after it)."""
    counter = TokenCounter(encoding)
    s = ExtractiveSummarizer(counter)
    # summary lines are whitespace-normalized sentences (split_sentences), never empty
    lines = [(r, " ".join(t.split())) for r, t in items]
    # candidates as the summarizer ranks them: (-score, -order, tokens, key, role, text)
    chosen = [(-1, -n, 1, f"{r}: {t}", r, t) for n, (r, t) in enumerate(lines, 1) if t]
    if chosen:
        whole = counter.section_cost(s._render(chosen))  # chronological: the summary's text
        assert whole == counter.section_cost(
            "\n".join(["Summary of earlier conversation:"] + [f"{r}: {t}" for r, t in lines if t])
        )
        rnd.shuffle(chosen)  # ranked order, as _select hands them over
        assert s._exact_cost(chosen) == whole


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(ROLES), sentence_text | sentence_spaced),
        min_size=2,
        max_size=8,
    ),
    st.randoms(use_true_random=False),
)
def test_cost_of_one_more_line_equals_counting_them_all(encoding: str, items, rnd):  # type: ignore[no-untyped-def]
    """The retries' exact cost of the chosen lines plus one, from the cost of the chosen
    lines and their newest, is the cost of counting them all again."""
    s = ExtractiveSummarizer(TokenCounter(encoding))
    lines = [(r, " ".join(t.split())) for r, t in items]
    cands = [(-1, -n, 1, f"{r}: {t}", r, t) for n, (r, t) in enumerate(lines, 1) if t]
    if len(cands) < 2:
        return
    rnd.shuffle(cands)
    *chosen, extra = cands
    cost = s._exact_cost(chosen)
    newest = min(chosen, key=lambda c: c[1])
    assert s._exact_cost_with(chosen, cost, newest, extra) == s._exact_cost([*chosen, extra])


def test_summaries_identical_to_encoding_whole() -> None:
    """Same summaries when every exact count encodes the whole text (the reference path)."""
    counter = TokenCounter()
    fast, whole = ExtractiveSummarizer(counter), ExtractiveSummarizer(counter)
    whole._additive = False
    root = Path(__file__).resolve().parent.parent / "fixtures"
    texts: list[tuple[str, str]] = []
    for f in sorted(root.glob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            d = json.loads(line)
            if isinstance(d.get("content"), str) and d.get("role"):
                texts.append((d["role"], d["content"]))
    assert len(texts) > 100
    a = b = ""
    for budget in (60, 120, 250):
        for n in range(0, len(texts), 7):
            chunk = texts[n : n + 7]
            a, b = fast.summarize(a, chunk, budget), whole.summarize(b, chunk, budget)
            assert a == b
        a, b = fast.shrink(a, budget // 2), whole.shrink(b, budget // 2)
        assert a == b
