"""The ShareGPT reader."""

from __future__ import annotations

from pathlib import Path

from memdiag.transcript import load
from tests.transcript.common import (
    SHAREGPT,
    roles,
    write_json,
)


def test_sharegpt_fixture_sessions_and_function_calls() -> None:
    t = load(SHAREGPT)
    assert t.sessions == ("sg-001", "sg-002", "s3")
    assert [sum(m.session == s for m in t.messages) for s in t.sessions] == [5, 5, 2]
    assert roles(t)[5:10] == ["system", "user", "assistant", "tool", "assistant"]
    call, result = t.messages[7], t.messages[8]
    assert call.tool_calls[0]["function"] == {
        "name": "convert_units",
        "arguments": {"value": 5, "from": "km", "to": "mi"},
    }
    assert result.tool_call_id == call.tool_call_ids[0]
    assert result.content == '{"result": 3.107}'
    assert len(t.turns) == 4


def test_sharegpt_json_array(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "sg.json",
        [
            {"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]},
            {"id": "x", "conversations": [{"from": "human", "value": "c"}]},
        ],
    )
    t = load(path)
    assert (t.format, t.sessions, roles(t)) == (
        "sharegpt",
        ("s1", "x"),
        ["user", "assistant", "user"],
    )
