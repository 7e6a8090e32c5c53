"""The LangChain reader."""

from __future__ import annotations

from pathlib import Path

from memdiag.transcript import load
from tests.transcript.common import (
    LANGCHAIN,
    roles,
    write_json,
    write_jsonl,
)


def test_langchain_fixture() -> None:
    t = load(LANGCHAIN)
    assert roles(t) == ["system", "user", "assistant", "user", "assistant", "tool", "assistant"]
    assert [m.id for m in t.messages] == [
        "m1",
        "lc-h1",
        "lc-a1",
        "lc-h2",
        "lc-a2",
        "lc-t1",
        "lc-a3",
    ]
    call = t.message("lc-a2").tool_calls[0]
    assert call == {
        "id": "call_7f3a",
        "type": "function",
        "function": {"name": "search_recipes", "arguments": {"query": "eggless pancakes"}},
    }
    tool = t.message("lc-t1")
    assert (tool.tool_call_id, tool.name) == ("call_7f3a", "search_recipes")
    assert len(t.turns) == 2
    assert t.sessions == ("s1",)


def test_langchain_jsonl_dumpd_and_several_conversations(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "lc.jsonl",
        [
            {"type": "human", "data": {"content": "hi", "id": "h1"}},
            {
                "lc": 1,
                "type": "constructor",
                "id": ["langchain", "schema", "messages", "AIMessage"],
                "kwargs": {"content": "hello", "id": "a1"},
            },
            {"type": "AIMessageChunk", "data": {"content": "more", "id": "a2"}},
        ],
    )
    t = load(path)
    assert (t.format, roles(t), [m.id for m in t.messages]) == (
        "langchain",
        ["user", "assistant", "assistant"],
        ["h1", "a1", "a2"],
    )
    nested = write_json(
        tmp_path / "lc2.json",
        [
            [{"type": "human", "data": {"content": "a"}}, {"type": "ai", "data": {"content": "b"}}],
            [{"type": "human", "data": {"content": "c"}}],
        ],
    )
    t = load(nested)
    assert t.sessions == ("s1", "s2")
    assert [m.session for m in t.messages] == ["s1", "s1", "s2"]
