"""LangGraph checkpoints (docs/framework-state.md): a `SqliteSaver` database, or one checkpoint
as `langchain_core.load.dumpd(checkpoint)` writes it.

The database (`memdiag replay checkpoints.sqlite --session THREAD`): one thread is read
(`--session ID`, the only one, or `all`; otherwise the threads are listed), along the lineage of
its newest checkpoint. The transcript holds every message that was ever in the thread's
`messages` channel, in order of first appearance, with LangChain's ids; each reply that a graph
step wrote becomes an observed `window` (docs/traces.md): the messages of the checkpoint that
step started from. A graph that trims or summarizes in a node of its own (writing
`RemoveMessage`s) therefore shows, step by step, what it kept. What the checkpoints cannot tell
is said in a note: a node that changes what it sends without writing it to the state (a system
prompt added inside the node, `trim_messages` on a copy) sent the model something else.

The file is never written to: opened immutable, or its WAL copied (docs/framework-state.md).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memdiag.errors import InputError
from memdiag.transcript.checkpoints import (
    Checkpoint,
    is_checkpoint_db,
    read_thread,
    state_messages,
    thread_summaries,
)
from memdiag.transcript.events import RawWindow
from memdiag.transcript.formats.langchain import is_message, read_message
from memdiag.transcript.model import RawItem, RawMessage, RawSession
from memdiag.transcript.source import Choice, PathError, Source, bad_at, choose, read_source
from memdiag.transcript.sqlitefile import connect_readonly, is_sqlite

name = "langgraph"
select_flag = "--session"

NOTE = (
    "LangGraph checkpoints hold the graph's state when each step starts: the {n} observed "
    "window(s) are the state each model step started from, not the request itself; a system "
    "prompt, trimming or summary made inside a node without writing it to the state is not in "
    "them (docs/framework-state.md)"
)
REMOVED_NOTE = (
    "{n} message(s) left the thread's state along the way (RemoveMessage: trimmed or "
    "summarized by the graph); the observed windows show which, turn by turn"
)
ONE_CHECKPOINT_NOTE = (
    "one LangGraph checkpoint: the state at one step ({ts}); messages the graph removed "
    "before it are not in it, and no window is known (a checkpoint database has them)"
)


# --- one checkpoint, dumpd-ed -------------------------------------------------------------


def _is_checkpoint(doc: Any) -> bool:
    values = doc.get("channel_values") if isinstance(doc, dict) else None
    return (
        isinstance(values, dict)
        and "v" in doc
        and isinstance(values.get("messages"), list)
        and (not values["messages"] or is_message(values["messages"][0]))
    )


def detect(source: Source) -> bool:
    return len(source.records) == 1 and _is_checkpoint(source.records[0][1])


def read(source: Source, skip_invalid: bool, select: str | None = None) -> Iterator[RawItem]:
    doc = source.records[0][1] if len(source.records) == 1 else None
    if select is not None:
        raise InputError(
            "--session chooses a thread of a checkpoint database; one checkpoint is one state",
            path=source.path,
        )
    if not _is_checkpoint(doc):
        raise InputError(
            "not a LangGraph checkpoint (expected {v, channel_values: {messages: [...]}})",
            path=source.path,
        )
    source.notes.append(ONE_CHECKPOINT_NOTE.format(ts=doc.get("ts") or "time unknown"))
    for where, msg in state_messages("", doc) or ():
        try:
            raw = read_message(where.lstrip("."), msg, 1)
        except PathError as exc:
            bad_at(source, skip_invalid, exc.where, exc.message)
            continue
        if raw is not None:
            yield raw


# --- a checkpoint database ----------------------------------------------------------------


def detect_path(path: str | Path) -> bool:
    if not is_sqlite(path):
        return False
    try:
        with connect_readonly(str(path)) as conn:
            return is_checkpoint_db(conn)
    except (sqlite3.Error, InputError):
        return False


def read_path(
    path: str | Path, skip_invalid: bool, select: str | None
) -> tuple[Source, list[RawItem]]:
    """The chosen threads of a checkpoint database as raw items (messages and windows)."""
    where = str(path)
    if not is_sqlite(path):  # `--from langgraph` on one dumpd-ed checkpoint
        source = read_source(path, skip_invalid)
        return source, list(read(source, skip_invalid, select))
    source = Source(where, [], is_jsonl=False)
    threads = thread_summaries(where)
    if not threads:
        raise InputError("the checkpoints table holds no checkpoints", path=where)
    choices = [Choice(tid, "", n, unit="checkpoint") for tid, n, _ in threads]
    items: list[RawItem] = []
    windows = removed = 0

    def skip(exc: PathError) -> None:
        bad_at(source, skip_invalid, exc.where, exc.message)

    for k in choose(where, "thread", select_flag, choices, select):
        thread = read_thread(where, choices[k].id, skip)
        if thread.other_branches:
            source.warnings.append(
                f"{where}: thread {thread.id!r}: {thread.other_branches} checkpoint(s) on other "
                "branches (a fork or time travel) not read; the newest checkpoint's lineage is"
            )
        if thread.subgraph_checkpoints:
            source.warnings.append(
                f"{where}: thread {thread.id!r}: {thread.subgraph_checkpoints} checkpoint(s) of "
                "subgraphs not read (their own state, not the graph's messages)"
            )
        first = thread.checkpoints[0] if thread.checkpoints else None
        items.append(RawSession(thread.id, 0, first.ts if first else None))
        thread_items, n_windows, n_removed = _thread_items(
            source, skip_invalid, thread.id, thread.checkpoints
        )
        items.extend(thread_items)
        windows += n_windows
        removed += n_removed
    source.notes.append(NOTE.format(n=windows))
    if removed:
        source.notes.append(REMOVED_NOTE.format(n=removed))
    return source, items


def _thread_items(
    source: Source, skip_invalid: bool, thread: str, checkpoints: tuple[Checkpoint, ...]
) -> tuple[list[RawItem], int, int]:
    """(messages in order of first appearance + a window per reply a step wrote, windows,
    messages removed from the state)."""
    items: list[RawItem] = []
    known: dict[str, RawMessage | None] = {}  # message key → its message (None: unreadable)
    before: list[str] | None = None  # message ids of the previous checkpoint's state
    before_where = ""
    windows = 0
    gone: set[str] = set()
    for cp in checkpoints:
        state: list[str] = []
        new: list[RawMessage] = []
        for k, (where, msg) in enumerate(cp.messages or ()):  # None: the channel never written
            key = _key(thread, msg, k)
            if key not in known:
                try:
                    raw = read_message(where, msg, 0)
                except PathError as exc:
                    bad_at(source, skip_invalid, exc.where, exc.message)
                    raw = None
                if raw is not None:
                    raw.id = raw.id or key
                    raw.ts = raw.ts or cp.ts
                    new.append(raw)
                known[key] = raw
            if known[key] is not None:
                state.append(key)
        items.extend(new)
        if before is not None:
            gone |= set(before) - set(state)
            if cp.source == "loop":  # a graph step wrote these: from the state before it
                for m in new:
                    if m.role == "assistant":
                        items.append(
                            RawWindow(
                                before=str(m.id),
                                ids=tuple(before),
                                source=before_where,
                            )
                        )
                        windows += 1
        before, before_where = state, cp.where
    return items, windows, len(gone)


def _key(thread: str, msg: Any, k: int) -> str:
    """A message's identity across checkpoints: its LangChain id (add_messages gives every
    message one), else its thread and place."""
    if isinstance(msg, dict):
        data = msg.get("kwargs") if isinstance(msg.get("kwargs"), dict) else msg
        ident = data.get("id")
        if isinstance(ident, str) and ident:
            return ident
    return f"{thread}-m{k + 1}"
