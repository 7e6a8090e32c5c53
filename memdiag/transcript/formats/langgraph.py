"""A LangGraph `SqliteSaver` checkpoint database (docs/framework-state.md), read directly:
`memdiag replay checkpoints.sqlite --session THREAD` (one checkpoint, dumpd-ed, is
`langgraph_checkpoint`).

One thread is read
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

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memdiag.errors import InputError
from memdiag.transcript.events import Extra, RawWindow
from memdiag.transcript.formats.base import Selection
from memdiag.transcript.formats.langchain import read_message
from memdiag.transcript.model import RawItem, RawMessage, RawSession
from memdiag.transcript.source import Choice, Source, choose
from memdiag.transcript.sqlitefile import connect_readonly, is_sqlite
from memdiag.transcript.toolkit import PathError, reject

if TYPE_CHECKING:
    from memdiag.transcript.checkpoints import Checkpoint

name = "langgraph"
# never from parsed JSON (detect is False): an SQLite file is found by detect_path
detect_priority = 90
examples = (
    "formats/langgraph_sqlite/checkpoints.sqlite",
    "formats/langgraph_sqlite/react_agent.sqlite",
)
selects = {"conversation": "--session"}  # a database holds many threads

NOTE = (
    "LangGraph checkpoints hold the graph's state when each step starts: the {n} observed "
    "window(s) are the state each model step started from, not the request itself; a system "
    "prompt, trimming or summary made inside a node without writing it to the state is not in "
    "them (docs/framework-state.md)"
)
INPUT_NOTE = (
    "{n} observed window(s) are what a pre_model_hook gave the model node "
    "(llm_input_messages, saved in the checkpoints); a prompt the node adds itself is not in "
    "them (docs/framework-state.md)"
)
REMOVED_NOTE = (
    "{n} message(s) left the thread's state along the way (RemoveMessage: trimmed or "
    "summarized by the graph); the observed windows show which, turn by turn"
)


def detect(source: Source) -> bool:
    return False  # a parsed JSON source is never an SQLite file: see detect_path


def read(source: Source, skip_invalid: bool) -> Iterator[RawItem]:
    raise source.error("not an SQLite file (expected a LangGraph checkpoint database)")


# --- a checkpoint database ----------------------------------------------------------------


def detect_path(path: str | Path) -> bool:
    if not is_sqlite(path):
        return False
    # the checkpoint reader (SQLite, MessagePack) only for an SQLite file: every load asks
    import sqlite3

    from memdiag.transcript.checkpoints import is_checkpoint_db

    try:
        with connect_readonly(str(path)) as conn:
            return is_checkpoint_db(conn)
    except (sqlite3.Error, InputError):
        return False


def read_path(
    path: str | Path, skip_invalid: bool, selection: Selection
) -> tuple[Source, list[RawItem]]:
    """The chosen threads of a checkpoint database as raw items (messages and windows)."""
    where = str(path)
    if not is_sqlite(path):
        raise InputError(
            "not an SQLite file (expected a LangGraph checkpoint database; one dumpd-ed "
            "checkpoint is --from langgraph_checkpoint)",
            path=where,
        )
    from memdiag.transcript.checkpoints import read_thread, thread_summaries

    source = Source(where, [], is_jsonl=False)
    threads = thread_summaries(where)
    if not threads:
        raise InputError("the checkpoints table holds no checkpoints", path=where)
    choices = [Choice(tid, "", n, unit="checkpoint") for tid, n, _ in threads]
    items: list[RawItem] = []
    windows = from_input = removed = 0

    def skip(exc: PathError) -> None:
        reject(source, skip_invalid, exc)

    for k in choose(where, "thread", selects["conversation"], choices, selection.conversation):
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
        thread_items, n_windows, n_input, n_removed = _thread_items(
            source, skip_invalid, thread.id, thread.checkpoints
        )
        items.extend(thread_items)
        windows += n_windows
        from_input += n_input
        removed += n_removed
    if windows - from_input or not windows:
        source.notes.append(NOTE.format(n=windows - from_input))
    if from_input:
        source.notes.append(INPUT_NOTE.format(n=from_input))
    if removed:
        source.notes.append(REMOVED_NOTE.format(n=removed))
    return source, items


def _thread_items(
    source: Source, skip_invalid: bool, thread: str, checkpoints: tuple[Checkpoint, ...]
) -> tuple[list[RawItem], int, int, int]:
    """(messages in order of first appearance + a window per reply a step wrote, windows,
    windows from a pre_model_hook's model input, messages removed from the state)."""
    items: list[RawItem] = []
    known: dict[str, RawMessage | None] = {}  # message key → its message (None: unreadable)
    before: list[str] | None = None  # message ids of the previous checkpoint's state
    before_cp: Checkpoint | None = None
    windows = from_input = 0
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
                    reject(source, skip_invalid, exc)
                    raw = None
                if raw is not None:
                    raw.id = raw.id or key
                    raw.ts = raw.ts or cp.ts
                    new.append(raw)
                known[key] = raw
            if known[key] is not None:
                state.append(key)
        items.extend(new)
        if before is not None and before_cp is not None:
            gone |= set(before) - set(state)
            replies = [m for m in new if m.role == "assistant"]
            if cp.source == "loop" and replies:  # a graph step wrote them, from the state before
                ids: tuple[str, ...] = tuple(before)
                extra: tuple[Extra, ...] = ()
                if before_cp.model_input is not None:  # unless a pre_model_hook said otherwise
                    ids, extra = _model_input(source, skip_invalid, thread, before_cp, known)
                    from_input += len(replies)
                for m in replies:
                    items.append(RawWindow(str(m.id), ids, extra, source=before_cp.where))
                windows += len(replies)
        before, before_cp = state, cp
    return items, windows, from_input, len(gone)


def _model_input(
    source: Source,
    skip_invalid: bool,
    thread: str,
    cp: Checkpoint,
    known: dict[str, RawMessage | None],
) -> tuple[tuple[str, ...], tuple[Extra, ...]]:
    """The window of a pre_model_hook's `llm_input_messages`: the thread's messages it holds,
    and, as a summary extra, any it made itself (a summarizing hook's summary)."""
    ids: list[str] = []
    extra: list[Extra] = []
    for k, (where, msg) in enumerate(cp.model_input or ()):
        key = _key(f"{thread}-input", msg, k)
        if known.get(key) is not None:
            ids.append(key)
            continue
        try:
            raw = read_message(where, msg, 0)
        except PathError as exc:
            reject(source, skip_invalid, exc)
            continue
        if raw is not None:
            extra.append(Extra("summary", raw.content))
    return tuple(ids), tuple(extra)


def _key(thread: str, msg: Any, k: int) -> str:
    """A message's identity across checkpoints: its LangChain id (add_messages gives every
    message one), else its thread and place."""
    if isinstance(msg, dict):
        data: dict[str, Any] = msg["kwargs"] if isinstance(msg.get("kwargs"), dict) else msg
        ident = data.get("id")
        if isinstance(ident, str) and ident:
            return ident
    return f"{thread}-m{k + 1}"
