"""Request/response logs (docs/traces.md): one LLM call per line, as proxies and gateways write.

Each line is ``{"request": {"model", "messages", ...}, "response": {...}}``: the chat request
body the client sent (OpenAI's, or Anthropic's with a top-level ``system``) and the body the
provider answered (a chat completion, or an Anthropic message; null for a failed call). Each
line is one :class:`~memdiag.transcript.calls.Call`; the interpreter rebuilds the conversation,
the observed windows and their sections. A conversation id, when the log records one
(``session_id``, ``conversation_id``, ``thread_id`` beside the request or in its
``metadata``), starts a session; ``user`` names the user.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memdiag.transcript.calls import Call, CallItem
from memdiag.transcript.calls.interpret import interpret
from memdiag.transcript.calls.shapes import request_inputs, response_outputs
from memdiag.transcript.formats.base import NO_SELECTION, Selection
from memdiag.transcript.model import RawItem
from memdiag.transcript.source import Source
from memdiag.transcript.toolkit import PathError, reject
from memdiag.transcript.tracing import first_record, with_memory_tools

name = "request_log"
# a call log: asked with the traces, before the chat formats (a request holds `messages`)
detect_priority = 14
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = ("formats/calls/request_log.jsonl",)
# it reads LLM calls: --agent chooses among their agents (docs/traces.md)
selects = {"agent": "--agent"}

SESSION_KEYS = ("session_id", "conversation_id", "thread_id")


def _is_entry(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("request"), dict)
        and isinstance(obj["request"].get("messages"), list)
        and "response" in obj
    )


def detect(source: Source) -> bool:
    return _is_entry(first_record(source))


def _ids(entry: dict[str, Any]) -> tuple[str | None, str | None]:
    request = entry["request"]
    meta = request.get("metadata") if isinstance(request.get("metadata"), dict) else {}
    session = next(
        (
            str(d[k])
            for d in (entry, meta)
            for k in SESSION_KEYS
            if isinstance(d, dict) and d.get(k) is not None
        ),
        None,
    )
    user = request.get("user", meta.get("user_id") if isinstance(meta, dict) else None)
    return session, None if user is None else str(user)


def read(
    source: Source, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> Iterator[RawItem]:
    agent = selection.agent
    calls: list[CallItem] = []
    for line, obj in source.records:
        entries = list(enumerate(obj)) if isinstance(obj, list) else [(None, obj)]
        for k, entry in entries:
            where = f"[{k}]" if k is not None else f"line {line}"
            try:
                if not _is_entry(entry):
                    raise PathError(where, "not a request/response entry {request, response}")
                inputs = request_inputs(entry["request"], f"{where}.request")
                outputs, usage, model = response_outputs(entry["response"], f"{where}.response")
            except PathError as exc:
                reject(source, skip_invalid, exc)
                continue
            session, user = _ids(entry)
            requested = entry["request"].get("model")
            calls.append(
                Call(
                    where,
                    tuple(inputs),
                    tuple(outputs),
                    model or (None if requested is None else str(requested)),
                    usage,
                    session=session,
                    user=user,
                    start=entry.get("timestamp", entry.get("ts")),
                )
            )
    yield from with_memory_tools(interpret(calls, source, agent=agent, unit="call"))
