"""Google ADK sessions (docs/framework-state.md): `session.model_dump_json()`
(`{id, app_name, user_id, state, events: [...], last_update_time}`), or a JSON array of them.

Each event is one turn of someone (`author`: the user or an agent) with `content: {role,
parts}`; a part is `text` (`thought: true` parts are reasoning, kept as metadata),
`function_call` (an OpenAI-shaped tool call, its id kept), `function_response` (a tool result
paired by id), or data (`inline_data`, `file_data`, code and its result: metadata). Events
without content (state changes) and streaming chunks (`partial`) are not messages. An event
compaction (`actions.compaction`, from `EventsCompactionConfig`) is a recorded summary through
the last message it covers (the `recorded` summarizer replays it). The event id
is the message id; an agent's name is the message's `name`. Several sessions: `--session ID`
(or `all`); otherwise they are listed.

The agent's `instruction` is not saved in the session (ADK builds it into each request), so a
note says so; `--system` supplies it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from memdiag.transcript.formats.base import NO_SELECTION, Selection
from memdiag.transcript.model import RawItem, RawMessage, RawSession, RawSummary
from memdiag.transcript.source import Choice, Source, choose, drop_nulls, iso_time, openai_tool_call
from memdiag.transcript.toolkit import PathError, expect, get_dict, get_list, get_str, reject, step

name = "adk"
# recognised by its own keys (`events` with `author`, `app_name`), with the exports
detect_priority = 35
examples = (
    "formats/adk/session.json",
    "formats/adk/sessions.json",
    "formats/adk/compacted_session.json",
)
selects = {"conversation": "--session"}  # a file may hold several sessions
saves_system_prompt = False  # the agent's instruction is built into each request, not saved

PARTS = ("text", "function_call", "function_response")
DATA_PARTS = (
    "inline_data",
    "file_data",
    "executable_code",
    "code_execution_result",
    "tool_call",
    "tool_response",
)


def _is_session(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("events"), list)
        and "app_name" in doc
        and all(isinstance(e, dict) and "author" in e for e in doc["events"][:1])
    )


def _sessions(source: Source) -> tuple[list[Any], bool]:
    doc = source.records[0][1] if len(source.records) == 1 else None
    if isinstance(doc, list):
        return doc, True
    return [doc], False


def detect(source: Source) -> bool:
    sessions, _ = _sessions(source)
    return bool(sessions) and _is_session(sessions[0])


def read(
    source: Source, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> Iterator[RawItem]:
    sessions, many = _sessions(source)
    listed = []
    for k, s in enumerate(sessions):
        if not _is_session(s):
            raise source.error(
                f"{f'[{k}]: ' if many else ''}not an ADK session (expected {{id, app_name, "
                "events: [...]}})"
            )
        listed.append(Choice(str(s.get("id") or f"s{k + 1}"), "", len(s["events"]), unit="event"))
    for n in choose(
        source.path, "session", selects["conversation"], listed, selection.conversation
    ):
        where = f"[{n}]" if many else ""
        yield RawSession(listed[n].id, n + 1, iso_time(_first_ts(sessions[n])))
        read: list[tuple[float, str]] = []  # (timestamp, id) of the messages so far
        kept: list[tuple[float, float, str]] = []  # compactions the next requests send
        for k, event in enumerate(sessions[n]["events"]):
            at = step(step(where, "events"), k)
            try:
                summary = _compaction(event, at, read, kept)
                if summary is not None:
                    yield summary
                    continue
                for m in _event(event, at, f"{listed[n].id}-e{k + 1}"):
                    read.append((_ts(event), str(m.id)))
                    yield m
            except PathError as exc:
                reject(source, skip_invalid, exc)


def _ts(event: Any) -> float:
    value = event.get("timestamp") if isinstance(event, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _compaction(
    event: Any, where: str, read: list[tuple[float, str]], kept: list[tuple[float, float, str]]
) -> RawSummary | None:
    """An event compaction (`actions.compaction`, ADK's EventsCompactionConfig): a recorded
    summary through the last message it covers. ADK sends every summary that a later one does
    not subsume, each in place of its events, so the summary is theirs together."""
    if not isinstance(event, dict) or not isinstance(event.get("actions"), dict):
        return None
    comp = event["actions"].get("compaction")
    if comp is None:
        return None
    at = step(step(where, "actions"), "compaction")
    comp = expect(comp, dict, at, "a compaction object")
    start, end = comp.get("start_timestamp"), comp.get("end_timestamp")
    if not all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in (start, end)):
        raise PathError(at, "expected numbers start_timestamp and end_timestamp")
    assert isinstance(start, (int, float)) and isinstance(end, (int, float))
    content = get_dict(comp, "compacted_content", at, required=True)
    parts = get_list(content, "parts", step(at, "compacted_content"))
    text = "".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )
    kept[:] = [c for c in kept if not (start <= c[0] and c[1] <= end)]  # subsumed by this one
    kept.append((float(start), float(end), text))
    covered = [mid for ts, mid in read if ts <= max(c[1] for c in kept)]
    if not covered:
        return None
    return RawSummary("\n\n".join(c[2] for c in kept), replaces_through=covered[-1])


def _first_ts(session: dict[str, Any]) -> Any:
    events = session["events"]
    return events[0].get("timestamp") if events and isinstance(events[0], dict) else None


def _event(event: Any, where: str, fallback: str) -> Iterator[RawMessage]:
    event = expect(event, dict, where, "an event object")
    content = get_dict(event, "content", where)
    if not content or event.get("partial") is True:
        return  # a state change without content, or a streaming chunk
    author = get_str(event, "author", where) or ""
    mid = get_str(event, "id", where) or fallback
    ts = iso_time(event.get("timestamp"))
    role = get_str(content, "role", step(where, "content"))
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[RawMessage] = []
    meta: dict[str, Any] = {}
    for k, part in enumerate(get_list(content, "parts", step(where, "content"))):
        at = step(step(where, "content.parts"), k)
        part = expect(part, dict, at, "a part object")
        kind = next((p for p in (*PARTS, *DATA_PARTS) if part.get(p) is not None), None)
        if kind is None:
            raise PathError(
                at,
                "a part with none of " + ", ".join(PARTS + DATA_PARTS) + " (an unknown part kind)",
            )
        if kind == "text":
            text = get_str(part, "text", at) or ""
            if part.get("thought") is True:
                meta.setdefault("reasoning", []).append(text)
            else:
                texts.append(text)
        elif kind == "function_call":
            call = get_dict(part, "function_call", at)
            calls.append(
                openai_tool_call(
                    get_str(call, "id", step(at, "function_call")),
                    get_str(call, "name", step(at, "function_call"), required=True),
                    call.get("args") or {},
                )
            )
        elif kind == "function_response":
            resp = get_dict(part, "function_response", at)
            fat = step(at, "function_response")
            body = resp.get("response")
            if (
                isinstance(body, dict)
                and set(body) == {"result"}
                and isinstance(body["result"], str)
            ):
                body = body["result"]  # what a plain function tool returned
            results.append(
                RawMessage(
                    "tool",
                    body
                    if isinstance(body, str)
                    else json.dumps(body, ensure_ascii=False, default=str),
                    id=mid if not (texts or calls or results) else f"{mid}-{k + 1}",
                    ts=ts,
                    name=get_str(resp, "name", fat),
                    tool_call_id=get_str(resp, "id", fat),
                )
            )
        else:
            meta.setdefault("parts", []).append({kind: _slim(drop_nulls(part[kind]))})
    if texts or calls or (not results and meta):
        speaker = "user" if author == "user" or (role == "user" and not calls) else "assistant"
        yield RawMessage(
            speaker,
            "".join(texts),
            id=mid,
            ts=ts,
            name=None if speaker == "user" else author or None,
            tool_calls=tuple(calls),
            metadata=meta,
        )
    for r in results:
        if r.id == mid and (texts or calls):
            r.id = f"{mid}-r"
        yield r


def _slim(value: Any) -> Any:
    """Inline bytes (an image sent as base64) replaced by their size."""
    if isinstance(value, dict) and isinstance(value.get("data"), str):
        return {**value, "data": f"<inline data, {len(value['data'])} chars>"}
    return value
