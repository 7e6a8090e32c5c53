"""Pydantic AI message history, as `result.all_messages_json()` wrote it after two runs (the
second continuing the first with `message_history`): fixtures/formats/pydantic_ai."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from memdiag.transcript import detect_format, load, read_source
from tests.transcript.realdata import FORMATS, assert_tool_pairs, error_of, roles, write_json

HISTORY = FORMATS / "pydantic_ai" / "history.json"
RAW = json.loads(HISTORY.read_text())


def test_the_history_of_two_runs_is_one_conversation() -> None:
    t = load(HISTORY)
    assert t.format == "pydantic_ai"
    assert t.sessions == (RAW[0]["conversation_id"],)  # both runs share it
    parts = [p["part_kind"] for m in RAW for p in m["parts"]]
    # every part a message (a response's parts are one message), plus the second run's
    # instructions, saved on its requests rather than as a part
    responses = sum(m["kind"] == "response" for m in RAW)
    requests_parts = sum(len(m["parts"]) for m in RAW if m["kind"] == "request")
    assert len(t.messages) == requests_parts + responses + 1
    assert parts.count("user-prompt") == len(t.turns) == 5
    assert roles(t)[:7] == ["system", "user", "assistant", "user", "assistant", "tool", "assistant"]
    assert t.messages[0].content.startswith("You are a travel assistant")
    later = [m for m in t.messages if m.metadata.get("instructions")]
    assert [m.content for m in later] == [RAW[8]["instructions"]]  # once, where they appear
    assert later[0].index == t.turns[3].user_index - 1


def test_tool_calls_keep_their_ids_and_pair_with_their_returns() -> None:
    t = load(HISTORY)
    (call,) = [c for m in t.messages for c in m.tool_calls]
    assert call["id"] == "call_weather_1" and call["function"]["name"] == "get_weather"
    assert call["function"]["arguments"] == {"city": "Lisbon"}
    (ret,) = [m for m in t.messages if m.role == "tool"]
    assert ret.tool_call_id == "call_weather_1" and ret.name == "get_weather"
    assert ret.content == "sunny, 24 °C"
    assert_tool_pairs(t)


def test_runs_models_and_usage_are_metadata() -> None:
    t = load(HISTORY)
    replies = [m for m in t.messages if m.role == "assistant"]
    assert {m.metadata["model_name"] for m in replies} == {"scripted-travel"}
    assert len({m.metadata["run_id"] for m in replies}) == 5  # one run per user prompt
    assert all(m.metadata["usage"]["input_tokens"] > 0 for m in replies)


def test_detected_and_not_taken_by_the_chat_readers(tmp_path: Path) -> None:
    assert detect_format(read_source(HISTORY)) == "pydantic_ai"
    path = tmp_path / "lines.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in RAW))
    assert len(load(path).messages) == len(load(HISTORY).messages)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d[2]["parts"][0].pop("part_kind"), "[2].parts[0].part_kind: missing field"),
        (
            lambda d: d[3]["parts"][0].update(part_kind="hologram"),
            "[3].parts[0].part_kind: unknown response part 'hologram'",
        ),
        (lambda d: d[4].update(kind="telegram"), "[4].kind: expected request or response"),
        (lambda d: d[3]["parts"][0].pop("tool_name"), "[3].parts[0].tool_name: expected a string"),
    ],
)
def test_bad_parts_are_one_line_naming_the_path(tmp_path: Path, change, says) -> None:
    doc = copy.deepcopy(RAW)
    change(doc)
    text = error_of(write_json(tmp_path / "h.json", doc), fmt="pydantic_ai")
    assert says in text and "\n" not in text


def test_skip_invalid_skips_the_bad_message(tmp_path: Path) -> None:
    doc = copy.deepcopy(RAW)
    doc[1]["parts"][0]["part_kind"] = "hologram"
    t = load(write_json(tmp_path / "h.json", doc), skip_invalid=True)
    assert t.skipped == 1 and len(t.messages) == len(load(HISTORY).messages) - 1
