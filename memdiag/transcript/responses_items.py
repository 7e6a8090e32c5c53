"""OpenAI Responses API items → raw messages, shared by the `openai_responses` format (items
in JSON) and the `openai_agents` format (items in an Agents SDK SQLite session): what
`responses.create` takes as `input` and returns as `output`, what `result.to_input_list()` and
the Agents SDK's sessions store. Items become canonical messages:

- `message` items (and bare `{"role", "content"}` ones): text blocks count; images and files stay
  metadata; a `refusal` block is what the assistant said, so it counts as text.
- calls that the caller executes (`function_call`, `custom_tool_call`, `computer_call`, shell,
  apply_patch, ...) become one assistant message with its tool calls (consecutive, parallel calls
  together), and their `*_output` items the `tool` messages answering them.
- tools that OpenAI runs (`web_search_call`, `file_search_call`, `code_interpreter_call`,
  `mcp_call`, ...) hold call and result in one item: an assistant call and its tool result.
- `reasoning` items are metadata of the next message (`reasoning`), not window text: OpenAI bills
  them as output, and drops them from later requests.
- a `compaction` item (an opaque, encrypted summary) is metadata of the next message, and the
  requests after it become observed windows (docs/reference.md#observed-windows) that hold it as an
  opaque summary
  covering everything before it (see :func:`compaction_windows`).
- null-filled fields of SDK dumps are dropped.

Errors name the item by its place (`[7].call_id: ...`), or its line in JSON Lines.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from memdiag.transcript.events import Extra, RawWindow
from memdiag.transcript.model import RawItem, RawMessage
from memdiag.transcript.source import Source, drop_nulls, slim_blobs
from memdiag.transcript.toolkit import PathError, reject
from memdiag.transcript.toolkit import step as key

# calls the caller runs; the value is what names the call and what its arguments are
CLIENT_CALLS: dict[str, tuple[str | None, str]] = {
    "function_call": (None, "arguments"),  # name from the item's `name`
    "custom_tool_call": (None, "input"),
    "computer_call": ("computer", "action"),
    "local_shell_call": ("local_shell", "action"),
    "shell_call": ("shell", "action"),
    "apply_patch_call": ("apply_patch", "operation"),
    "tool_search_call": ("tool_search", "arguments"),
    "program": ("program", "code"),
}
OUTPUTS = {
    "function_call_output",
    "custom_tool_call_output",
    "computer_call_output",
    "local_shell_call_output",
    "shell_call_output",
    "apply_patch_call_output",
    "tool_search_output",
    "program_output",
}
# tools OpenAI runs: (arguments field, result field) in the one item
HOSTED_CALLS: dict[str, tuple[str, str | None]] = {
    "web_search_call": ("action", None),
    "file_search_call": ("queries", "results"),
    "code_interpreter_call": ("code", "outputs"),
    "image_generation_call": ("revised_prompt", None),  # `result` is a base64 image
    "mcp_call": ("arguments", "output"),
}
# items that are not messages: kept as metadata of the next message
META_ITEMS = {
    "reasoning",
    "compaction",
    "compaction_trigger",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
    "additional_tools",
    "configuration_update",
    "item_reference",
}
ITEM_TYPES = {"message", *CLIENT_CALLS, *OUTPUTS, *HOSTED_CALLS, *META_ITEMS}
TEXT_BLOCKS = {"input_text", "output_text", "text", "summary_text"}
ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
# statuses that add nothing: every stored item has one
_QUIET = {"status": "completed", "phase": None}


@dataclass(frozen=True, slots=True)
class Item:
    """One Responses item and where it is: its JSON path and, in JSON Lines, its line."""

    where: str
    line: int
    value: Any


def is_responses_item(obj: Any) -> bool:
    """Does this record look like a Responses item (and like nothing else we read)?"""
    if not isinstance(obj, dict):
        return False
    kind = obj.get("type")
    if isinstance(kind, str) and kind in ITEM_TYPES and kind != "message":
        return True
    content = obj.get("content")
    return (
        (kind == "message" or "role" in obj)
        and isinstance(content, list)
        and any(
            isinstance(b, dict) and b.get("type") in ("input_text", "output_text", "input_image")
            for b in content
        )
    )


@dataclass
class _Reader:
    source: Source
    skip_invalid: bool
    out: list[RawMessage] = field(default_factory=list)
    calls: RawMessage | None = None  # the assistant message collecting parallel calls
    open_calls: set[str] = field(default_factory=set)  # call ids waiting for their output
    known_ids: set[str] = field(default_factory=set)
    pending_meta: dict[str, list[Any]] = field(default_factory=dict)
    compactions: list[tuple[int, Item]] = field(default_factory=list)  # (position in out, item)

    def read(self, items: Iterable[Item]) -> list[RawMessage]:
        items = list(items)
        for it in items:
            obj = it.value
            if (
                isinstance(obj, dict)
                and obj.get("type") != "item_reference"
                and isinstance(obj.get("id"), str)
            ):
                self.known_ids.add(obj["id"])
        for it in items:
            try:
                self.item(it)
            except PathError as exc:
                reject(self.source, self.skip_invalid, exc, self._line(it))
        self.flush()
        if self.pending_meta and self.out:  # metadata after the last message stays with it
            last = self.out[-1]
            for name, values in self.pending_meta.items():
                last.metadata.setdefault(name, []).extend(values)
        return self.out

    def _line(self, it: Item) -> int | None:
        return it.line if self.source.is_jsonl else None

    def item(self, it: Item) -> None:
        obj = it.value
        if not isinstance(obj, dict):
            raise PathError(it.where, f"expected an item object, got {type(obj).__name__}")
        kind = obj.get("type", "message" if "role" in obj else None)
        if kind is None:
            raise PathError(
                it.where, "missing field 'type' (message, function_call, reasoning, ...)"
            )
        if not isinstance(kind, str) or kind not in ITEM_TYPES:
            raise PathError(
                key(it.where, "type"),
                f"unknown item type {kind!r}; expected message, function_call, "
                "function_call_output, reasoning or another Responses item type",
            )
        if kind == "message":
            self.flush()
            self.emit(self.message(it, obj))
        elif kind in CLIENT_CALLS:
            self.call(it, obj, kind)
        elif kind in OUTPUTS:
            self.flush()
            self.output(it, obj, kind)
        elif kind in HOSTED_CALLS:
            self.flush()
            self.hosted(it, obj, kind)
        else:
            self.meta(it, obj, kind)

    # --- messages ---------------------------------------------------------------------

    def message(self, it: Item, obj: dict[str, Any]) -> RawMessage:
        role = obj.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise PathError(
                key(it.where, "role"),
                f"unknown role {role!r}; expected user, assistant, system or developer",
            )
        text, blocks = self.content(key(it.where, "content"), obj.get("content"))
        meta: dict[str, Any] = {}
        if blocks:
            meta["blocks"] = blocks
        for name, value in drop_nulls(obj).items():
            if name not in ("type", "role", "content", "id") and _QUIET.get(name, 0) != value:
                meta[name] = value
        return RawMessage(ROLES[role], text, it.line, id=_str_id(obj, "id"), metadata=meta)

    def content(self, where: str, content: Any) -> tuple[str, list[Any]]:
        if content is None:
            return "", []
        if isinstance(content, str):
            return content, []
        if not isinstance(content, list):
            raise PathError(
                where, f"expected a string or a list of blocks, got {type(content).__name__}"
            )
        texts: list[str] = []
        other: list[Any] = []
        for k, block in enumerate(content):
            if not isinstance(block, dict):
                raise PathError(
                    f"{where}[{k}]", f"expected a block object, got {type(block).__name__}"
                )
            kind = block.get("type")
            if isinstance(kind, str) and kind in TEXT_BLOCKS:
                text = block.get("text")
                if not isinstance(text, str):
                    raise PathError(f"{where}[{k}].text", "missing (a string)")
                texts.append(text)
                extra = drop_nulls({n: v for n, v in block.items() if n not in ("type", "text")})
                if any(v not in ([], {}) for v in extra.values()):  # citations and such
                    other.append({"type": kind, **extra})
            elif kind == "refusal" and isinstance(block.get("refusal"), str):
                texts.append(block["refusal"])
            else:
                other.append(slim_blobs(drop_nulls(block)))
        return "\n".join(texts), other

    # --- calls and their outputs ------------------------------------------------------

    def call(self, it: Item, obj: dict[str, Any], kind: str) -> None:
        name, args_field = CLIENT_CALLS[kind]
        call_id = obj.get("call_id") or obj.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise PathError(key(it.where, "call_id"), f"missing (a {kind} needs its call id)")
        if name is None:
            name = obj.get("name")
            if not isinstance(name, str) or not name:
                raise PathError(key(it.where, "name"), f"missing (the tool a {kind} calls)")
        args = obj.get(args_field, obj.get("actions"))
        if args is None:
            args = {}
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": drop_nulls(args)},
        }
        if self.calls is None:
            self.calls = RawMessage("assistant", "", it.line, id=_str_id(obj, "id"))
            self.attach_meta(self.calls)
        self.calls.tool_calls = (*self.calls.tool_calls, call)
        items = self.calls.metadata.setdefault("items", [])
        items.append(
            {"type": kind, **({"id": obj["id"]} if isinstance(obj.get("id"), str) else {})}
        )
        self.open_calls.add(call_id)

    def output(self, it: Item, obj: dict[str, Any], kind: str) -> None:
        call_id = obj.get("call_id")
        if call_id is None and kind == "local_shell_call_output":
            call_id = obj.get("id")  # its `id` names the call it answers
        if not isinstance(call_id, str) or not call_id:
            raise PathError(
                key(it.where, "call_id"), f"missing (the call that this {kind} answers)"
            )
        if call_id not in self.open_calls:  # str, checked above
            raise PathError(
                key(it.where, "call_id"),
                f"no earlier call with call_id {call_id!r} (a tool output needs its call)",
            )
        self.open_calls.discard(call_id)
        text, blocks = self.output_text(key(it.where, "output"), obj.get("output"))
        meta: dict[str, Any] = {"item_type": kind} if kind != "function_call_output" else {}
        if blocks:
            meta["blocks"] = blocks
        mid = _str_id(obj, "id") if kind != "local_shell_call_output" else None
        self.emit(
            RawMessage(
                "tool",
                text,
                it.line,
                id=mid,
                tool_call_id=call_id,
                metadata=meta,
            )
        )

    def output_text(self, where: str, output: Any) -> tuple[str, list[Any]]:
        if output is None or isinstance(output, str):
            return output or "", []
        if isinstance(output, list):
            return self.content(where, output)
        # computer screenshots, shell results ({stdout, stderr, outcome}), ...
        return json.dumps(drop_nulls(output), ensure_ascii=False, sort_keys=True), []

    def hosted(self, it: Item, obj: dict[str, Any], kind: str) -> None:
        call_id = obj.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise PathError(key(it.where, "id"), f"missing (a {kind} item names itself)")
        args_field, result_field = HOSTED_CALLS[kind]
        name = obj.get("name") if kind == "mcp_call" else kind.removesuffix("_call")
        args = drop_nulls(obj.get(args_field)) or {}
        call = {"id": call_id, "type": kind, "function": {"name": name, "arguments": args}}
        msg = RawMessage(
            "assistant",
            "",
            it.line,
            id=call_id,
            tool_calls=(call,),
            metadata={"item_type": kind},
        )
        self.emit(msg)
        result = drop_nulls(obj.get(result_field)) if result_field else None
        if isinstance(result, str):
            text = result
        elif result:
            text = json.dumps(result, ensure_ascii=False, sort_keys=True)
        else:
            text = ""
        status = obj.get("status")
        meta = {"item_type": kind, **({"status": status} if isinstance(status, str) else {})}
        self.emit(
            RawMessage(
                "tool",
                text,
                it.line,
                id=f"{call_id}:result",
                tool_call_id=call_id,
                metadata=meta,
            )
        )

    def meta(self, it: Item, obj: dict[str, Any], kind: str) -> None:
        if kind == "item_reference":
            ref = obj.get("id")
            if not isinstance(ref, str) or ref not in self.known_ids:
                raise PathError(
                    key(it.where, "id"),
                    f"item_reference to {ref!r}, which is not in this file "
                    "(it lives on OpenAI's servers; export the full items)",
                )
            return  # a reference to an item we already have
        value = drop_nulls(obj)
        if kind == "reasoning":
            value = _reasoning(value)
        elif isinstance(value.get("encrypted_content"), str):
            value["encrypted_content"] = f"<{len(value['encrypted_content'])} chars, encrypted>"
        if kind == "compaction":
            self.flush()
            self.compactions.append((len(self.out), it))
        name = {"reasoning": "reasoning", "compaction": "compaction"}.get(kind, "items")
        self.pending_meta.setdefault(name, []).append(value)

    # --- output -----------------------------------------------------------------------

    def attach_meta(self, msg: RawMessage) -> None:
        for name, values in self.pending_meta.items():
            msg.metadata.setdefault(name, []).extend(values)
        self.pending_meta = {}

    def emit(self, msg: RawMessage) -> None:
        if msg.role != "tool":
            self.attach_meta(msg)
        self.out.append(msg)

    def flush(self) -> None:
        if self.calls is not None:
            self.out.append(self.calls)
            self.calls = None


def _str_id(obj: dict[str, Any], name: str) -> str | None:
    value = obj.get(name)
    return value if isinstance(value, str) and value else None


def _reasoning(value: dict[str, Any]) -> dict[str, Any]:
    """A reasoning item as metadata: its summary text, not its (large) encrypted content."""
    out: dict[str, Any] = {k: v for k, v in value.items() if k not in ("encrypted_content",)}
    if isinstance(value.get("encrypted_content"), str):
        out["encrypted_content"] = f"<{len(value['encrypted_content'])} chars, encrypted>"
    return out


def read_items(
    source: Source,
    items: Iterable[Item],
    skip_invalid: bool,
    default_id: Callable[[RawMessage, int], str] | None = None,
    id_suffix: str = "",
) -> list[RawItem]:
    """Responses items → raw messages (one session), and the observed windows that compaction
    items tell (docs/reference.md#observed-windows).

    ``default_id(message, k)`` names the k-th message when its item has no id (the windows
    need every id); without it they are named as the transcript would (`m<k+1>`).
    ``id_suffix`` follows every id (a branch of a session shares rows with its main branch).
    """
    reader = _Reader(source, skip_invalid)
    messages = reader.read(items)
    for k, m in enumerate(messages):
        if m.id is None:
            m.id = default_id(m, k) if default_id else f"m{k + 1}"
        m.id += id_suffix
    return [*messages, *compaction_windows(messages, reader.compactions)]


def compaction_windows(
    messages: list[RawMessage], compactions: list[tuple[int, Item]]
) -> list[RawWindow]:
    """The requests after a `compaction` item saw it (an opaque summary of everything before
    it) and the items after it: one observed window per request, until the next compaction.

    A request starts at each assistant message (reply or tool call) that follows the
    compaction, a user message or a tool result; a hosted tool's result (web search, ...) is
    part of the request that ran it.
    """
    if not compactions:
        return []
    windows: list[RawWindow] = []
    bounds = [p for p, _ in compactions] + [len(messages)]
    for (start, item), end in zip(compactions, bounds[1:], strict=True):
        covers = tuple(str(m.id) for m in messages[:start])
        extra = (Extra("summary", "", covers=covers, opaque=True),)
        source = item.where or f"line {item.line}"
        for r in range(start, end):
            m = messages[r]
            previous = messages[r - 1] if r > start else None
            starts = m.role == "assistant" and (
                previous is None
                or previous.role in ("user", "system")
                or (previous.role == "tool" and "item_type" not in previous.metadata)
            )
            if starts:
                ids = tuple(str(x.id) for x in messages[start:r])
                windows.append(RawWindow(str(m.id), ids, extra, source=source, line=item.line))
    return windows
