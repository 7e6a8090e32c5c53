"""A transcript → canonical JSON Lines (docs/reference.md#transcript-input), the output of `memdiag
convert`.

Loading what is written gives back the same messages (ids, roles, content, sessions, tool calls,
markers, metadata) and the same summaries: ids are always written, so the default `m<N>` ids
of the input stay stable even if messages are later added or removed by hand.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

from memdiag.transcript.model import DEFAULT_SESSION, Message, Transcript
from memdiag.transcript.source import MESSAGE_FIELDS  # metadata keys never written top level

# json.dumps(ensure_ascii=False) leaves these unescaped, but str.splitlines (and some JSON
# Lines readers) break lines on them; escaping keeps one record per line
_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def to_canonical(transcript: Transcript) -> Iterator[dict[str, Any]]:
    """Yield the canonical records of a transcript: session lines, messages, summary events.

    Session lines are written only when they carry information: several sessions, a session
    id other than the default, or a session timestamp. Messages do not repeat their session.
    """
    messages = transcript.messages
    with_sessions = (
        len(transcript.sessions) > 1
        or any(s != DEFAULT_SESSION for s in transcript.sessions)
        or bool(transcript.session_ts)
        # without a session line, the reader takes the first message's ts as the session's
        or bool(messages and messages[0].ts is not None)
    )
    # Transcript.sessions is in order of entry, which may come before a session's first
    # message (a session line, then a message naming another session) or without any message;
    # such sessions are written just before the next session line, which keeps that order
    sessions = transcript.sessions
    order = {s: k for k, s in enumerate(sessions)}
    written: set[str] = set()
    cursor = 0  # every session before this index has had its line written
    summaries = sorted(transcript.summaries, key=lambda s: s.after_index)
    next_summary = 0

    def session_line(sid: str) -> dict[str, Any]:
        record: dict[str, Any] = {"type": "session", "id": sid}
        ts = transcript.session_ts.get(sid)
        if ts is not None and sid not in written:
            record["ts"] = ts
        written.add(sid)
        return record

    def sessions_before(end: int) -> Iterator[dict[str, Any]]:
        nonlocal cursor
        while cursor < end:
            if sessions[cursor] not in written:
                yield session_line(sessions[cursor])
            cursor += 1

    def summaries_through(index: int) -> Iterator[dict[str, Any]]:
        nonlocal next_summary
        while next_summary < len(summaries) and summaries[next_summary].after_index <= index:
            event = summaries[next_summary]
            record: dict[str, Any] = {"type": "summary", "content": event.content}
            if event.replaces_through >= 0:
                record["replaces_through"] = messages[event.replaces_through].id
            if event.meta:  # a coding agent's compaction: where and how (docs/coding-agents.md)
                record["compaction"] = event.meta
            next_summary += 1
            yield record

    # observed requests and searches follow the message they produced (ids resolve on reading)
    events: dict[int, list[dict[str, Any]]] = {}
    for retrieval in transcript.retrievals:
        events.setdefault(retrieval.before, []).append(retrieval.record())
    for window in transcript.windows:
        events.setdefault(window.before, []).append(window.record())
    yield from summaries_through(-1)
    current: str | None = None
    for message in messages:
        if with_sessions and message.session != current:
            yield from sessions_before(order[message.session])
            yield session_line(message.session)
        current = message.session
        yield _message_record(message)
        yield from events.get(message.index, ())
        yield from summaries_through(message.index)
    yield from summaries_through(len(messages))
    if with_sessions:
        yield from sessions_before(len(sessions))


def _message_record(m: Message) -> dict[str, Any]:
    record: dict[str, Any] = {"role": m.role, "content": m.content, "id": m.id}
    if m.ts is not None:
        record["ts"] = m.ts
    if m.name is not None:
        record["name"] = m.name
    if m.tool_calls:
        record["tool_calls"] = list(m.tool_calls)
    if m.tool_call_id is not None:
        record["tool_call_id"] = m.tool_call_id
    if m.forgot is not None:
        record["forgot"] = m.forgot
    # metadata (non-text blocks, has_answer, image captions, ...) rides along as extra fields,
    # which the canonical reader keeps as metadata again
    for key, value in m.metadata.items():
        if key not in MESSAGE_FIELDS:
            record[key] = value
    return record


def dumps_record(record: dict[str, Any]) -> str:
    """One canonical JSON Lines record (without the newline), UTF-8 text kept readable."""
    text = json.dumps(record, ensure_ascii=False, default=str)
    for char, escape in _LINE_BREAKS.items():
        if char in text:  # these characters can only occur inside JSON strings
            text = text.replace(char, escape)
    return text


def write_canonical(transcript: Transcript, fp: IO[str]) -> int:
    """Write a transcript as canonical JSON Lines to a text stream; return the lines written."""
    count = 0
    for record in to_canonical(transcript):
        fp.write(dumps_record(record) + "\n")
        count += 1
    return count
