"""A LangChain agent whose SummarizationMiddleware summarized a fact away (docs/traces.md).

fixtures/stacks/summarized_away/make.py ran the real `create_agent` + `SummarizationMiddleware`
with scripted chat models, traced by OpenInference and by LangChain's LangSmith tracer. The user
told the agent at turn 1 she is allergic to peanuts; at turn 6 it suggested peanuts. The
summarizer's own call is no turn: the user's turn 6 is memdiag's turn 6, the evidence is her
message (not the summarizer's prompt), and the verdict is summarized away, not evicted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.tokens import TokenCounter
from memdiag.transcript import load
from tests.conftest import FIXTURES

STACK = FIXTURES / "stacks" / "summarized_away"
TRACES = [STACK / "openinference.json", STACK / "langsmith_runs.json"]
FACT = "allergic to peanuts"
runner = CliRunner()


def diagnose(path: Path, *args: str) -> dict[str, Any]:
    res = runner.invoke(
        app, ["diagnose", str(path), "--fact", FACT, "--at", "6", "--format", "json", *args]
    )
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["diagnoses"][0]


def last_span_inputs() -> list[tuple[str, str]]:
    """The raw input messages of the last LLM span, read from the file without memdiag."""
    spans = json.loads((STACK / "openinference.json").read_text())
    llm = [s for s in spans if s["attributes"].get("openinference.span.kind") == "LLM"]
    a = llm[-1]["attributes"]
    out = []
    k = 0
    while f"llm.input_messages.{k}.message.role" in a:
        out.append(
            (
                a[f"llm.input_messages.{k}.message.role"],
                a[f"llm.input_messages.{k}.message.content"],
            )
        )
        k += 1
    return out


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_the_verdict_is_summarized_away_at_the_users_turn(path: Path) -> None:
    d = diagnose(path)
    assert d["verdict"] == "short_term_summarized_away"
    assert d["details"]["mechanism"] == "summarized_away"
    assert d["details"]["lost_at_turn"] == 5  # the summary came before the reply of turn 5
    assert d["details"]["observed"]["request_turn"] == 6
    top = d["evidence"][0]
    assert top["text"].startswith("Hi, I'm Mia. I'm allergic to peanuts") and top["turn"] == 1
    # the summarizer's prompt is not evidence
    assert not any("summar" in e["text"].lower() for e in d["evidence"])


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_turns_are_the_humans_and_the_summary_is_a_section(path: Path) -> None:
    t = load(path)
    users = [m.content for m in t.messages if m.role == "user"]
    assert len(t.turns) == 6 and len(users) == 6
    assert not any("summary of the conversation" in u for u in users)
    assert any("auxiliary" in w for w in t.warnings)
    # the summary is one summary event, and a `summary` section of the later requests that
    # covers the messages it replaced (the allergy among them)
    assert len(t.summaries) == 1
    fact_id = next(m.id for m in t.messages if "allergic" in m.content)
    later = [w for w in t.windows if t.messages[w.before].turn >= 5]
    assert len(later) == 2
    for w in later:
        (summary,) = [e for e in w.extra if e.section == "summary"]
        assert "Memmo Alfama" in summary.content and fact_id in summary.covers
        assert fact_id not in w.ids


def test_window_tokens_are_the_request_as_sent() -> None:
    # the recounted request of turn 6 is the span's own input, counted once
    d = diagnose(STACK / "openinference.json")
    counter = TokenCounter()
    raw = last_span_inputs()
    assert len(raw) == 6  # system, summary, the 2 kept messages, reply 5, question 6
    expected = sum(counter.message_cost(role, text) for role, text in raw)
    assert d["details"]["observed"]["tokens"] == expected + counter.overhead.reply_priming


def test_both_traces_give_the_same_conversation() -> None:
    a, b = (load(p) for p in TRACES)
    assert [(m.role, m.content) for m in a.messages] == [(m.role, m.content) for m in b.messages]
    assert [len(w.ids) for w in a.windows] == [len(w.ids) for w in b.windows]
