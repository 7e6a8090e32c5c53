"""ChatGPT data export `conversations.json` (docs/reference.md#transcript-input).

Each conversation is a tree (`mapping`: node id → {message, parent, children}); regenerating a
reply or editing a message adds a sibling branch. The app shows the branch that ends at
`current_node`, and so does this reader: it walks from `current_node` up to the root and
reports how many messages lie on other branches.

- The hidden empty system node is left out; the custom-instructions node
  (`user_editable_context`) and saved memories (`model_editable_context`) are what the model
  was given, so they become system messages marked `hidden`.
- An assistant message to a tool (`recipient` other than `all`: python, bio, browser, ...) is
  a tool call; the tool's answer is paired with it.
- `thoughts` and `reasoning_recap` are metadata of the next assistant message, not window text.
- Images and files are metadata (`blocks`, `attachments`): the export has no text for them.

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

ROLES = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool"}
REASONING = {"thoughts", "reasoning_recap"}
# metadata worth keeping on a message (the rest is request ids, flags, rendering hints)
KEPT_META = ("attachments", "model_slug", "citations", "content_references", "aggregate_result")


def is_chatgpt_export(doc: Any) -> bool:
    first = doc[0] if isinstance(doc, list) and doc else doc
    return isinstance(first, dict) and isinstance(first.get("mapping"), dict)


def _conversations(source: Source) -> list[tuple[str, Any]]:
    doc = source.records[0][1] if source.records and not source.is_jsonl else None
    if source.is_jsonl:  # one conversation per line: not how ChatGPT writes it, but harmless
        return [(f"line {line}", obj) for line, obj in source.records]
    if isinstance(doc, list):
        return [(f"[{k}]", c) for k, c in enumerate(doc)]
    return [("", doc)]


def _conv_id(conv: dict[str, Any], n: int) -> str:
    for name in ("id", "conversation_id"):
        if isinstance(conv.get(name), str) and conv[name]:
            return str(conv[name])
    return f"c{n + 1}"


@dataclass
class _Path:
    """The nodes of one conversation's current branch, root first."""

    nodes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    off_branch: int = 0  # messages on other branches


def current_branch(conv: dict[str, Any], where: str) -> _Path:
    mapping = conv.get("mapping")
    if not isinstance(mapping, dict):
        raise PathError(f"{where}.mapping", "missing (an object of nodes)")
    leaf = conv.get("current_node")
    if not isinstance(leaf, str):
        raise PathError(f"{where}.current_node", "missing (the id of the node the app shows)")
    if leaf not in mapping:  # str, checked above
        raise PathError(f"{where}.current_node", f"no node {leaf!r} in mapping")
    path = _Path()
    seen: set[str] = set()
    node_id: str | None = leaf
    while node_id is not None:
        if node_id in seen:
            raise PathError(f"{where}.mapping.{node_id}.parent", "the parents form a cycle")
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise PathError(
                f"{where}.mapping.{node_id}", f"expected a node object, got {type(node).__name__}"
            )
        path.nodes.append((node_id, node))
        parent = node.get("parent")
        if parent is not None and (not isinstance(parent, str) or parent not in mapping):
            raise PathError(f"{where}.mapping.{node_id}.parent", f"no node {parent!r} in mapping")
        node_id = parent
    path.nodes.reverse()
    path.off_branch = sum(
        1
        for nid, node in mapping.items()
        if nid not in seen and isinstance(node, dict) and node.get("message") is not None
    )
    return path


def _parts_text(where: str, parts: Any) -> tuple[str, list[Any]]:
    if not isinstance(parts, list):
        raise PathError(f"{where}.parts", f"expected a list, got {type(parts).__name__}")
    texts: list[str] = []
    blocks: list[Any] = []
    for k, part in enumerate(parts):
        if isinstance(part, str):
            if part:
                texts.append(part)
        elif isinstance(part, dict):
            blocks.append(drop_nulls(part))
        else:
            raise PathError(
                f"{where}.parts[{k}]", f"expected a string or an object, got {type(part).__name__}"
            )
    return "\n".join(texts), blocks


def _content(where: str, content: Any) -> tuple[str, str, list[Any]]:
    """(content_type, text, non-text blocks) of a message's content."""
    if not isinstance(content, dict):
        raise PathError(
            where, f"expected an object with content_type, got {type(content).__name__}"
        )
    kind = content.get("content_type")
    if not isinstance(kind, str):
        raise PathError(f"{where}.content_type", "missing (text, multimodal_text, code, ...)")
    if kind in ("text", "multimodal_text"):
        text, blocks = _parts_text(where, content.get("parts"))
        return kind, text, blocks
    if kind in ("code", "execution_output", "tether_quote", "system_error", "computer_output"):
        value = content.get("text")
        return kind, value if isinstance(value, str) else "", []
    if kind == "tether_browsing_display":
        value = content.get("result") or content.get("summary") or ""
        return kind, str(value), []
    if kind == "user_editable_context":
        texts = [content.get(k) for k in ("user_profile", "user_instructions")]
        return kind, "\n".join(t for t in texts if isinstance(t, str) and t), []
    if kind == "model_editable_context":
        value = content.get("model_set_context")
        return kind, value if isinstance(value, str) else "", []
    if kind in REASONING:
        return kind, "", [drop_nulls(content)]
    if isinstance(content.get("parts"), list):  # a newer kind of the same shape
        text, blocks = _parts_text(where, content["parts"])
        return kind, text, blocks
    if isinstance(content.get("text"), str):
        return kind, content["text"], []
    raise PathError(
        f"{where}.content_type",
        f"unknown content type {kind!r} without text or parts (use --skip-invalid to leave it out)",
    )


@dataclass
class _Reader:
    source: Source
    skip_invalid: bool
    out: list[RawMessage] = field(default_factory=list)
    pending_calls: dict[str, str] = field(default_factory=dict)  # tool name → call id
    reasoning: list[Any] = field(default_factory=list)

    def conversation(self, where: str, nodes: list[tuple[str, dict[str, Any]]]) -> None:
        for node_id, node in nodes:
            msg = node.get("message")
            if msg is None:
                continue
            at = f"{where}.mapping.{node_id}.message"
            try:
                self.message(at, node_id, msg)
            except PathError as exc:
                reject(self.source, self.skip_invalid, exc)
        if self.reasoning and self.out:
            self.out[-1].metadata.setdefault("reasoning", []).extend(self.reasoning)
            self.reasoning = []

    def message(self, at: str, node_id: str, msg: Any) -> None:
        if not isinstance(msg, dict):
            raise PathError(at, f"expected an object, got {type(msg).__name__}")
        author = msg.get("author")
        role = author.get("role") if isinstance(author, dict) else None
        if not isinstance(role, str) or role not in ROLES:
            raise PathError(
                f"{at}.author.role",
                f"unknown role {role!r}; expected user, assistant, system or tool",
            )
        name = author.get("name") if isinstance(author, dict) else None
        kind, text, blocks = _content(f"{at}.content", msg.get("content"))
        meta_in: dict[str, Any] = msg["metadata"] if isinstance(msg.get("metadata"), dict) else {}
        hidden = bool(meta_in.get("is_visually_hidden_from_conversation"))
        if kind in REASONING:
            self.reasoning.extend(blocks)
            return
        if hidden and not text.strip():
            return  # the empty system node every conversation starts with
        meta: dict[str, Any] = {k: drop_nulls(meta_in[k]) for k in KEPT_META if meta_in.get(k)}
        if blocks:
            meta["blocks"] = blocks
        if kind not in ("text", "multimodal_text"):
            meta["content_type"] = kind
        if hidden or meta_in.get("is_user_system_message"):
            meta["hidden"] = True
        if meta_in.get("is_user_system_message") or kind in (
            "user_editable_context",
            "model_editable_context",
        ):
            role = "system"  # instructions and memories the app gives the model
        mid: str = msg["id"] if isinstance(msg.get("id"), str) and msg["id"] else node_id
        raw = RawMessage(
            ROLES[role],
            text,
            0,
            id=mid,
            ts=iso_time(msg.get("create_time")),
            name=name if isinstance(name, str) and role == "tool" else None,
            metadata=meta,
        )
        recipient = msg.get("recipient")
        if role == "assistant" and isinstance(recipient, str) and recipient != "all":
            raw.tool_calls = (
                {"id": mid, "type": "function", "function": {"name": recipient, "arguments": text}},
            )
            raw.content = ""
            self.pending_calls[recipient] = mid
        elif role == "tool":
            call = self.pending_calls.pop(name, None) if isinstance(name, str) else None
            if call is None and len(self.pending_calls) == 1:  # browser.search → browser
                call = self.pending_calls.pop(next(iter(self.pending_calls)))
            raw.tool_call_id = call
        if role == "assistant" and self.reasoning:
            raw.metadata["reasoning"] = self.reasoning
            self.reasoning = []
        self.out.append(raw)


name = "chatgpt"
# an export's conversations are recognised by their own keys (`mapping`); before the chat formats
detect_priority = 30
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = ("formats/chatgpt/conversations.json",)
selects = {"conversation": "--conversation"}  # exports hold many


def detect(source: Source) -> bool:
    return bool(source.records) and is_chatgpt_export(source.records[0][1])


def choices(source: Source) -> list[Choice]:
    """The conversations of the export, as listed when none is chosen."""
    out = []
    for n, (where, conv) in enumerate(_conversations(source)):
        if not isinstance(conv, dict):
            out.append(Choice(f"c{n + 1}", f"<{where}: not a conversation>"))
            continue
        try:
            count = sum(1 for _, node in current_branch(conv, where).nodes if node.get("message"))
        except PathError:
            count = 0
        title = conv.get("title") if isinstance(conv.get("title"), str) else ""
        ts = iso_time(conv.get("create_time"))
        out.append(Choice(_conv_id(conv, n), title or "", count, ts))
    return out


def read(
    source: Source, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> Iterator[RawItem]:
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
            path = current_branch(conv, where)
        except PathError as exc:
            reject(source, skip_invalid, exc)
            continue
        if path.off_branch:
            source.warnings.append(
                f"conversation {listed[n].title or listed[n].id!r}: {path.off_branch} "
                "message(s) on other branches (regenerated or edited) not followed; read the "
                "branch ending at current_node"
            )
        reader = _Reader(source, skip_invalid)
        reader.conversation(where, path.nodes)
        yield RawSession(listed[n].id, n + 1, iso_time(conv.get("create_time")))
        for m in reader.out:
            m.line = n + 1
        yield from reader.out
