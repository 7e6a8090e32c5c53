"""Canonical JSON Lines (docs/reference.md#transcript-input): one message, session, summary, window
or retrieval object
per line (window/retrieval: docs/reference.md#observed-windows, memdiag/transcript/events.py)."""

from __future__ import annotations

from collections.abc import Iterator

from memdiag.transcript.events import retrieval_from, window_from
from memdiag.transcript.model import RawItem, RawSession, RawSummary
from memdiag.transcript.source import Source, message_from_dict, opt_str
from memdiag.transcript.toolkit import reject

name = "canonical"
# JSON Lines of messages: after the formats whose records also have `role` (Responses items)
detect_priority = 50
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = ("demo.jsonl",)


def detect(source: Source) -> bool:
    if not source.is_jsonl or not source.records:
        return False
    first = source.records[0][1]
    return isinstance(first, dict) and (
        "role" in first or first.get("type") in ("session", "summary", "window", "retrieval")
    )


def read(source: Source, skip_invalid: bool) -> Iterator[RawItem]:
    if not source.is_jsonl:
        raise source.error("canonical format is JSON Lines: one object per line", 1)
    for line, obj in source.records:
        if not isinstance(obj, dict):
            reject(source, skip_invalid, f"expected a JSON object, got {type(obj).__name__}", line)
            continue
        kind = obj.get("type")
        try:
            if kind == "session":
                sid = opt_str(obj, "id")
                if not sid:
                    raise ValueError("missing field 'id' on a session line")
                yield RawSession(sid, line, opt_str(obj, "ts") or opt_str(obj, "timestamp"))
            elif kind == "summary":
                content = obj.get("content")
                if not isinstance(content, str):
                    raise ValueError("field 'content' of a summary must be a string")
                meta = obj.get("compaction")  # a coding agent's compaction (convert keeps it)
                if meta is not None and not isinstance(meta, dict):
                    raise ValueError("field 'compaction' of a summary must be an object")
                yield RawSummary(content, opt_str(obj, "replaces_through"), line, meta or {})
            elif kind == "window":
                yield window_from(obj, line)
            elif kind == "retrieval":
                yield retrieval_from(obj, line)
            elif kind in (None, "message"):
                yield message_from_dict(obj, line)
            else:
                raise ValueError(
                    f"field 'type': unknown {kind!r}; expected session, summary, window, "
                    "retrieval or a message"
                )
        except ValueError as exc:
            reject(source, skip_invalid, str(exc), line)
