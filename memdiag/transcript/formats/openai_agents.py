"""The OpenAI Agents SDK's `SQLiteSession` file, read directly (docs/reference.md#transcript-input):
`memdiag replay agent.db --session ID`.

The SDK stores each session's Responses items as JSON text in a messages table
(`agent_messages(id, session_id, message_data, created_at)` by default; any table with
`session_id` and `message_data` columns is found), read here as the `openai_responses` items
are. One session is read (`--session ID`, the only one, or `all`: every session, each a session
of the transcript); otherwise the error lists them. Messages without an item id are named by
their row (`row7`), so ids stay the same whichever sessions are read.

An `AdvancedSQLiteSession` file keeps conversation branches: the main branch is the session's
id (what the SDK reads by default), another branch is `ID@BRANCH`, and `@BRANCH` follows the
ids of its messages. The file is never written to.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memdiag.errors import InputError
from memdiag.transcript.formats.base import NO_SELECTION, Selection
from memdiag.transcript.model import RawItem, RawMessage, RawSession
from memdiag.transcript.responses_items import Item, read_items
from memdiag.transcript.source import Choice, Source, choose, json_loads
from memdiag.transcript.sqlitefile import connect_readonly, is_sqlite
from memdiag.transcript.toolkit import PathError, reject

if TYPE_CHECKING:
    import sqlite3

name = "openai_agents"
# never from parsed JSON (detect is False): an SQLite file is found by detect_path
detect_priority = 90
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = (
    "formats/agents_sqlite/agent.db",
    "formats/agents_sqlite/advanced.db",
)
selects = {"conversation": "--session"}  # a database holds many sessions


def detect(source: Source) -> bool:
    return False  # a parsed JSON source is never an SQLite file: see detect_path


def read(source: Source, skip_invalid: bool) -> Iterator[RawItem]:
    raise InputError(
        "not an SQLite file (expected an Agents SDK session database)", path=source.path
    )


def detect_path(path: str | Path) -> bool:
    return is_sqlite(path)


def _tables(conn: sqlite3.Connection) -> dict[str, set[str]]:
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {t: {r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')} for t in names}


def _rows(path: str) -> tuple[str, list[Any]]:
    """(table, rows of (row id, session, branch, message_data, created_at)) in session order.

    An `AdvancedSQLiteSession` file keeps branches in `message_structure`: a row may belong to
    several branches, listed in each one's order.
    """
    import sqlite3  # only when a database is read (detection looks at its magic bytes)

    try:
        with connect_readonly(path) as conn:
            tables = _tables(conn)
            found = [t for t, cols in tables.items() if {"session_id", "message_data"} <= cols]
            if not found:
                raise InputError(
                    "no Agents SDK session table (a table with session_id and message_data "
                    f"columns); tables: {', '.join(tables) or 'none'}",
                    path=path,
                )
            table = "agent_messages" if "agent_messages" in found else found[0]
            if {"message_id", "branch_id", "sequence_number"} <= tables.get(
                "message_structure", set()
            ):
                query = (
                    f"SELECT m.id, m.session_id, s.branch_id, m.message_data, m.created_at "
                    f'FROM "{table}" m JOIN message_structure s ON m.id = s.message_id '
                    "ORDER BY s.sequence_number"
                )
            else:
                query = (
                    f"SELECT id, session_id, 'main', message_data, created_at "
                    f'FROM "{table}" ORDER BY id'
                )
            return table, conn.execute(query).fetchall()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"not a readable SQLite file: {exc}", path=path) from None


def _sqlite_ts(value: Any) -> str | None:
    # CURRENT_TIMESTAMP is UTC, written as "YYYY-MM-DD HH:MM:SS"
    if isinstance(value, str) and len(value) >= 19 and value[10] == " ":
        return value[:10] + "T" + value[11:] + "Z"
    return value if isinstance(value, str) else None


def read_path(
    path: str | Path, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> tuple[Source, list[RawItem]]:
    """The chosen sessions of an Agents SDK database as raw items."""
    where = str(path)
    if not is_sqlite(path):
        raise InputError("not an SQLite file (expected an Agents SDK session database)", path=where)
    source = Source(where, [], is_jsonl=False)
    table, rows = _rows(where)
    # one choice per session, and per branch of an AdvancedSQLiteSession (`ID@BRANCH`; the
    # main branch, which the SDK reads by default, is the session's own id)
    by_session: dict[str, list[tuple[int, Any, Any]]] = {}
    for rowid, sid, branch, data, created in rows:
        key = str(sid) if branch in (None, "main") else f"{sid}@{branch}"
        by_session.setdefault(key, []).append((rowid, data, created))
    if not by_session:
        raise InputError(f"table {table!r} holds no session items", path=where)
    choices = [
        Choice(sid, "", len(r), _sqlite_ts(r[0][2]), unit="item") for sid, r in by_session.items()
    ]
    items: list[RawItem] = []
    for k in choose(where, "session", selects["conversation"], choices, selection.conversation):
        sid = choices[k].id
        parsed: list[Item] = []
        stamps: dict[int, str | None] = {}
        for rowid, data, created in by_session[sid]:
            at = f"{table}[id={rowid}].message_data"
            try:
                value = json_loads(data)
            except (TypeError, ValueError) as exc:  # invalid, or beyond the reader's limits
                reject(source, skip_invalid, PathError(at, f"invalid JSON ({exc})"))
                continue
            parsed.append(Item(at, rowid, value))
            stamps[rowid] = _sqlite_ts(created)
        items.append(RawSession(sid, parsed[0].line if parsed else 0, choices[k].ts))
        # messages without an item id are named by their row: stable whichever sessions are
        # read; a row shared by branches gets the branch after its id (`row3@retry`)
        suffix = sid[sid.index("@") :] if "@" in sid else ""
        for m in read_items(
            source, parsed, skip_invalid, lambda m, _: f"row{m.line}", id_suffix=suffix
        ):
            if isinstance(m, RawMessage):
                m.ts = m.ts or stamps.get(m.line)
            items.append(m)
    return source, items
