"""OpenTelemetry GenAI spans (docs/reference.md#observed-windows): the SDK's ``span.to_json()``
form and OTLP/JSON.

Inference spans (``gen_ai.operation.name`` chat / text_completion / generate_content) carry the
request either as attributes (``gen_ai.system_instructions``, ``gen_ai.input.messages``,
``gen_ai.output.messages``: JSON with ``parts``) or as the older per-message span events
(``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message``,
``gen_ai.tool.message``, ``gen_ai.choice``; and the oldest ``gen_ai.content.prompt`` /
``gen_ai.content.completion``). Each call becomes a ``window`` event over the messages it sent;
``search_memory`` spans (``gen_ai.memory.query.text``, ``gen_ai.memory.records``) and
``retrieval`` spans (``gen_ai.retrieval.query.text``, ``gen_ai.retrieval.documents``) become
``retrieval`` events for the next reply.

Sessions: ``gen_ai.conversation.id`` (or OpenInference's ``session.id``, OpenLLMetry's
association property) on the span or an ancestor; without one, the file is one conversation
(traces are often one turn each, so a trace is not a session).
Also read: OpenLLMetry's flattened ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``
attributes, and the ``gen_ai.client.inference.operation.details`` log record that holds a
call's content when it is captured in events only.
Each span is mapped to a :class:`~memdiag.transcript.calls.Call`, its agent being the chain of
agent and tool spans above it; the interpreter (docs/traces.md) picks the agent the human talks
to, and the others are listed (``--agent``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memdiag.transcript.calls import Call, CallItem, Search, Usage
from memdiag.transcript.calls.interpret import interpret
from memdiag.transcript.events import RawRetrieval
from memdiag.transcript.formats.base import NO_SELECTION, Selection
from memdiag.transcript.model import RawItem, RawMessage
from memdiag.transcript.otlp import Span, is_otlp, is_otlp_logs, is_sdk_span, spans_of
from memdiag.transcript.source import Source, json_loads, message_from_dict
from memdiag.transcript.toolkit import PathError, reject
from memdiag.transcript.tracing import (
    ancestors,
    as_text,
    first_record,
    int_or_none,
    maybe_json,
    records_of,
    role_of,
    sub,
    tool_call,
    with_memory_tools,
)

name = "otel"
# asked first with the other traces: a trace's documents are never chats, but a chat reader
# could take their message lists for one
detect_priority = 10
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = (
    "formats/traces/otel_openai_v2.jsonl",
    "formats/traces/otel_spans.json",
    "formats/traces/otel_otlp.json",
    "formats/traces/otel_events.json",
    "formats/traces/otel_openai_openinference.json",
    "formats/traces/otel_openai_traceloop.json",
    "formats/traces/otel_console.log",
)
# it reads LLM calls: --agent chooses among their agents (docs/traces.md)
selects = {"agent": "--agent"}

INFERENCE = {"chat", "text_completion", "generate_content"}
# a conversation: OpenTelemetry's attribute, then OpenInference's and OpenLLMetry's; without one
# the file is one conversation (a trace is often one turn of it, so traces are not sessions)
SESSION_KEYS = (
    "gen_ai.conversation.id",
    "session.id",
    "traceloop.association.properties.session_id",
    "langfuse.session.id",
)
SEARCH = {"search_memory", "retrieval"}
# the event (a log record bound to the span) that holds a call's content when capture is
# EVENT_ONLY, in the GenAI conventions from 1.37 on
DETAILS = "gen_ai.client.inference.operation.details"
PROMPT_TOKEN_KEYS = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
)
_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _parts_messages(msgs: Any, where: str) -> list[RawMessage]:
    """`gen_ai.input.messages` / `gen_ai.output.messages`: [{role, parts: [...]}]."""
    msgs = maybe_json(msgs, where)
    if not isinstance(msgs, list):
        raise PathError(where, "expected a list of messages {role, parts}")
    out: list[RawMessage] = []
    for k, m in enumerate(msgs):
        at = f"{where}[{k}]"
        if not isinstance(m, dict):
            raise PathError(at, "expected a message object")
        role = role_of(m.get("role"), at)
        parts = m.get("parts")
        if not isinstance(parts, list):
            raise PathError(f"{at}.parts", "missing or not a list")
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        results: list[RawMessage] = []
        other: list[Any] = []
        for j, p in enumerate(parts):
            if not isinstance(p, dict) or not isinstance(p.get("type"), str):
                raise PathError(f"{at}.parts[{j}]", "expected a part with a string 'type'")
            kind = p["type"]
            if kind == "text":
                texts.append(as_text(p.get("content")))
            elif kind == "tool_call":
                name_at = f"{at}.parts[{j}].name"
                calls.append(tool_call(p.get("id"), p.get("name"), p.get("arguments", {}), name_at))
            elif kind == "tool_call_response":
                results.append(
                    RawMessage(
                        "tool",
                        as_text(p.get("response", p.get("result"))),
                        tool_call_id=None if p.get("id") is None else str(p.get("id")),
                    )
                )
            else:  # reasoning, blob, uri, file, generic parts: metadata, not window text
                other.append(p)
        if results and not texts and not calls:
            out.extend(results)  # tool results (one per call, as memdiag pairs them)
            continue
        meta: dict[str, Any] = {"blocks": other} if other else {}
        if m.get("finish_reason") is not None:
            meta["finish_reason"] = m["finish_reason"]
        out.append(RawMessage(role, "\n".join(texts), tool_calls=tuple(calls), metadata=meta))
        out.extend(results)
    return out


def _instructions(value: Any, where: str) -> list[RawMessage]:
    value = maybe_json(value, where)
    if isinstance(value, str):
        return [RawMessage("system", value)]
    if not isinstance(value, list):
        raise PathError(where, "expected a list of parts")
    texts = [
        as_text(p.get("content")) for p in value if isinstance(p, dict) and p.get("type") == "text"
    ]
    return [RawMessage("system", "\n".join(texts))] if texts else []


def _old_message(role: str, attrs: dict[str, Any], where: str) -> RawMessage:
    body = attrs
    if "gen_ai.event.content" in attrs:
        body = maybe_json(attrs["gen_ai.event.content"], f"{where}.gen_ai.event.content")
        if not isinstance(body, dict):
            raise PathError(where, "gen_ai.event.content is not an object")
    if isinstance(body.get("message"), (dict, str)):  # gen_ai.choice
        inner = maybe_json(body["message"], f"{where}.message")
        body = inner if isinstance(inner, dict) else {"content": inner}
    role = role_of(body.get("role", role), where)
    calls = maybe_json(body.get("tool_calls"), f"{where}.tool_calls") or []
    if not isinstance(calls, list):
        raise PathError(f"{where}.tool_calls", "expected a list")
    tool_calls = []
    for k, c in enumerate(calls):
        if isinstance(c, dict):
            fn = sub(c, "function", f"{where}.tool_calls[{k}]")
            name_at = f"{where}.tool_calls[{k}].function.name"
            args = fn.get("arguments", "")
            tool_calls.append(tool_call(c.get("id"), fn.get("name"), args, name_at))
    content = body.get("content")
    if isinstance(content, list):  # content blocks
        content = "\n".join(as_text(b.get("text", "")) for b in content if isinstance(b, dict))
    tool_id = body.get("id") if role == "tool" else body.get("tool_call_id")
    return RawMessage(
        role,
        as_text(content),
        tool_calls=tuple(tool_calls),
        tool_call_id=None if tool_id is None else str(tool_id),
    )


def _unflatten(attrs: dict[str, Any], prefix: str, where: str) -> list[Any]:
    """`prefix.0.message.role = x` … → [{"message": {"role": x}}] (OpenInference's lists)."""
    root: dict[Any, Any] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix + "."):
            continue
        node = root
        parts = [int(p) if p.isdigit() else p for p in key[len(prefix) + 1 :].split(".")]
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):  # `x.0.message = "a"` beside `x.0.message.role`
                raise PathError(f"{where}.{key}", "conflicts with a value set at a shorter key")
        node[parts[-1]] = value

    def listify(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        if node and all(isinstance(k, int) for k in node):
            return [listify(node[k]) for k in sorted(node)]
        return {k: listify(v) for k, v in node.items()}

    out = listify(root)
    return out if isinstance(out, list) else []


def _openinference(items: list[Any], where: str) -> list[RawMessage]:
    out = []
    for k, item in enumerate(items):
        at = f"{where}.{k}.message"
        m = item.get("message") if isinstance(item, dict) else None
        if not isinstance(m, dict):
            raise PathError(at, "expected message.role / message.content")
        raw_calls = m.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise PathError(f"{at}.tool_calls", "expected a list")
        calls = []
        for j, c in enumerate(raw_calls):
            if isinstance(c, dict):
                tc = sub(c, "tool_call", f"{at}.tool_calls.{j}")
                fn = sub(tc, "function", f"{at}.tool_calls.{j}.tool_call")
                name_at = f"{at}.tool_calls.{j}.tool_call.function.name"
                args = fn.get("arguments", "")
                calls.append(tool_call(tc.get("id"), fn.get("name"), args, name_at))
        content = m.get("content")
        if content is None and isinstance(m.get("contents"), list):
            texts = []
            for j, c in enumerate(m["contents"]):
                if isinstance(c, dict):
                    mc = sub(c, "message_content", f"{at}.contents.{j}")
                    if mc.get("type", "text") == "text":
                        texts.append(as_text(mc.get("text")))
            content = "\n".join(texts)
        tool_id = m.get("tool_call_id")
        out.append(
            RawMessage(
                role_of(m.get("role"), at),
                as_text(content),
                tool_calls=tuple(calls),
                tool_call_id=None if tool_id is None else str(tool_id),
                name=m.get("name") if isinstance(m.get("name"), str) else None,
            )
        )
    return out


def _flat_content(value: Any) -> str:
    """OpenLLMetry's `content`: text, or content blocks as a JSON string (multimodal)."""
    if isinstance(value, str) and value.lstrip().startswith("[{"):
        try:
            blocks = json_loads(value)
        except ValueError:
            return value
        if isinstance(blocks, list) and all(isinstance(b, dict) and "type" in b for b in blocks):
            return "\n".join(as_text(b.get("text")) for b in blocks if b.get("type") == "text")
    return as_text(value)


def _openllmetry(items: list[Any], where: str) -> list[RawMessage]:
    """OpenLLMetry's flattened `gen_ai.prompt.N.*` / `gen_ai.completion.N.*` attributes:
    role, content, tool_call_id, tool_calls.M.{id, name, arguments}."""
    out = []
    for k, m in enumerate(items):
        at = f"{where}.{k}"
        if not isinstance(m, dict):
            raise PathError(at, "expected role / content attributes")
        raw_calls = m.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise PathError(f"{at}.tool_calls", "expected tool_calls.M.* attributes")
        calls = [
            tool_call(
                c.get("id"), c.get("name"), c.get("arguments", ""), f"{at}.tool_calls.{j}.name"
            )
            for j, c in enumerate(raw_calls)
            if isinstance(c, dict)
        ]
        role = m.get("role", "assistant" if where.endswith("completion") else None)
        tool_id = m.get("tool_call_id")
        meta = {"finish_reason": m["finish_reason"]} if m.get("finish_reason") else {}
        out.append(
            RawMessage(
                role_of(role, at),
                _flat_content(m.get("content")),
                tool_calls=tuple(calls),
                tool_call_id=None if tool_id is None else str(tool_id),
                metadata=meta,
            )
        )
    return out


def _messages(span: Span) -> tuple[list[RawMessage], list[RawMessage]]:
    """(inputs, outputs) of an inference span, from attributes or events."""
    a = span.attributes
    where = f"{span.where}.attributes"
    inputs: list[RawMessage] = []
    details = next((attrs for name, attrs in span.events if name == DETAILS), None)
    if details is not None and "gen_ai.input.messages" not in a:
        # content captured as the log record the span names, not on the span
        a = {**a, **details}
        where = f"{span.where}.log record {DETAILS}"
    if "gen_ai.prompt.0.role" in a or "gen_ai.prompt.0.content" in a:
        inputs = _openllmetry(_unflatten(a, "gen_ai.prompt", where), f"{where}.gen_ai.prompt")
        outputs = _openllmetry(
            _unflatten(a, "gen_ai.completion", where), f"{where}.gen_ai.completion"
        )
        return inputs, outputs
    if "llm.input_messages.0.message.role" in a:
        inputs = _openinference(
            _unflatten(a, "llm.input_messages", where), f"{where}.llm.input_messages"
        )
        outputs = _openinference(
            _unflatten(a, "llm.output_messages", where), f"{where}.llm.output_messages"
        )
        return inputs, outputs
    if "gen_ai.input.messages" in a or "gen_ai.output.messages" in a:
        if "gen_ai.system_instructions" in a:
            inputs += _instructions(
                a["gen_ai.system_instructions"], f"{where}.gen_ai.system_instructions"
            )
        if "gen_ai.input.messages" in a:
            inputs += _parts_messages(a["gen_ai.input.messages"], f"{where}.gen_ai.input.messages")
        outputs = (
            _parts_messages(a["gen_ai.output.messages"], f"{where}.gen_ai.output.messages")
            if "gen_ai.output.messages" in a
            else []
        )
        return inputs, outputs
    outputs = []
    for k, (name, attrs) in enumerate(span.events):
        at = f"{span.where}.events[{k}]"
        if name in _EVENT_ROLES:
            inputs.append(_old_message(_EVENT_ROLES[name], attrs, at))
        elif name == "gen_ai.choice":
            outputs.append(_old_message("assistant", attrs, at))
        elif name in ("gen_ai.content.prompt", "gen_ai.content.completion"):
            key = "gen_ai.prompt" if name.endswith("prompt") else "gen_ai.completion"
            msgs = maybe_json(attrs.get(key), f"{at}.{key}")
            if not isinstance(msgs, list):
                raise PathError(f"{at}.{key}", "expected a JSON list of messages")
            target = inputs if key == "gen_ai.prompt" else outputs
            for j, m in enumerate(msgs):
                if not isinstance(m, dict):
                    raise PathError(f"{at}.{key}[{j}]", "expected a message object")
                try:
                    target.append(message_from_dict(m, 0))
                except ValueError as exc:
                    raise PathError(f"{at}.{key}[{j}]", str(exc)) from None
    return inputs, outputs


# --- the format ----------------------------------------------------------------------------


def detect(source: Source) -> bool:
    first = first_record(source)
    if is_otlp(first) or is_otlp_logs(first):
        return True
    return is_sdk_span(first) and isinstance(first.get("attributes"), dict)


def read(
    source: Source, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> Iterator[RawItem]:
    agent = selection.agent
    try:
        spans = spans_of(source)
    except PathError as exc:
        raise source.error(str(exc)) from None
    calls = list(calls_of(spans, source, skip_invalid))
    yield from with_memory_tools(interpret(calls, source, agent=agent, unit="span"))


def _agentish(span: Span) -> str | None:
    """'agent' for an agent's span, 'tool' for a tool's (an agent called as a tool runs under
    one), else None."""
    if span.operation == "invoke_agent":
        return "agent"
    if span.operation == "execute_tool" or span.attributes.get("openinference.span.kind") == "TOOL":
        return "tool"
    return None


def _agent_name(span: Span) -> str:
    for key in ("gen_ai.agent.name", "gen_ai.tool.name"):
        name = span.attributes.get(key)
        if isinstance(name, str) and name:
            return name
    for prefix in ("invoke_agent ", "execute_tool "):
        if span.name.startswith(prefix):
            return span.name[len(prefix) :].strip() or "agent"
    return span.name or "agent"


def calls_of(spans: list[Span], source: Source, skip_invalid: bool) -> Iterator[CallItem]:
    """The calls and memory searches of the spans, in time order."""
    by_id = {s.span_id: s for s in spans if s.span_id}
    uncaptured = 0
    # OTLP starts are nanoseconds, the SDK's are ISO strings: a file mixing both sorts by kind first
    for span in sorted(spans, key=lambda s: (isinstance(s.start, str), s.start)):
        op = span.operation
        if op not in INFERENCE and op not in SEARCH:
            continue
        chain = list(ancestors(span, by_id, lambda s: s.parent_id))
        agents = [_agent_name(a) for a in reversed(chain) if _agentish(a)]
        agent = "/".join(agents) or None
        nested = any(_agentish(a) == "tool" for a in chain)
        conv = next(
            (
                str(s.attributes[key])
                for s in (span, *chain)
                for key in SESSION_KEYS
                if s.attributes.get(key) is not None
            ),
            None,
        )
        try:
            if op in SEARCH:
                found = _retrieval(span)
                if found is None:
                    uncaptured += 1
                else:
                    yield Search(
                        span.where, found.query, found.records, conv, agent, nested, span.start
                    )
                continue
            inputs, outputs = _messages(span)
            if not inputs:
                raise PathError(
                    span.where,
                    f"span {span.name!r} has no input messages (gen_ai.input.messages or "
                    "gen_ai.*.message events); was content capture off? "
                    "(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)",
                )
        except PathError as exc:
            reject(source, skip_invalid, exc)
            continue
        a = span.attributes
        model = (
            a.get("gen_ai.response.model")
            or a.get("gen_ai.request.model")
            or a.get("llm.model_name")
        )
        tokens = next(
            (n for key in PROMPT_TOKEN_KEYS if (n := int_or_none(a.get(key))) is not None), None
        )
        yield Call(
            span.where,
            tuple(inputs),
            tuple(outputs),
            None if model is None else str(model),
            Usage(tokens),
            session=conv,
            agent=agent,
            parent=span.parent_id,
            id=span.span_id,
            start=span.start,
            nested=nested,
        )
    if uncaptured:
        source.warnings.append(
            f"{source.path}: {uncaptured} memory search span(s) without their records "
            "(content capture off): not judged"
        )


def _retrieval(span: Span) -> RawRetrieval | None:
    a = span.attributes
    where = f"{span.where}.attributes"
    if a.get("openinference.span.kind") == "RETRIEVER":
        found = _unflatten(a, "retrieval.documents", where)
        docs = [d.get("document") if isinstance(d, dict) else d for d in found]
        if not docs:
            return None
        query = a.get("input.value", "")
        at = f"{where}.retrieval.documents"
        return RawRetrieval(as_text(query), records_of(docs, at), None, span.where)
    memory = span.operation == "search_memory"
    key = "gen_ai.memory.records" if memory else "gen_ai.retrieval.documents"
    if key not in a:
        return None  # content capture off: what came back is unknown, which is not "nothing"
    query = a.get("gen_ai.memory.query.text" if memory else "gen_ai.retrieval.query.text", "")
    records = records_of(a[key], f"{where}.{key}")
    return RawRetrieval(as_text(query), records, None, span.where)
