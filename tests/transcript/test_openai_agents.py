"""The Agents SDK's SQLite sessions: fixtures written by a real Runner and SQLiteSession /
AdvancedSQLiteSession (openai-agents), read directly and never changed."""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from memdiag.cli import app
from memdiag.transcript import load
from memdiag.transcript.source import ChoiceNeeded
from tests.transcript.realdata import (
    ADVANCED_DB,
    AGENT_DB,
    assert_tool_pairs,
    error_of,
    ids,
    roles,
    runner,
)


def test_agents_db_lists_sessions_when_none_is_chosen() -> None:
    with pytest.raises(ChoiceNeeded) as info:
        load(AGENT_DB)
    text = str(info.value)
    assert text.startswith(f"{AGENT_DB}: holds 2 sessions; choose one with --session ID")
    lines = text.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["mia-trip", "mia-followup"]
    assert "8 items" in lines[1] and "2 items" in lines[2]
    assert info.value.exit_code == 2


def test_agents_db_reads_one_session() -> None:
    t = load(AGENT_DB, select="mia-trip")
    assert t.format == "openai_agents"
    assert t.sessions == ("mia-trip",)
    assert roles(t) == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    assert ids(t) == ["row1", "msg_001", "row3", "fc_003", "row6", "msg_005"]
    assert t.message("fc_003").tool_calls[0]["function"]["name"] == "search_flights"
    assert t.message("row6").tool_call_id == "call_flights_1"
    assert t.message("msg_005").metadata["reasoning"][0]["id"] == "rs_004"
    assert all(m.ts and m.ts.endswith("Z") for m in t.messages)
    assert_tool_pairs(t)


def test_agents_db_all_sessions_keep_row_ids() -> None:
    t = load(AGENT_DB, select="all")
    assert t.sessions == ("mia-trip", "mia-followup")
    one = load(AGENT_DB, select="mia-followup")
    assert ids(one) == ids(t)[-2:] == ["row9", "msg_006"]
    assert [tn.session for tn in t.turns] == ["mia-trip", "mia-trip", "mia-followup"]


def test_agents_db_unknown_session_lists_them() -> None:
    with pytest.raises(ChoiceNeeded, match="no session is 'bob' among 2"):
        load(AGENT_DB, select="bob")


def test_agents_db_is_opened_read_only(tmp_path: Path) -> None:
    db = shutil.copy(AGENT_DB, tmp_path / "agent.db")
    before = hashlib.sha256(Path(db).read_bytes()).hexdigest()
    load(db, select="all")
    assert hashlib.sha256(Path(db).read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.db"]


def _db_with(tmp_path: Path, rows: list[str]) -> Path:
    db = Path(shutil.copy(AGENT_DB, tmp_path / "agent.db"))
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.executemany(
            "INSERT INTO agent_messages (session_id, message_data) VALUES ('mia-trip', ?)",
            [(r,) for r in rows],
        )
        conn.commit()
    return db


def test_agents_db_bad_rows_name_table_and_row(tmp_path: Path) -> None:
    db = _db_with(tmp_path, ['{"type": "telepathy"}'])
    text = error_of(db, select="mia-trip")
    assert "agent_messages[id=11].message_data.type: unknown item type 'telepathy'" in text
    db2 = _db_with(tmp_path / "b" if (tmp_path / "b").mkdir() is None else tmp_path, ["{not json"])
    assert "agent_messages[id=11].message_data: invalid JSON" in error_of(db2, select="mia-trip")


def test_agents_db_skip_invalid(tmp_path: Path) -> None:
    db = _db_with(tmp_path, ['{"type": "telepathy"}', "{oops", '{"role": "user", "content": "x"}'])
    t = load(db, select="mia-trip", skip_invalid=True)
    assert t.skipped == 2
    assert t.messages[-1].content == "x"


def test_agents_db_without_session_table(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER, body TEXT)")
        conn.commit()
    assert "no Agents SDK session table" in error_of(db)


def test_cli_lists_sessions_and_exits_2() -> None:
    result = runner.invoke(app, ["replay", str(AGENT_DB)])
    assert result.exit_code == 2
    assert "holds 2 sessions" in result.stderr
    assert "mia-trip" in result.stderr and "mia-followup" in result.stderr
    assert result.stdout == ""


def test_cli_convert_and_replay_a_session() -> None:
    result = runner.invoke(app, ["convert", str(AGENT_DB), "--session", "mia-trip"])
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r.get("role") for r in records if "role" in r] == [
        "user", "assistant", "user", "assistant", "tool", "assistant",
    ]  # fmt: skip
    result = runner.invoke(
        app,
        ["replay", str(AGENT_DB), "--session", "mia-trip", "--format", "json",
         "--fact", "allergic to peanuts"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["transcript"] == str(AGENT_DB) and out["strategies"]


def test_agents_advanced_db_branches_are_sessions() -> None:
    with pytest.raises(ChoiceNeeded) as info:
        load(ADVANCED_DB)
    assert [c.id for c in info.value.choices] == ["mia-trip", "mia-trip@retry"]
    main = load(ADVANCED_DB, select="mia-trip")
    assert ids(main) == ["row1", "msg_101", "row3", "msg_102"]
    retry = load(ADVANCED_DB, select="mia-trip@retry")
    assert ids(retry) == ["row1@retry", "msg_101@retry", "row5@retry", "msg_103@retry"]
    assert retry.messages[2].content == "Where should I go in May? Porto?"
    both = load(ADVANCED_DB, select="all")
    assert both.sessions == ("mia-trip", "mia-trip@retry") and len(both.messages) == 8


def test_agents_db_with_a_live_wal_is_read_from_a_copy(tmp_path: Path) -> None:
    """An agent still running keeps new rows in the -wal file: they are read, and neither the
    database nor its -wal/-shm files change."""
    db = Path(shutil.copy(AGENT_DB, tmp_path / "agent.db"))
    writer = sqlite3.connect(db)
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute(
            "INSERT INTO agent_messages (session_id, message_data) VALUES ('mia-followup', ?)",
            ('{"role": "user", "content": "And for the way back?"}',),
        )
        writer.commit()
        files = sorted(tmp_path.iterdir())
        assert [p.name for p in files] == ["agent.db", "agent.db-shm", "agent.db-wal"]
        before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
        t = load(db, select="mia-followup")
        assert t.messages[-1].content == "And for the way back?"
        after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()}
        assert after == before
    finally:
        writer.close()


def test_diagnose_across_agents_sdk_sessions() -> None:
    """The allergy was said in session mia-trip; mia-followup starts empty and suggests a peanut
    butter bar: nothing carried the fact over, a long-term write-path failure."""
    result = runner.invoke(
        app,
        ["diagnose", str(AGENT_DB), "--session", "all", "--fact", "allergic to peanuts",
         "--at", "3", "--format", "json"],
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.stderr
    (diagnosis,) = json.loads(result.stdout)["diagnoses"]
    assert diagnosis["verdict"] == "long_term_not_written"
    assert diagnosis["session"] == "mia-followup"
    assert [e["id"] for e in diagnosis["evidence"]][:1] == ["row1"]
