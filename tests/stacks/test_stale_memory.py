"""A LangChain agent that writes memories with a model and injects them into its system prompt
(docs/traces.md): the memory writer's calls are no turns, the injected memories are the
window's `memories` section (the stable prompt is counted once), and an older and a newer value
of one fact in them is flagged from the trace alone.

fixtures/stacks/stale_memory/make.py ran the real libraries with scripted models: the user
lives in Berlin, then moved to Lisbon (session s1); in session s2 both memories are injected
and the agent answers with Berlin's weather.
"""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.tokens import TokenCounter
from memdiag.transcript import load
from tests.conftest import FIXTURES

TRACE = FIXTURES / "stacks" / "stale_memory" / "trace.json"
runner = CliRunner()


def run(*args: str) -> dict[str, Any]:
    res = runner.invoke(app, [*args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_the_writer_is_no_turn_and_its_memories_are_a_section() -> None:
    t = load(TRACE)
    assert [m.content for m in t.messages if m.role == "user"] == [
        "Hi! I live in Berlin.",
        "Big news: I moved to Lisbon last month.",
        "How is the weather at home today?",
    ]
    assert not any(m.content.startswith("Write one memory") for m in t.messages)
    # one stable system prompt per session, the memories beside it
    assert {m.content for m in t.messages if m.role == "system"} == {
        "You are a travel assistant. Be brief."
    }
    last = t.windows[-1]
    (memories,) = last.extra
    assert memories.section == "memories"
    assert "User lives in Berlin." in memories.content
    assert "User moved to Lisbon last month." in memories.content


def test_window_tokens_count_the_system_prompt_once() -> None:
    out = run("replay", str(TRACE), "--strategy", "observed")
    observed = out["strategies"]["observed"]
    # every turn's window is its recorded request, recounted: no system prompt of session s1
    # counted again in s2
    assert [t["tokens"]["total"] for t in observed["turns"]] == [
        c["tokens"] for c in observed["calls"]
    ]
    spans = json.loads(TRACE.read_text())
    last = [s for s in spans if s["attributes"].get("openinference.span.kind") == "LLM"][-1]
    a = last["attributes"]
    counter = TokenCounter()
    sent = sum(
        counter.message_cost(
            a[f"llm.input_messages.{k}.message.role"], a[f"llm.input_messages.{k}.message.content"]
        )
        for k in range(2)
    )
    turn3 = observed["turns"][-1]["tokens"]
    assert (
        turn3["system"] + turn3["memories"] + turn3["messages"] == observed["calls"][-1]["tokens"]
    )
    # the system message split in two costs one message's overhead more than as sent
    assert abs(observed["calls"][-1]["tokens"] - (sent + counter.overhead.reply_priming)) <= 4


def test_the_older_memory_used_is_stale_from_the_trace_alone() -> None:
    (d,) = run("diagnose", str(TRACE), "--fact", "lives in Lisbon", "--at", "3")["diagnoses"]
    assert d["verdict"] == "long_term_stale"
    assert "conflict_in_context" in d["flags"] and "judged_from_trace" in d["flags"]
    said = [e["text"] for e in d["evidence"] if e["stated"]]
    assert "Big news: I moved to Lisbon last month." in said
    assert "'berlin' (older) and 'lisbon' (newer)" in d["fixes"][0]
