"""Claude.ai data export `conversations.json` (docs/reference.md#transcript-input).

A JSON array of conversations {uuid, name, created_at, chat_messages}. Each chat message has a
`sender` (human | assistant), `text`, and in newer exports `content` blocks and a
`parent_message_uuid`:

- When messages name their parents, a retried reply or an edited message is a branch: the
  reader follows the branch that ends at `current_leaf_message_uuid` when the export has it,
  else at the last message of `chat_messages`, and reports how many messages it left out.
- text blocks are the text; `thinking` blocks are metadata (`reasoning`), not window text.
- claude.ai's own tools (web search, ...) run inside one assistant message: its `tool_use`
  and `tool_result` blocks split it into assistant(text, tool call), tool(result),
  assistant(rest); the pieces keep the message uuid (`uuid`, `uuid#2`, ...).
- An attachment's `extracted_content` is what the model read, so it is part of the text
  (after the message, headed `[attachment NAME]`); uploaded `files` (images) are metadata.

One conversation is read: `--conversation ID|TITLE`, the only one, or `all` (each a session).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from memdiag.transcript.formats.base import NO_SELECTION, Selection
from memdiag.transcript.model import RawItem, RawMessage, RawSession
from memdiag.transcript.source import Choice, Source, choose, drop_nulls, iso_time
from memdiag.transcript.toolkit import PathError, reject

SENDERS = {"human": "user", "assistant": "assistant"}
ROOT_PARENT = "00000000-0000-4000-8000-000000000000"
_BLOCK_NOISE = ("start_timestamp", "stop_timestamp", "flags")


def is_claude_export(doc: Any) -> bool:
    first = doc[0] if isinstance(doc, list) and doc else doc
    return isinstance(first, dict) and isinstance(first.get("chat_messages"), list)


def _conversations(source: Source) -> list[tuple[str, Any]]:
    if source.is_jsonl:
        return [(f"line {line}", obj) for line, obj in source.records]
    doc = source.records[0][1] if source.records else None
    if isinstance(doc, list):
        return [(f"[{k}]", c) for k, c in enumerate(doc)]
    return [("", doc)]


def _uuid(obj: dict[str, Any]) -> str | None:
    value = obj.get("uuid")
    return value if isinstance(value, str) and value else None


def branch(conv: dict[str, Any], where: str) -> tuple[list[tuple[int, Any]], int]:
    """The messages of the current branch (index, message), and how many lie elsewhere."""
    messages = conv.get("chat_messages")
    if not isinstance(messages, list):
        raise PathError(f"{where}.chat_messages", "missing (a list of messages)")
    linked = [
        m for m in messages if isinstance(m, dict) and isinstance(m.get("parent_message_uuid"), str)
    ]
    if not linked:
        return list(enumerate(messages)), 0
    index = {u: k for k, m in enumerate(messages) if isinstance(m, dict) and (u := _uuid(m))}
    leaf = conv.get("current_leaf_message_uuid")
    if leaf is not None and (not isinstance(leaf, str) or leaf not in index):
        raise PathError(
            f"{where}.current_leaf_message_uuid", f"no message {leaf!r} in chat_messages"
        )
    k: int | None = index[leaf] if isinstance(leaf, str) else len(messages) - 1
    path: list[int] = []
    seen: set[int] = set()
    while k is not None:
        if k in seen:
            raise PathError(
                f"{where}.chat_messages[{k}].parent_message_uuid", "parents form a cycle"
            )
        seen.add(k)
        path.append(k)
        msg = messages[k]
        parent = msg.get("parent_message_uuid") if isinstance(msg, dict) else None
        if parent is None or parent == ROOT_PARENT:
            break
        if not isinstance(parent, str) or parent not in index:
            raise PathError(
                f"{where}.chat_messages[{k}].parent_message_uuid",
                f"no message {parent!r} in chat_messages",
            )
        k = index[parent]
    path.reverse()
    return [(k, messages[k]) for k in path], len(messages) - len(path)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for b in content:
            if isinstance(b, str):
                parts.append(b)
            elif isinstance(b, dict):
                title, text = b.get("title"), b.get("text")
                parts.extend(p for p in (title, text) if isinstance(p, str) and p)
    return "\n".join(parts)


@dataclass
class _Message:
    """Splits one chat message into assistant / tool pieces around tool blocks."""

    uuid: str
    role: str
    ts: str | None
    line: int
    out: list[RawMessage] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    open_calls: list[tuple[str, str]] = field(default_factory=list)  # (call id, tool name)

    def next_id(self) -> str:
        return self.uuid if not self.out else f"{self.uuid}#{len(self.out) + 1}"

    def piece(self) -> None:
        if self.texts or self.calls or self.meta:
            self.out.append(
                RawMessage(
                    self.role,
                    "\n".join(self.texts),
                    self.line,
                    id=self.next_id(),
                    ts=self.ts,
                    tool_calls=tuple(self.calls),
                    metadata=self.meta,
                )
            )
        self.texts, self.calls, self.meta = [], [], {}

    def block(self, where: str, b: Any) -> None:
        if not isinstance(b, dict):
            raise PathError(where, f"expected a content block object, got {type(b).__name__}")
        kind = b.get("type")
        if kind == "text":
            if not isinstance(b.get("text"), str):
                raise PathError(f"{where}.text", "missing (a string)")
            if self.calls:  # text after a call without its result yet: a new piece
                self.piece()
            self.texts.append(b["text"])
        elif kind == "thinking":
            self.meta.setdefault("reasoning", []).append(_clean(b))
        elif kind == "tool_use":
            name = b.get("name")
            if not isinstance(name, str) or not name:
                raise PathError(f"{where}.name", "missing (the tool used)")
            call_id = b.get("id") if isinstance(b.get("id"), str) else None
            call_id = call_id or f"{self.uuid}:tool{len(self.open_calls) + len(self.out) + 1}"
            args = b.get("input") if isinstance(b.get("input"), dict) else {}
            self.calls.append(
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
            )
            self.open_calls.append((call_id, name))
        elif kind == "tool_result":
            wanted = b.get("tool_use_id")
            match = next(
                (
                    c
                    for c in self.open_calls
                    if (c[0] == wanted if isinstance(wanted, str) else c[1] == b.get("name"))
                ),
                None,
            )
            if match is None:
                raise PathError(
                    where, f"tool_result {wanted or b.get('name')!r} has no tool_use before it"
                )
            self.open_calls.remove(match)
            if self.calls or self.texts:
                self.piece()
            meta: dict[str, Any] = {"is_error": True} if b.get("is_error") else {}
            content = b.get("content")
            if isinstance(content, list):
                meta["blocks"] = [_clean(x) for x in content if isinstance(x, dict)]
            self.out.append(
                RawMessage(
                    "tool",
                    _result_text(content),
                    self.line,
                    id=self.next_id(),
                    ts=self.ts,
                    name=b.get("name") if isinstance(b.get("name"), str) else None,
                    tool_call_id=match[0],
                    metadata=meta,
                )
            )
        else:  # token_budget, images, newer block kinds: not text
            self.meta.setdefault("blocks", []).append(_clean(b))


def _clean(block: dict[str, Any]) -> dict[str, Any]:
    return drop_nulls({k: v for k, v in block.items() if k not in _BLOCK_NOISE})


def read_message(where: str, msg: Any, line: int) -> list[RawMessage]:
    if not isinstance(msg, dict):
        raise PathError(where, f"expected a message object, got {type(msg).__name__}")
    uuid = _uuid(msg)
    if uuid is None:
        raise PathError(f"{where}.uuid", "missing (the message id)")
    sender = msg.get("sender")
    role = SENDERS.get(sender) if isinstance(sender, str) else None
    if role is None:
        raise PathError(
            f"{where}.sender", f"unknown sender {msg.get('sender')!r}; expected human or assistant"
        )
    m = _Message(uuid, role, iso_time(msg.get("created_at")), line)
    content = msg.get("content")
    if isinstance(content, list) and content:
        for k, b in enumerate(content):
            m.block(f"{where}.content[{k}]", b)
    else:
        text = msg.get("text")
        if not isinstance(text, str):
            raise PathError(f"{where}.text", "missing (a string, or content blocks)")
        m.texts.append(text)
    attachments = msg.get("attachments") or []
    if not isinstance(attachments, list):
        raise PathError(f"{where}.attachments", "expected a list")
    kept = []
    for k, a in enumerate(attachments):
        if not isinstance(a, dict):
            raise PathError(f"{where}.attachments[{k}]", "expected an object")
        extracted = a.get("extracted_content")
        if isinstance(extracted, str) and extracted:
            m.texts.append(f"[attachment {a.get('file_name') or k + 1}]\n{extracted}")
        kept.append(drop_nulls({n: v for n, v in a.items() if n != "extracted_content"}))
    files = msg.get("files") or []
    if kept:
        m.meta["attachments"] = kept
    if isinstance(files, list) and files:
        m.meta["files"] = [drop_nulls(f) for f in files if isinstance(f, dict)]
    m.piece()
    if m.open_calls:
        raise PathError(f"{where}.content", f"tool_use {m.open_calls[0][0]!r} has no tool_result")
    return m.out


name = "claude"
# an export's conversations are recognised by their own keys (`chat_messages`); before the chats
detect_priority = 31
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = ("formats/claude/conversations.json",)
selects = {"conversation": "--conversation"}  # exports hold many


def detect(source: Source) -> bool:
    return bool(source.records) and is_claude_export(source.records[0][1])


def choices(source: Source) -> list[Choice]:
    """The conversations of the export, as listed when none is chosen."""
    out = []
    for n, (where, conv) in enumerate(_conversations(source)):
        if not isinstance(conv, dict):
            out.append(Choice(f"c{n + 1}", f"<{where}: not a conversation>"))
            continue
        try:
            count = len(branch(conv, where)[0])
        except PathError:
            count = 0
        title = conv.get("name") if isinstance(conv.get("name"), str) else ""
        cid = _uuid(conv) or f"c{n + 1}"
        out.append(Choice(cid, title or "", count, iso_time(conv.get("created_at"))))
    return out


def _coding_agent_session(source: Source) -> bool:
    """JSON Lines of Claude Code's own session lines (docs/coding-agents.md), not an export."""
    return source.is_jsonl and any(
        isinstance(obj, dict)
        and "parentUuid" in obj
        and "sessionId" in obj
        and "chat_messages" not in obj
        for _, obj in source.records[:50]
    )


def read(
    source: Source, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> Iterator[RawItem]:
    if _coding_agent_session(source):
        raise source.error(
            "a Claude Code session (uuid/parentUuid lines), not a Claude.ai export: read it "
            "with --from claude_code, or without --from"
        )
    convs = _conversations(source)
    listed = choices(source)
    for n in choose(
        source.path, "conversation", selects["conversation"], listed, selection.conversation
    ):
        where, conv = convs[n]
        if not isinstance(conv, dict):
            message = f"expected a conversation object, got {type(conv).__name__}"
            reject(source, skip_invalid, PathError(where, message))
            continue
        try:
            path, elsewhere = branch(conv, where)
        except PathError as exc:
            reject(source, skip_invalid, exc)
            continue
        if elsewhere:
            source.warnings.append(
                f"conversation {listed[n].title or listed[n].id!r}: {elsewhere} message(s) "
                "on other branches (retried or edited) not followed"
            )
        yield RawSession(listed[n].id, n + 1, iso_time(conv.get("created_at")))
        for k, msg in path:
            try:
                yield from read_message(f"{where}.chat_messages[{k}]", msg, n + 1)
            except PathError as exc:
                reject(source, skip_invalid, exc)
