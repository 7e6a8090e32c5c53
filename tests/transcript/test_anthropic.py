"""The Anthropic Messages API reader."""

from __future__ import annotations

from pathlib import Path

from memdiag.transcript import load
from tests.transcript.common import (
    ANTHROPIC,
    roles,
    write_json,
    write_jsonl,
)


def test_anthropic_document_and_response_log(tmp_path: Path) -> None:
    doc = write_json(
        tmp_path / "doc.json",
        {"system": "Be kind.", "messages": [{"role": "user", "content": "hello"}]},
    )
    t = load(doc)
    assert (t.format, roles(t)) == ("anthropic", ["system", "user"])

    log = write_jsonl(
        tmp_path / "log.jsonl",
        [
            {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [{"type": "text", "text": "Hi there"}],
                "stop_reason": "end_turn",
            },
            {
                "id": "msg_02",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [{"type": "text", "text": "Again"}],
                "stop_reason": "end_turn",
            },
        ],
    )
    t = load(log)
    assert t.format == "anthropic"
    assert [m.id for m in t.messages] == ["msg_01", "msg_02"]
    assert t.messages[0].metadata["stop_reason"] == "end_turn"


def test_anthropic_fixture_messages_sessions_and_tool_pairing() -> None:
    t = load(ANTHROPIC)
    assert t.sessions == ("trip-weather", "trip-snacks")
    assert roles(t) == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "system",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]
    # the tool_result-only user message is no turn; the one with text after its result is
    assert len(t.turns) == 4
    assert [t.messages[turn.user_index].content for turn in t.turns] == [
        "Hi, I'm Mia. I'm allergic to peanuts. What's the weather in Lisbon tomorrow?",
        "Here is my boarding pass. Which gate do I need?",
        "Suggest a snack for my flight.",
        "Something sweet, please.",
    ]
    for tool in (m for m in t.messages if m.role == "tool"):
        call = t.messages[tool.index - 1]
        assert call.role == "assistant"
        assert tool.tool_call_id in call.tool_call_ids
    first_call = t.messages[2].tool_calls[0]
    assert first_call["id"] == "toolu_01A"
    assert first_call["function"]["name"] == "get_weather"
    assert first_call["function"]["arguments"] == {"city": "Lisbon", "day": "tomorrow"}
    assert t.messages[3].content == "Sunny, 24°C, light wind from the north"
    assert t.messages[7].content == "You are a travel assistant."  # system as text blocks
    assert t.messages[10].content == '{"allergies": ["peanuts"], "diet": "none"}'
    image = t.messages[5]
    assert image.content == "Here is my boarding pass. Which gate do I need?"
    assert image.metadata["blocks"][0]["type"] == "image"


def test_anthropic_tool_error_flag_is_kept(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "a.jsonl",
        [
            {
                "system": "s",
                "messages": [
                    {"role": "user", "content": "go"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
                    },
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": "t1",
                                "content": "boom",
                                "is_error": True,
                            }
                        ],
                    },
                ],
            }
        ],
    )
    tool = load(path).messages[-1]
    assert (tool.role, tool.tool_call_id, tool.metadata) == ("tool", "t1", {"is_error": True})
