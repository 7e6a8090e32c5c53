"""smolagents memory steps (docs/traces.md): `agent.memory.get_full_steps()` as JSON.

A JSON array of steps (or one step per line): ``TaskStep`` (``task``) and ``ActionStep``
(``model_input_messages``: what the model was sent; ``model_output_message``: what it
answered). Each ActionStep is one :class:`~memdiag.transcript.calls.Call`. smolagents writes
earlier steps into the next request as an empty assistant message, a ``tool-call`` message
(``Calling tools:`` and the calls as a Python literal) and a ``tool-response`` message
(``Observation:``): they are read as the assistant's tool calls and the tool's result. The
``final_answer`` tool call is the reply the user reads: an assistant message with the answer,
whose observation is not repeated.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from memdiag.transcript.calls import Call, CallItem, Usage
from memdiag.transcript.calls.interpret import interpret
from memdiag.transcript.formats.base import NO_SELECTION, Selection
from memdiag.transcript.formats.smolagents import tool_calls_of
from memdiag.transcript.model import RawItem, RawMessage
from memdiag.transcript.source import Source
from memdiag.transcript.toolkit import PathError, reject
from memdiag.transcript.tracing import (
    as_text,
    first_record,
    int_or_none,
    role_of,
    with_memory_tools,
)

name = "smolagents_steps"
# agent memory: asked with the call logs, before the chat formats (steps hold message lists)
detect_priority = 18
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = ("formats/calls/smolagents_steps.json",)
# it reads LLM calls: --agent chooses among their agents (docs/traces.md)
selects = {"agent": "--agent"}

FINAL = "final_answer"
_CALLING = "Calling tools:"


def _is_step(obj: Any) -> bool:
    return isinstance(obj, dict) and (
        "model_input_messages" in obj or ("task" in obj and "task_images" in obj)
    )


def detect(source: Source) -> bool:
    return _is_step(first_record(source))


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(
            as_text(b.get("text")) for b in content if isinstance(b, dict) and "text" in b
        )
    return as_text(content)


def _answer(calls: list[dict[str, Any]]) -> str | None:
    """The final answer's text, when the only call is `final_answer`."""
    if len(calls) != 1 or calls[0]["function"]["name"] != FINAL:
        return None
    args: Any = calls[0]["function"]["arguments"]
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return args
    return as_text(args.get("answer", args)) if isinstance(args, dict) else as_text(args)


def _inputs(messages: Any, where: str) -> list[RawMessage]:
    if not isinstance(messages, list):
        raise PathError(where, "expected a list of messages")
    out: list[RawMessage] = []
    skip_observation = False
    pending: str | None = None  # the id of the call a tool-response answers
    for k, m in enumerate(messages):
        at = f"{where}[{k}]"
        if not isinstance(m, dict):
            raise PathError(at, "expected a message object")
        role, text = m.get("role"), _text(m.get("content"))
        if role == "tool-call":
            calls = tool_calls_of(m, text, at)
            answer = _answer(calls)
            skip_observation = answer is not None
            if answer is not None:
                out.append(RawMessage("assistant", answer))
            else:
                pending = calls[0]["id"] if calls else None
                out.append(RawMessage("assistant", "", tool_calls=tuple(calls)))
        elif role == "tool-response":
            if not skip_observation:
                out.append(RawMessage("tool", text, tool_call_id=pending))
            skip_observation, pending = False, None
        elif role == "assistant" and not text.strip() and not m.get("tool_calls"):
            continue  # the step's empty text, written before its tool-call message
        else:
            out.append(RawMessage(role_of(role, at), text))
    return out


def _output(m: Any, where: str) -> list[RawMessage]:
    if m is None:
        return []
    if not isinstance(m, dict):
        raise PathError(where, "expected a message object")
    calls = tool_calls_of(m, "", where) if m.get("tool_calls") else []
    answer = _answer(calls)
    if answer is not None:
        return [RawMessage("assistant", answer)]
    return [RawMessage("assistant", _text(m.get("content")), tool_calls=tuple(calls))]


def read(
    source: Source, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> Iterator[RawItem]:
    calls: list[CallItem] = []
    for line, obj in source.records:
        steps = list(enumerate(obj)) if isinstance(obj, list) else [(None, obj)]
        for k, step in steps:
            where = f"[{k}]" if k is not None else f"line {line}"
            if not _is_step(step):
                reject(source, skip_invalid, PathError(where, "not a smolagents memory step"))
                continue
            if "model_input_messages" not in step:
                continue  # a task: its words are in the next request
            try:
                inputs = _inputs(step["model_input_messages"], f"{where}.model_input_messages")
                outputs = _output(step.get("model_output_message"), f"{where}.model_output_message")
            except PathError as exc:
                reject(source, skip_invalid, exc)
                continue
            usage = step.get("token_usage") if isinstance(step.get("token_usage"), dict) else {}
            calls.append(
                Call(
                    where,
                    tuple(inputs),
                    tuple(outputs),
                    usage=Usage(
                        int_or_none(usage.get("input_tokens")),
                        int_or_none(usage.get("output_tokens")),
                    ),
                    start=(step.get("timing") or {}).get("start_time")
                    if isinstance(step.get("timing"), dict)
                    else None,
                )
            )
    yield from with_memory_tools(interpret(calls, source, agent=selection.agent, unit="step"))
