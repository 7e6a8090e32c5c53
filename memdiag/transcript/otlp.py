"""OpenTelemetry span encodings: the SDK's ``span.to_json()`` and OTLP/JSON (spans and logs).

Both are read into :class:`Span` objects with plain attribute dicts; log records that name a
span (the older GenAI conventions log each message as an event) are attached to it as events.
Used by the ``otel`` format.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from memdiag.transcript.source import Source
from memdiag.transcript.toolkit import PathError


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
        if kind is not None:
            return {"LLM": "chat", "RETRIEVER": "retrieval", "AGENT": "invoke_agent"}.get(str(kind))
        # OpenLLMetry before the GenAI conventions: `llm.request.type`, `traceloop.span.kind`
        request = self.attributes.get("llm.request.type")
        if request in ("chat", "completion"):
            return "chat" if request == "chat" else "text_completion"
        traceloop = self.attributes.get("traceloop.span.kind")
        return {"agent": "invoke_agent", "tool": "execute_tool"}.get(str(traceloop))


# --- the two span encodings ----------------------------------------------------------------


def is_sdk_span(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("context"), dict) and "name" in obj


def is_otlp(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("resourceSpans"), list)


def is_otlp_logs(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("resourceLogs"), list)


def _obj(value: Any, where: str, what: str = "an object") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PathError(where, f"expected {what}, got {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    """An optional list (null or missing reads as empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise PathError(where, f"expected a list, got {type(value).__name__}")
    return value


def _id(value: Any, where: str) -> str | None:
    """A span or trace id: a string (or a number), never an object."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise PathError(where, f"expected an id string, got {type(value).__name__}")
    return str(value)


def _otlp_value(v: Any, where: str) -> Any:
    """An OTLP AnyValue (`{"stringValue": ...}`, `{"arrayValue": {"values": [...]}}`, ...)."""
    if not isinstance(v, dict):
        return v
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        n = v["intValue"]
        if isinstance(n, bool) or not isinstance(n, (str, int, float)):
            raise PathError(f"{where}.intValue", f"expected an integer, got {type(n).__name__}")
        try:
            return int(n)
        except (ValueError, OverflowError):
            raise PathError(f"{where}.intValue", "expected an integer") from None
    if "arrayValue" in v:
        at = f"{where}.arrayValue"
        values = _list(_obj(v["arrayValue"], at).get("values"), f"{at}.values")
        return [_otlp_value(x, f"{at}.values[{k}]") for k, x in enumerate(values)]
    if "kvlistValue" in v:
        at = f"{where}.kvlistValue"
        return _otlp_attrs(_obj(v["kvlistValue"], at).get("values"), f"{at}.values")
    if "bytesValue" in v:
        import base64  # rare in traces: not imported by every load that asks otel to detect
        import binascii

        raw = v["bytesValue"]
        if not isinstance(raw, str):
            raise PathError(f"{where}.bytesValue", "expected a base64 string")
        try:
            return base64.b64decode(raw).hex()
        except (binascii.Error, ValueError):
            raise PathError(f"{where}.bytesValue", "invalid base64") from None
    return None


def _otlp_attrs(items: Any, where: str) -> dict[str, Any]:
    """OTLP attributes, `[{key, value}]`, as a dict (entries that are not objects ignored)."""
    out: dict[str, Any] = {}
    for k, kv in enumerate(_list(items, where)):
        if isinstance(kv, dict):
            out[str(kv.get("key"))] = _otlp_value(kv.get("value"), f"{where}[{k}].value")
    return out


def _sdk_attrs(value: Any, where: str) -> dict[str, Any]:
    """The SDK's attributes: an object (null or empty reads as empty)."""
    return dict(_obj(value, where)) if value else {}


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
    prefix = f"{where}." if where else ""
    for r, rl in enumerate(obj["resourceLogs"]):
        at = f"{prefix}resourceLogs[{r}]"
        for s, sl in enumerate(_list(_obj(rl, at).get("scopeLogs"), f"{at}.scopeLogs")):
            sat = f"{at}.scopeLogs[{s}]"
            records = _list(_obj(sl, sat).get("logRecords"), f"{sat}.logRecords")
            for k, rec in enumerate(records):
                path = f"{sat}.logRecords[{k}]"
                rec = _obj(rec, path, "a log record object")
                attrs = _otlp_attrs(rec.get("attributes"), f"{path}.attributes")
                name = rec.get("eventName") or attrs.get("event.name")
                if not isinstance(name, str):
                    continue
                body = _otlp_value(rec.get("body"), f"{path}.body")
                merged = {**attrs, **(body if isinstance(body, dict) else {"content": body})}
                yield _id(rec.get("spanId"), f"{path}.spanId"), name, merged


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
            at = where or "span"
            events = []
            for k, e in enumerate(_list(obj.get("events"), f"{at}.events")):
                if isinstance(e, dict):
                    attrs = _sdk_attrs(e.get("attributes"), f"{at}.events[{k}].attributes")
                    events.append((str(e.get("name")), attrs))
            yield Span(
                at,
                str(obj.get("name")),
                _id(ctx.get("span_id"), f"{at}.context.span_id"),
                _id(obj.get("parent_id"), f"{at}.parent_id"),
                _id(ctx.get("trace_id"), f"{at}.context.trace_id"),
                str(obj.get("start_time") or ""),
                _sdk_attrs(obj.get("attributes"), f"{at}.attributes"),
                events,
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
        at = f"{prefix}resourceSpans[{r}]"
        rs = _obj(rs, at)
        key = "scopeSpans" if rs.get("scopeSpans") else "instrumentationLibrarySpans"
        for s, ss in enumerate(_list(rs.get(key), f"{at}.{key}")):
            sat = f"{at}.{key}[{s}]"
            for k, sp in enumerate(_list(_obj(ss, sat).get("spans"), f"{sat}.spans")):
                path = f"{sat}.spans[{k}]"
                sp = _obj(sp, path, "a span object")
                events = []
                for j, e in enumerate(_list(sp.get("events"), f"{path}.events")):
                    if isinstance(e, dict):
                        attrs = _otlp_attrs(e.get("attributes"), f"{path}.events[{j}].attributes")
                        events.append((str(e.get("name")), attrs))
                yield Span(
                    path,
                    str(sp.get("name")),
                    _id(sp.get("spanId"), f"{path}.spanId"),
                    _id(sp.get("parentSpanId"), f"{path}.parentSpanId"),
                    _id(sp.get("traceId"), f"{path}.traceId"),
                    _start(sp.get("startTimeUnixNano"), f"{path}.startTimeUnixNano"),
                    _otlp_attrs(sp.get("attributes"), f"{path}.attributes"),
                    events,
                )


def _start(value: Any, where: str) -> int:
    """A span's start in nanoseconds: an integer, or a string of one (OTLP/JSON writes int64
    as a string)."""
    if not value:
        return 0
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise PathError(where, f"expected an integer, got {type(value).__name__}")
    try:
        return int(value)
    except ValueError:
        raise PathError(where, "expected an integer") from None


# --- messages -------------------------------------------------------------------------------
