"""Anthropic Messages API: `{"system"?, "messages": [...]}` per line, a JSON document
(or a list of them), or a log of message objects; one conversation = one session."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from memdiag.transcript.model import RawItem, RawMessage, RawSession
from memdiag.transcript.source import (
    Elements,
    Source,
    check_blocks,
    checked_text,
    message_from_dict,
)
from memdiag.transcript.toolkit import reject

name = "anthropic"
# before openai, which would read `{"messages": [...]}` too but miss the tool_result blocks
detect_priority = 41
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = (
    "formats/anthropic.jsonl",
    "formats/sdk_dumps/anthropic_messages.json",
)

# block types that only the Anthropic API produces (OpenAI uses image_url, input_text, ...)
_ANTHROPIC_BLOCKS = {
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "web_search_tool_result",
    "document",
}
_OPENAI_BLOCKS = {"image_url", "input_text", "output_text", "input_audio", "file", "refusal"}


@dataclass
class _Conversation:
    index: int  # element holding the conversation (for error lines)
    line: int
    top: dict[str, Any]  # system, id, model, ...
    messages: list[tuple[int, int, Any]] = field(default_factory=list)  # (element, line, msg)
    bare_lines: bool = False  # gathered from JSON Lines records that are messages themselves


def _conversations(els: Elements) -> Iterator[_Conversation]:
    """Group the elements into conversations: `{"system"?, "messages": [...]}` records, a bare
    list of messages, or consecutive bare message records (a log of API messages).

    A generator, so that detection can stop at the first conversation that tells.
    """
    bare: _Conversation | None = None
    for n, (line, el) in enumerate(els.items):
        if isinstance(el, dict) and "role" in el and "messages" not in el:
            if bare is None:
                bare = _Conversation(n, line, {}, bare_lines=els.source.is_jsonl)
            bare.messages.append((n, line, el))
            continue
        if bare is not None:
            yield bare
            bare = None
        if isinstance(el, list):
            yield _Conversation(n, line, {}, [(n, line, m) for m in el])
        elif isinstance(el, dict) and isinstance(el.get("messages"), list):
            yield _Conversation(n, line, el, [(n, line, m) for m in el["messages"]])
        else:
            yield _Conversation(n, line, el if isinstance(el, dict) else {}, [])
    if bare is not None:
        yield bare


def _signal(conv: _Conversation) -> bool | None:
    """True: surely Anthropic; False: surely not (OpenAI signals); None: can't tell."""
    top = conv.top
    if not conv.messages:
        return False
    if isinstance(top.get("system"), (str, list)):
        return True
    first = conv.messages[0][2]
    if not top and isinstance(first, dict) and first.get("type") == "message" and "model" in first:
        return True  # a Messages API response object
    if conv.bare_lines:
        # one message per line is canonical JSONL, which allows Anthropic blocks
        # (docs/reference.md#transcript-input) and
        # has session and summary lines that this reader does not know
        return False
    for _, _, msg in conv.messages:
        if not isinstance(msg, dict):
            continue
        if msg.get("role") in ("system", "developer", "tool", "function") or "tool_calls" in msg:
            return False  # Anthropic keeps the system prompt and tool results elsewhere
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if not isinstance(kind, str):
                continue
            if kind in _ANTHROPIC_BLOCKS or (kind == "image" and "source" in block):
                return True
            if kind in _OPENAI_BLOCKS:
                return False
    if top.get("type") == "message" or str(top.get("model", "")).startswith("claude"):
        return True
    return None


def _message(msg: Any, line: int) -> list[RawMessage]:
    """One API message → canonical messages: tool_result blocks become `tool` messages."""
    if not isinstance(msg, dict):
        raise ValueError(f"expected a message object, got {type(msg).__name__}")
    content = msg.get("content")
    try:
        check_blocks(content)
    except ValueError as exc:
        raise ValueError(f"field 'content': {exc}") from None
    if not isinstance(content, list):
        return [message_from_dict(msg, line)]
    results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    if not results:
        return [message_from_dict(msg, line)]
    if msg.get("role") != "user":
        raise ValueError("tool_result blocks belong in a user message")
    out: list[RawMessage] = []
    for k, block in enumerate(results):
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str) or not call_id:
            raise ValueError(f"tool_result block {k}: missing field 'tool_use_id'")
        try:
            text, meta = checked_text(block.get("content"))
        except ValueError as exc:
            raise ValueError(f"tool_result block {k}: field 'content': {exc}") from None
        if block.get("is_error"):
            meta = {**meta, "is_error": True}
        out.append(RawMessage("tool", text, line, tool_call_id=call_id, metadata=meta))
    rest = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_result")]
    # a user message holding only tool results is the API's way to return them, not a user turn
    if rest:
        out.append(message_from_dict({**msg, "content": rest}, line))
    return out


def detect(source: Source) -> bool:
    for conv in _conversations(Elements(source)):
        signal = _signal(conv)
        if signal is not None:
            return signal
    return False


def read(source: Source, skip_invalid: bool) -> Iterator[RawItem]:
    els = Elements(source)
    convs = list(_conversations(els))
    many = len(convs) > 1
    for n, conv in enumerate(convs, start=1):
        label = f"conversation {n}: " if many and els.is_array else ""
        if not conv.messages:
            if not isinstance(conv.top.get("messages"), list):  # [] is just an empty chat
                reject(
                    source,
                    skip_invalid,
                    f"{label}missing field 'messages' (a list)",
                    els.line(conv.index),
                )
            continue
        if many:
            yield RawSession(str(conv.top.get("id") or f"s{n}"), conv.line)
        if conv.top.get("system") is not None:
            try:
                text, meta = checked_text(conv.top["system"])
            except ValueError as exc:
                reject(source, skip_invalid, f"{label}field 'system': {exc}", els.line(conv.index))
            else:
                yield RawMessage("system", text, conv.line, metadata=meta)
        for k, (element, line, msg) in enumerate(conv.messages):
            try:
                yield from _message(msg, line)
            except ValueError as exc:
                where = f"messages[{k}]: " if conv.top or els.is_array else ""
                reject(source, skip_invalid, f"{label}{where}{exc}", els.line(element))
