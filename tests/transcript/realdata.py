"""What the tests of the real-world formats share: fixture paths, checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memdiag.errors import InputError
from memdiag.transcript import Transcript, load

FORMATS = Path(__file__).resolve().parents[2] / "fixtures" / "formats"
RESPONSES = FORMATS / "openai_responses" / "items.json"
AGENT_DB = FORMATS / "agents_sqlite" / "agent.db"
ADVANCED_DB = FORMATS / "agents_sqlite" / "advanced.db"
CHATGPT = FORMATS / "chatgpt" / "conversations.json"
CLAUDE = FORMATS / "claude" / "conversations.json"
LANGGRAPH = FORMATS / "langgraph"
SDK_DUMPS = FORMATS / "sdk_dumps"

runner = CliRunner()


def roles(t: Transcript) -> list[str]:
    return [m.role for m in t.messages]


def ids(t: Transcript) -> list[str]:
    return [m.id for m in t.messages]


def assert_tool_pairs(t: Transcript) -> None:
    """Every tool result answers a call made earlier in its session, and every call is answered
    before the next user message."""
    open_calls: set[str] = set()
    for m in t.messages:
        if m.role == "user":
            assert not open_calls, f"calls {open_calls} unanswered before {m.id}"
        open_calls |= set(m.tool_call_ids)
        if m.role == "tool" and m.tool_call_id is not None:
            assert m.tool_call_id in open_calls, f"{m.id} answers no open call"
            open_calls.discard(m.tool_call_id)
    assert not open_calls


def no_nulls(value: Any) -> bool:
    if isinstance(value, dict):
        return all(v is not None and no_nulls(v) for v in value.values())
    if isinstance(value, list):
        return all(no_nulls(v) for v in value)
    return True


def write_json(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return path


def error_of(path: Path, **kwargs: Any) -> str:
    with pytest.raises(InputError) as info:
        load(path, **kwargs)
    text = str(info.value)
    assert text.startswith(f"{path}:")
    return text
