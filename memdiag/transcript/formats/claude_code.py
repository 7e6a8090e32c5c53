"""Claude Code sessions: `~/.claude/projects/<project>/<session>.jsonl` (docs/coding-agents.md).

One JSON object per line, written by Claude Code as the session goes. How lines become the
transcript:

- The conversation is the chain of `uuid` → `parentUuid` links that ends at the session's last
  line; a `compact_boundary` line starts a new chain (`parentUuid: null`) and names the line
  it continues in `logicalParentUuid`. Lines off the chain (a rewound attempt, a retried reply)
  are left out, and counted in a warning.
- `isSidechain` lines and `subagents/*.jsonl` (older versions: `agent-*.jsonl` beside the
  session) are other agents (`agentId`): listed, and read with `--agent ID`; without it the
  main conversation is read.
- `isMeta` lines (a skill's instructions, the local-command caveat) and command wrappers
  (`<command-name>`, `<local-command-stdout>`, ...) are Claude Code's, not the user's words, but
  it sends them: they are the `memories` section of the requests that follow (until a
  compaction replaces them), never a message, a turn or a statement of the user.
- `<task-notification>` and `[Request interrupted by user…]` user lines are kept as user
  messages marked `injected`: in the window, part of the turn they arrive in, opening none.
- One API reply is written over several `assistant` lines that share `message.id` (a text,
  then each `tool_use`): they are one assistant message, whose `usage` gives the real prompt
  size of its request (input + cache creation + cache read tokens).
- Tool results arrive as `user` lines of `tool_result` blocks: each is a `tool` message
  answering its `tool_use` (by `tool_use_id`).
- `progress`, `file-history-snapshot`, `system` (hooks, errors), `summary` (titles) and other
  records are not messages.
- A `compact_boundary` system line (`compactMetadata.trigger`, `preTokens`, `postTokens`)
  followed by the `isCompactSummary` user line is a summary that replaced everything before
  it: a recorded `summary` event; the requests after it hold that summary and what came after.
- Each reply is a request: the first and the last of each turn, and the last before and the
  first after a compaction, are observed windows (docs/traces.md; ``session_dirs.kept_requests``).

A directory (`~/.claude/projects/<project>/`) lists its sessions, newest first; `--session ID`
reads one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memdiag.errors import InputError
from memdiag.transcript.claude_chain import (
    MAIN,
    MESSAGE_TYPES,
    Line,
    Summarizer,
    agents,
    chain,
    describe,
    is_record,
    prompt_size,
    summarizer_of,
    summarizers,
)
from memdiag.transcript.claude_lines import (
    blocks_of,
    injected_kind,
    is_wrapper,
    result_text,
    text_of,
    user_text,
)
from memdiag.transcript.events import Extra, RawWindow
from memdiag.transcript.formats.base import NO_SELECTION, Selection
from memdiag.transcript.model import RawItem, RawMessage, RawSession, RawSummary, opens_turn
from memdiag.transcript.session_dirs import (
    head_records,
    kept_requests,
    read_sessions,
    session_choice,
)
from memdiag.transcript.source import Choice, Source, iso_time, openai_tool_call
from memdiag.transcript.toolkit import PathError, reject

name = "claude_code"
# after the traces (10-19, whose documents are never session lines) and before the Responses
# items (20) and every chat format: its lines are Claude Code's own envelopes
detect_priority = 18
examples = (
    "formats/claude_code/3a7770b4-aba3-46dd-b677-8fc2d71d4e06.jsonl",
    "formats/claude_code/agent-a0294d5.jsonl",
    "formats/claude_code/dag_compact_after_rewind.jsonl",
    "formats/claude_code/forgets_rule.jsonl",
)
# a project directory holds many sessions; a session, several agents (its subagents)
selects = {"conversation": "--session", "agent": "--agent"}


def detect(source: Source) -> bool:
    """JSON Lines whose message lines carry Claude Code's chain fields (uuid, parentUuid,
    sessionId) and a `message` object."""
    if not source.is_jsonl:
        return False
    for _, obj in source.records[:200]:
        if (
            is_record(obj)
            and obj["type"] in MESSAGE_TYPES
            and isinstance(obj.get("message"), dict)
            and "uuid" in obj
        ):
            return True
    return False


# --- a directory of sessions ------------------------------------------------------------


def detect_path(path: str | Path) -> bool:
    """A session file, or a project directory whose newest session is one."""
    p = Path(path)
    try:
        if p.is_file():
            return _looks_like_session(p)
        if not p.is_dir():
            return False
        files = _sessions(p)
    except OSError:  # a name too long, a directory that cannot be listed: not ours to read
        return False
    return bool(files) and _looks_like_session(files[0])


def _looks_like_session(f: Path) -> bool:
    return any(
        is_record(obj)
        and isinstance(obj, dict)
        and obj["type"] in MESSAGE_TYPES
        and "uuid" in obj
        and isinstance(obj.get("message"), dict)
        for obj in head_records(f)
    )


def _sessions(directory: Path) -> list[Path]:
    """The session files of a project directory, newest first (subagent files left out)."""
    files = [
        f for f in directory.glob("*.jsonl") if f.is_file() and not f.name.startswith("agent-")
    ]
    return sorted(files, key=lambda f: (-f.stat().st_mtime, f.name))


def read_path(
    path: str | Path, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> tuple[Source, list[RawItem]]:
    return read_sessions(
        path,
        _sessions,
        _choice,
        "Claude Code session",
        selection.conversation,
        lambda one: read(one, skip_invalid, Selection(agent=selection.agent)),
        skip_invalid,
    )


def _choice(f: Path) -> Choice:
    return session_choice(f, b'"type":"user"', _title)


def _title(obj: dict[str, Any]) -> str | None:
    text = user_text(obj)
    return text if text and not is_wrapper(text) and not obj.get("isMeta") else None


# --- one session file ---------------------------------------------------------------------


@dataclass
class _Build:
    source: Source
    skip_invalid: bool
    out: list[RawItem] = field(default_factory=list)
    messages: list[RawMessage] = field(default_factory=list)
    open_reply: RawMessage | None = None
    reply_id: str | None = None
    replies: dict[str, RawMessage] = field(default_factory=dict)  # by message.id
    last_reply: RawMessage | None = None
    summarizers: list[Summarizer] = field(default_factory=list)
    last_boundary_ts: str | None = None
    boundary: Line | None = None
    summary: tuple[str, tuple[str, ...], dict[str, Any]] | None = None  # text, covers, meta
    context_start: int = 0  # index in messages where the current context begins
    # what Claude Code sent since the context began that is no message of the conversation
    # (`isMeta` lines: a skill's instructions; the command lines): the `memories` section
    injected: list[Extra] = field(default_factory=list)
    windows: list[RawWindow] = field(default_factory=list)
    requests: list[tuple[int, bool, RawWindow]] = field(default_factory=list)
    turn: int = 0
    compacted: bool = False  # a compaction since the last request
    session: str | None = None

    def add(self, m: RawMessage) -> None:
        if opens_turn(m):
            self.turn += 1
        self.messages.append(m)
        self.out.append(m)

    def close_reply(self) -> None:
        self.open_reply = None
        self.reply_id = None

    def user(self, ln: Line, msg: dict[str, Any]) -> None:
        obj = ln.obj
        self.close_reply()
        content = msg.get("content")
        if obj.get("isCompactSummary"):
            self.compaction_summary(ln, user_text(obj))
            return
        if obj.get("isMeta"):
            self.inject(user_text(obj))
            return
        blocks = blocks_of(content)
        texts: list[str] = []
        results = 0
        for k, block in enumerate(blocks):
            if isinstance(block, str):
                texts.append(block)
                continue
            if not isinstance(block, dict):
                raise PathError(f"message.content[{k}]", "must be an object")
            kind = block.get("type")
            if kind == "tool_result":
                results += 1
                text, meta = result_text(block.get("content"))
                if block.get("is_error"):
                    meta["is_error"] = True
                call_id = block.get("tool_use_id")
                self.add(
                    RawMessage(
                        "tool",
                        text,
                        line=ln.line,
                        id=ln.uuid if results == 1 else f"{ln.uuid}#{results}",
                        ts=iso_time(obj.get("timestamp")),
                        tool_call_id=call_id if isinstance(call_id, str) else None,
                        metadata=meta,
                    )
                )
            elif kind == "text":
                texts.append(text_of(block))
        text = "\n".join(t for t in texts if t is not None)
        if not text.strip() or is_wrapper(text):
            self.compact_args(text)
            self.inject(text)
            return
        injected = injected_kind(text)
        self.add(
            RawMessage(
                "user",
                text,
                line=ln.line,
                id=ln.uuid if not results else f"{ln.uuid}#text",
                ts=iso_time(obj.get("timestamp")),
                metadata={"injected": injected} if injected else {},
            )
        )

    def inject(self, text: str) -> None:
        """A line Claude Code sends to the model that is not the conversation's: counted in the
        requests that follow (until a compaction replaces it), never a turn nor your words."""
        if text.strip():
            self.injected.append(Extra("memories", text))

    def compact_args(self, text: str) -> None:
        """`/compact <instructions>`: Claude Code writes the command after the summary it asked
        for; its arguments told the summarizer what to keep."""
        if self.summary is None or "<command-name>/compact</command-name>" not in text:
            return
        meta = self.summary[2]
        start, end = text.find("<command-args>"), text.find("</command-args>")
        args = text[start + len("<command-args>") : end].strip() if 0 <= start < end else ""
        if args and "instructions" not in meta and self.context_start == len(self.messages):
            meta["instructions"] = args

    def assistant(self, ln: Line, msg: dict[str, Any]) -> None:
        obj = ln.obj
        mid = msg.get("id")
        content = msg.get("content")
        blocks = blocks_of(content)
        if (
            self.open_reply is None
            and isinstance(mid, str)
            and self.last_reply is not None
            and self.replies.get(mid) is self.last_reply
        ):  # a parallel tool call written after the result of the one before: same reply
            self.open_reply, self.reply_id = self.last_reply, mid
        if self.open_reply is None or not isinstance(mid, str) or mid != self.reply_id:
            self.close_reply()
            reply = RawMessage(
                "assistant", "", line=ln.line, id=ln.uuid, ts=iso_time(obj.get("timestamp"))
            )
            if isinstance(mid, str):
                reply.metadata["message_id"] = mid
            if isinstance(msg.get("model"), str):
                reply.metadata["model"] = msg["model"]
            self.add(reply)
            self.open_reply, self.reply_id = reply, mid if isinstance(mid, str) else None
            self.last_reply = reply
            if isinstance(mid, str):
                self.replies[mid] = reply
            self.request(reply)
        reply = self.open_reply
        assert reply is not None
        texts = [reply.content] if reply.content else []
        calls = list(reply.tool_calls)
        for k, block in enumerate(blocks):
            if not isinstance(block, dict):
                raise PathError(f"message.content[{k}]", "must be an object")
            kind = block.get("type")
            if kind == "text":
                texts.append(text_of(block))
            elif kind == "tool_use":
                args = block.get("input", {})
                calls.append(
                    openai_tool_call(
                        block.get("id") if isinstance(block.get("id"), str) else None,
                        block.get("name"),
                        json.dumps(args, ensure_ascii=False, sort_keys=True),
                    )
                )
            elif kind in ("thinking", "redacted_thinking"):
                reply.metadata.setdefault("reasoning", []).append(
                    {"type": kind, "chars": len(str(block.get("thinking", "")))}
                )
        reply.content = "\n".join(texts)
        reply.tool_calls = tuple(calls)
        usage = msg.get("usage")
        prompt = prompt_size(usage)
        if prompt is not None:  # every line repeats it; the last one is the reply's
            reply.metadata["prompt_tokens"] = prompt
            if self.windows and self.windows[-1].before == reply.id:
                self.windows[-1].prompt_tokens = prompt

    def request(self, reply: RawMessage) -> None:
        """The request that produced ``reply`` held the context so far (the summary and what
        came after it, once compacted)."""
        ids = tuple(str(m.id) for m in self.messages[self.context_start : -1])
        extra: tuple[Extra, ...] = tuple(self.injected)
        source = None
        if self.summary is not None:
            text, covers, meta = self.summary
            extra = (Extra("summary", text, covers=covers), *extra)
            source = f"compact_boundary at line {meta.get('line')}"
        model = reply.metadata.get("model")
        window = RawWindow(
            str(reply.id),
            ids,
            extra,
            model=model if isinstance(model, str) else None,
            source=source,
            line=reply.line,
        )
        self.windows.append(window)
        self.requests.append((self.turn, self.compacted, window))
        self.compacted = False

    def boundary_line(self, ln: Line) -> None:
        self.close_reply()
        self.boundary = ln

    def compaction_summary(self, ln: Line, text: str) -> None:
        covers = tuple(str(m.id) for m in self.messages)
        meta: dict[str, Any] = {"summary_line": ln.line}
        b = self.boundary
        if b is not None:
            cm = b.obj.get("compactMetadata")
            cm = cm if isinstance(cm, dict) else {}
            meta.update(
                {
                    "line": b.line,
                    "ts": iso_time(b.obj.get("timestamp")),
                    "trigger": cm.get("trigger"),
                    "pre_tokens": cm.get("preTokens"),
                    "post_tokens": cm.get("postTokens"),
                    "uuid": b.uuid,
                }
            )
            ts = iso_time(b.obj.get("timestamp"))
            found = summarizer_of(self.summarizers, ts, self.last_boundary_ts)
            if found is not None:
                meta["summarizer"] = found.to_dict()
            self.last_boundary_ts = ts or self.last_boundary_ts
        else:
            meta.update({"line": ln.line, "ts": iso_time(ln.obj.get("timestamp"))})
        meta = {k: v for k, v in meta.items() if v is not None}
        self.boundary = None
        self.summary = (text, covers, meta)
        self.context_start = len(self.messages)
        self.injected = []
        self.compacted = True
        through = str(self.messages[-1].id) if self.messages else None
        self.out.append(RawSummary(text, replaces_through=through, line=ln.line, meta=meta))


def read(
    source: Source, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> Iterator[RawItem]:
    """One session file: its main conversation, or the agent ``selection.agent`` names (a
    ``--session`` choice is for a directory: see read_path)."""
    agent = selection.agent
    by_agent = agents(source)
    if not by_agent:
        raise InputError("no Claude Code lines (uuid, parentUuid, sessionId)", path=source.path)
    names = list(by_agent)
    if agent is None:
        chosen = MAIN if MAIN in by_agent else None
        if chosen is None and len(names) == 1:
            chosen = names[0]
        if chosen is None:
            listing = ", ".join(describe(n, by_agent[n]) for n in names)
            raise InputError(
                f"holds {len(names)} agents and no main conversation; choose one with "
                f"--agent NAME: {listing}",
                path=source.path,
            )
    elif agent == "all":  # every agent, each its own session (`<session>/<agent>`)
        for name in names:
            yield from _read_agent(source, skip_invalid, by_agent, name, name)
        return
    else:
        chosen = agent
        if chosen not in by_agent and f"agent-{chosen}" in by_agent:
            chosen = f"agent-{chosen}"
        if chosen not in by_agent:
            raise InputError(
                f"--agent {agent}: no such agent; this session has: {', '.join(names)} "
                "(or --agent all)",
                path=source.path,
            )
    others = [n for n in names if n != chosen]
    if others:
        source.warnings.append(
            f"read agent {chosen!r}; the session also holds "
            + ", ".join(describe(n, by_agent[n]) for n in others)
            + " (read one with --agent NAME, or --agent all)"
        )
    yield from _read_agent(source, skip_invalid, by_agent, chosen, None)


def _read_agent(
    source: Source,
    skip_invalid: bool,
    by_agent: dict[str, list[Line]],
    name: str,
    label: str | None,
) -> Iterator[RawItem]:
    """Agent ``name``'s conversation; ``label`` names its session `<session>/<label>` (when
    every agent is read: a subagent shares its session's id)."""
    lines = by_agent[name]
    main = by_agent.get(MAIN, []) if name != MAIN else []
    path, off, missing = chain(lines, frozenset(str(ln.uuid) for ln in main if ln.uuid))
    if off:
        source.warnings.append(
            f"{off} message line(s) lie off the conversation's chain (a rewound or retried "
            "branch) and are left out"
        )
    if missing:
        source.warnings.append(
            f"{missing} line(s) name a parent that is not in the file (lines removed from it?); "
            "the conversation follows the line before each"
        )
    b = _Build(source, skip_invalid)
    if name == MAIN:
        b.summarizers = summarizers(by_agent)
    for ln in path:
        obj = ln.obj
        kind = obj["type"]
        sid = obj.get("sessionId")
        if isinstance(sid, str) and sid and sid != b.session:
            b.session = sid
            named = f"{sid}/{label}" if label and label != MAIN else sid
            b.out.append(RawSession(named, line=ln.line, ts=iso_time(obj.get("timestamp"))))
        if kind == "system" and obj.get("subtype") == "compact_boundary":
            b.boundary_line(ln)
            continue
        if kind not in MESSAGE_TYPES:
            continue
        msg = obj.get("message")
        if not isinstance(msg, dict):
            reject(
                source,
                skip_invalid,
                PathError("message", "missing (an object with role and content)"),
                ln.line,
            )
            continue
        try:
            if kind == "user":
                b.user(ln, msg)
            else:
                b.assistant(ln, msg)
        except PathError as exc:
            reject(source, skip_invalid, exc, ln.line)
    b.out.extend(kept_requests(b.requests, before_compaction=True))
    yield from b.out


__all__ = ["MAIN", "agents", "chain", "detect", "detect_path", "name", "read", "read_path"]
