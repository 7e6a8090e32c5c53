"""`{"conversations": [{"from", "value"}]}` per line or as a JSON array; each conversation
is one session, named by its `id` (s1, s2, ... without one)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memdiag.transcript.model import RawItem, RawMessage, RawSession
from memdiag.transcript.source import Elements, Source, json_loads, openai_tool_call
from memdiag.transcript.toolkit import reject

name = "sharegpt"
# recognised by its own key (`conversations`): its place among the datasets does not matter
detect_priority = 60
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = ("formats/sharegpt.jsonl",)

_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "model": "assistant",
    "system": "system",
    "tool": "tool",
    "observation": "tool",
    "function_response": "tool",
    "function_call": "assistant",
}


def _calls(value: str, sid: str, k: int) -> list[dict[str, Any]]:
    """The tool calls of a `function_call` turn (JSON `{"name", "arguments"}` or a list)."""
    try:
        parsed = json_loads(value)
    except ValueError:  # not JSON, or beyond the reader's limits: plain text, not a call
        return []
    calls = parsed if isinstance(parsed, list) else [parsed]
    if not calls or not all(isinstance(c, dict) and "name" in c for c in calls):
        return []
    # ShareGPT has no call ids: make ones that are unique in the transcript so that the
    # following observation pairs with its call
    return [
        openai_tool_call(f"{sid}-call{k}-{j}", c["name"], c.get("arguments", c.get("parameters")))
        for j, c in enumerate(calls)
    ]


def detect(source: Source) -> bool:
    first = Elements(source).first()
    return isinstance(first, dict) and isinstance(first.get("conversations"), list)


def read(source: Source, skip_invalid: bool) -> Iterator[RawItem]:
    els = Elements(source)
    for n, (line, conv) in enumerate(els.items):
        label = f"conversation {n + 1}: " if els.is_array else ""
        if not isinstance(conv, dict) or not isinstance(conv.get("conversations"), list):
            reject(
                source, skip_invalid, f"{label}missing field 'conversations' (a list)", els.line(n)
            )
            continue
        sid = str(conv.get("id") or f"s{n + 1}")
        yield RawSession(sid, line)
        if isinstance(conv.get("system"), str) and conv["system"]:
            yield RawMessage("system", conv["system"], line)
        pending: list[str] = []  # tool call ids waiting for their observation
        for k, turn in enumerate(conv["conversations"]):
            try:
                msg = _turn(turn, line, sid, k, pending)
            except ValueError as exc:
                reject(source, skip_invalid, f"{label}conversations[{k}]: {exc}", els.line(n))
                continue
            yield msg


def _turn(turn: Any, line: int, sid: str, k: int, pending: list[str]) -> RawMessage:
    if not isinstance(turn, dict):
        raise ValueError(f"expected an object, got {type(turn).__name__}")
    speaker = turn.get("from", turn.get("role"))
    if not isinstance(speaker, str):
        raise ValueError("missing field 'from' (human, gpt, system, ...)")
    role = _ROLES.get(speaker.lower())
    if role is None:
        raise ValueError(
            f"field 'from': unknown speaker {speaker!r}; expected one of " + ", ".join(_ROLES)
        )
    value = turn.get("value", turn.get("content"))
    if not isinstance(value, str):
        raise ValueError("missing field 'value' (a string)")
    meta = {key: v for key, v in turn.items() if key not in ("from", "role", "value", "content")}
    if speaker.lower() == "function_call":
        calls = _calls(value, sid, k)
        if calls:
            pending.extend(c["id"] for c in calls)
            return RawMessage(role, "", line, tool_calls=tuple(calls), metadata=meta)
    call_id = pending.pop(0) if role == "tool" and pending else None
    return RawMessage(role, value, line, tool_call_id=call_id, metadata=meta)
