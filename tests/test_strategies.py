"""The summary and scratchpad strategies and their summarizers, alone and through the engine."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdiag.config import LLMSettings, Settings
from memdiag.errors import UnavailableError, UsageError
from memdiag.replay import prepare, replay
from memdiag.strategies.llm_summarizer import LLMSummarizer
from memdiag.strategies.summarizers import SUMMARIZERS, SUMMARY_HEADER, ExtractiveSummarizer
from memdiag.text import split_sentences
from memdiag.tokens import TokenCounter, truncate_to_tokens
from memdiag.transcript import load
from memdiag.transcript.model import RawMessage, RawSession, RawSummary, Transcript, build
from tests.conftest import FIXTURES
from tests.helpers import orphan_tools, tiktoken_cache, transcripts, windows

ALLERGY = FIXTURES / "allergy.jsonl"
ALLERGY_ZH = FIXTURES / "allergy_zh.jsonl"


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter()


def summary_settings(budget: int, **over: Any) -> Settings:
    return Settings(budget=budget).with_overrides(**over)


# --- extractive summarizer -------------------------------------------------------------------

SENTENCES = st.sampled_from(
    [
        "I'm allergic to peanuts.",
        "Sounds good.",
        "The Louvre opens at 9am on Monday.",
        "Never book red-eye flights!",
        "我对花生过敏。",
        "好的。",
        "We land in Lisbon on December 12.",
        "That is a lovely idea, let me check the options for you right away",
        "I prefer window seats",
        "Ok",
        "Check-in is at 3 pm and breakfast is included in the price of 150 euros",
    ]
)
ROLES = st.sampled_from(["user", "assistant", "tool"])


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.lists(st.tuples(ROLES, SENTENCES), max_size=6), min_size=1, max_size=6),
    st.integers(0, 120),
)
def test_extractive_budget_never_exceeded(
    chunks: list[list[tuple[str, str]]], max_tokens: int
) -> None:
    counter = TokenCounter()
    summarizer = ExtractiveSummarizer(counter)
    summary = ""
    for chunk in chunks:
        summary = summarizer.summarize(summary, chunk, max_tokens)
        assert counter.section_cost(summary) <= max_tokens
        assert summary == "" or summary.startswith(SUMMARY_HEADER)
        assert summarizer.shrink(summary, max_tokens // 2) == "" or (
            counter.section_cost(summarizer.shrink(summary, max_tokens // 2)) <= max_tokens // 2
        )


def test_extractive_prefers_constraints_and_keeps_chronology(counter: TokenCounter) -> None:
    s = ExtractiveSummarizer(counter)
    messages = [
        ("user", "Hi there. I'm allergic to peanuts."),
        ("assistant", "That sounds like a lovely plan for the trip overall."),
        ("user", "We land in Lisbon on December 12."),
        ("assistant", "Sounds good."),
        ("user", "Never book red-eye flights!"),
    ]
    out = s.summarize("", messages, 60)
    lines = out.splitlines()
    assert lines[0] == SUMMARY_HEADER
    assert lines[1:] == [
        "user: I'm allergic to peanuts.",
        "user: We land in Lisbon on December 12.",
        "user: Never book red-eye flights!",
    ]
    # a tight budget keeps the strongest statement first
    tight = s.summarize("", messages, counter.section_cost(SUMMARY_HEADER + "\nuser: x") + 8)
    assert "allergic to peanuts" in tight and "Lisbon" not in tight
    # a running summary keeps its old lines when they still win
    rolled = s.summarize(out, [("assistant", "The museum opens at 10.")], 60)
    assert rolled.splitlines()[1] == "user: I'm allergic to peanuts."


def test_extractive_ties_go_to_the_more_recent(counter: TokenCounter) -> None:
    s = ExtractiveSummarizer(counter)
    one_line = counter.section_cost(SUMMARY_HEADER + "\nuser: We land in Lisbon on May 12.")
    out = s.summarize(
        "",
        [("user", "We land in Lisbon on May 12."), ("user", "We land in Porto on May 19.")],
        one_line,
    )
    assert "Porto" in out and "Lisbon" not in out


def test_extractive_handles_chinese(counter: TokenCounter) -> None:
    s = ExtractiveSummarizer(counter)
    out = s.summarize("", [("user", "你好。我对花生过敏，请注意！十二月去成都玩五天。好的。")], 60)
    assert "user: 我对花生过敏，请注意！" in out.splitlines()
    assert "好的" not in out


def test_split_sentences() -> None:
    text = "Hi, I'm Mia. It costs 3.5 euros! Ok?\nnew line 我对花生过敏。我住在北京；好的！"
    assert split_sentences(text) == [
        "Hi, I'm Mia.",
        "It costs 3.5 euros!",
        "Ok?",
        "new line 我对花生过敏。",
        "我住在北京；",
        "好的！",
    ]


def test_truncate_to_tokens(counter: TokenCounter) -> None:
    text = "word " * 50 + "我对花生过敏" * 10
    for limit in (0, 4, 5, 12, 40, 500):
        out = truncate_to_tokens(counter, text, limit)
        assert counter.section_cost(out) <= limit
        assert text.startswith(out)
    assert truncate_to_tokens(counter, "short", 100) == "short"


def test_registry() -> None:
    assert set(SUMMARIZERS) == {"extractive", "recorded", "llm"}


# --- llm summarizer (a local stand-in endpoint only) -----------------------------------------


class _Handler(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict[str, Any]]] = []
    reply = "Mia is allergic to peanuts. " * 40
    status = 200

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(
            {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
        )
        if self.status != 200:
            self.send_error(self.status)
            return
        data = json.dumps({"choices": [{"message": {"content": self.reply}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def endpoint() -> Iterator[str]:
    _Handler.requests = []
    _Handler.status = 200
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_llm_summarizer_posts_and_truncates(
    endpoint: str, counter: TokenCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", "sekret")
    llm = LLMSummarizer(
        counter, LLMSettings(base_url=endpoint, model="m", api_key_env="TEST_LLM_KEY")
    )
    out = llm.summarize("", [("user", "I'm allergic to peanuts.")], 40)
    assert counter.section_cost(out) <= 40 and out.startswith("Mia is allergic")
    (req,) = _Handler.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["auth"] == "Bearer sekret"
    assert req["body"]["model"] == "m"
    assert "user: I'm allergic to peanuts." in req["body"]["messages"][1]["content"]


def test_llm_summarizer_errors(endpoint: str, counter: TokenCounter) -> None:
    _Handler.status = 500
    llm = LLMSummarizer(counter, LLMSettings(base_url=endpoint, model="m", max_retries=0))
    with pytest.raises(UnavailableError, match="HTTP 500"):
        llm.summarize("", [("user", "hi there you")], 40)
    with pytest.raises(UsageError, match="base_url"):
        LLMSummarizer(counter, LLMSettings())
    closed = LLMSummarizer(
        counter, LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", timeout=2, max_retries=0)
    )
    with pytest.raises(UnavailableError, match="cannot reach"):
        closed.summarize("", [("user", "hi there you")], 40)


# --- strategies through the engine -----------------------------------------------------------

CASES = [
    ("summary", {"summary.summarizer": "extractive", "summary.summary_max_tokens": 50}),
    ("summary", {"summary.summarizer": "recorded"}),
    ("summary", {"summary.summary_max_tokens": 30, "summary.keep_recent_tokens": 0}),
    ("scratchpad", {"scratchpad.scratchpad_max_tokens": 30}),
    ("scratchpad", {"scratchpad.scratchpad_max_tokens": 200, "sliding_window.max_turns": 2}),
]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), st.integers(40, 500), st.sampled_from(CASES))
def test_window_invariants(transcript: Transcript, budget: int, case: tuple[str, dict]) -> None:
    name, over = case
    settings_ = summary_settings(budget, **over)
    rctx = prepare(transcript, settings_)
    res = replay(rctx, name)
    for r, window in windows(transcript, res):
        if not r.overflow:
            assert r.tokens["total"] <= budget
        assert r.tokens["messages"] == sum(rctx.costs[i] for i in window) + 3
        assert transcript.turns[r.turn - 1].user_index in window
        assert not orphan_tools(transcript, [transcript.messages[i].id for i in window])
        if name == "summary" and over.get("summary.summarizer") != "recorded":
            assert r.tokens["summary"] <= settings_.summary.summary_max_tokens
        if name == "scratchpad":
            assert r.tokens["scratchpad"] <= settings_.scratchpad.scratchpad_max_tokens
    final = res.final
    assert final is not None
    assert res.turns[-1].tokens["summary"] == rctx.counter.section_cost(final.summary)
    assert res.turns[-1].tokens["scratchpad"] == rctx.counter.section_cost(final.pinned)
    again = replay(prepare(transcript, settings_), name)
    assert again.turns == res.turns and again.final == res.final


@pytest.mark.parametrize("name", ["summary", "scratchpad"])
@pytest.mark.parametrize("turn", [10, 25, 40])
def test_section_tokens_equal_independent_tiktoken_count(
    name: str, turn: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tiktoken

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tiktoken_cache(tmp_path)))
    enc = tiktoken.get_encoding("o200k_base")
    t = load(ALLERGY)
    settings_ = summary_settings(600, **{"summary.summary_max_tokens": 120})
    res = replay(prepare(t, settings_), name, until_turn=turn)
    view = res.final
    assert view is not None
    text = view.summary if name == "summary" else view.pinned
    assert text, "the section should be in use at this budget"
    expected = 3 + len(enc.encode("system")) + len(enc.encode(text))
    section = "summary" if name == "summary" else "scratchpad"
    assert res.turns[-1].tokens[section] == expected
    assert res.turns[-1].tokens["total"] <= 600


def test_fixture_shape() -> None:
    t = load(ALLERGY)
    assert len(t.turns) == 42
    allergy = [m for m in t.messages if m.role == "user" and "allergic to peanuts" in m.content]
    assert allergy[0].turn == 2
    (forgot,) = [m for m in t.messages if m.forgot]
    assert forgot.turn == 40 and forgot.forgot == "allergic to peanuts"
    (summary,) = t.summaries
    assert "peanut" not in summary.content and "window seats" in summary.content


def test_scratchpad_keeps_allergy_while_sliding_window_loses_it() -> None:
    t = load(ALLERGY)
    rctx = prepare(t, Settings(budget=800))
    fact = "allergic to peanuts"
    pad = replay(rctx, "scratchpad", [fact], until_turn=40)
    (kept,) = pad.facts
    assert kept.stated_at_turn == 2 and kept.lost_at_turn is None and kept.kept_by == "pinned"
    assert pad.final is not None and pad.final.fields["allergy"] == "peanuts"
    assert "- allergic to: peanuts" in pad.final.pinned
    assert all(r.tokens["total"] <= 800 for r in pad.turns)
    (lost,) = replay(rctx, "sliding_window", [fact], until_turn=40).facts
    assert lost.lost_at_turn is not None and lost.lost_at_turn < 40
    assert lost.mechanism == "evicted"


def test_scratchpad_keeps_chinese_allergy() -> None:
    t = load(ALLERGY_ZH)
    rctx = prepare(t, Settings(budget=600))
    fact = "对花生过敏"
    (kept,) = replay(rctx, "scratchpad", [fact], until_turn=25).facts
    assert kept.lost_at_turn is None and kept.kept_by == "pinned"
    (lost,) = replay(rctx, "sliding_window", [fact], until_turn=25).facts
    assert lost.mechanism == "evicted"


def test_extractive_summary_keeps_allergy() -> None:
    t = load(ALLERGY)
    res = replay(
        prepare(t, Settings(budget=800)), "summary", ["allergic to peanuts"], until_turn=40
    )
    (fact,) = res.facts
    assert fact.lost_at_turn is None and fact.kept_by == "summary"
    assert any(r.summarized for r in res.turns)
    assert (
        res.final is not None
        and "user: Before we start: I'm allergic to peanuts" in res.final.summary
    )


def test_recorded_summary_is_verbatim_and_loses_what_it_omits() -> None:
    t = load(ALLERGY)
    settings_ = summary_settings(3000, **{"summary.summarizer": "recorded"})
    facts = ["allergic to peanuts", "prefers window seats"]
    res = replay(prepare(t, settings_), "summary", facts, until_turn=40)
    (event,) = t.summaries
    assert res.final is not None and res.final.summary == event.content
    allergy, seats = res.facts
    assert allergy.mechanism == "summarized_away" and allergy.lost_at_turn == 23
    assert seats.lost_at_turn is None and seats.kept_by == "summary"
    turn23 = res.turns[22]
    covered = [m.id for m in t.messages if m.role != "system" and m.index <= event.replaces_through]
    assert list(turn23.summarized) == covered
    assert not any(r.evicted for r in res.turns)


def test_recorded_summary_of_an_ended_session_is_ignored() -> None:
    items = [
        RawMessage("user", "I'm allergic to peanuts.", session="a"),
        RawMessage("assistant", "Noted."),
        RawSession("b"),
        RawSummary("Old session summary."),
        RawMessage("user", "Hello again, any news for me?"),
        RawMessage("assistant", "Welcome back."),
    ]
    t = build(items, path="<t>", format="canonical")
    res = replay(prepare(t, summary_settings(500, **{"summary.summarizer": "recorded"})), "summary")
    assert res.final is not None and res.final.summary == ""


def test_summary_resets_with_the_session() -> None:
    items: list[Any] = [RawSession("first")]
    items += [
        RawMessage("user", f"I'm allergic to peanuts. Day {k} in Lisbon was great.")
        for k in range(8)
    ]
    items += [RawSession("next"), RawMessage("user", "New trip: Rome in May.")]
    t = build(items, path="<t>", format="canonical")
    settings_ = summary_settings(80, **{"summary.summary_max_tokens": 40})
    res = replay(prepare(t, settings_), "summary", until_turn=8)
    assert res.final is not None and res.final.summary
    res = replay(prepare(t, settings_), "summary")
    assert res.final is not None and res.final.summary == ""
    assert res.turns[-1].tokens["summary"] == 0


def _user_transcript(*texts: str, session_break: int | None = None) -> Transcript:
    items: list[Any] = [RawSession("s1")]
    for k, text in enumerate(texts):
        if session_break == k:
            items.append(RawSession("s2"))
        items.append(RawMessage("user", text, id=f"u{k + 1}"))
        items.append(RawMessage("assistant", "Okay."))
    return build(items, path="<t>", format="canonical")


def test_scratchpad_overwrites_single_and_accumulates_multi() -> None:
    t = _user_transcript(
        "I live in Berlin. I'm allergic to peanuts.",
        "I just moved to Lisbon.",
        "I'm also allergic to shellfish. I live in Lisbon.",
    )
    res = replay(prepare(t, Settings(budget=2000)), "scratchpad")
    assert res.final is not None
    assert res.final.fields == {"location": "Lisbon", "allergy": "peanuts; shellfish"}
    pins = [[(p.field, p.value, p.previous, p.message_id) for p in r.pinned] for r in res.turns]
    assert pins == [
        [("location", "Berlin", None, "u1"), ("allergy", "peanuts", None, "u1")],
        [("location", "Lisbon", "Berlin", "u2")],
        [("allergy", "shellfish", None, "u3")],  # restating Lisbon changes nothing
    ]
    assert res.final.pinned == (
        "Pinned facts:\n- lives in: Lisbon\n- allergic to: peanuts; shellfish"
    )


def test_scratchpad_history_attribute() -> None:
    from memdiag.strategies import make_strategy
    from memdiag.strategies.base import StrategyContext

    t = _user_transcript("I live in Berlin.", "I live in Lisbon now.")
    rctx = prepare(t, Settings(budget=2000))
    strategy = make_strategy(
        "scratchpad", StrategyContext(t, rctx.costs, rctx.counter), rctx.settings, 2000
    )
    for _, unit in rctx.units:
        strategy.add(unit)
    fit = strategy.fit(2, 10)
    assert fit.pinned_changed and len(fit.pins) == 2
    assert [(c.value, c.previous) for c in strategy.history] == [
        ("Berlin", None),
        ("Lisbon", "Berlin"),
    ]  # type: ignore[attr-defined]
    assert strategy.fit(2, 10).pins == []


def test_scratchpad_drops_weak_then_oldest_first() -> None:
    t = _user_transcript(
        "I prefer window seats.",
        "I'm allergic to peanuts.",
        "My name is Mia.",
    )
    counter = TokenCounter()
    header_only = "Pinned facts:\n- name: Mia\n- allergic to: peanuts"
    cap = counter.section_cost(header_only)
    res = replay(
        prepare(t, summary_settings(2000, **{"scratchpad.scratchpad_max_tokens": cap})),
        "scratchpad",
    )
    assert res.final is not None
    assert res.final.pinned == "Pinned facts:\n- allergic to: peanuts\n- name: Mia"
    smaller = counter.section_cost("Pinned facts:\n- name: Mia")
    res = replay(
        prepare(t, summary_settings(2000, **{"scratchpad.scratchpad_max_tokens": smaller})),
        "scratchpad",
    )
    assert res.final is not None and res.final.pinned == "Pinned facts:\n- name: Mia"
    assert res.turns[-1].tokens["scratchpad"] == smaller


def test_scratchpad_resets_with_the_session() -> None:
    t = _user_transcript("I'm allergic to peanuts.", "Hello again.", session_break=1)
    res = replay(prepare(t, Settings(budget=2000)), "scratchpad", ["allergic to peanuts"])
    assert res.final is not None and res.final.pinned == "" and res.final.fields == {}
    (fact,) = res.facts
    assert fact.mechanism == "session_end"
    assert res.turns[-1].tokens["scratchpad"] == 0


def test_scratchpad_user_rules(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n  - id: seat\n    field: seat\n    strong: true\n"
        "    patterns: ['(?i:\\bseat)\\s+(?P<value>\\d+[A-F])']\n",
        encoding="utf-8",
    )
    t = _user_transcript("Put me in seat 14C.")
    res = replay(
        prepare(t, summary_settings(2000, **{"scratchpad.rules": str(rules)})), "scratchpad"
    )
    assert res.final is not None and res.final.fields == {"seat": "14C"}
