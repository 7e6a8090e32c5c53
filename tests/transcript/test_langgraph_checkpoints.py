"""LangGraph checkpoints, as a real SqliteSaver wrote them (fixtures/formats/langgraph_sqlite:
a graph that trims its messages before each model step, two threads) and one dumpd-ed
checkpoint: threads, the messages of every step, the observed windows (the state each model
step started from, checked against LangGraph's own get_state_history), read-only opening,
corrupt databases, and the whole stack: `memdiag diagnose` finds the trimmed allergy."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from memdiag.cli import app
from memdiag.transcript import load
from memdiag.transcript.source import ChoiceNeeded
from tests.transcript.realdata import FORMATS, assert_tool_pairs, error_of, ids, roles, runner

HERE = FORMATS / "langgraph_sqlite"
DB = HERE / "checkpoints.sqlite"
DUMPD = HERE / "checkpoint_dumpd.json"
STATES = json.loads((HERE / "states.json").read_text())


def test_threads_are_listed_when_none_is_chosen() -> None:
    with pytest.raises(ChoiceNeeded) as info:
        load(DB)
    assert [c.id for c in info.value.choices] == ["mia-trip", "mia-followup"]
    assert [c.messages for c in info.value.choices] == [len(STATES["mia-trip"]), 8]
    assert "--session ID (or --session all)" in str(info.value)


def test_a_thread_holds_every_message_that_was_ever_in_its_state() -> None:
    t = load(DB, select="mia-trip")
    assert t.format == "langgraph" and t.sessions == ("mia-trip",)
    every: list[str] = []
    for state in STATES["mia-trip"]:
        every += [i for i in state["messages"] if i not in every]
    assert ids(t) == every  # LangGraph's ids, in order of first appearance
    first_two = ["system", "user", "assistant", "user", "assistant", "tool", "assistant"]
    assert roles(t) == first_two + ["user", "assistant"] * 3
    assert len(t.turns) == 5
    call = t.message("ai-2").tool_calls[0]
    assert call["id"] == "call_weather_1" and call["function"]["name"] == "get_weather"
    assert t.messages[5].tool_call_id == "call_weather_1" and t.messages[5].name == "get_weather"
    assert_tool_pairs(t)


def test_each_reply_has_the_window_of_the_state_its_step_started_from() -> None:
    """The window before a reply is the checkpoint before the step that wrote it: compared with
    the states LangGraph's get_state_history() gives (states.json)."""
    t = load(DB, select="mia-trip")
    history = STATES["mia-trip"]
    expected = {}
    for before, after in itertools.pairwise(history):
        for new in (i for i in after["messages"] if i not in before["messages"]):
            if new.startswith("ai-") and after["source"] == "loop":
                expected[new] = before["messages"]
    assert {w.before_id: list(w.ids) for w in t.windows} == expected
    assert len(t.windows) == 6
    # the trim node dropped the allergy (the first user message) before the third model step
    allergy = t.messages[1].id
    assert "allergic to peanuts" in t.messages[1].content
    kept = [allergy in w.ids for w in t.windows]
    assert kept == [True, True, True, False, False, False]
    assert all(w.source and "checkpoints[thread_id=mia-trip" in w.source for w in t.windows)


def test_the_notes_say_what_checkpoints_cannot_tell() -> None:
    t = load(DB, select="mia-trip")
    assert any("not the request itself" in n and "6 observed window" in n for n in t.notes)
    removed = {i for s in STATES["mia-trip"] for i in s["messages"]} - set(
        STATES["mia-trip"][-1]["messages"]
    )
    assert any(f"{len(removed)} message(s) left the thread's state" in n for n in t.notes)


def test_all_threads_are_sessions_and_the_short_one_lost_nothing() -> None:
    t = load(DB, select="all")
    assert t.sessions == ("mia-trip", "mia-followup")
    follow = [w for w in t.windows if t.messages[w.before].session == "mia-followup"]
    assert [w.before_id for w in follow] == ["ai-7", "ai-8"]
    assert follow[-1].ids == tuple(STATES["mia-followup"][-2]["messages"])


def test_the_database_is_opened_read_only(tmp_path: Path) -> None:
    db = Path(shutil.copy(DB, tmp_path / "checkpoints.sqlite"))
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    load(db, select="all")
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints.sqlite"]


def test_a_database_with_a_wal_is_read_from_a_copy(tmp_path: Path) -> None:
    """An agent still running: the newest checkpoints are in the -wal file."""
    db = Path(shutil.copy(DB, tmp_path / "live.sqlite"))
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("DELETE FROM checkpoints WHERE thread_id = 'mia-followup'")
    conn.commit()  # the deletion is in live.sqlite-wal only; the connection stays open
    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()}
    assert "live.sqlite-wal" in files
    t = load(db)  # one thread left: no choice needed
    assert t.sessions == ("mia-trip",)
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()} == files
    conn.close()


def _corrupt(tmp_path: Path, sql: str, *args: object) -> Path:
    db = Path(shutil.copy(DB, tmp_path / "bad.sqlite"))
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute(sql, args)
        conn.commit()
    return db


def test_a_corrupt_checkpoint_names_the_row_and_field(tmp_path: Path) -> None:
    newest = STATES["mia-trip"][-1]["checkpoint_id"]
    db = _corrupt(
        tmp_path,
        "UPDATE checkpoints SET checkpoint = ? WHERE checkpoint_id = ?",
        b"\x85\xa1v",
        newest,
    )
    text = error_of(db, select="mia-trip")
    assert f"checkpoints[thread_id=mia-trip, checkpoint_id={newest}].checkpoint: msgpack:" in text
    assert "\n" not in text


def test_skip_invalid_leaves_a_corrupt_checkpoint_out(tmp_path: Path) -> None:
    newest = STATES["mia-trip"][-1]["checkpoint_id"]
    db = _corrupt(
        tmp_path, "UPDATE checkpoints SET checkpoint = ? WHERE checkpoint_id = ?", b"\xc1", newest
    )
    t = load(db, select="mia-trip", skip_invalid=True)
    assert t.skipped == 1
    assert "ai-6" not in ids(t)  # only the newest checkpoint held the last reply


def test_an_unknown_serialization_is_named(tmp_path: Path) -> None:
    db = _corrupt(tmp_path, "UPDATE checkpoints SET type = 'pickle'")
    assert "].type: serialization 'pickle' cannot be read" in error_of(db, select="mia-trip")


def test_a_message_of_unknown_type_names_its_path(tmp_path: Path) -> None:
    """A message dict whose type is not LangChain's, packed as JsonPlusSerializer packs it."""
    db = Path(shutil.copy(DB, tmp_path / "bad.sqlite"))
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute(
            "SELECT rowid, checkpoint FROM checkpoints WHERE thread_id = 'mia-followup'"
        ).fetchall()
        # the system message's `type: system`, in every checkpoint that holds it
        changed = [(b.replace(b"\xa6system", b"\xa6oracle", 1), r) for r, b in rows]
        assert sum(new != old for (new, _), (_, old) in zip(changed, rows, strict=True)) >= 2
        conn.executemany("UPDATE checkpoints SET checkpoint = ? WHERE rowid = ?", changed)
        conn.commit()
    text = error_of(db, select="mia-followup")
    assert ".checkpoint.channel_values.messages[0].type: unknown message type 'oracle'" in text


def test_not_a_checkpoint_database(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("CREATE TABLE checkpoints (thread_id TEXT, body TEXT)")
        conn.commit()
    assert "no LangGraph checkpoints table" in error_of(db, fmt="langgraph")
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    result = runner.invoke(app, ["convert", str(garbage), "--from", "langgraph"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and str(garbage) in result.stderr


def test_one_dumpd_checkpoint_is_its_state() -> None:
    t = load(DUMPD)
    assert t.format == "langgraph_checkpoint"
    raw = json.loads(DUMPD.read_text())
    assert ids(t) == [m["kwargs"]["id"] for m in raw["channel_values"]["messages"]]
    assert ids(t) == STATES["mia-trip"][-1]["messages"]
    assert not t.windows
    assert any("one LangGraph checkpoint" in n for n in t.notes)


def test_a_dumpd_checkpoint_with_a_bad_message_names_its_path(tmp_path: Path) -> None:
    raw = json.loads(DUMPD.read_text())
    raw["channel_values"]["messages"][2]["id"][-1] = "TelepathyMessage"
    path = tmp_path / "cp.json"
    path.write_text(json.dumps(raw))
    assert "channel_values.messages[2].id: unknown message type 'TelepathyMessage'" in error_of(
        path
    )


# --- the whole stack ------------------------------------------------------------------------


def test_diagnose_finds_the_allergy_the_graph_trimmed_away() -> None:
    """The graph's trim node dropped Mia's allergy before the third model step; at turn 5 the
    model suggested peanuts. diagnose reads the checkpoint windows: short-term, dropped."""
    result = runner.invoke(
        app,
        [
            "diagnose",
            str(DB),
            "--session",
            "mia-trip",
            "--fact",
            "allergic to peanuts",
            "--at",
            "5",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (d,) = doc["diagnoses"]
    assert d["verdict"] == "short_term_dropped" and d["layer"] == "short_term"
    assert d["at_turn"] == 5 and d["session"] == "mia-trip"
    assert d["details"]["strategy"] == "observed"
    assert d["details"]["observed"]["request"] == "ai-6"
    assert d["evidence"][0]["turn"] == 1 and "allergic to peanuts" in d["evidence"][0]["text"]
    assert "not the request itself" in result.stderr


def test_replay_and_convert_of_a_thread() -> None:
    res = runner.invoke(
        app, ["replay", str(DB), "--session", "mia-trip", "-s", "all", "-f", "json"]
    )
    assert res.exit_code == 0, res.output
    assert "observed" in res.stdout
    conv = runner.invoke(app, ["convert", str(DB), "--session", "mia-trip"])
    records = [json.loads(line) for line in conv.stdout.splitlines()]
    assert sum(r.get("type") == "window" for r in records) == 6
    assert sum("role" in r for r in records) == len(load(DB, select="mia-trip").messages)


def test_every_window_is_a_state_before_its_reply() -> None:
    """For every thread: a window holds only messages that came before its reply, each once,
    among them the user message of the reply's turn (the graph never trims the question)."""
    t = load(DB, select="all")
    assert t.windows
    for w in t.windows:
        assert all(i < w.before for i in w.indices)
        assert len(set(w.ids)) == len(w.ids)
        reply = t.messages[w.before]
        turn = t.turn(reply.turn)
        assert turn.user_index in w.indices
        assert {t.messages[i].session for i in w.indices} == {reply.session}


# --- a pre_model_hook that trims the model's input, not the state ---------------------------

REACT = HERE / "react_agent.sqlite"
REACT_STATES = json.loads((HERE / "react_states.json").read_text())


def test_a_pre_model_hooks_input_is_the_window() -> None:
    """create_react_agent(pre_model_hook=...) keeps every message in the state and saves what
    the model node was given in `llm_input_messages`: that is each reply's window."""
    t = load(REACT)
    assert len(t.turns) == 4 and len(t.messages) == len(REACT_STATES[-1]["messages"])
    given = [s["llm_input_messages"] for s in REACT_STATES if s["next"] == ["agent"]]
    assert [list(w.ids) for w in t.windows] == given
    allergy = t.messages[0]
    assert "allergic to peanuts" in allergy.content
    assert [allergy.id in w.ids for w in t.windows] == [True, True, False, False, False]
    assert any("pre_model_hook gave the model node" in n for n in t.notes)
    assert not any("not the request itself" in n for n in t.notes)


def test_diagnose_finds_what_the_hook_trimmed() -> None:
    res = runner.invoke(
        app, ["diagnose", str(REACT), "--fact", "allergic to peanuts", "--at", "4", "-f", "json"]
    )
    assert res.exit_code == 0, res.output
    (d,) = json.loads(res.stdout)["diagnoses"]
    assert d["verdict"] == "short_term_dropped" and d["details"]["strategy"] == "observed"
