"""The OpenAI Agents SDK's `SQLiteSession` file, read directly (SPEC §2).

The SDK stores each session's Responses items as JSON text in a messages table
(`agent_messages(id, session_id, message_data, created_at)` by default; any table with
`session_id` and `message_data` columns is found). The file is opened read-only. One session
is read (`--session ID`; the only one when there is one; `all` reads every session, each a
session of the transcript); otherwise the error lists the sessions.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memdiag.errors import InputError
from memdiag.transcript.formats import Source
from memdiag.transcript.formats_new._common import Choice, bad, choose
from memdiag.transcript.formats_new.responses import Item, read_items
from memdiag.transcript.model import RawItem, RawSession

SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite(path: str | Path) -> bool:
    try:
        with open(path, "rb") as fp:
            return fp.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


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


def _messages_table(conn: sqlite3.Connection, path: str) -> str:
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        found = []
        for name in tables:
            cols = {r[1] for r in conn.execute(f'PRAGMA table_info("{name}")')}
            if {"session_id", "message_data"} <= cols:
                found.append(name)
    except sqlite3.DatabaseError as exc:
        raise InputError(f"not a readable SQLite file: {exc}", path=path) from None
    if not found:
        raise InputError(
            "no Agents SDK session table (a table with session_id and message_data columns); "
            f"tables: {', '.join(tables) or 'none'}",
            path=path,
        )
    return "agent_messages" if "agent_messages" in found else found[0]


def _sqlite_ts(value: Any) -> str | None:
    # CURRENT_TIMESTAMP is UTC, written as "YYYY-MM-DD HH:MM:SS"
    if isinstance(value, str) and len(value) >= 19 and value[10] == " ":
        return value[:10] + "T" + value[11:] + "Z"
    return value if isinstance(value, str) else None


class OpenAIAgentsSQLite:
    """`memdiag replay agent.db --session ID`: an Agents SDK SQLiteSession database."""

    name = "openai_agents"
    select_flag = "--session"

    def detect(self, source: Source) -> bool:
        return False  # a parsed JSON source is never an SQLite file (see detect_path)

    def read(self, source: Source, skip_invalid: bool) -> Iterator[RawItem]:
        raise InputError(
            "not an SQLite file (expected an Agents SDK session database)", path=source.path
        )

    def detect_path(self, path: str | Path) -> bool:
        return is_sqlite(path)

    def read_path(
        self, path: str | Path, skip_invalid: bool, select: str | None
    ) -> tuple[Source, list[RawItem]]:
        name = str(path)
        if not is_sqlite(path):
            raise InputError(
                "not an SQLite file (expected an Agents SDK session database)", path=name
            )
        source = Source(name, [], is_jsonl=False)
        conn = _connect(name)
        try:
            table = _messages_table(conn, name)
            try:
                rows = conn.execute(
                    f'SELECT id, session_id, message_data, created_at FROM "{table}" ORDER BY id'
                ).fetchall()
            except sqlite3.DatabaseError as exc:
                raise InputError(f"cannot read table {table!r}: {exc}", path=name) from None
        finally:
            conn.close()
        by_session: dict[str, list[tuple[int, Any, Any]]] = {}
        for rowid, sid, data, created in rows:
            by_session.setdefault(str(sid), []).append((rowid, data, created))
        if not by_session:
            raise InputError(f"table {table!r} holds no session items", path=name)
        choices = [
            Choice(sid, "", len(r), _sqlite_ts(r[0][2]), unit="item")
            for sid, r in by_session.items()
        ]
        if select == "all":
            chosen = list(by_session)
        else:
            k = choose(name, "session", self.select_flag, choices, select)
            chosen = [choices[k].id]
        items: list[RawItem] = []
        for sid in chosen:
            parsed: list[Item] = []
            stamps: dict[int, str | None] = {}
            for rowid, data, created in by_session[sid]:
                where = f"{table}[id={rowid}].message_data"
                try:
                    value = json.loads(data)
                except (TypeError, json.JSONDecodeError) as exc:
                    bad(source, skip_invalid, where, f"invalid JSON ({exc})")
                    continue
                parsed.append(Item(where, rowid, value))
                stamps[rowid] = _sqlite_ts(created)
            messages = read_items(source, parsed, skip_invalid)
            items.append(RawSession(sid, parsed[0].line if parsed else 0, choices_ts(choices, sid)))
            for m in messages:
                m.ts = m.ts or stamps.get(m.line)
                if m.id is None:  # the row id: stable whichever sessions are read
                    m.id = f"row{m.line}"
            items.extend(messages)
        return source, items


def choices_ts(choices: list[Choice], sid: str) -> str | None:
    return next((c.ts for c in choices if c.id == sid), None)
