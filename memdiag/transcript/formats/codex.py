"""Codex rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl` (docs/coding-agents.md).

Each line is `{"timestamp", "type", "payload"}` (Codex's `RolloutItem`):

- `session_meta`: the session (its `id`, time, `cwd`, `cli_version`);
- `turn_context`: the model and settings of the turns that follow;
- `response_item`: a Responses item (messages, `reasoning`, `function_call` and
  `custom_tool_call` with their `*_output`), read as the `openai_responses` format reads them
  (:mod:`memdiag.transcript.responses_items`). The items Codex injects as user messages at
  session start (`# AGENTS.md instructions ...`, `<environment_context>`, `<user_instructions>`)
  and `developer` messages are instructions, not the user's words: system messages;
- `compacted`: a summary (`message`) and the history that replaced everything before it
  (`replacement_history`): a recorded `summary` event; the requests after it hold that summary
  and what came after (the first and last request of each turn, and the first after a
  compaction, are observed windows: docs/traces.md);
- `event_msg`: UI events. `token_count` carries the real prompt size of the request that just
  answered (`info.last_token_usage.input_tokens`): the observed window's `prompt_tokens`, shown
  beside memdiag's own count. `user_message` / `agent_message` repeat the response items and
  are not read again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memdiag.errors import InputError
from memdiag.transcript.events import Extra, RawWindow
from memdiag.transcript.formats.base import NO_SELECTION, Selection
from memdiag.transcript.model import RawItem, RawMessage, RawSession, RawSummary
from memdiag.transcript.responses_items import Item, read_items
from memdiag.transcript.session_dirs import (
    head_records,
    kept_requests,
    read_sessions,
    session_choice,
)
from memdiag.transcript.source import Choice, Source, iso_time
from memdiag.transcript.toolkit import PathError, reject

name = "codex"
# after the traces (10-19) and before the Responses items (20): a rollout line wraps its item
# in an envelope, which no other format has
detect_priority = 19
examples = (
    "formats/codex/sample_codex_session.jsonl",
    "formats/codex/rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl",
)
selects = {"conversation": "--session"}  # a sessions directory holds many rollouts
ROLLOUT_TYPES = ("session_meta", "response_item", "turn_context", "event_msg", "compacted")
# the user items Codex writes itself at session start: instruction files and the environment
INJECTED = ("# AGENTS.md instructions", "<environment_context>", "<user_instructions>")


def detect(source: Source) -> bool:
    if not source.is_jsonl:
        return False
    return any(_is_rollout_line(obj) for _, obj in source.records[:50])


# --- a directory of rollouts (~/.codex/sessions, or one of its days) ------------------------


def _rollouts(directory: Path) -> list[Path]:
    files = [f for f in directory.rglob("rollout-*.jsonl") if f.is_file()]
    return sorted(files, key=lambda f: (-f.stat().st_mtime, f.name))


def detect_path(path: str | Path) -> bool:
    """A rollout file, or a directory holding rollouts (``rollout-*.jsonl``)."""
    p = Path(path)
    try:
        if p.is_file():
            return any(_is_rollout_line(obj) for obj in head_records(p))
        return p.is_dir() and bool(_rollouts(p))
    except OSError:  # a name too long, a directory that cannot be listed: not ours to read
        return False


def _is_rollout_line(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and obj.get("type") in ("session_meta", "response_item", "turn_context", "compacted")
        and isinstance(obj.get("payload"), dict)
    )


def read_path(
    path: str | Path, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> tuple[Source, list[RawItem]]:
    return read_sessions(
        path,
        _rollouts,
        _choice,
        "Codex rollout",
        selection.conversation,
        lambda one: read(one, skip_invalid),
        skip_invalid,
    )


def _choice(f: Path) -> Choice:
    return session_choice(f, b'"user_message"', _title)


def _title(obj: dict[str, Any]) -> str | None:
    payload = obj.get("payload")
    text = payload.get("message") if isinstance(payload, dict) else None
    return text if isinstance(text, str) else None


def _text_of_items(items: list[Any]) -> str:
    out = []
    for it in items:
        if not isinstance(it, dict):
            continue
        content = it.get("content")
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and isinstance(b.get("text"), str):
                    out.append(b["text"])
        elif isinstance(content, str):
            out.append(content)
    return "\n".join(out)


def read(
    source: Source, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> Iterator[RawItem]:
    """One rollout (``--session`` chooses among a directory's rollouts: see read_path)."""
    items: list[Item] = []
    marks: list[tuple[int, str, dict[str, Any]]] = []  # (line, kind, payload): compactions, counts
    session: RawSession | None = None
    models: list[tuple[int, str]] = []
    for line, obj in source.records:
        if not isinstance(obj, dict):
            reject(source, skip_invalid, "a rollout line must be an object", line)
            continue
        kind = obj.get("type")
        payload = obj.get("payload")
        if kind not in ROLLOUT_TYPES:
            continue  # newer record types: not messages
        if not isinstance(payload, dict):
            reject(source, skip_invalid, PathError("payload", "missing (an object)"), line)
            continue
        if kind == "session_meta":
            sid = payload.get("id")
            if session is None and isinstance(sid, str) and sid:
                session = RawSession(sid, line=line, ts=iso_time(payload.get("timestamp")))
        elif kind == "turn_context":
            if isinstance(payload.get("model"), str):
                models.append((line, payload["model"]))
        elif kind == "response_item":
            items.append(Item("payload", line, payload))
        elif kind == "compacted":
            marks.append((line, "compacted", payload))
        elif payload.get("type") == "token_count":
            marks.append((line, "token_count", payload))
    raw = read_items(source, items, skip_invalid)
    messages = [m for m in raw if isinstance(m, RawMessage)]
    for m in messages:
        if m.role == "user" and m.content.lstrip().startswith(INJECTED):
            m.role = "system"
            m.metadata["injected"] = "instructions"
    if not messages and not marks:
        raise InputError("no Codex response items in this rollout", path=source.path)
    out: list[RawItem] = []
    if session is not None:
        out.append(session)
    out.extend(_interleave(messages, marks, models))
    yield from out


def _model_at(models: list[tuple[int, str]], line: int) -> str | None:
    found = None
    for at, model in models:
        if at <= line:
            found = model
    return found


def _interleave(
    messages: list[RawMessage],
    marks: list[tuple[int, str, dict[str, Any]]],
    models: list[tuple[int, str]],
) -> list[RawItem]:
    """Messages in file order with the compactions between them, then one observed window per
    request (each assistant reply that follows a user message or a tool result)."""
    out: list[RawItem] = []
    windows: list[RawWindow] = []
    context: list[RawMessage] = []
    before: list[RawMessage] = []  # every message so far
    summary: tuple[str, tuple[str, ...], dict[str, Any], bool] | None = None
    pending = sorted(marks, key=lambda m: m[0])
    last: RawMessage | None = None
    k = 0
    turn = 0
    requests: list[tuple[int, bool, RawWindow]] = []
    state = {"compacted": False}  # a compaction since the last request

    def flush_marks(upto: int) -> None:
        nonlocal k, summary, context
        while k < len(pending) and pending[k][0] < upto:
            line, kind, payload = pending[k]
            k += 1
            if kind == "token_count":
                info = payload.get("info")
                last_usage = info.get("last_token_usage") if isinstance(info, dict) else None
                tokens = last_usage.get("input_tokens") if isinstance(last_usage, dict) else None
                known = isinstance(tokens, int) and not isinstance(tokens, bool)
                if known and windows and windows[-1].prompt_tokens is None:
                    windows[-1].prompt_tokens = tokens
                continue
            text = payload.get("message") if isinstance(payload.get("message"), str) else ""
            history = payload.get("replacement_history")
            kept = _text_of_items(history) if isinstance(history, list) else ""
            body = "\n".join(t for t in (text, kept) if t)
            # a remote compaction keeps its summary encrypted (a `compaction` item): unreadable
            sealed = isinstance(history, list) and any(
                isinstance(it, dict)
                and (
                    it.get("type") in ("compaction", "compaction_summary")
                    or "encrypted_content" in it
                )
                for it in history
            )
            opaque = sealed or (not body and isinstance(history, list) and bool(history))
            covers = tuple(str(m.id) for m in before)
            meta: dict[str, Any] = {"line": line, "trigger": "compacted"}
            if isinstance(history, list):
                meta["replacement_items"] = len(history)
            summary = (body, covers, meta, opaque)
            state["compacted"] = True
            context = []
            through = str(before[-1].id) if before else None
            out.append(RawSummary(body, replaces_through=through, line=line, meta=meta))

    for m in messages:
        flush_marks(m.line)
        starts = m.role == "assistant" and (last is None or last.role in ("user", "tool", "system"))
        if starts:
            extra: tuple[Extra, ...] = ()
            source = None
            if summary is not None:
                body, covers, meta, opaque = summary
                extra = (Extra("summary", body, covers=covers),)
                if opaque:  # what it kept verbatim is readable; the rest is sealed
                    extra = (
                        *((Extra("summary", body),) if body else ()),
                        Extra("summary", "", covers=covers, opaque=True),
                    )
                source = f"compacted at line {meta['line']}"
            window = RawWindow(
                str(m.id),
                tuple(str(x.id) for x in context),
                extra,
                model=_model_at(models, m.line),
                source=source,
                line=m.line,
            )
            windows.append(window)
            requests.append((turn, state["compacted"], window))
            state["compacted"] = False
        if m.role == "user":
            turn += 1
        out.append(m)
        context.append(m)
        before.append(m)
        last = m
    flush_marks(10**12)
    return [*out, *kept_requests(requests)]


__all__ = ["detect", "detect_path", "name", "read", "read_path"]
