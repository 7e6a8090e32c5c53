"""LangChain message dumps and LangGraph state, from a real LangGraph run (langgraph,
langchain-core): model_dump, the thread state of the API, dumpd(state.values)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from memdiag.transcript import detect_format, load, read_source
from tests.transcript.realdata import (
    LANGGRAPH,
    assert_tool_pairs,
    error_of,
    ids,
    roles,
    write_json,
)


@pytest.mark.parametrize("name", ["model_dump.json", "thread_state.json", "dumpd_state.json"])
def test_langgraph_dumps_are_read_alike(name: str) -> None:
    t = load(LANGGRAPH / name)
    assert t.format == "langchain"
    assert roles(t) == ["system", "user", "assistant", "user", "assistant", "tool", "assistant"]
    assert ids(t)[0] == "sys" and ids(t)[2] == "ai-1" and ids(t)[-1] == "ai-3"
    raw = json.loads((LANGGRAPH / "model_dump.json").read_text())
    assert ids(t)[1] == raw[1]["id"]  # the ids LangGraph gave the human messages
    assert t.message("ai-2").tool_calls[0]["id"] == "call_flights_1"
    assert t.messages[5].tool_call_id == "call_flights_1"
    assert t.messages[5].name == "search_flights"
    assert_tool_pairs(t)
    # the dump's nulls and empty fields are gone; a tool message keeps its status
    assert [m.metadata for m in t.messages if m.metadata] == [{"status": "success"}]


def test_langgraph_thread_state_names_the_session() -> None:
    assert load(LANGGRAPH / "thread_state.json").sessions == ("mia",)


def test_langgraph_state_values_not_misread_as_openai(tmp_path: Path) -> None:
    raw = json.loads((LANGGRAPH / "model_dump.json").read_text())
    path = write_json(tmp_path / "values.json", {"messages": raw})
    assert detect_format(read_source(path)) == "langchain"
    path = tmp_path / "msgs.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in raw))
    assert load(path).format == "langchain"


def test_langgraph_history_reads_the_newest_state(tmp_path: Path) -> None:
    state = json.loads((LANGGRAPH / "thread_state.json").read_text())
    older = copy.deepcopy(state)
    older["values"]["messages"] = older["values"]["messages"][:3]
    older["created_at"] = "2000-01-01T00:00:00+00:00"
    path = write_json(tmp_path / "history.json", [state, older])
    assert len(load(path).messages) == 7


def test_langchain_bad_message_names_its_path(tmp_path: Path) -> None:
    state = json.loads((LANGGRAPH / "thread_state.json").read_text())
    state["values"]["messages"][2]["type"] = "alien"
    path = write_json(tmp_path / "state.json", state)
    text = error_of(path, fmt="langchain")
    assert text.startswith(f"{path}: values.messages[2].type: unknown message type 'alien'")
