"""smolagents memory as messages (docs/framework-state.md): `agent.write_memory_to_messages()`
dumped to JSON (`[m.dict() for m in messages]`, or JSON Lines): what the agent sends next.

Roles: `system` (smolagents' prompt), `user` (a task, `New task:\\n...`), `assistant` (the
model's text), `tool-call` (text `Calling tools:\\n[...]`, a Python repr of the calls) and
`tool-response` (text `Observation:\\n...`, or `Call id: ...` and an error). A tool call
becomes the OpenAI-shaped calls of the assistant message before it (or of its own assistant
message), ids kept; an observation is the tool result of the step's call (smolagents records one
observation for all calls of a step: it answers the first, and names the others in its
metadata). Content is a text or a list of `{"type": "text"}` blocks; images are metadata.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from memdiag.transcript.model import RawItem, RawMessage
from memdiag.transcript.source import Elements, Source, checked_text, openai_tool_call
from memdiag.transcript.toolkit import PathError, expect, get_str, reject, step

name = "smolagents"
# its `tool-call` / `tool-response` roles are its own; asked before canonical and openai,
# which would refuse them as unknown roles
detect_priority = 45
examples = ("formats/smolagents/memory.json",)

ROLES = ("system", "user", "assistant", "tool-call", "tool-response")
CALLING = "Calling tools:\n"
CALL_ID = "Call id: "


def detect(source: Source) -> bool:
    els = Elements(source)
    roles = {
        e.get("role") if isinstance(e, dict) and isinstance(e.get("role"), str) else None
        for _, e in els.items[:200]
    }
    return bool(roles) and roles <= set(ROLES) and bool(roles & {"tool-call", "tool-response"})


def read(source: Source, skip_invalid: bool) -> Iterator[RawItem]:
    els = Elements(source)
    pending: list[str] = []  # ids of the calls of the last tool-call message
    held: RawMessage | None = None  # an assistant message that the next tool-call may join
    for n, (line, obj) in enumerate(els.items):
        where = f"[{n}]" if els.is_array else ""
        try:
            msg = _message(obj, where, line, pending)
        except PathError as exc:
            reject(source, skip_invalid, exc, els.line(n))
            continue
        if msg.metadata.pop("_joins", False) and held is not None and not held.tool_calls:
            held.tool_calls = msg.tool_calls  # the model's text and its calls: one reply
            continue
        if held is not None:
            yield held
        held = msg if msg.role == "assistant" else None
        if held is None:
            yield msg
    if held is not None:
        yield held


def _message(obj: Any, where: str, line: int, pending: list[str]) -> RawMessage:
    obj = expect(obj, dict, where, "a message object")
    role = get_str(obj, "role", where, required=True)
    if role not in ROLES:
        raise PathError(
            step(where, "role"), f"unknown role {role!r}; expected one of {', '.join(ROLES)}"
        )
    content = obj.get("content")
    try:
        text, meta = checked_text(content)
    except ValueError as exc:
        raise PathError(step(where, "content"), str(exc)) from None
    if role == "tool-call":
        calls = tool_calls_of(obj, text, where)
        pending[:] = [str(c["id"]) for c in calls if c.get("id")]
        return RawMessage("assistant", "", line, tool_calls=tuple(calls), metadata={"_joins": True})
    if role == "tool-response":
        answers, pending[:] = list(pending), []
        call_id = answers[0] if answers else None
        if text.startswith(CALL_ID):  # an error: smolagents names the call itself
            call_id = text[len(CALL_ID) :].split("\n", 1)[0].strip() or call_id
        if len(answers) > 1:
            meta["answers"] = answers
        return RawMessage("tool", text, line, tool_call_id=call_id, metadata=meta)
    return RawMessage(role, text, line, metadata=meta)


def tool_calls_of(obj: dict[str, Any], text: str, where: str) -> list[dict[str, Any]]:
    """The calls of a tool-call message: its `tool_calls` field, or the repr in its text (also
    read by ``smolagents_steps``, whose steps hold the same messages)."""
    listed = obj.get("tool_calls")
    if not listed:
        if not text.startswith(CALLING):
            raise PathError(step(where, "content"), "a tool-call message without 'Calling tools:'")
        try:  # a Python literal (str() of a list of dicts): literal_eval runs no code
            listed = ast.literal_eval(text[len(CALLING) :].strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise PathError(
                step(where, "content"), "the calls after 'Calling tools:' are not a Python list"
            ) from None
    calls = []
    for k, call in enumerate(expect(listed, list, step(where, "tool_calls"), "a list of calls")):
        at = step(step(where, "tool_calls"), k)
        call = expect(call, dict, at, "a call object")
        fn: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else call
        calls.append(
            openai_tool_call(
                get_str(call, "id", at), get_str(fn, "name", at, required=True), fn.get("arguments")
            )
        )
    return calls
