"""Langfuse observations (docs/reference.md#observed-windows): the public API's observations, or a
trace with them.

Accepted: `{"data": [observation, ...]}` (``GET /api/public/v2/observations``, the SDK's
``api.observations.get_many()``), a trace `{"id", "sessionId"?, "observations": [...]}`
(``GET /api/public/traces/{id}``), a list of either, or observations one per line.
GENERATION observations carry the request in ``input`` (OpenAI-style messages, or
``{"messages": [...]}``) and the reply in ``output``; each becomes a ``window`` event, with the
provider's prompt tokens from ``usageDetails.input`` (or ``usage.input``/``promptTokens``).
RETRIEVER observations become ``retrieval`` events. Sessions: ``sessionId``, else the file is
one conversation (a trace is usually one turn).
Each GENERATION is mapped to a :class:`~memdiag.transcript.calls.Call`, its agent being the
AGENT and TOOL observations above it; the interpreter keeps the sub-agents apart (docs/
traces.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memdiag.transcript.calls import Call, CallItem, Search, Usage
from memdiag.transcript.calls.interpret import interpret
from memdiag.transcript.formats.base import NO_SELECTION, Selection
from memdiag.transcript.formats.langsmith import message
from memdiag.transcript.model import RawItem, RawMessage
from memdiag.transcript.source import Source
from memdiag.transcript.toolkit import PathError, reject
from memdiag.transcript.tracing import (
    ancestors,
    as_text,
    first_record,
    int_or_none,
    records_of,
    sub,
    with_memory_tools,
)

name = "langfuse"
# a trace format: asked before the chat formats, which could take a generation's messages
detect_priority = 12
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = ("formats/traces/langfuse_observations.json",)
# it reads LLM calls: --agent chooses among their agents (docs/traces.md)
selects = {"agent": "--agent"}

_TYPES = {
    "GENERATION",
    "SPAN",
    "EVENT",
    "AGENT",
    "TOOL",
    "CHAIN",
    "RETRIEVER",
    "EMBEDDING",
    "EVALUATOR",
    "GUARDRAIL",
}


def _is_observation(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("type"), str)
        and obj["type"] in _TYPES
        and ("traceId" in obj or "startTime" in obj)
    )


def _is_trace(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("observations"), list) and "id" in obj


def _observations(source: Source) -> list[tuple[str, dict[str, Any], str | None]]:
    """(path, observation, session of its trace) for every observation in the file."""
    out: list[tuple[str, dict[str, Any], str | None]] = []

    def add(doc: Any, where: str) -> None:
        if _is_observation(doc):
            out.append((where, doc, None))
        elif _is_trace(doc):
            sid = doc.get("sessionId")
            for k, o in enumerate(doc["observations"]):
                if not _is_observation(o):
                    raise PathError(f"{where}.observations[{k}]", "not a Langfuse observation")
                out.append((f"{where}.observations[{k}]", o, None if sid is None else str(sid)))
        elif isinstance(doc, dict) and isinstance(doc.get("data"), list):
            for k, o in enumerate(doc["data"]):
                add(o, f"{where}.data[{k}]" if where else f"data[{k}]")
        else:
            raise PathError(where or "document", "not a Langfuse observation, trace or response")

    for line, obj in source.records:
        prefix = f"line {line}" if source.is_jsonl else ""
        if isinstance(obj, list):
            for k, doc in enumerate(obj):
                add(doc, f"{prefix}[{k}]")
        else:
            add(obj, prefix)
    return out


def _messages(value: Any, where: str) -> list[RawMessage]:
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value, where = value["messages"], f"{where}.messages"
    if isinstance(value, str):
        return [RawMessage("user", value)]
    if isinstance(value, dict) and "role" in value:
        return [message(value, where)]
    if not isinstance(value, list):
        raise PathError(where, "expected messages (a list of {role, content})")
    return [message(m, f"{where}[{k}]") for k, m in enumerate(value)]


def _reply(value: Any, where: str) -> list[RawMessage]:
    if value is None:
        return []
    if isinstance(value, str):
        return [RawMessage("assistant", value)]
    if isinstance(value, dict) and isinstance(value.get("choices"), list) and value["choices"]:
        choice = value["choices"][0]
        if not isinstance(choice, dict):
            raise PathError(
                f"{where}.choices[0]", f"expected an object, got {type(choice).__name__}"
            )
        return [message(choice.get("message"), f"{where}.choices[0].message")]
    if isinstance(value, dict) and "role" not in value and "content" in value:
        value = {**value, "role": "assistant"}
    return _messages(value, where)


def _prompt_tokens(o: dict[str, Any], where: str) -> int | None:
    usage = sub(o, "usageDetails", where)
    legacy = sub(o, "usage", where)
    for v in (usage.get("input"), legacy.get("input"), o.get("promptTokens")):
        n = int_or_none(v)
        if n is not None:
            return n
    return None


def detect(source: Source) -> bool:
    first = first_record(source)
    if isinstance(first, dict) and isinstance(first.get("data"), list) and first["data"]:
        first = first["data"][0]
    return _is_observation(first) or _is_trace(first)


def read(
    source: Source, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> Iterator[RawItem]:
    agent = selection.agent
    yield from with_memory_tools(_read(source, skip_invalid, agent))


def _read(source: Source, skip_invalid: bool, choice: str | None) -> Iterator[RawItem]:
    try:
        found = _observations(source)
    except PathError as exc:
        raise source.error(str(exc)) from None
    by_id = {str(o.get("id")): o for _, o, _ in found}

    def agent_of(o: dict[str, Any]) -> tuple[str | None, bool]:
        """The names of the AGENT and TOOL observations above it (outermost first), and whether
        a TOOL is above it (an agent called as a tool)."""
        agents: list[str] = []
        tool = False
        for a in ancestors(o, by_id, lambda x: x.get("parentObservationId")):
            tool = tool or a.get("type") == "TOOL"
            if a.get("type") in ("AGENT", "TOOL"):
                agents.append(str(a.get("name") or "agent"))
        return "/".join(reversed(agents)) or None, tool

    items: list[CallItem] = []
    for where, o, trace_session in sorted(found, key=lambda f: str(f[1].get("startTime", ""))):
        kind = o.get("type")
        if kind not in ("GENERATION", "RETRIEVER"):
            continue
        agent, nested = agent_of(o)
        raw_sid = o.get("sessionId") or trace_session  # else one conversation (not per trace)
        sid = None if raw_sid is None else str(raw_sid)
        try:
            if kind == "RETRIEVER":
                query = o.get("input")
                if isinstance(query, dict):
                    query = query.get("query", query.get("input", ""))
                output = o.get("output")
                if isinstance(output, dict):
                    output = output.get("documents", output.get("records"))
                if output is None:
                    continue
                records = records_of(output, f"{where}.output")
                items.append(Search(where, as_text(query), records, sid, agent, nested))
                continue
            if o.get("input") is None:
                raise PathError(f"{where}.input", "generation with no input messages")
            inputs = _messages(o["input"], f"{where}.input")
            outputs = _reply(o.get("output"), f"{where}.output")
            tokens = _prompt_tokens(o, where)
        except PathError as exc:
            reject(source, skip_invalid, exc)
            continue
        model = o.get("model")
        parent = o.get("parentObservationId")
        items.append(
            Call(
                where,
                tuple(inputs),
                tuple(outputs),
                None if model is None else str(model),
                Usage(tokens),
                session=sid,
                user=None if o.get("userId") is None else str(o["userId"]),
                agent=agent,
                parent=None if parent is None else str(parent),
                id=None if o.get("id") is None else str(o["id"]),
                start=o.get("startTime"),
                nested=nested,
            )
        )
    yield from interpret(items, source, agent=choice, unit="generation")
