"""A LangGraph `travel-agent` (node `agent`) calling a `research-agent` as a tool, under
OpenInference (docs/traces.md): every LLM span of the main agent runs under two AGENT spans,
and the main conversation is still the one the human talks to.

fixtures/stacks/sub_agent/make.py ran the real libraries with scripted models. The user said
at turn 1 she is vegetarian; the research agent, which never heard it, suggested a steakhouse.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.transcript import load
from tests.conftest import FIXTURES

STACK = FIXTURES / "stacks" / "sub_agent"
runner = CliRunner()


def diagnose(path: str, *args: str) -> dict[str, Any]:
    res = runner.invoke(app, ["diagnose", path, "--fact", "vegetarian", "--format", "json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["diagnoses"][0]


def test_the_main_conversation_is_the_humans_and_the_sub_agent_is_listed() -> None:
    t = load(STACK / "trace.json")
    assert [m.content for m in t.messages if m.role == "user"] == [
        "I'm vegetarian, by the way.",
        "Where should I have dinner in Graça?",
    ]
    assert len(t.turns) == 2 and len(t.windows) == 3  # two calls at turn 2 (a tool loop)
    # the research agent's answer reaches the main agent as the tool result, once
    assert [m.content for m in t.messages if m.role == "tool"] == [
        "Churrasqueira da Graça serves the best steak in Lisbon, near the Graça viewpoint."
    ]
    (warning,) = [w for w in t.warnings if "left out" in w]
    assert "research-agent (1)" in warning and "--agent" in warning


def test_the_main_agent_had_the_fact_the_sub_agent_did_not() -> None:
    main = diagnose(str(STACK / "trace.json"), "--at", "2")
    assert main["verdict"] == "in_context"
    assert main["evidence"][0]["text"] == "I'm vegetarian, by the way."
    assert main["details"]["observed"]["request_turn"] == 2
    sub = runner.invoke(
        app,
        ["convert", str(STACK / "trace.json"), "--agent", "research-agent"],
    )
    assert sub.exit_code == 0, sub.output
    lines = [json.loads(x) for x in sub.stdout.splitlines()]
    said = [x["content"] for x in lines if x.get("role") in ("user", "assistant")]
    assert said == [
        "A good dinner place in Lisbon's Graça?",
        "Churrasqueira da Graça serves the best steak in Lisbon, near the Graça viewpoint.",
    ]
    assert not any("vegetarian" in s for s in said)


def test_an_unknown_agent_lists_the_agents() -> None:
    res = runner.invoke(app, ["convert", str(STACK / "trace.json"), "--agent", "nope"])
    assert res.exit_code == 2
    assert "no agent is 'nope' among 2" in res.output and "--agent all" in res.output
    assert "travel-agent/ask_researcher/research-agent  1 call" in res.output


def test_a_file_of_sub_agent_calls_alone_is_read() -> None:
    t = load(STACK / "researcher_only.json")
    assert [m.role for m in t.messages] == ["system", "user", "assistant"]
    assert len(t.windows) == 1


def test_agent_is_refused_for_a_file_without_calls() -> None:
    res = runner.invoke(app, ["convert", str(FIXTURES / "demo.jsonl"), "--agent", "research-agent"])
    assert res.exit_code == 2 and "--agent" in res.output


def test_console_span_exporter_output_reads_as_the_same_trace() -> None:
    # ConsoleSpanExporter's default: pretty-printed spans one after another, no array
    console = load(STACK / "console.json")
    array = load(STACK / "trace.json")
    assert [(m.role, m.content) for m in console.messages] == [
        (m.role, m.content) for m in array.messages
    ]
    assert [w.ids for w in console.windows] == [w.ids for w in array.windows]


def test_a_broken_document_among_concatenated_ones_names_its_line(tmp_path: Path) -> None:
    text = (STACK / "console.json").read_text()
    cut = text.index("\n}\n{") + 3  # the second span starts here
    bad = tmp_path / "console.json"
    bad.write_text(text[:cut] + '    "name": oops,\n' + text[cut:])
    res = runner.invoke(app, ["convert", str(bad)])
    assert res.exit_code == 2
    assert "invalid JSON" in res.output and "Traceback" not in res.output


def test_agent_all_reads_every_agent_each_in_its_own_session() -> None:
    res = runner.invoke(app, ["convert", str(STACK / "trace.json"), "--agent", "all"])
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    sessions = [x["id"] for x in lines if x.get("type") == "session"]
    assert sessions == ["trip-7", "travel-agent/ask_researcher/research-agent@trip-7"]
    users = [x["content"] for x in lines if x.get("role") == "user"]
    assert users == [
        "I'm vegetarian, by the way.",
        "Where should I have dinner in Graça?",
        "A good dinner place in Lisbon's Graça?",
    ]
