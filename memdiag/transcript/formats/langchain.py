"""LangChain messages and LangGraph state (docs/reference.md#transcript-input), in every form they
are saved in:

- `messages_to_dict`: `{"type": "human", "data": {...}}`
- `message.model_dump()`: the flat dict the LangGraph API returns
  (`{"type": "human", "content": ..., "id": ..., "additional_kwargs": {}, ...}`)
- `dumpd(message)`: `{"lc": 1, "type": "constructor", "id": [..., "HumanMessage"], "kwargs": {...}}`

either one per line, as a JSON array (an array of arrays: several conversations), or inside a
LangGraph state: `{"messages": [...]}` (`state.values`, `dumpd(state.values)`), a thread state
or thread from the LangGraph API (`{"values": {"messages": [...]}, "checkpoint": ...}`; the
thread id names the session), or a thread's history (the newest state is read).

Tool calls become OpenAI-shaped calls; null fields of the dumps (name, usage_metadata, artifact,
...) and empty ones are dropped; reasoning blocks are metadata, not text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from memdiag.transcript.model import ROLES, RawItem, RawMessage, RawSession
from memdiag.transcript.source import Source, checked_text, drop_nulls, slim_blobs
from memdiag.transcript.toolkit import PathError, reject

TYPES = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
    "developer": "system",
    "remove": "",  # RemoveMessage: a deletion marker of add_messages, not a message
}
CLASSES = {
    "HumanMessage": "human",
    "AIMessage": "ai",
    "SystemMessage": "system",
    "ToolMessage": "tool",
    "FunctionMessage": "function",
    "ChatMessage": "chat",
    "RemoveMessage": "remove",
}
# fields of a message dump kept as metadata when they say something
KEPT = (
    "additional_kwargs",
    "response_metadata",
    "invalid_tool_calls",
    "usage_metadata",
    "artifact",
    "example",
)
REASONING_BLOCKS = {"reasoning", "thinking", "redacted_thinking"}


def _lc_class(obj: dict[str, Any]) -> str | None:
    if obj.get("lc") is not None and isinstance(obj.get("kwargs"), dict):
        ident = obj.get("id")
        cls = str(ident[-1]) if isinstance(ident, list) and ident else ""
        return CLASSES.get(cls.removesuffix("Chunk"), cls)
    return None


def is_message(obj: Any) -> bool:
    """A LangChain message in any of its three dumped forms."""
    if not isinstance(obj, dict):
        return False
    if _lc_class(obj) is not None:
        return True
    kind = obj.get("type")
    if not isinstance(kind, str):
        return False
    if isinstance(obj.get("data"), dict):  # messages_to_dict
        return True
    base = kind.removesuffix("Chunk")
    base = CLASSES.get(base, base)
    if "content" not in obj:
        return False
    return base == "chat" or (base in TYPES and "role" not in obj)


def _messages_of(doc: Any) -> tuple[str, Any] | None:
    """(path, messages) of a LangGraph state/thread, or None."""
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("messages"), list):
        return "messages", doc["messages"]
    values = doc.get("values")
    if isinstance(values, dict) and isinstance(values.get("messages"), list):
        return "values.messages", values["messages"]
    return None


def _thread_id(doc: dict[str, Any]) -> str | None:
    for holder in (
        doc,
        doc.get("checkpoint"),
        doc.get("config", {}).get("configurable") if isinstance(doc.get("config"), dict) else None,
    ):
        if isinstance(holder, dict) and isinstance(holder.get("thread_id"), str):
            return str(holder["thread_id"])
    return None


@dataclass(frozen=True, slots=True)
class _Conversation:
    where: str  # JSON path of the message list ("" for bare records)
    line: int
    session: str | None
    messages: list[tuple[str, int, Any]]  # (path, line, message)


def _conversations(source: Source) -> list[_Conversation]:
    if source.is_jsonl:
        records = source.records
        if records and any(_messages_of(r) for _, r in records[:1]):
            return [_state("", line, r) for line, r in records]
        return [_Conversation("", 0, None, [("", line, r) for line, r in records])]
    doc = source.records[0][1] if source.records else None
    if isinstance(doc, list) and doc and all(isinstance(el, list) for el in doc):
        return [
            _Conversation(
                f"[{k}]", k + 1, f"s{k + 1}", [(f"[{k}][{j}]", k + 1, m) for j, m in enumerate(el)]
            )
            for k, el in enumerate(doc)
        ]
    if isinstance(doc, list) and doc and _messages_of(doc[0]) is not None:
        # a thread's history (newest state first in the LangGraph API): read the newest
        newest = max(range(len(doc)), key=lambda k: str(_get(doc[k], "created_at") or ""))
        return [_state(f"[{newest}]", newest + 1, doc[newest])]
    if isinstance(doc, list):
        return [_Conversation("", 0, None, [(f"[{k}]", k + 1, m) for k, m in enumerate(doc)])]
    return [_state("", 1, doc)]


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else None


def _state(where: str, line: int, doc: Any) -> _Conversation:
    found = _messages_of(doc)
    if found is None:
        return _Conversation(where, line, None, [(where, line, doc)])
    path, messages = found
    base = f"{where}.{path}" if where else path
    assert isinstance(doc, dict)
    return _Conversation(
        base, line, _thread_id(doc), [(f"{base}[{k}]", line, m) for k, m in enumerate(messages)]
    )


def read_message(where: str, obj: Any, line: int) -> RawMessage | None:
    """One dumped message → a raw message (None for a RemoveMessage marker)."""
    if not isinstance(obj, dict):
        raise PathError(where, f"expected a message object, got {type(obj).__name__}")
    cls = _lc_class(obj)
    prefix = ""
    if cls is not None:
        kind, data, prefix = cls, obj["kwargs"], "kwargs."
    elif isinstance(obj.get("data"), dict):
        kind, data, prefix = str(obj.get("type")), obj["data"], "data."
    else:
        kind, data = str(obj.get("type")), obj
    kind = CLASSES.get(kind.removesuffix("Chunk"), kind.removesuffix("Chunk"))
    at = f"{where}.{prefix}" if where else prefix
    if kind == "remove":
        return None
    role: Any = data.get("role") if kind == "chat" else TYPES.get(kind)
    if isinstance(role, str):
        role = {"human": "user", "ai": "assistant"}.get(role, role)
    if not isinstance(role, str) or role not in ROLES:
        raise PathError(
            f"{at}type" if cls is None else f"{where}.id" if where else "id",
            f"unknown message type {kind!r}; expected human, ai, system or tool",
        )
    content = data.get("content")
    if isinstance(content, list):
        for k, b in enumerate(content):
            if isinstance(b, dict) and not isinstance(b.get("type", ""), str):
                raise PathError(f"{at}content[{k}].type", "must be a string")
    try:
        text, meta = checked_text(content)
    except ValueError as exc:
        raise PathError(f"{at}content", str(exc)) from None
    blocks = meta.pop("blocks", [])
    reasoning = [b for b in blocks if b.get("type") in REASONING_BLOCKS]  # types are str
    blocks = [b for b in blocks if b not in reasoning]
    meta = {}
    if blocks:
        meta["blocks"] = [slim_blobs(drop_nulls(b)) for b in blocks]
    if reasoning:
        meta["reasoning"] = [drop_nulls(b) for b in reasoning]
    calls = data.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        raise PathError(f"{at}tool_calls", "must be a list of objects")
    tool_calls = [_call(c.get("id"), c.get("name"), c.get("args", {})) for c in calls]
    extra = data.get("additional_kwargs")
    if not tool_calls and isinstance(extra, dict) and isinstance(extra.get("tool_calls"), list):
        tool_calls = [drop_nulls(c) for c in extra["tool_calls"] if isinstance(c, dict)]
    if not tool_calls:  # an Anthropic model's reply keeps its tool_use blocks in the content
        tool_calls = [
            _call(b.get("id"), b.get("name"), b.get("input", {}))
            for b in blocks
            if b.get("type") == "tool_use"
        ]
    for name in KEPT:
        value = drop_nulls(data.get(name))
        if name == "additional_kwargs" and isinstance(value, dict) and calls:
            value = {k: v for k, v in value.items() if k != "tool_calls"}
        if value not in (None, False, {}, []):
            meta[name] = value
    if isinstance(data.get("status"), str) and data["status"]:
        meta["status"] = data["status"]  # a tool message's success / error
    return RawMessage(
        role=role,
        content=text,
        line=line,
        id=_opt(data, "id", at),
        name=_opt(data, "name", at),
        tool_calls=tuple(tool_calls),
        tool_call_id=_opt(data, "tool_call_id", at),
        metadata=meta,
    )


def _call(call_id: Any, name: Any, args: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def _opt(data: dict[str, Any], name: str, at: str) -> str | None:
    value = data.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise PathError(f"{at}{name}", f"must be a string, got {type(value).__name__}")
    return str(value)


name = "langchain"
# before anthropic and openai, which take any `{"messages": [...]}` and would miss LangChain's
# message dumps
detect_priority = 40
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = (
    "formats/langchain.json",
    "formats/langgraph/thread_state.json",
    "formats/langgraph/dumpd_state.json",
    "formats/langgraph/model_dump.json",
)


def detect(source: Source) -> bool:
    """Asked before openai and anthropic, which take any `{"messages": [...]}`."""
    if not source.records:
        return False
    first = source.records[0][1]
    found = _messages_of(first[0] if isinstance(first, list) and first else first)
    if found is not None:
        messages = found[1]
        return bool(messages) and is_message(messages[0])
    if isinstance(first, list) and first and isinstance(first[0], list):
        first = first[0]
    if isinstance(first, list):
        return bool(first) and is_message(first[0])
    return is_message(first)


def read(source: Source, skip_invalid: bool) -> Iterator[RawItem]:
    for conv in _conversations(source):
        if conv.session is not None:
            yield RawSession(conv.session, conv.line)
        for where, line, msg in conv.messages:
            jsonl_line = line if source.is_jsonl else None
            try:
                raw = read_message(where, msg, line)
            except PathError as exc:
                reject(source, skip_invalid, exc, jsonl_line)
                continue
            if raw is not None:
                yield raw
