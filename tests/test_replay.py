from __future__ import annotations

import json

import pytest

from memdiag.config import Settings
from memdiag.render.jsonout import replay_json
from memdiag.replay import prepare, replay, run
from memdiag.transcript import load
from tests.conftest import FIXTURES
from tests.helpers import independent_cost, raw_lines, tiktoken_cache, windows_from_deltas

DEMO = FIXTURES / "demo.jsonl"


def demo_json(budget: int, facts=("allergic to peanuts",), **over) -> dict:
    t = load(DEMO)
    settings = Settings(budget=budget).with_overrides(**over)
    report = run(t, settings, facts)
    return replay_json(t.path, report.encoding, report.budget, report.results)


def test_fact_leaves_window_at_known_turn():
    out = demo_json(400)
    fact = out["strategies"]["sliding_window"]["facts"][0]
    assert fact["evidence_id"] == "u1"
    assert fact["stated_at_turn"] == 1
    assert fact["lost_at_turn"] == 6
    assert fact["mechanism"] == "evicted"
    turn6 = out["strategies"]["sliding_window"]["turns"][5]
    assert "u1" in turn6["evicted"]


def test_fact_kept_with_big_budget():
    fact = demo_json(5000)["strategies"]["sliding_window"]["facts"][0]
    assert fact["lost_at_turn"] is None or fact["mechanism"] == "session_end"
    # with no eviction the fact only leaves with its session (turn 9 starts session 'thu')
    assert fact["lost_at_turn"] == 9 and fact["mechanism"] == "session_end"


@pytest.mark.parametrize("budget", [200, 400, 800])
def test_window_tokens_equal_independent_tiktoken_count(budget, tmp_path, monkeypatch):
    """tokens.total equals OpenAI's chat count of system + kept messages + reply priming."""
    import tiktoken

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tiktoken_cache(tmp_path)))
    enc = tiktoken.get_encoding("o200k_base")
    raw = raw_lines(DEMO)
    system = [r for r in raw if r.get("role") == "system"]
    by_id = {r["id"]: r for r in raw if r.get("id")}
    out = demo_json(budget)["strategies"]["sliding_window"]["turns"]
    sys_tokens = sum(independent_cost(enc, r) for r in system)
    for turn, window in zip(out, windows_from_deltas(out), strict=True):
        msgs = sum(independent_cost(enc, by_id[i]) for i in window)
        assert turn["tokens"]["system"] == sys_tokens
        assert turn["tokens"]["messages"] == msgs + 3
        assert turn["tokens"]["total"] == sys_tokens + msgs + 3
        assert turn["tokens"]["total"] <= budget


def test_max_turns_limits_window():
    out = demo_json(100_000, **{"sliding_window.max_turns": 2})["strategies"]["sliding_window"]
    t = load(DEMO)
    turn_of = {m.id: m.turn for m in t.messages}
    for turn, window in zip(out["turns"], windows_from_deltas(out["turns"]), strict=True):
        assert {turn_of[i] for i in window} <= {turn["turn"], turn["turn"] - 1}
    assert out["facts"][0]["lost_at_turn"] == 3


def test_session_start_resets_window():
    out = demo_json(5000)["strategies"]["sliding_window"]["turns"]
    first_thu = next(t for t in out if t["session"] == "thu")
    assert first_thu["session_turn"] == 1
    assert "u1" in first_thu["dropped_by_session"]
    assert windows_from_deltas(out)[out.index(first_thu)] == ["u9"]


def test_each_message_encoded_once_for_all_strategies(monkeypatch):
    from memdiag.tokens import TokenCounter

    calls: list[int] = []
    real = TokenCounter.count_many

    def spy(self, texts):
        calls.append(len(texts))
        return real(self, texts)

    monkeypatch.setattr(TokenCounter, "count_many", spy)
    t = load(DEMO)
    rctx = prepare(t, Settings(budget=300))
    for _ in range(3):
        replay(rctx, "sliding_window", ["allergic to peanuts"])
    assert calls == [len(t.messages)]


def test_until_turn_stops_and_reports_window():
    t = load(DEMO)
    rctx = prepare(t, Settings(budget=400))
    res = replay(rctx, "sliding_window", until_turn=5)
    assert [r.turn for r in res.turns] == [1, 2, 3, 4, 5]
    ids = [t.messages[i].id for i in res.final.indices]
    assert ids[0] == "u1" and ids[-1] == "u5"


def test_json_is_serialisable_and_deltas_small():
    out = demo_json(300)
    text = json.dumps(out)
    turns = out["strategies"]["sliding_window"]["turns"]
    # deltas: every message id enters exactly once
    entered = [i for t in turns for i in t["entered"]]
    assert len(entered) == len(set(entered))
    assert len(text) < 20_000


def test_facts_file_takes_window_room_and_keeps_its_facts(tmp_path):
    from memdiag.stores.open import LongTermStores

    facts = tmp_path / "facts.json"
    facts.write_text('{"name": "Mia", "allergy": "peanuts"}')
    t = load(DEMO)
    settings = Settings(budget=400)
    text, tokens = LongTermStores.open(str(facts), None, None).profile_section(settings)
    assert "allergy: peanuts" in text and tokens > 0
    report = run(
        t, settings, ["allergic to peanuts", "prefers window seats"], memory=(text, tokens)
    )
    res = report.results[0]
    assert all(r.tokens["memories"] == tokens for r in res.turns)
    assert all(r.tokens["total"] <= 400 for r in res.turns)
    allergy, seats = res.facts
    assert allergy.lost_at_turn is None and allergy.kept_by == "memories"
    assert seats.lost_at_turn is not None  # the profile does not hold it


def test_auto_facts_are_strong_facts_worded_as_pinned():
    t = load(FIXTURES / "allergy.jsonl")
    report = run(t, Settings(budget=800, strategy="all"))
    assert report.facts_found
    assert "allergic to peanuts" in report.facts and "Mia" in report.facts
    zh = run(load(FIXTURES / "allergy_zh.jsonl"), Settings(budget=600))
    assert "花生过敏" in zh.facts
    by_name = {r.name: r for r in report.results}
    k = report.facts.index("allergic to peanuts")
    # the sliding window and the summary lose it for a while; the scratchpad never does
    assert any(e["event"] == "lost" for e in by_name["sliding_window"].facts[k].history)
    assert not any(e["event"] == "lost" for e in by_name["scratchpad"].facts[k].history)


def test_system_prompt_can_be_evicted_when_configured():
    t = load(DEMO)
    kept = run(t, Settings(budget=300)).results[0]
    free = run(t, Settings(budget=300, keep_system=False)).results[0]
    assert all(r.tokens["system"] > 0 for r in kept.turns)
    assert all(r.tokens["system"] == 0 for r in free.turns)
    system_id = t.messages[0].id
    assert system_id in free.turns[0].entered
    assert any(system_id in r.evicted for r in free.turns)


def test_fact_evicted_in_the_turn_it_arrives_is_reported_lost(tmp_path):
    p = tmp_path / "t.jsonl"
    long_reply = "I'm allergic to peanuts, noted. " + "Here is a long itinerary. " * 60
    lines = [
        {"role": "user", "content": "Plan my week."},
        {"id": "a1", "role": "assistant", "content": long_reply},
        {"role": "user", "content": "Thanks!"},
    ]
    p.write_text("\n".join(json.dumps(x) for x in lines))
    res = run(load(p), Settings(budget=150), ["allergic to peanuts"]).results[0]
    fact = res.facts[0]
    assert "a1" in res.turns[1].entered and "a1" in res.turns[1].evicted
    assert fact.stated_at_turn == 2 and fact.lost_at_turn == 2 and fact.mechanism == "evicted"
    assert fact.kept_by is None
