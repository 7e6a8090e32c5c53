"""AutoGen AgentChat saved state (docs/framework-state.md): `await agent.save_state()` and
`await team.save_state()` as JSON.

- An agent (`{type: AssistantAgentState, llm_context: {messages: [...]}}`): its model context,
  typed `UserMessage`, `AssistantMessage` (content a text or a `FunctionCall` list, `thought`
  kept as metadata), `FunctionExecutionResultMessage` (a tool result per call id) and
  `SystemMessage`. Messages have no ids: each gets `AGENT-N`.
- A team (`{type: TeamState, agent_states: {NAME: ...}}`): the group chat manager's
  `message_thread` (the conversation the human takes part in: `TextMessage`s with ids, tool
  call request/execution events, handoffs) and each agent's own model context. The transcript
  is one of them: `--agent team` (the thread) or `--agent NAME`; without it they are listed.

An agent's system message is not saved in its state (AssistantAgent sends it with every
request), so a note says so; `--system` supplies it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from memdiag.transcript.formats.base import NO_SELECTION, Selection
from memdiag.transcript.model import RawItem, RawMessage, RawSession
from memdiag.transcript.source import Choice, Source, choose, drop_nulls, iso_time, openai_tool_call
from memdiag.transcript.toolkit import PathError, expect, get_dict, get_list, get_str, reject, step

name = "autogen"
# recognised by its own `type` (AssistantAgentState, TeamState), with the exports
detect_priority = 34
examples = ("formats/autogen/agent_state.json", "formats/autogen/team_state.json")
selects = {"agent": "--agent"}  # a team holds the group's thread and each agent's context
saves_system_prompt = False  # an agent's system message is sent, not saved
TEAM = "team"  # the choice of a team file that is the manager's message thread

CONTEXT_TYPES = (
    "UserMessage",
    "AssistantMessage",
    "FunctionExecutionResultMessage",
    "SystemMessage",
)
# events of a team's thread that are not conversation (streaming chunks, speaker selection, ...)
NOT_MESSAGES = (
    "ModelClientStreamingChunkEvent",
    "SelectSpeakerEvent",
    "SelectorEvent",
    "UserInputRequestedEvent",
    "CodeGenerationEvent",
    "CodeExecutionEvent",
)


def _doc(source: Source) -> dict[str, Any] | None:
    doc = source.records[0][1] if len(source.records) == 1 else None
    return doc if isinstance(doc, dict) else None


def detect(source: Source) -> bool:
    doc = _doc(source)
    if doc is None or not isinstance(doc.get("type"), str):
        return False
    if isinstance(doc.get("agent_states"), dict):
        return True
    context = doc.get("llm_context")
    return isinstance(context, dict) and isinstance(context.get("messages"), list)


def _contexts(doc: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(choice id, JSON path, messages or thread) of what the file holds."""
    if not isinstance(doc.get("agent_states"), dict):
        agent = "agent"
        messages = get_list(get_dict(doc, "llm_context"), "messages", "llm_context")
        sources = [m.get("source") for m in messages if isinstance(m, dict)]
        named = [s for s in sources if isinstance(s, str) and s != "user"]
        return [(named[0] if named else agent, "llm_context.messages", messages)]
    found: list[tuple[str, str, Any]] = []
    thread: tuple[str, str, Any] | None = None
    for key, state in doc["agent_states"].items():
        at = step("agent_states", str(key))
        state = expect(state, dict, at, "an agent state object")
        if "message_thread" in state:
            thread = (TEAM, step(at, "message_thread"), state["message_thread"])
            continue
        inner = get_dict(state, "agent_state", at) or state  # ChatAgentContainerState wraps it
        context = get_dict(inner, "llm_context", step(at, "agent_state"))
        if "messages" in context:
            found.append(
                (
                    str(key),
                    step(step(at, "agent_state"), "llm_context.messages"),
                    context["messages"],
                )
            )
    return ([thread] if thread else []) + found


def read(
    source: Source, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> Iterator[RawItem]:
    doc = _doc(source)
    if doc is None:
        raise source.error("not an AutoGen state (expected an object with a `type`)")
    try:
        held = _contexts(doc)
    except PathError as exc:
        raise source.error(str(exc)) from None
    if not held:
        raise source.error("an AutoGen state without a model context or a message thread")
    listed = [
        Choice(cid, "", len(v) if isinstance(v, list) else 0, unit="message") for cid, _, v in held
    ]
    for n in choose(source.path, "agent", selects["agent"], listed, selection.agent):
        cid, where, messages = held[n]
        yield RawSession(cid, 1)
        try:
            messages = expect(messages, list, where, "a list of messages")
        except PathError as exc:
            reject(source, skip_invalid, exc)
            continue
        read_one = _thread_message if cid == TEAM else _context_message
        for k, msg in enumerate(messages):
            try:
                yield from read_one(msg, step(where, k), f"{cid}-{k + 1}")
            except PathError as exc:
                reject(source, skip_invalid, exc)


def _text(value: Any, where: str) -> tuple[str, dict[str, Any]]:
    """A `content` that is a text, or a list of texts and images (MultiModalMessage)."""
    if isinstance(value, str):
        return value, {}
    items = expect(value, list, where, "a text or a list of texts and images")
    texts = [v for v in items if isinstance(v, str)]
    other = [{"image": True} for v in items if not isinstance(v, str)]
    return "\n".join(texts), ({"content": other} if other else {})


def _calls(value: Any, where: str) -> list[dict[str, Any]]:
    calls = []
    for k, call in enumerate(expect(value, list, where, "a list of function calls")):
        at = step(where, k)
        call = expect(call, dict, at, "a FunctionCall object")
        args = call.get("arguments")
        calls.append(
            openai_tool_call(
                get_str(call, "id", at), get_str(call, "name", at, required=True), args
            )
        )
    return calls


def _results(value: Any, where: str, mid: str) -> Iterator[RawMessage]:
    for k, result in enumerate(expect(value, list, where, "a list of function results")):
        at = step(where, k)
        result = expect(result, dict, at, "a FunctionExecutionResult object")
        content = result.get("content")
        text = content if isinstance(content, str) else json.dumps(content, default=str)
        yield RawMessage(
            "tool",
            text,
            id=mid if k == 0 else f"{mid}.{k + 1}",
            name=get_str(result, "name", at),
            tool_call_id=get_str(result, "call_id", at),
            metadata={"is_error": True} if result.get("is_error") is True else {},
        )


def _context_message(msg: Any, where: str, mid: str) -> Iterator[RawMessage]:
    msg = expect(msg, dict, where, "a message object")
    kind = get_str(msg, "type", where, required=True)
    if kind not in CONTEXT_TYPES:
        raise PathError(
            step(where, "type"),
            f"unknown message type {kind!r}; expected one of {', '.join(CONTEXT_TYPES)}",
        )
    content = msg.get("content")
    at = step(where, "content")
    source = get_str(msg, "source", where)
    if kind == "FunctionExecutionResultMessage":
        yield from _results(content, at, mid)
        return
    if kind == "AssistantMessage":
        meta = {"thought": msg["thought"]} if isinstance(msg.get("thought"), str) else {}
        if isinstance(content, list):
            yield RawMessage(
                "assistant",
                "",
                id=mid,
                name=source,
                tool_calls=tuple(_calls(content, at)),
                metadata=meta,
            )
        else:
            yield RawMessage(
                "assistant",
                get_str(msg, "content", where) or "",
                id=mid,
                name=source,
                metadata=meta,
            )
        return
    text, meta = _text(content, at)
    role = "system" if kind == "SystemMessage" else "user"
    yield RawMessage(role, text, id=mid, name=source if source != "user" else None, metadata=meta)


def _thread_message(msg: Any, where: str, mid: str) -> Iterator[RawMessage]:
    msg = expect(msg, dict, where, "a message object")
    kind = get_str(msg, "type", where, required=True) or ""
    if kind in NOT_MESSAGES:
        return
    source = get_str(msg, "source", where) or ""
    ident = get_str(msg, "id", where) or mid
    ts = iso_time(msg.get("created_at"))
    content = msg.get("content")
    at = step(where, "content")
    meta: dict[str, Any] = {"type": kind}
    usage = msg.get("models_usage")
    if isinstance(usage, dict):
        meta["usage"] = drop_nulls(usage)
    if kind == "ToolCallRequestEvent":
        yield RawMessage(
            "assistant",
            "",
            id=ident,
            ts=ts,
            name=source,
            tool_calls=tuple(_calls(content, at)),
            metadata=meta,
        )
        return
    if kind == "ToolCallExecutionEvent":
        for m in _results(content, at, ident):
            m.ts = ts
            yield m
        return
    if kind == "ThoughtEvent" or kind == "MemoryQueryEvent":
        return  # the agent's reasoning, a memory lookup: not messages of the thread
    if not (kind.endswith("Message") or kind.endswith("Event")):
        raise PathError(step(where, "type"), f"unknown message type {kind!r}")
    text, more = _text(content if not isinstance(content, dict) else json.dumps(content), at)
    role = "user" if source == "user" else "assistant"
    yield RawMessage(
        role,
        text,
        id=ident,
        ts=ts,
        name=None if role == "user" else source,
        metadata={**meta, **more},
    )
