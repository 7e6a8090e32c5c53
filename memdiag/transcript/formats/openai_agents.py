"""The OpenAI Agents SDK's `SQLiteSession` file, read directly (SPEC §2):
`memdiag replay agent.db --session ID`.

The SDK stores each session's Responses items as JSON text in a messages table
(`agent_messages(id, session_id, message_data, created_at)` by default; any table with
`session_id` and `message_data` columns is found), read here as the `openai_responses` items
are. One session is read (`--session ID`, the only one, or `all`: every session, each a session
of the transcript); otherwise the error lists them. Messages without an item id are named by
their row (`row7`), so ids stay the same whichever sessions are read. The file is never
written to.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memdiag.errors import InputError
from memdiag.transcript.model import RawItem, RawMessage, RawSession
from memdiag.transcript.responses_items import Item, read_items
from memdiag.transcript.source import Choice, Source, bad_at, choose

name = "openai_agents"
select_flag = "--session"
SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite(path: str | Path) -> bool:
    try:
        with open(path, "rb") as fp:
            return fp.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def detect(source: Source) -> bool:
    return False  # a parsed JSON source is never an SQLite file: see detect_path


def read(source: Source, skip_invalid: bool) -> Iterator[RawItem]:
    raise InputError(
        "not an SQLite file (expected an Agents SDK session database)", path=source.path
    )


def detect_path(path: str | Path) -> bool:
    return is_sqlite(path)


def _connect(path: str) -> sqlite3.Connection:
    """Open read-only, leaving no file behind: the SDK's files are in WAL mode, where even a
    read-only connection creates `-wal` and `-shm` files. Without a `-wal` file the database
    file holds everything, so it is opened immutable; with one (the agent may be running),
    read-only through the WAL that is already there."""
    wal = Path(path + "-wal").exists()
    uri = Path(path).resolve().as_uri() + ("?mode=ro" if wal else "?immutable=1")
    try:
        return sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise InputError(f"cannot open SQLite file: {exc}", path=path) from None


def _rows(path: str) -> tuple[str, list[Any]]:
    conn = _connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        found = [
            t
            for t in tables
            if {"session_id", "message_data"}
            <= {r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')}
        ]
        if not found:
            raise InputError(
                "no Agents SDK session table (a table with session_id and message_data "
                f"columns); tables: {', '.join(tables) or 'none'}",
                path=path,
            )
        table = "agent_messages" if "agent_messages" in found else found[0]
        rows = conn.execute(
            f'SELECT id, session_id, message_data, created_at FROM "{table}" ORDER BY id'
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"not a readable SQLite file: {exc}", path=path) from None
    finally:
        conn.close()
    return table, rows


def _sqlite_ts(value: Any) -> str | None:
    # CURRENT_TIMESTAMP is UTC, written as "YYYY-MM-DD HH:MM:SS"
    if isinstance(value, str) and len(value) >= 19 and value[10] == " ":
        return value[:10] + "T" + value[11:] + "Z"
    return value if isinstance(value, str) else None


def read_path(
    path: str | Path, skip_invalid: bool, select: str | None
) -> tuple[Source, list[RawItem]]:
    """The chosen sessions of an Agents SDK database as raw items."""
    where = str(path)
    if not is_sqlite(path):
        raise InputError("not an SQLite file (expected an Agents SDK session database)", path=where)
    source = Source(where, [], is_jsonl=False)
    table, rows = _rows(where)
    by_session: dict[str, list[tuple[int, Any, Any]]] = {}
    for rowid, sid, data, created in rows:
        by_session.setdefault(str(sid), []).append((rowid, data, created))
    if not by_session:
        raise InputError(f"table {table!r} holds no session items", path=where)
    choices = [
        Choice(sid, "", len(r), _sqlite_ts(r[0][2]), unit="item") for sid, r in by_session.items()
    ]
    items: list[RawItem] = []
    for k in choose(where, "session", select_flag, choices, select):
        sid = choices[k].id
        parsed: list[Item] = []
        stamps: dict[int, str | None] = {}
        for rowid, data, created in by_session[sid]:
            at = f"{table}[id={rowid}].message_data"
            try:
                value = json.loads(data)
            except (TypeError, json.JSONDecodeError) as exc:
                bad_at(source, skip_invalid, at, f"invalid JSON ({exc})")
                continue
            parsed.append(Item(at, rowid, value))
            stamps[rowid] = _sqlite_ts(created)
        items.append(RawSession(sid, parsed[0].line if parsed else 0, choices[k].ts))
        # messages without an item id are named by their row: stable whichever sessions are read
        for m in read_items(source, parsed, skip_invalid, lambda m, _: f"row{m.line}"):
            if isinstance(m, RawMessage):
                m.ts = m.ts or stamps.get(m.line)
            items.append(m)
    return source, items
