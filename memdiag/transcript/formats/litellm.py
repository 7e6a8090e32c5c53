"""LiteLLM logging payloads (docs/traces.md): the `standard_logging_object` of each call.

What LiteLLM hands its logging integrations (a `StandardLoggingPayload`), one per line or a
JSON array: ``messages`` (the request as sent), ``response`` (the chat completion, or the
error's text for a failed call), ``model``, ``prompt_tokens``, ``startTime``. Each payload is
one :class:`~memdiag.transcript.calls.Call`. The conversation: ``session_id`` when LiteLLM
recorded one, else ``trace_id`` when several calls share it (it falls back to a fresh id per
call, which names no conversation), else ``metadata.session_id``; without any, the file is one
conversation. ``end_user`` (or ``metadata.user_api_key_end_user_id``) names the user.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from memdiag.transcript.calls import Call, CallItem, Usage
from memdiag.transcript.calls.interpret import interpret
from memdiag.transcript.calls.shapes import messages_of, response_outputs
from memdiag.transcript.formats.base import NO_SELECTION, Selection
from memdiag.transcript.model import RawItem
from memdiag.transcript.source import Source
from memdiag.transcript.toolkit import PathError, documents, reject
from memdiag.transcript.tracing import first_record, int_or_none, with_memory_tools

name = "litellm"
# a call log: asked with the traces, before the chat formats (a payload holds `messages`,
# which the OpenAI reader would take for a fine-tuning line)
detect_priority = 15
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = ("formats/calls/litellm.jsonl",)
# it reads LLM calls: --agent chooses among their agents (docs/traces.md)
selects = {"agent": "--agent"}


def _is_payload(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and "messages" in obj
        and "response" in obj
        and isinstance(obj.get("call_type"), str)
        and ("litellm_call_id" in obj or "model_parameters" in obj)
    )


def detect(source: Source) -> bool:
    return _is_payload(first_record(source))


def _payloads(source: Source) -> list[tuple[str, dict[str, Any]]]:
    return documents(source, _is_payload, "a LiteLLM logging payload (messages, response)")


def _text(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def read(
    source: Source, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> Iterator[RawItem]:
    try:
        payloads = _payloads(source)
    except PathError as exc:
        raise source.error(str(exc)) from None
    shared = Counter(_text(p.get("trace_id")) for _, p in payloads)
    calls: list[CallItem] = []
    for where, p in payloads:
        raw_meta = p.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        trace = _text(p.get("trace_id"))
        session = (
            _text(p.get("session_id"))
            or (trace if trace is not None and shared[trace] > 1 else None)
            or _text(meta.get("session_id"))
        )
        try:
            if p.get("status") not in (None, "success"):
                raise PathError(f"{where}.status", f"a failed call ({p['status']}): no reply")
            inputs = messages_of(p["messages"], f"{where}.messages")
            outputs, usage, model = response_outputs(p["response"], f"{where}.response")
        except PathError as exc:
            reject(source, skip_invalid, exc)
            continue
        tokens = usage.input_tokens
        if tokens is None:
            tokens = int_or_none(p.get("prompt_tokens"))
        calls.append(
            Call(
                where,
                tuple(inputs),
                tuple(outputs),
                model or _text(p.get("model")),
                Usage(tokens, usage.output_tokens),
                session=session,
                user=_text(p.get("end_user")) or _text(meta.get("user_api_key_end_user_id")),
                id=_text(p.get("id")),
                start=p.get("startTime"),
            )
        )
    yield from with_memory_tools(interpret(calls, source, agent=selection.agent, unit="call"))
