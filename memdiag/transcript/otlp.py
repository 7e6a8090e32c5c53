"""OpenTelemetry span encodings: the SDK's ``span.to_json()`` and OTLP/JSON (spans and logs).

Both are read into :class:`Span` objects with plain attribute dicts; log records that name a
span (the older GenAI conventions log each message as an event) are attached to it as events.
Used by the ``otel`` format.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from memdiag.transcript.source import Source
from memdiag.transcript.tracing import PathError


@dataclass
class Span:
    where: str
    name: str
    span_id: str | None
    parent_id: str | None
    trace_id: str | None
    start: int | str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def operation(self) -> str | None:
        op = self.attributes.get("gen_ai.operation.name")
        if isinstance(op, str):
            return op
        kind = self.attributes.get("openinference.span.kind")  # Arize Phoenix / OpenInference
        return {"LLM": "chat", "RETRIEVER": "retrieval", "AGENT": "invoke_agent"}.get(str(kind))


# --- the two span encodings ----------------------------------------------------------------


def is_sdk_span(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("context"), dict) and "name" in obj


def is_otlp(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("resourceSpans"), list)


def is_otlp_logs(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("resourceLogs"), list)


def _otlp_value(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        return int(v["intValue"])
    if "arrayValue" in v:
        return [_otlp_value(x) for x in v["arrayValue"].get("values", [])]
    if "kvlistValue" in v:
        return {
            kv.get("key"): _otlp_value(kv.get("value")) for kv in v["kvlistValue"].get("values", [])
        }
    if "bytesValue" in v:
        return base64.b64decode(v["bytesValue"]).hex()
    return None


def _otlp_attrs(items: Any, where: str) -> dict[str, Any]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise PathError(where, "expected a list of {key, value}")
    return {
        str(kv.get("key")): _otlp_value(kv.get("value")) for kv in items if isinstance(kv, dict)
    }


def spans_of(source: Source) -> list[Span]:
    """Every span of the file, with the log events that name it attached as span events.

    Instrumentations of the older conventions log each message as a log record (an event with
    ``eventName`` gen_ai.user.message, ...) tied to its span by ``spanId``; a collector writes
    them beside the spans (``resourceLogs``).
    """
    spans: list[Span] = []
    logs: list[tuple[str | None, str, dict[str, Any]]] = []
    for item in _items(source):
        if isinstance(item, Span):
            spans.append(item)
        else:
            logs.append(item)
    by_id = {s.span_id: s for s in spans if s.span_id}
    for span_id, name, body in logs:
        if span_id in by_id:
            by_id[span_id].events.append((name, body))
    return spans


def _otlp_logs(obj: dict[str, Any], where: str) -> Iterator[tuple[str | None, str, dict[str, Any]]]:
    for rl in obj["resourceLogs"]:
        for sl in rl.get("scopeLogs") or []:
            for k, rec in enumerate(sl.get("logRecords") or []):
                attrs = _otlp_attrs(rec.get("attributes"), f"{where}.logRecords[{k}].attributes")
                name = rec.get("eventName") or attrs.get("event.name")
                if not isinstance(name, str):
                    continue
                body = _otlp_value(rec.get("body"))
                merged = {**attrs, **(body if isinstance(body, dict) else {"content": body})}
                yield rec.get("spanId"), name, merged


def _items(source: Source) -> Iterator[Span | tuple[str | None, str, dict[str, Any]]]:
    """Spans and span-bound log events, from SDK to_json objects or OTLP/JSON requests."""
    docs: list[tuple[str, Any]] = []
    for line, obj in source.records:
        if isinstance(obj, list):
            docs.extend((f"[{k}]", o) for k, o in enumerate(obj))
        else:
            docs.append((f"line {line}" if source.is_jsonl else "", obj))
    for where, obj in docs:
        if is_sdk_span(obj):
            ctx = obj["context"]
            yield Span(
                where or "span",
                str(obj.get("name")),
                ctx.get("span_id"),
                obj.get("parent_id"),
                ctx.get("trace_id"),
                str(obj.get("start_time") or ""),
                dict(obj.get("attributes") or {}),
                [
                    (str(e.get("name")), dict(e.get("attributes") or {}))
                    for e in obj.get("events") or []
                    if isinstance(e, dict)
                ],
            )
        elif is_otlp(obj):
            yield from _otlp_spans(obj, where)
        elif is_otlp_logs(obj):
            yield from _otlp_logs(obj, where)
        else:
            raise PathError(where or "document", "not an OpenTelemetry span or OTLP request")


def _otlp_spans(obj: dict[str, Any], where: str) -> Iterator[Span]:
    prefix = f"{where}." if where else ""
    for r, rs in enumerate(obj["resourceSpans"]):
        for s, ss in enumerate(rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []):
            for k, sp in enumerate(ss.get("spans") or []):
                path = f"{prefix}resourceSpans[{r}].scopeSpans[{s}].spans[{k}]"
                yield Span(
                    path,
                    str(sp.get("name")),
                    sp.get("spanId"),
                    sp.get("parentSpanId") or None,
                    sp.get("traceId"),
                    int(sp.get("startTimeUnixNano") or 0),
                    _otlp_attrs(sp.get("attributes"), f"{path}.attributes"),
                    [
                        (str(e.get("name")), _otlp_attrs(e.get("attributes"), f"{path}.events"))
                        for e in sp.get("events") or []
                        if isinstance(e, dict)
                    ],
                )


# --- messages -------------------------------------------------------------------------------
