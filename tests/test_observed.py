"""The `observed` strategy and diagnosis from what the agent really saw
(docs/reference.md#observed-windows).

The OpenTelemetry fixture's agent sends the system prompt and its last 6 messages, and reports
prompt tokens that are exactly the OpenAI chat count of the request (computed by the fixture
script with tiktoken) plus 41 tokens of tool definitions that no message shows: so memdiag's
recount must differ from every reported count by exactly 41.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.config import Settings
from memdiag.diagnosis import Failure, diagnose
from memdiag.replay import run
from memdiag.stores.open import LongTermStores
from memdiag.strategies.observed import call_tokens
from memdiag.transcript import load
from tests.conftest import FIXTURES
from tests.test_stores import COSINE, _model_dir_or_skip, build_store

TRACES = FIXTURES / "formats" / "traces"
SPANS = TRACES / "otel_spans.json"
TOOL_DEFINITION_TOKENS = 41  # make_otel.py
runner = CliRunner()


def u1_of(path: Path = SPANS) -> str:
    t = load(path)
    return next(m.id for m in t.messages if m.content.startswith("Hi, I'm Mia"))


def test_recounted_tokens_beside_reported() -> None:
    t = load(SPANS)
    calls = call_tokens(t, Settings().token_counter())
    assert len(calls) == 11
    assert {c.difference for c in calls} == {TOOL_DEFINITION_TOKENS}
    assert [c.turn for c in calls] == [1, 2, 3, 4, 4, 5, 6, 7, 8, 9, 10]


def test_replay_all_shows_observed_beside_simulated() -> None:
    res = runner.invoke(
        app,
        [
            "replay",
            str(SPANS),
            "--strategy",
            "all",
            "--format",
            "json",
            "--fact",
            "allergic to peanuts",
            "--budget",
            "200",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert list(doc["strategies"]) == ["sliding_window", "summary", "scratchpad", "observed"]
    observed = doc["strategies"]["observed"]
    fact = observed["facts"][0]
    # u1 was in the requests of turns 1-3, not in turn 4's: lost at turn 4, evicted
    assert (fact["stated_at_turn"], fact["lost_at_turn"], fact["mechanism"]) == (1, 4, "evicted")
    u1 = u1_of()
    assert u1 in observed["turns"][3]["evicted"]
    assert [c["difference"] for c in observed["calls"]] == [TOOL_DEFINITION_TOKENS] * 11
    # the observed window's message tokens are the recount of its request (first of the turn)
    first = observed["calls"][0]
    assert observed["turns"][0]["tokens"]["total"] == first["tokens"]
    assert "calls" not in doc["strategies"]["sliding_window"]


def test_observed_needs_windows() -> None:
    res = runner.invoke(app, ["replay", str(FIXTURES / "allergy.jsonl"), "--strategy", "observed"])
    assert res.exit_code == 2
    assert "no observed windows" in res.stderr
    res = runner.invoke(
        app, ["replay", str(FIXTURES / "allergy.jsonl"), "--strategy", "all", "--format", "json"]
    )
    assert "observed" not in json.loads(res.stdout)["strategies"]


def test_diagnose_forgot_from_otel_trace_alone() -> None:
    """No store, no simulation settings: the trace says which request dropped the fact."""
    res = runner.invoke(
        app,
        [
            "diagnose",
            str(SPANS),
            "--fact",
            "allergic to peanuts",
            "--at",
            "8",
            "--format",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    (d,) = json.loads(res.stdout)["diagnoses"]
    assert (d["verdict"], d["layer"]) == ("short_term_dropped", "short_term")
    u1 = u1_of()
    obs = d["details"]["observed"]
    assert obs["last_seen_turn"] == 3 and d["details"]["lost_at_turn"] == 4
    assert obs["request_turn"] == 8
    assert obs["reported_prompt_tokens"] - obs["tokens"] == TOOL_DEFINITION_TOKENS
    assert d["details"]["explanation"] == (
        f"the request of turn 8 did not contain {u1}; it was dropped between turn 3 and turn 4"
    )
    wi = d["details"]["what_if"]
    assert wi["kept_by_strategy"]["scratchpad"] is True
    assert wi["kept_by_strategy"]["sliding_window"] is False
    assert any("scratchpad" in f for f in d["fixes"])


def test_diagnose_simulated_when_asked() -> None:
    t = load(SPANS)
    settings = Settings(budget=4000)
    (d,) = diagnose(t, settings, [Failure("allergic to peanuts", 8)], observed=False)
    assert d.verdict == "in_context"  # 4000 tokens of sliding window keep it
    (d,) = diagnose(t, settings, [Failure("allergic to peanuts", 8)])
    assert d.verdict == "short_term_dropped"


def test_fact_in_the_request_is_in_context() -> None:
    t = load(SPANS)
    (d,) = diagnose(t, Settings(), [Failure("flying to Lisbon on Friday", 3)])
    assert d.verdict == "in_context" and d.details.to_dict()["kept_by"] == "verbatim"


def test_long_term_judged_from_recorded_search_without_store() -> None:
    t = load(SPANS)
    (d,) = diagnose(t, Settings(), [Failure("allergic to peanuts", 10)])
    assert (d.verdict, d.layer) == ("long_term_not_retrieved", "long_term")
    assert "judged_from_trace" in d.flags
    (search,) = d.details.to_dict()["recorded_retrieval"]
    assert [r["id"] for r in search["records"]] == ["mem-1", "mem-2"]


def test_recorded_search_returned_it_but_request_lacked_it() -> None:
    t = load(TRACES / "langfuse_observations.json")
    (d,) = diagnose(t, Settings(), [Failure("allergic to peanuts", 5)])
    assert d.verdict == "long_term_not_injected"
    assert d.details.to_dict()["retrieved"] == ["mem-2"]


def test_letta_summary_dropped_the_fact() -> None:
    t = load(TRACES / "letta_agent.af")
    (d,) = diagnose(t, Settings(), [Failure("allergic to peanuts", 4)])
    assert d.verdict == "short_term_summarized_away"
    assert d.details.to_dict()["mechanism"] == "summarized_away"
    # what Letta's summary kept is in the request: a fact it states is in context
    (d,) = diagnose(t, Settings(), [Failure("flying to Lisbon on Friday", 4)])
    assert (d.verdict, d.details.to_dict()["kept_by"]) == ("in_context", "summary")


def test_opaque_compaction_is_flagged(tmp_path: Path) -> None:
    lines = [
        {"role": "user", "content": "I'm allergic to peanuts.", "id": "u1"},
        {"role": "assistant", "content": "Noted.", "id": "a1"},
        {"type": "window", "before": "a1", "ids": ["u1"]},
        {"role": "user", "content": "Book Lisbon.", "id": "u2"},
        {"role": "assistant", "content": "Done.", "id": "a2"},
        {
            "type": "window",
            "before": "a2",
            "ids": ["u2"],
            "extra": [
                {
                    "section": "summary",
                    "content": "",
                    "covers": ["u1", "a1"],
                    "opaque": True,
                    "tokens": 120,
                }
            ],
        },
        {"role": "user", "content": "Snack?", "id": "u3"},
        {"role": "assistant", "content": "Peanuts!", "id": "a3", "forgot": "allergic to peanuts"},
        {
            "type": "window",
            "before": "a3",
            "ids": ["u2", "a2", "u3"],
            "extra": [
                {
                    "section": "summary",
                    "content": "",
                    "covers": ["u1", "a1"],
                    "opaque": True,
                    "tokens": 120,
                }
            ],
        },
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    t = load(path)
    (d,) = diagnose(t, Settings(), [Failure("allergic to peanuts", 3, "a3")])
    assert d.verdict == "short_term_summarized_away"
    assert "opaque_compaction" in d.flags
    assert (
        d.details.to_dict()["observed"]["last_seen_turn"] == 1
        and d.details.to_dict()["lost_at_turn"] == 2
    )
    # the opaque item's reported size counts in the request's summary section
    calls = call_tokens(t, Settings().token_counter())
    assert calls[1].recounted > 120 and calls[1].exact


def test_opaque_item_of_unknown_size_is_a_lower_bound() -> None:
    """A Responses compaction item (fixture of the realdata readers) has no readable size."""
    t = load(FIXTURES / "formats" / "openai_responses" / "items.json")
    (call,) = call_tokens(t, Settings().token_counter())
    assert not call.exact
    (d,) = diagnose(t, Settings(), [Failure("allergic to peanuts", 3)])
    assert d.verdict == "short_term_summarized_away" and "opaque_compaction" in d.flags
    details = d.details.to_dict()
    assert details["observed"]["tokens_exact"] is False
    # the what-if does not take the lower bound for the agent's size
    assert details["what_if"]["budget"] == Settings().effective_budget()


@pytest.fixture(scope="module")
def agent_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    model = _model_dir_or_skip()
    path = tmp_path_factory.mktemp("agent") / "store"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(tmp_path_factory.getbasetemp() / "home"))
        mp.setenv("ANONYMIZED_TELEMETRY", "False")
        build_store(path, {"agent": ("agent.jsonl", COSINE)}, model)
    yield path


def test_store_and_recorded_search_disagree(agent_store: Path) -> None:
    """The trace's search did not return the allergy; the store, queried today, does."""
    t = load(SPANS)
    settings = Settings().with_overrides(**{"store.top_k": 20})
    stores = LongTermStores.open(None, str(agent_store), None)
    try:
        (d,) = diagnose(t, settings, [Failure("allergic to peanuts", 10)], stores)
    finally:
        stores.close()
    assert "retrieval_disagreement" in d.flags
    assert d.details.to_dict()["recorded_found"] is False
    assert d.details.to_dict()["fresh_query_found"] is True
    # the fresh query is the one the agent recorded, not a guess
    assert d.details.to_dict()["query"] == "Next Monday. Any snack idea for the train?"


def test_explicit_strategy_simulates_instead() -> None:
    res = runner.invoke(
        app,
        ["diagnose", str(SPANS), "--fact", "allergic to peanuts", "--at", "8",
         "--strategy", "sliding_window", "--budget", "100", "--format", "json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    (d,) = json.loads(res.stdout)["diagnoses"]
    assert d["details"]["strategy"] == "sliding_window" and "observed" not in d["details"]


def test_check_reads_a_trace(tmp_path: Path) -> None:
    spec = tmp_path / "checks.yaml"
    spec.write_text(
        "version: 1\n"
        "cases:\n"
        "  - name: the trace drops the allergy\n"
        f"    transcript: {SPANS}\n"
        "    expect:\n"
        "      - verdict: short_term_dropped\n"
        "        fact: allergic to peanuts\n"
        "        at_turn: 8\n"
        "      - verdict: long_term_not_retrieved\n"
        "        fact: allergic to peanuts\n"
        "        at_turn: 10\n"
    )
    res = runner.invoke(app, ["check", str(spec), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["passed"] == 1


@pytest.mark.parametrize(
    "path",
    [SPANS, TRACES / "langsmith_runs.json", TRACES / "langfuse_observations.json"],
    ids=lambda p: p.stem,
)
def test_observed_deltas_rebuild_each_turns_first_request(path: Path) -> None:
    """Replay's entered/evicted deltas for `observed` give back the recorded requests."""
    from memdiag.render.jsonout import turn_json
    from memdiag.strategies.observed import first_requests
    from tests.helpers import windows_from_deltas

    t = load(path)
    (res,) = run(t, Settings().with_overrides(strategy="observed")).results
    rebuilt = windows_from_deltas([turn_json(r) for r in res.turns])
    requests = first_requests(t)
    for record, window in zip(res.turns, rebuilt, strict=True):
        request = requests[record.turn]
        expected = [t.messages[i].id for i in request.indices if t.messages[i].role != "system"]
        assert sorted(window) == sorted(expected), record.turn


def test_long_term_without_recorded_search_says_what_the_request_held(tmp_path: Path) -> None:
    lines = [
        {"type": "session", "id": "s1"},
        {"role": "user", "content": "I'm allergic to peanuts.", "id": "u1"},
        {"role": "assistant", "content": "Noted.", "id": "a1"},
        {"type": "session", "id": "s2"},
        {"role": "user", "content": "Snack?", "id": "u2"},
        {"role": "assistant", "content": "Peanuts!", "id": "a2", "forgot": "allergic to peanuts"},
        {"type": "window", "before": "a2", "ids": ["u2"]},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    (d,) = diagnose(load(path), Settings(), [Failure("allergic to peanuts", 2, "a2")])
    assert d.verdict == "long_term_not_written" and "no_store_checked" in d.flags
    assert d.fixes[0].startswith("The request of turn 2 (a2) did not contain it")
    # the memories injected into the request are what long-term memory delivered
    lines[-1] = {
        "type": "window",
        "before": "a2",
        "ids": ["u2"],
        "extra": [{"section": "memories", "content": "User is allergic to peanuts."}],
    }
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    (d,) = diagnose(load(path), Settings(), [Failure("allergic to peanuts", 2, "a2")])
    assert (d.verdict, d.details.to_dict()["kept_by"]) == ("in_context", "memories")
