"""A LangGraph `travel-agent` (node `agent`) that trims its history with `trim_messages`,
under OpenInference (docs/traces.md): every LLM span runs under two AGENT spans, and the trace
still reads as the human's conversation (once "no messages found").

fixtures/stacks/trimmed/make.py ran the real libraries with a scripted model.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.tokens import TokenCounter
from memdiag.transcript import load
from tests.conftest import FIXTURES

TRACE = FIXTURES / "stacks" / "trimmed" / "trace.json"
runner = CliRunner()


def test_the_trimmed_fact_is_dropped_at_the_users_turn() -> None:
    res = runner.invoke(
        app,
        ["diagnose", str(TRACE), "--fact", "allergic to peanuts", "--at", "5", "--format", "json"],
    )
    assert res.exit_code == 0, res.output
    (d,) = json.loads(res.stdout)["diagnoses"]
    assert d["verdict"] == "short_term_dropped" and d["details"]["mechanism"] == "evicted"
    assert d["evidence"][0]["text"] == "Hi, I'm Mia. I'm allergic to peanuts."
    assert d["details"]["observed"]["request_turn"] == 5
    # the window is the last LLM span's input, recounted
    spans = json.loads(TRACE.read_text())
    a = [s for s in spans if s["attributes"].get("openinference.span.kind") == "LLM"][-1][
        "attributes"
    ]
    counter = TokenCounter()
    sent = []
    k = 0
    while f"llm.input_messages.{k}.message.role" in a:
        sent.append(
            counter.message_cost(
                a[f"llm.input_messages.{k}.message.role"],
                a[f"llm.input_messages.{k}.message.content"],
            )
        )
        k += 1
    assert len(d["details"]["observed"]["window_ids"]) == k
    assert d["details"]["observed"]["tokens"] == sum(sent) + counter.overhead.reply_priming


def test_five_turns_and_no_agent_left_out() -> None:
    t = load(TRACE)
    assert len(t.turns) == 5 and len(t.windows) == 5
    assert not any("left out" in w for w in t.warnings)
