"""OpenAI chat: `{"messages": [...]}` per line (one conversation = one session), or a JSON
array of such conversations or of messages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memdiag.transcript.model import RawItem, RawSession
from memdiag.transcript.source import Source, message_from_dict
from memdiag.transcript.toolkit import reject

name = "openai"
# takes any `{"messages": [...]}`: after langchain and anthropic, which know theirs apart
detect_priority = 51
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = ("formats/sdk_dumps/chat_completions.json",)


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
            reject(source, skip_invalid, "missing field 'messages' (a list)", line)
            continue
        if many:
            yield RawSession(str(conv.get("id") or f"s{n}"), line)
        for k, msg in enumerate(conv["messages"]):
            where = line if source.is_jsonl else k + 1
            if not isinstance(msg, dict):
                reject(source, skip_invalid, f"messages[{k}]: expected an object", where)
                continue
            try:
                yield message_from_dict(msg, where)
            except ValueError as exc:
                reject(source, skip_invalid, f"messages[{k}]: {exc}", where)
