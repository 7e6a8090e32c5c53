"""OpenAI chat: `{"messages": [...]}` per line (one conversation = one session), or a JSON
array of such conversations or of messages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memdiag.transcript.model import RawItem, RawSession
from memdiag.transcript.source import Source, invalid, message_from_dict

name = "openai"


def detect(source: Source) -> bool:
    if not source.records:
        return False
    first = source.records[0][1]
    if isinstance(first, dict):
        return isinstance(first.get("messages"), list)
    return (
        isinstance(first, list)
        and bool(first)
        and isinstance(first[0], dict)
        and ("role" in first[0] or isinstance(first[0].get("messages"), list))
    )


def read(source: Source, skip_invalid: bool) -> Iterator[RawItem]:
    conversations: list[tuple[int, Any]] = []
    for line, obj in source.records:
        if isinstance(obj, list) and obj and isinstance(obj[0], dict) and "role" in obj[0]:
            conversations.append((line, {"messages": obj}))
        elif isinstance(obj, list):
            conversations.extend((i + 1, o) for i, o in enumerate(obj))
        else:
            conversations.append((line, obj))
    many = len(conversations) > 1
    for n, (line, conv) in enumerate(conversations, start=1):
        if not isinstance(conv, dict) or not isinstance(conv.get("messages"), list):
            invalid(source, skip_invalid, line, "missing field 'messages' (a list)")
            continue
        if many:
            yield RawSession(str(conv.get("id") or f"s{n}"), line)
        for k, msg in enumerate(conv["messages"]):
            where = line if source.is_jsonl else k + 1
            if not isinstance(msg, dict):
                invalid(source, skip_invalid, where, f"messages[{k}]: expected an object")
                continue
            try:
                yield message_from_dict(msg, where)
            except ValueError as exc:
                invalid(source, skip_invalid, where, f"messages[{k}]: {exc}")
