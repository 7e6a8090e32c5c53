"""Letta agent files `.af` (docs/reference.md#observed-windows): an agent's messages and the window
it really holds.

An agent file (github.com/letta-ai/agent-file) holds ``agents[]``, each with ``messages`` and
``in_context_message_ids``: the messages the agent's context window holds at export time, which
the next request sends. It becomes one ``window`` event, for the agent's last reply: the
in-context messages before it. Messages that are not in context were evicted by Letta's
summarizer; the ``system_alert`` summary it leaves in context becomes the window's ``summary``
extra, covering the evicted messages (it is not a conversation message). Letta's JSON envelopes
are unwrapped (``user_message`` → the user's words; ``heartbeat``/``login``/``system_alert`` →
system messages); reasoning blocks are kept as metadata, not window text. Archival/recall memory
searches (``archival_memory_search``, ``conversation_search``) become ``retrieval`` events.

Several agents (a main agent with its sleeptime agent in a group, or unrelated agents): the
transcript is the main agent's (the group's ``manager_agent_id``, else the first agent); the
others are named in a warning. Files that hold the JSON document as one JSON string (some
published examples) are read too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memdiag.transcript.events import Extra, RawWindow
from memdiag.transcript.model import RawItem, RawMessage
from memdiag.transcript.source import Source, check_tool_calls, json_loads
from memdiag.transcript.toolkit import PathError
from memdiag.transcript.tracing import as_text, role_of, sub, with_memory_tools

name = "letta"
# an agent file holds message lists that a chat reader could take: asked with the traces
detect_priority = 13
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = (
    "formats/traces/letta_agent.af",
    "formats/traces/letta_group.af",
)

_SYSTEM_ENVELOPES = ("heartbeat", "login", "system_alert")


def _document(source: Source) -> Any:
    if len(source.records) != 1:
        return None
    doc = source.records[0][1]
    if isinstance(doc, str) and doc.lstrip().startswith("{"):
        try:
            doc = json_loads(doc)
        except ValueError:
            return None
    return doc


def _is_agent_file(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("agents"), list)
        and all(isinstance(a, dict) and "messages" in a for a in doc["agents"])
    )


def _main_agent(doc: dict[str, Any]) -> int:
    ids = [str(a.get("id")) for a in doc["agents"]]
    groups = doc.get("groups") or []
    if not isinstance(groups, list):
        raise PathError("groups", f"expected a list, got {type(groups).__name__}")
    for k, group in enumerate(groups):
        if not group:
            continue
        if not isinstance(group, dict):
            raise PathError(f"groups[{k}]", f"expected an object, got {type(group).__name__}")
        manager = sub(group, "manager_config", f"groups[{k}]").get("manager_agent_id")
        if manager is not None and str(manager) in ids:
            return ids.index(str(manager))
    return 0


def _envelope(text: str) -> dict[str, Any] | None:
    if not text.lstrip().startswith("{"):
        return None
    try:
        value = json_loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("type"), str) else None


def _message(m: Any, where: str) -> RawMessage:
    if not isinstance(m, dict):
        raise PathError(where, "expected a message object")
    role = role_of(m.get("role"), where)
    mid = m.get("id")
    if mid is None:
        raise PathError(f"{where}.id", "missing (in_context_message_ids refers to messages by id)")
    content = m.get("content")
    texts: list[str] = []
    other: list[Any] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for k, block in enumerate(content):
            if not isinstance(block, dict):
                raise PathError(f"{where}.content[{k}]", "expected a content block")
            if block.get("type") == "text":
                texts.append(as_text(block.get("text")))
            else:  # reasoning, images, ...: metadata
                other.append({k2: v for k2, v in block.items() if k2 != "signature"})
    elif content is not None:
        raise PathError(f"{where}.content", "expected a string or a list of blocks")
    text = "\n".join(texts)
    meta: dict[str, Any] = {"blocks": other} if other else {}
    envelope = _envelope(text) if role == "user" else None
    if envelope is not None:
        kind = envelope["type"]
        if kind == "user_message":
            text = as_text(envelope.get("message"))
        elif kind in _SYSTEM_ENVELOPES:
            role = "system"
            text = as_text(envelope.get("message", envelope.get("reason", text)))
            meta["letta_type"] = kind
    calls = m.get("tool_calls") or []
    if not isinstance(calls, list):
        raise PathError(f"{where}.tool_calls", "expected a list")
    try:  # OpenAI-shaped calls: a `function` object with a string name
        check_tool_calls(calls)
    except ValueError as exc:
        raise PathError(where, str(exc)) from None
    tool_id = m.get("tool_call_id")
    return RawMessage(
        role,
        text,
        id=str(mid),
        ts=None if m.get("created_at") is None else str(m["created_at"]),
        name=m.get("name") if isinstance(m.get("name"), str) else None,
        tool_calls=tuple(calls),
        tool_call_id=None if tool_id is None else str(tool_id),
        metadata=meta,
    )


def _is_summary(m: RawMessage) -> bool:
    return m.metadata.get("letta_type") == "system_alert" and "summary" in m.content.lower()


def detect(source: Source) -> bool:
    return _is_agent_file(_document(source))


def read(source: Source, skip_invalid: bool) -> Iterator[RawItem]:
    doc = _document(source)
    if not _is_agent_file(doc):
        raise source.error("not a Letta agent file (expected 'agents' with 'messages')")
    if not doc["agents"]:
        raise source.error("agents: empty, no agent to read")
    try:
        n = _main_agent(doc)
    except PathError as exc:
        raise source.error(str(exc)) from None
    agent = doc["agents"][n]
    where = f"agents[{n}]"
    others = [
        f"{a.get('id')} {a.get('name')!r}"
        + (f" ({a.get('agent_type')})" if a.get("agent_type") else "")
        for k, a in enumerate(doc["agents"])
        if k != n
    ]
    if others:
        source.warnings.append(
            f"{source.path}: {len(doc['agents'])} agents; read {agent.get('id')} "
            f"{agent.get('name')!r}; left out: {', '.join(others)}"
        )
    try:
        yield from with_memory_tools(_agent(agent, where))
    except PathError as exc:
        raise source.error(str(exc)) from None


def _agent(agent: dict[str, Any], where: str) -> Iterator[RawItem]:
    raw = agent.get("messages")
    if not isinstance(raw, list):
        raise PathError(f"{where}.messages", "expected a list of messages")
    messages = [_message(m, f"{where}.messages[{k}]") for k, m in enumerate(raw)]
    by_id = {m.id: k for k, m in enumerate(messages)}
    context = agent.get("in_context_message_ids")
    if context is None:
        yield from messages
        return
    if not isinstance(context, list):
        raise PathError(f"{where}.in_context_message_ids", "expected a list of message ids")
    for k, mid in enumerate(context):
        if str(mid) not in by_id:
            raise PathError(f"{where}.in_context_message_ids[{k}]", f"no message with id {mid!r}")
    in_context = {str(mid) for mid in context}
    summaries = [m for m in messages if _is_summary(m) and m.id in in_context]
    kept = [m for m in messages if m not in summaries]
    yield from kept
    replies = [m for m in kept if m.role == "assistant"]
    if not replies:
        return
    last = replies[-1]
    order = [m.id for m in kept]
    before = order.index(str(last.id))
    ids = [str(mid) for mid in context if str(mid) in order and order.index(str(mid)) < before]
    evicted = tuple(m.id for m in kept[:before] if m.id not in in_context and m.id)
    extra = tuple(
        Extra("summary", s.content, covers=tuple(i for i in evicted if i is not None))
        for s in summaries
    )
    model = sub(agent, "llm_config", where).get("model")
    yield RawWindow(
        str(last.id),
        tuple(ids),
        extra,
        None,
        None if model is None else str(model),
        f"{where}.in_context_message_ids",
    )
