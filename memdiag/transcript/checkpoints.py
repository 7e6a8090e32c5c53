"""LangGraph checkpoints: the thread states a checkpointer saved, decoded (docs/framework-state.md).

A LangGraph checkpointer saves one checkpoint per step of a thread: the graph's state when the
step starts (`channel_values`), the checkpoint before it (`parent_checkpoint_id`) and what
happened (`metadata`: `source` input / loop / update / fork, `step`). `SqliteSaver`
(langgraph-checkpoint-sqlite) keeps them in table `checkpoints(thread_id, checkpoint_ns,
checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata)`, the checkpoint serialized by
`JsonPlusSerializer` as MessagePack (`type` msgpack) or JSON, the metadata as JSON.

This module reads them without LangGraph: the database opened so that nothing of it can change
(:func:`memdiag.transcript.sqlitefile.connect_readonly`), MessagePack decoded by
:mod:`memdiag.transcript.msgpack`, the LangChain messages of the `messages` channel turned back
into their `model_dump()` dicts (the classes the data names are never imported). A thread is
read along the lineage of its newest checkpoint (what `graph.get_state()` shows): checkpoints of
other branches (a fork, time travel) are counted, not read.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from memdiag.errors import InputError
from memdiag.transcript.msgpack import Ext, unpack
from memdiag.transcript.sqlitefile import connect_readonly
from memdiag.transcript.toolkit import PathError, type_name

TABLE = "checkpoints"
COLUMNS = {"thread_id", "checkpoint_id", "parent_checkpoint_id", "type", "checkpoint", "metadata"}
# JsonPlusSerializer's extension codes whose payload is [module, class, value, ...]
_CONSTRUCTED = {0, 1, 2, 3, 4, 5}
_NUMPY, _DELTA_SNAPSHOT = 6, 7


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One saved step of a thread: the state it started from."""

    id: str
    parent: str | None
    where: str  # the row, as errors name it: checkpoints[thread_id=T, checkpoint_id=C]
    ts: str | None
    step: int | None
    source: str | None  # input | loop | update | fork
    messages: tuple[tuple[str, Any], ...] | None  # (path, message dict); None: no messages channel
    # what a pre_model_hook gave the model node (the prebuilt ReAct agent's `llm_input_messages`),
    # when this checkpoint's step wrote it; None otherwise
    model_input: tuple[tuple[str, Any], ...] | None = None


@dataclass(frozen=True, slots=True)
class Thread:
    id: str
    checkpoints: tuple[Checkpoint, ...]  # the newest checkpoint's lineage, oldest first
    other_branches: int  # checkpoints of the thread not on that lineage
    subgraph_checkpoints: int  # checkpoints of subgraphs (checkpoint_ns other than ""), not read


def is_checkpoint_db(conn: sqlite3.Connection) -> bool:
    cols = {r[1] for r in conn.execute(f'PRAGMA table_info("{TABLE}")')}
    return cols >= COLUMNS


def thread_summaries(path: str) -> list[tuple[str, int, str | None]]:
    """(thread id, root checkpoints, newest checkpoint id) of every thread, in first-seen order."""
    with _open(path) as conn:
        rows = conn.execute(
            f'SELECT thread_id, count(*), max(checkpoint_id) FROM "{TABLE}" '
            "WHERE checkpoint_ns = '' GROUP BY thread_id ORDER BY min(rowid)"
        ).fetchall()
    return [(str(t), int(n), c) for t, n, c in rows]


def read_thread(
    path: str, thread_id: str, skip: Callable[[PathError], None] | None = None
) -> Thread:
    """The thread's checkpoints along its newest one's lineage. A checkpoint that cannot be read
    raises PathError naming the row and field, or, given ``skip``, is handed to it and left out."""
    with _open(path) as conn:
        rows = conn.execute(
            "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata "
            f'FROM "{TABLE}" WHERE thread_id = ? ORDER BY checkpoint_id',
            (thread_id,),
        ).fetchall()
    root = [r for r in rows if r[0] == ""]
    by_id = {str(r[1]): r for r in root}
    lineage: list[Any] = []
    seen: set[str] = set()
    at = str(root[-1][1]) if root else None  # the newest: what get_state() reads
    while at is not None and at in by_id and at not in seen:
        seen.add(at)
        lineage.append(by_id[at])
        parent = by_id[at][2]
        at = str(parent) if parent is not None else None
    lineage.reverse()
    checkpoints: list[Checkpoint] = []
    for r in lineage:
        try:
            checkpoints.append(
                decode_row(f"{TABLE}[thread_id={thread_id}, checkpoint_id={r[1]}]", r[1:])
            )
        except PathError as exc:
            if skip is None:
                raise
            skip(exc)
    return Thread(thread_id, tuple(checkpoints), len(root) - len(lineage), len(rows) - len(root))


def decode_row(where: str, row: Sequence[Any]) -> Checkpoint:
    """(checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata) → a Checkpoint."""
    cid, parent, kind, blob, meta_blob = row
    doc = _loads(f"{where}.checkpoint", kind, blob)
    if not isinstance(doc, dict):
        raise PathError(
            f"{where}.checkpoint", f"expected a checkpoint object, got {type_name(doc)}"
        )
    meta = _metadata(f"{where}.metadata", meta_blob)
    step = meta.get("step")
    return Checkpoint(
        id=str(cid),
        parent=str(parent) if parent is not None else None,
        where=where,
        ts=doc.get("ts") if isinstance(doc.get("ts"), str) else None,
        step=step if isinstance(step, int) and not isinstance(step, bool) else None,
        source=meta.get("source") if isinstance(meta.get("source"), str) else None,
        messages=state_messages(f"{where}.checkpoint", doc),
        model_input=_model_input(f"{where}.checkpoint", doc),
    )


def state_messages(
    where: str, doc: dict[str, Any], channel: str = "messages"
) -> tuple[tuple[str, Any], ...] | None:
    """The (path, message dict) of a checkpoint's `channel_values.messages` (or another
    channel of messages); None without it."""
    values = doc.get("channel_values")
    if values is None:
        return None
    if not isinstance(values, dict):
        raise PathError(f"{where}.channel_values", f"expected an object, got {type_name(values)}")
    base = f"{where}.channel_values.{channel}"
    messages = values.get(channel)
    if isinstance(messages, Ext) and messages.code == _DELTA_SNAPSHOT:
        messages = plain(base, messages)
    if messages is None:
        return None
    if not isinstance(messages, list):
        raise PathError(base, f"expected a list, got {type_name(messages)}")
    return tuple((f"{base}[{k}]", plain(f"{base}[{k}]", m)) for k, m in enumerate(messages))


def _model_input(where: str, doc: dict[str, Any]) -> tuple[tuple[str, Any], ...] | None:
    """`llm_input_messages` when this checkpoint's step wrote it (`updated_channels`, checkpoint
    format 4): the model node's input that a pre_model_hook made. A value left from an earlier
    step is not this step's."""
    updated = doc.get("updated_channels")
    if not isinstance(updated, list) or "llm_input_messages" not in updated:
        return None
    return state_messages(where, doc, "llm_input_messages")


def plain(where: str, value: Any) -> Any:
    """A decoded value with JsonPlusSerializer's extension values replaced by plain data: a
    pydantic model (a LangChain message) by its `model_dump()`, other objects by their
    constructor's argument (a datetime by its ISO text)."""
    if isinstance(value, Ext):
        if value.code in _CONSTRUCTED:
            try:
                payload = unpack(value.data)
            except ValueError as exc:
                raise PathError(where, str(exc)) from None
            if not isinstance(payload, list) or len(payload) < 3:
                raise PathError(where, f"extension {value.code}: expected [module, class, value]")
            inner = plain(where, payload[2])
            if isinstance(inner, dict) and "type" not in inner and isinstance(payload[1], str):
                inner = {**inner, "type": payload[1]}  # a message dumped without its type field
            return inner
        if value.code == _DELTA_SNAPSHOT:
            try:
                return plain(where, unpack(value.data))
            except ValueError as exc:
                raise PathError(where, str(exc)) from None
        if value.code == _NUMPY:
            return "<numpy array>"
        raise PathError(where, f"unknown extension type {value.code} (not JsonPlusSerializer's)")
    if isinstance(value, dict):
        return {_key(k): plain(f"{where}.{_key(k)}", v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(f"{where}[{k}]", v) for k, v in enumerate(value)]
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return value


def _key(key: Any) -> str:
    return key if isinstance(key, str) else str(key)


def _loads(where: str, kind: Any, blob: Any) -> Any:
    if isinstance(blob, str):
        blob = blob.encode("utf-8")
    if not isinstance(blob, bytes):
        raise PathError(where, f"expected a blob, got {type_name(blob)}")
    if kind == "msgpack":
        try:
            return unpack(blob)
        except ValueError as exc:
            raise PathError(where, str(exc)) from None
    if kind == "json":
        try:
            return json.loads(blob)
        except (ValueError, RecursionError) as exc:
            raise PathError(where, f"invalid JSON ({exc})") from None
    raise PathError(
        where.rsplit(".", 1)[0] + ".type",
        f"serialization {kind!r} cannot be read; expected msgpack or json "
        "(JsonPlusSerializer's; pickle and encrypted checkpoints are not read)",
    )


def _metadata(where: str, blob: Any) -> dict[str, Any]:
    if blob is None:
        return {}
    raw = blob.encode("utf-8") if isinstance(blob, str) else blob
    if not isinstance(raw, bytes):
        raise PathError(where, f"expected a blob, got {type_name(blob)}")
    try:
        meta = json.loads(raw) if raw[:1] == b"{" else unpack(raw)
    except (ValueError, RecursionError) as exc:
        raise PathError(where, f"neither JSON nor msgpack ({exc})") from None
    return meta if isinstance(meta, dict) else {}


@contextmanager
def _open(path: str) -> Iterator[sqlite3.Connection]:
    """The database, opened so that it cannot change; SQLite errors as one-line input errors."""
    try:
        with connect_readonly(path) as conn:
            if not is_checkpoint_db(conn):
                raise InputError(
                    f"no LangGraph checkpoints table (a table {TABLE!r} with columns "
                    + ", ".join(sorted(COLUMNS))
                    + ")",
                    path=path,
                )
            yield conn
    except sqlite3.DatabaseError as exc:
        raise InputError(f"not a readable SQLite file: {exc}", path=path) from None
