"""LangChain message dicts (`messages_to_dict`, or `dumpd`'s constructor form) one per line
or as a JSON array; an array of arrays holds several conversations (one session each)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memdiag.transcript.model import ROLES, RawItem, RawMessage, RawSession
from memdiag.transcript.source import Elements, Source, checked_text, openai_tool_call, path_str

name = "langchain"

_ROLES = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
    "developer": "system",
}
# class names of the `dumpd` form and of streamed chunks → the `type` of messages_to_dict
_CLASSES = {
    "HumanMessage": "human",
    "AIMessage": "ai",
    "SystemMessage": "system",
    "ToolMessage": "tool",
    "FunctionMessage": "function",
    "ChatMessage": "chat",
}
_KEPT = (
    "additional_kwargs",
    "response_metadata",
    "invalid_tool_calls",
    "usage_metadata",
    "status",
    "artifact",
)


def _is_message(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    if "lc" in obj and isinstance(obj.get("kwargs"), dict):
        return True
    return isinstance(obj.get("data"), dict) and isinstance(obj.get("type"), str)


def _kind(obj: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if "lc" in obj and isinstance(obj.get("kwargs"), dict):
        ident = obj.get("id")
        cls = ident[-1] if isinstance(ident, list) and ident else ""
        return _CLASSES.get(str(cls).removesuffix("Chunk"), str(cls)), obj["kwargs"]
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise ValueError("missing field 'type'; expected human, ai, system or tool")
    data = obj.get("data")
    if not isinstance(data, dict):
        raise ValueError("missing field 'data' (an object with 'content')")
    return _CLASSES.get(kind.removesuffix("Chunk"), kind), data


def _message(obj: Any, line: int) -> RawMessage:
    if not isinstance(obj, dict):
        raise ValueError(f"expected a message object, got {type(obj).__name__}")
    kind, data = _kind(obj)
    if kind == "chat":  # ChatMessage carries its own role
        role = path_str(data, "role", "data.") or ""
        role = {"human": "user", "ai": "assistant"}.get(role, role)
    else:
        role = _ROLES.get(kind, "")
    if role not in ROLES:
        raise ValueError(
            f"field 'type': unknown message type {kind!r}; expected human, ai, system or tool"
        )
    try:
        content, meta = checked_text(data.get("content"))
    except ValueError as exc:
        raise ValueError(f"field 'data.content': {exc}") from None
    calls = data.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        raise ValueError("field 'data.tool_calls' must be a list of objects")
    tool_calls = [openai_tool_call(c.get("id"), c.get("name"), c.get("args", {})) for c in calls]
    extra = data.get("additional_kwargs")
    if not tool_calls and isinstance(extra, dict) and isinstance(extra.get("tool_calls"), list):
        tool_calls = [c for c in extra["tool_calls"] if isinstance(c, dict)]  # OpenAI's shape
    if not tool_calls:  # an Anthropic model's reply keeps its tool_use blocks in the content
        tool_calls = [
            openai_tool_call(b.get("id"), b.get("name"), b.get("input", {}))
            for b in meta.get("blocks", [])
            if b.get("type") == "tool_use"
        ]
    for key in _KEPT:
        if data.get(key):
            meta = {**meta, key: data[key]}
    return RawMessage(
        role=role,
        content=content,
        line=line,
        id=path_str(data, "id", "data."),
        name=path_str(data, "name", "data."),
        tool_calls=tuple(tool_calls),
        tool_call_id=path_str(data, "tool_call_id", "data."),
        metadata=meta,
    )


def detect(source: Source) -> bool:
    first = Elements(source).first()
    if isinstance(first, list) and first:
        first = first[0]
    return _is_message(first)


def read(source: Source, skip_invalid: bool) -> Iterator[RawItem]:
    els = Elements(source)
    many = sum(isinstance(el, list) for _, el in els.items) > 1
    for n, (line, el) in enumerate(els.items):
        if isinstance(el, list):
            if many:
                yield RawSession(f"s{n + 1}", line)
            messages: list[tuple[int | None, Any]] = list(enumerate(el))
        else:
            messages = [(None, el)]
        for k, msg in messages:
            try:
                yield _message(msg, line)
            except ValueError as exc:
                where = f"[{k}]: " if k is not None else ""
                els.bad(n, skip_invalid, f"{where}{exc}")
