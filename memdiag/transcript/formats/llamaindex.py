"""LlamaIndex chat stores (docs/framework-state.md): what `SimpleChatStore.persist()` writes,
`{"store": {KEY: [ChatMessage, ...]}, "class_name": "SimpleChatStore"}`, the store of a
`ChatMemoryBuffer` (or any memory on a SimpleChatStore), one key per user or conversation.

One key is read (`--session KEY`, the only one, or `all`: each key a session); otherwise the
keys are listed. A message is `{role, blocks: [{block_type, ...}], additional_kwargs}` (or, from
llama-index before 0.12, `{role, content}`): `text` blocks are its text, `tool_call` blocks its
tool calls (`tool_call_id`, `tool_name`, `tool_kwargs`), a tool message names its call in
`additional_kwargs.tool_call_id`; `thinking` blocks are metadata, media blocks too. Messages
have no ids: each gets `KEY-N` (its place under its key), the same whichever keys are read.

The agent's system prompt is not in the store (an agent adds it to each request), so a note
says so; `--system` supplies it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memdiag.transcript.formats.base import NO_SELECTION, Selection
from memdiag.transcript.model import RawItem, RawMessage, RawSession
from memdiag.transcript.source import Choice, Source, choose, drop_nulls, openai_tool_call
from memdiag.transcript.toolkit import (
    PathError,
    expect,
    get_dict,
    get_list,
    get_str,
    reject,
    step,
)

name = "llamaindex"
# recognised by its own keys (`store` of message lists with `blocks`), with the exports
detect_priority = 33
examples = ("formats/llamaindex/chat_store.json",)
selects = {"conversation": "--session"}  # a store holds a key per user or conversation
saves_system_prompt = False  # the agent's system prompt is sent, never stored

ROLES = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
    "chatbot": "assistant",
    "model": "assistant",
}
MEDIA_BLOCKS = ("image", "audio", "video", "document", "citable", "citation", "cache_control")
BLOCKS = ("text", "tool_call", "thinking", *MEDIA_BLOCKS)


def _store(source: Source) -> dict[str, Any] | None:
    doc = source.records[0][1] if len(source.records) == 1 else None
    store = doc.get("store") if isinstance(doc, dict) else None
    return store if isinstance(store, dict) else None


def detect(source: Source) -> bool:
    store = _store(source)
    if store is None or not store:
        return False
    first = next(iter(store.values()))
    return (
        isinstance(first, list)
        and bool(first)
        and isinstance(first[0], dict)
        and "role" in first[0]
        and ("blocks" in first[0] or "additional_kwargs" in first[0])
    )


def read(
    source: Source, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> Iterator[RawItem]:
    store = _store(source)
    if store is None:
        raise source.error('not a LlamaIndex chat store (expected {"store": {KEY: [...]}})')
    keys = list(store)
    listed = [
        Choice(str(k), "", len(v) if isinstance(v, list) else 0, unit="message")
        for k, v in store.items()
    ]
    for n in choose(source.path, "key", selects["conversation"], listed, selection.conversation):
        key = keys[n]
        where = step("store", key)
        yield RawSession(str(key), 1)
        try:
            messages = expect(store[key], list, where, "a list of messages")
        except PathError as exc:
            reject(source, skip_invalid, exc)
            continue
        for k, msg in enumerate(messages):
            try:
                yield _message(msg, step(where, k), f"{key}-{k + 1}")
            except PathError as exc:
                reject(source, skip_invalid, exc)


def _message(msg: Any, where: str, mid: str) -> RawMessage:
    msg = expect(msg, dict, where, "a message object")
    role = get_str(msg, "role", where, required=True) or ""
    if role not in ROLES:
        raise PathError(
            step(where, "role"), f"unknown role {role!r}; expected one of {', '.join(ROLES)}"
        )
    extra = dict(get_dict(msg, "additional_kwargs", where))
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    if "blocks" in msg or "content" not in msg:
        for k, block in enumerate(get_list(msg, "blocks", where)):
            at = step(step(where, "blocks"), k)
            block = expect(block, dict, at, "a block object")
            kind = get_str(block, "block_type", at, required=True)
            if kind == "text":
                texts.append(get_str(block, "text", at) or "")
            elif kind == "tool_call":
                calls.append(
                    openai_tool_call(
                        get_str(block, "tool_call_id", at),
                        get_str(block, "tool_name", at, required=True),
                        block.get("tool_kwargs", {}),
                    )
                )
            elif kind == "thinking":
                meta.setdefault("reasoning", []).append(drop_nulls(block))
            elif kind in MEDIA_BLOCKS:
                meta.setdefault("blocks", []).append(_slim(block))
            else:
                raise PathError(
                    step(at, "block_type"),
                    f"unknown block type {kind!r}; expected one of {', '.join(BLOCKS)}",
                )
    else:  # llama-index before 0.12: `content` is the text
        texts.append(get_str(msg, "content", where) or "")
    old_calls = extra.pop("tool_calls", None)  # OpenAI-shaped calls of older agents
    if not calls and isinstance(old_calls, list):
        calls = [drop_nulls(c) for c in old_calls if isinstance(c, dict)]
    call_id = get_str(extra, "tool_call_id", step(where, "additional_kwargs"))
    extra.pop("tool_call_id", None)
    name = get_str(extra, "name", step(where, "additional_kwargs"))
    extra.pop("name", None)
    if extra:
        meta["additional_kwargs"] = drop_nulls(extra)
    return RawMessage(
        ROLES[role],
        "\n".join(texts),
        id=mid,
        name=name,
        tool_calls=tuple(calls),
        tool_call_id=call_id,
        metadata=meta,
    )


def _slim(block: dict[str, Any]) -> dict[str, Any]:
    """A media block without its inline bytes (base64 images would be copied whole)."""
    out = {k: v for k, v in drop_nulls(block).items() if k not in ("image", "audio", "data")}
    return out
