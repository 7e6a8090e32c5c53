"""Pydantic AI message history (docs/framework-state.md): what `result.all_messages_json()`
writes (`ModelMessagesTypeAdapter`), a JSON array of
`{kind: request | response, parts: [{part_kind, ...}], timestamp, run_id, ...}`.

Request parts: `system-prompt` (a system message), `user-prompt` (the user's words; images and
files are kept as metadata), `tool-return` (a tool result, paired by `tool_call_id`) and
`retry-prompt` (what Pydantic AI sent back after a failed tool call or output: a tool result
when it names a call, else a user message). A request's `instructions` (sent with every request
but not saved as a part) become a system message where they first appear or change. Response
parts: `text`, `tool-call` (OpenAI-shaped calls, ids kept), `thinking` (metadata, not text),
native tool calls and their returns and files (metadata). The history's `conversation_id`
names the session; each message keeps its run, model and usage as metadata.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from memdiag.transcript.model import RawItem, RawMessage, RawSession
from memdiag.transcript.source import Elements, Source, drop_nulls, openai_tool_call
from memdiag.transcript.toolkit import PathError, expect, get_list, get_str, reject, step

name = "pydantic_ai"
# recognised by its own keys (`kind` request/response, `parts` with `part_kind`): no other
# reader takes it, so it sits with the exports
detect_priority = 32
examples = ("formats/pydantic_ai/history.json",)

KINDS = ("request", "response")
REQUEST_PARTS = ("system-prompt", "user-prompt", "tool-return", "retry-prompt")
RESPONSE_PARTS = ("text", "tool-call", "thinking", "file")
# parts that are metadata, not text the model is sent again (provider-run tools, and the
# instruction parts of newer versions, which `instructions` already carries)
META_PARTS = (
    "builtin-tool-call",
    "builtin-tool-return",
    "native-tool-call",
    "native-tool-return",
    "instruction-baseline",
    "instruction-delta",
    "tool-availability-delta",
    "compaction",
)


def _is_message(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and obj.get("kind") in KINDS
        and isinstance(obj.get("parts"), list)
        and all(isinstance(p, dict) and "part_kind" in p for p in obj["parts"][:1])
    )


def detect(source: Source) -> bool:
    return _is_message(Elements(source).first())


def read(source: Source, skip_invalid: bool) -> Iterator[RawItem]:
    els = Elements(source)
    session: str | None = None
    instructions: str | None = None
    for n, (_, obj) in enumerate(els.items):
        where = f"[{n}]" if els.is_array else ""
        try:
            msg = expect(obj, dict, where, "a message object (kind request or response)")
            conv = get_str(msg, "conversation_id", where)
            if conv and conv != session:
                session = conv
                yield RawSession(conv, n + 1, get_str(msg, "timestamp", where))
            kind = msg.get("kind")
            if kind not in KINDS:
                raise PathError(step(where, "kind"), f"expected request or response, got {kind!r}")
            meta = _meta(msg)
            if kind == "request":
                text = get_str(msg, "instructions", where)
                if text and text != instructions:
                    ts = get_str(msg, "timestamp", where)
                    yield RawMessage("system", text, n + 1, ts=ts, metadata={"instructions": True})
                instructions = text or instructions
                yield from _request(msg, where, n + 1, meta)
            else:
                yield _response(msg, where, n + 1, meta)
        except PathError as exc:
            reject(source, skip_invalid, exc, els.line(n))


def _meta(msg: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for key in ("run_id", "model_name", "provider_name", "finish_reason"):
        if isinstance(msg.get(key), str) and msg[key]:
            meta[key] = msg[key]
    usage = msg.get("usage")
    if isinstance(usage, dict):
        counts = {k: v for k, v in usage.items() if isinstance(v, int) and v}
        if counts:
            meta["usage"] = counts
    return meta


def _parts(msg: dict[str, Any], where: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for k, part in enumerate(get_list(msg, "parts", where, required=True)):
        at = step(step(where, "parts"), k)
        part = expect(part, dict, at, "a part object")
        kind = part.get("part_kind")
        if not isinstance(kind, str):
            raise PathError(step(at, "part_kind"), "missing field 'part_kind' (a string)")
        yield at, kind, part


def _content(part: dict[str, Any], at: str) -> tuple[str, dict[str, Any]]:
    """A part's content as text; non-text user content (images, files) as metadata."""
    value = part.get("content")
    if isinstance(value, str):
        return value, {}
    if isinstance(value, list):
        texts = [v for v in value if isinstance(v, str)]
        other = [drop_nulls(v) for v in value if not isinstance(v, str)]
        return "\n".join(texts), ({"content": other} if other else {})
    if value is None:
        return "", {}
    return json.dumps(value, ensure_ascii=False, default=str), {}


def _request(
    msg: dict[str, Any], where: str, line: int, meta: dict[str, Any]
) -> Iterator[RawMessage]:
    for at, kind, part in _parts(msg, where):
        ts = get_str(part, "timestamp", at)
        if kind in META_PARTS:
            continue
        if kind not in REQUEST_PARTS:
            raise PathError(
                step(at, "part_kind"),
                f"unknown request part {kind!r}; expected one of {', '.join(REQUEST_PARTS)}",
            )
        text, extra = _content(part, at)
        call_id = get_str(part, "tool_call_id", at)
        tool = get_str(part, "tool_name", at)
        if kind == "system-prompt":
            yield RawMessage("system", text, line, ts=ts, metadata=extra)
        elif kind == "user-prompt":
            yield RawMessage("user", text, line, ts=ts, metadata={**meta, **extra})
        elif kind == "tool-return" or (kind == "retry-prompt" and call_id and tool):
            retry = {"retry": True} if kind == "retry-prompt" else {}
            yield RawMessage(
                "tool", text, line, ts=ts, name=tool, tool_call_id=call_id, metadata=retry
            )
        else:  # a retry of the output, not of a tool call: a user message as sent
            yield RawMessage("user", text, line, ts=ts, metadata={"retry": True})


def _response(msg: dict[str, Any], where: str, line: int, meta: dict[str, Any]) -> RawMessage:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    extra: dict[str, list[Any]] = {}
    for at, kind, part in _parts(msg, where):
        if kind == "text":
            texts.append(get_str(part, "content", at) or "")
        elif kind == "tool-call":
            name = get_str(part, "tool_name", at, required=True)
            calls.append(
                openai_tool_call(get_str(part, "tool_call_id", at), name, part.get("args"))
            )
        elif kind == "thinking":
            extra.setdefault("reasoning", []).append(drop_nulls(part))
        elif kind == "file" or kind in META_PARTS:
            extra.setdefault("parts", []).append(drop_nulls(part))
        else:
            raise PathError(
                step(at, "part_kind"),
                f"unknown response part {kind!r}; expected one of {', '.join(RESPONSE_PARTS)}",
            )
    return RawMessage(
        "assistant",
        "\n".join(texts),
        line,
        id=get_str(msg, "provider_response_id", where),
        ts=get_str(msg, "timestamp", where),
        tool_calls=tuple(calls),
        metadata={**meta, **extra},
    )
