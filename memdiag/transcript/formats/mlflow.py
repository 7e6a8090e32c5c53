"""MLflow traces (docs/traces.md): `Trace.to_json()`, one trace per line or a JSON array.

A trace is ``{"info": {"trace_metadata": {...}}, "data": {"spans": [...]}}``; each span's
attributes hold JSON strings: ``mlflow.spanType`` (``CHAT_MODEL``, ``LLM``, ``RETRIEVER``,
``AGENT``, ``TOOL``, ...), ``mlflow.spanInputs`` and ``mlflow.spanOutputs``. A chat model
span is one :class:`~memdiag.transcript.calls.Call`: its inputs are the chat request
(``{"messages": [...]}``, or the list of messages), its outputs the chat completion (or a
message, or the reply's text). A retriever span is a recorded search (``query``, the documents'
``id``, ``page_content``, ``metadata.score``). The conversation: ``mlflow.trace.session`` of
the trace's metadata; the user: ``mlflow.trace.user``. Agents: the AGENT and TOOL spans above a
call.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memdiag.transcript.calls import Call, CallItem, Search, Usage
from memdiag.transcript.calls.interpret import interpret
from memdiag.transcript.calls.shapes import messages_of, response_outputs
from memdiag.transcript.formats.base import NO_SELECTION, Selection
from memdiag.transcript.model import RawItem, RawMessage
from memdiag.transcript.source import Source, json_loads
from memdiag.transcript.toolkit import PathError, reject
from memdiag.transcript.tracing import (
    ancestors,
    as_text,
    first_record,
    records_of,
    with_memory_tools,
)

name = "mlflow"
# a trace format: asked with the traces, before the chat formats
detect_priority = 17
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = ("formats/calls/mlflow_traces.jsonl",)
# it reads LLM calls: --agent chooses among their agents (docs/traces.md)
selects = {"agent": "--agent"}

CALL_TYPES = {"CHAT_MODEL", "LLM"}


def _is_trace(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("info"), dict)
        and isinstance(obj.get("data"), dict)
        and isinstance(obj["data"].get("spans"), list)
    )


def detect(source: Source) -> bool:
    return _is_trace(first_record(source))


def _attr(span: dict[str, Any], key: str, where: str) -> Any:
    """An attribute's value: MLflow writes every one as JSON (`"\"CHAT_MODEL\""`)."""
    attrs = span.get("attributes")
    if not isinstance(attrs, dict) or attrs.get(key) is None:
        return None
    value = attrs[key]
    if not isinstance(value, str):
        return value
    try:
        return json_loads(value)
    except ValueError:
        raise PathError(f"{where}.attributes.{key}", "invalid JSON in attribute") from None


def _inputs(value: Any, where: str) -> list[RawMessage]:
    if isinstance(value, dict) and "messages" in value:
        return messages_of(value["messages"], f"{where}.messages")
    if isinstance(value, list):
        return messages_of(value, where)
    raise PathError(where, "a chat model span without input messages")


def _outputs(value: Any, where: str) -> tuple[list[RawMessage], Usage, str | None]:
    if value is None:
        return [], Usage(), None
    if isinstance(value, str):
        return [RawMessage("assistant", value)], Usage(), None
    if isinstance(value, dict) and "choices" in value:
        return response_outputs(value, where)
    if isinstance(value, dict) and "content" in value:
        return messages_of([{"role": "assistant", **value}], where), Usage(), None
    raise PathError(where, "expected a chat completion, a message or the reply's text")


def read(
    source: Source, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> Iterator[RawItem]:
    traces: list[tuple[str, dict[str, Any]]] = []
    for line, obj in source.records:
        docs = list(enumerate(obj)) if isinstance(obj, list) else [(None, obj)]
        for k, doc in docs:
            where = f"[{k}]" if k is not None else f"line {line}"
            if not _is_trace(doc):
                raise source.error(f"{where}: not an MLflow trace (info, data.spans)")
            traces.append((where, doc))
    items: list[tuple[Any, CallItem]] = []
    for where, trace in traces:
        info = trace["info"]
        meta = info.get("trace_metadata") or info.get("request_metadata") or {}
        meta = meta if isinstance(meta, dict) else {}
        session = meta.get("mlflow.trace.session")
        user = meta.get("mlflow.trace.user")
        spans = [s for s in trace["data"]["spans"] if isinstance(s, dict)]
        by_id = {str(s.get("span_id")): s for s in spans if s.get("span_id")}
        for k, span in enumerate(trace["data"]["spans"]):
            at = f"{where}.data.spans[{k}]"
            if not isinstance(span, dict):
                reject(source, skip_invalid, PathError(at, "expected a span object"))
                continue
            try:
                kind = _attr(span, "mlflow.spanType", at)
                if kind not in CALL_TYPES and kind != "RETRIEVER":
                    continue
                chain = list(ancestors(span, by_id, lambda s: s.get("parent_span_id")))
                agents = [
                    str(a.get("name") or "agent")
                    for a in reversed(chain)
                    if _attr(a, "mlflow.spanType", at) in ("AGENT", "TOOL")
                ]
                agent = "/".join(agents) or None
                nested = any(_attr(a, "mlflow.spanType", at) == "TOOL" for a in chain)
                start = span.get("start_time_unix_nano") or 0
                inputs = _attr(span, "mlflow.spanInputs", at)
                outputs = _attr(span, "mlflow.spanOutputs", at)
                sid = None if session is None else str(session)
                if kind == "RETRIEVER":
                    if outputs is None:
                        continue  # nothing came back to judge
                    query = inputs.get("query", "") if isinstance(inputs, dict) else inputs
                    records = records_of(outputs, f"{at}.attributes.mlflow.spanOutputs")
                    items.append(
                        (start, Search(at, as_text(query), records, sid, agent, nested, start))
                    )
                    continue
                sent = _inputs(inputs, f"{at}.attributes.mlflow.spanInputs")
                replies, usage, model = _outputs(outputs, f"{at}.attributes.mlflow.spanOutputs")
            except PathError as exc:
                reject(source, skip_invalid, exc)
                continue
            requested = inputs.get("model") if isinstance(inputs, dict) else None
            call = Call(
                at,
                tuple(sent),
                tuple(replies),
                model or (None if requested is None else str(requested)),
                usage,
                session=sid,
                user=None if user is None else str(user),
                agent=agent,
                parent=None if span.get("parent_span_id") is None else str(span["parent_span_id"]),
                id=None if span.get("span_id") is None else str(span["span_id"]),
                start=start,
                nested=nested,
            )
            items.append((start, call))
    ordered = [c for _, c in sorted(items, key=lambda x: x[0] if isinstance(x[0], int) else 0)]
    yield from with_memory_tools(interpret(ordered, source, agent=selection.agent, unit="span"))
