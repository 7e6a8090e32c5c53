"""smolagents memory (fixtures/formats/smolagents): `agent.write_memory_to_messages()` of a
ToolCallingAgent after five tasks, dumped with ChatMessage.dict()."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from memdiag.transcript import detect_format, load, read_source
from tests.transcript.realdata import FORMATS, assert_tool_pairs, error_of, roles, write_json

MEMORY = FORMATS / "smolagents" / "memory.json"
RAW = json.loads(MEMORY.read_text())


def test_the_memory_reads_as_the_agent_sends_it() -> None:
    assert detect_format(read_source(MEMORY)) == "smolagents"
    t = load(MEMORY)
    assert roles(t)[0] == "system" and len(t.turns) == 5
    assert t.turns and t.messages[1].content.startswith("New task:\nHi, I'm Mia")
    calls = [c for m in t.messages for c in m.tool_calls]
    listed = [r for r in RAW if r["role"] == "tool-call"]
    assert [c["id"] for c in calls] == [f"call_{k}" for k in range(1, 7)] and len(listed) == 6
    assert calls[1]["function"] == {"name": "get_weather", "arguments": {"city": "Lisbon"}}
    # the model's text and the calls it made are one reply
    weather = next(m for m in t.messages if m.tool_calls and m.tool_calls[0]["id"] == "call_2")
    assert weather.content == "Let me check the weather in Lisbon."
    tools = [m for m in t.messages if m.role == "tool"]
    assert [m.tool_call_id for m in tools] == [c["id"] for c in calls]
    assert tools[1].content == "Observation:\nsunny, 24 °C"
    assert_tool_pairs(t)
    assert len(t.messages) == len(RAW) - len(listed)  # each assistant text joined its calls


def test_an_error_observation_names_its_call(tmp_path: Path) -> None:
    doc = copy.deepcopy(RAW)
    doc[8]["content"][0]["text"] = "Call id: call_2\nError:\nthe weather service is down"
    t = load(write_json(tmp_path / "m.json", doc))
    assert [m for m in t.messages if m.role == "tool"][1].tool_call_id == "call_2"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d[3].update(role="tool-cal"), "[3].role: unknown role 'tool-cal'"),
        (
            lambda d: d[3]["content"][0].update(text="Calling tools:\n[{'id': "),
            "[3].content: the calls after 'Calling tools:' are not a Python list",
        ),
        (
            lambda d: d[3]["content"][0].update(text="Calling tools:\n[{'id': 'x'}]"),
            "[3].tool_calls[0].name: expected a string, got null",
        ),
    ],
)
def test_bad_messages_are_one_line_naming_the_path(tmp_path: Path, change, says) -> None:
    doc = copy.deepcopy(RAW)
    change(doc)
    assert says in error_of(write_json(tmp_path / "m.json", doc), fmt="smolagents")
