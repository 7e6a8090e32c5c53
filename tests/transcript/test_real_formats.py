"""Formats that agents and chat apps really record (issue 10): OpenAI Responses items, the
Agents SDK's SQLite sessions, ChatGPT and Claude.ai exports, LangChain/LangGraph dumps.

The fixtures were made by the real libraries (openai, openai-agents, langgraph, langchain-core)
where one writes the format; the scripts beside them name the versions.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.errors import InputError
from memdiag.transcript import Transcript, detect_format, load, read_source
from memdiag.transcript.source import ChoiceNeeded
from memdiag.transcript.writer import write_canonical

FORMATS = Path(__file__).resolve().parents[2] / "fixtures" / "formats"
RESPONSES = FORMATS / "openai_responses" / "items.json"
AGENT_DB = FORMATS / "agents_sqlite" / "agent.db"
CHATGPT = FORMATS / "chatgpt" / "conversations.json"
CLAUDE = FORMATS / "claude" / "conversations.json"
LANGGRAPH = FORMATS / "langgraph"

runner = CliRunner()


def roles(t: Transcript) -> list[str]:
    return [m.role for m in t.messages]


def ids(t: Transcript) -> list[str]:
    return [m.id for m in t.messages]


def assert_tool_pairs(t: Transcript) -> None:
    """Every tool result answers a call made earlier in its session, and every call is answered
    before the next user message."""
    open_calls: set[str] = set()
    for m in t.messages:
        if m.role == "user":
            assert not open_calls, f"calls {open_calls} unanswered before {m.id}"
        open_calls |= set(m.tool_call_ids)
        if m.role == "tool" and m.tool_call_id is not None:
            assert m.tool_call_id in open_calls, f"{m.id} answers no open call"
            open_calls.discard(m.tool_call_id)
    assert not open_calls


def no_nulls(value: Any) -> bool:
    if isinstance(value, dict):
        return all(v is not None and no_nulls(v) for v in value.values())
    if isinstance(value, list):
        return all(no_nulls(v) for v in value)
    return True


def write_json(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return path


def error_of(path: Path, **kwargs: Any) -> str:
    with pytest.raises(InputError) as info:
        load(path, **kwargs)
    text = str(info.value)
    assert text.startswith(f"{path}:")
    return text


# --- OpenAI Responses items ---------------------------------------------------------------


def test_responses_items_are_detected_and_read() -> None:
    t = load(RESPONSES)
    assert t.format == "openai_responses"
    assert roles(t) == [
        "system", "user", "assistant", "user", "assistant", "tool", "tool", "assistant",
        "user", "assistant", "tool", "assistant",
    ]  # fmt: skip
    assert [m.id for m in t.messages if m.role == "assistant"] == [
        "msg_01", "fc_03", "msg_05", "ws_07", "msg_08",
    ]  # fmt: skip
    calls = t.message("fc_03")
    # the two parallel function calls are one assistant message, answered in order
    assert [c["id"] for c in calls.tool_calls] == ["call_lis", "call_opo"]
    assert [m.tool_call_id for m in t.messages[5:7]] == ["call_lis", "call_opo"]
    assert t.messages[5].content == "Lisbon: 21C, sunny"
    assert_tool_pairs(t)
    assert len(t.turns) == 3


def test_responses_reasoning_is_metadata_not_text() -> None:
    t = load(RESPONSES)
    calls = t.message("fc_03")
    assert calls.metadata["reasoning"][0]["id"] == "rs_02"
    assert all("call the tool twice" not in m.content for m in t.messages)
    # the image is kept as a block, the text alone counts
    user = t.messages[1]
    assert user.content == "Hi, I'm Mia. I'm allergic to peanuts."
    assert user.metadata["blocks"][0]["type"] == "input_image"


def test_responses_null_fields_are_dropped() -> None:
    raw = json.loads(RESPONSES.read_text())
    assert any(v is None for item in raw for v in item.values())  # the SDK dump has them
    t = load(RESPONSES)
    for m in t.messages:
        assert no_nulls(m.metadata), m.id
        assert not {"phase", "logprobs", "prompt_cache_breakpoint"} & set(json.dumps(m.metadata))
    text = json.dumps([m.metadata for m in t.messages])
    assert "null" not in text and "logprobs" not in text


def test_responses_compaction_is_kept_as_metadata() -> None:
    # until the observed-window events land, the opaque summary rides on the next message
    t = load(RESPONSES)
    after = t.messages[8]
    assert after.content == "Any news about TAP strikes?"
    assert after.metadata["compaction"][0]["id"] == "cmp_06"
    assert "gAAAA" not in json.dumps(after.metadata)  # the encrypted blob is not copied


def test_responses_compaction_is_an_observed_window() -> None:
    """The request after a compaction item saw it (opaque, covering everything before) and
    the items after it; a hosted web search belongs to the request that ran it."""
    pytest.importorskip(
        "memdiag.transcript.events",
        reason="the SPEC §2b window events land with the trace formats (issue 10, branch traces)",
    )
    t: Any = load(RESPONSES)
    assert [(w.before_id, w.ids) for w in t.windows] == [("ws_07", ("m9",))]
    (summary,) = t.windows[0].extra
    assert summary.opaque and summary.section == "summary" and summary.content == ""
    assert summary.covers == ("m1", "m2", "msg_01", "m4", "fc_03", "m6", "m7", "msg_05")


def test_responses_jsonl_first_item_looks_canonical(tmp_path: Path) -> None:
    """Today's failure: a bare `{"role", "content"}` first item, then `reasoning`."""
    items = json.loads(RESPONSES.read_text())[3:10]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    assert detect_format(read_source(path)) == "openai_responses"
    t = load(path)
    assert roles(t) == ["user", "assistant", "tool", "tool", "assistant"]
    assert t.messages[0].line == 1 and t.messages[2].line == 5


@pytest.mark.parametrize(
    ("items", "where", "message"),
    [
        ([{"type": "telepathy", "id": "x"}], "[0].type", "unknown item type 'telepathy'"),
        (
            [
                {"role": "user", "content": "hi"},
                {"type": "function_call_output", "call_id": "call_9", "output": "x"},
            ],
            "[1].call_id",
            "no earlier call with call_id 'call_9'",
        ),
        ([{"type": "item_reference", "id": "msg_gone"}], "[0].id", "item_reference to 'msg_gone'"),
        (
            [{"type": "message", "role": "user", "content": [{"type": "input_text"}]}],
            "[0].content[0].text",
            "missing",
        ),
        ([{"type": "function_call", "name": "f", "arguments": "{}"}], "[0].call_id", "missing"),
        ([{"type": "message", "role": "robot", "content": "x"}], "[0].role", "unknown role"),
    ],
)
def test_responses_bad_items_name_their_path(
    tmp_path: Path, items: list[Any], where: str, message: str
) -> None:
    path = write_json(tmp_path / "items.json", items)
    text = error_of(path, fmt="openai_responses")
    assert f"{path}: {where}: " in text and message in text
    assert "\n" not in text


def test_responses_skip_invalid_counts(tmp_path: Path) -> None:
    items = json.loads(RESPONSES.read_text())
    items.insert(2, {"type": "telepathy"})
    items.insert(4, {"type": "function_call_output", "call_id": "nope", "output": ""})
    path = write_json(tmp_path / "items.json", items)
    t = load(path, skip_invalid=True)
    assert t.skipped == 2
    assert len(t.messages) == len(load(RESPONSES).messages)


# --- Agents SDK SQLiteSession -------------------------------------------------------------


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


# --- ChatGPT export -----------------------------------------------------------------------


def test_chatgpt_export_lists_conversations() -> None:
    with pytest.raises(ChoiceNeeded) as info:
        load(CHATGPT)
    lines = str(info.value).splitlines()
    assert "holds 2 conversations; choose one with --conversation ID or title" in lines[0]
    assert "'Lisbon trip'" in lines[1] and "'Packing list'" in lines[2]


@pytest.mark.parametrize(
    "select", ["Lisbon trip", "lisbon", "6748a1f0-1c2d-8000-9e3f-0a1b2c3d4e5f"]
)
def test_chatgpt_export_follows_current_branch(select: str) -> None:
    t = load(CHATGPT, select=select)
    assert t.format == "chatgpt"
    assert ids(t) == [
        "ctx-1", "mem-1", "u-1", "a-1", "a-2", "tool-2", "a-3", "u-2", "a-5", "tool-5", "a-6",
    ]  # fmt: skip
    # the regenerated reply and the edited message are on other branches; said so
    assert not {"a-1-old", "u-2-old", "a-4-old", "sys-0"} & set(ids(t))
    assert any("3 message(s) on other branches" in w for w in t.warnings)
    assert t.message("ctx-1").role == "system" and t.message("ctx-1").metadata["hidden"]
    assert "Preferred name: Mia" in t.message("ctx-1").content
    # saved memories: what the app injected, a system message too
    memories = t.message("mem-1")
    assert memories.role == "system" and "Prefers window seats." in memories.content
    assert memories.metadata["content_type"] == "model_editable_context"


def test_chatgpt_export_tools_attachments_and_reasoning() -> None:
    t = load(CHATGPT, select="Lisbon trip")
    assert t.message("a-2").tool_calls[0]["function"]["name"] == "bio"
    assert t.message("tool-2").tool_call_id == "a-2"
    assert t.message("tool-5").tool_call_id == "a-5" and t.message("tool-5").content == "2"
    assert_tool_pairs(t)
    user = t.message("u-1")
    assert user.content == "Hi, I'm Mia. I'm allergic to peanuts. Here is my itinerary."
    assert [a["name"] for a in user.metadata["attachments"]] == [
        "boarding-pass.png", "itinerary.pdf",
    ]  # fmt: skip
    assert user.metadata["blocks"][0]["content_type"] == "image_asset_pointer"
    assert user.ts == "2024-11-27T06:47:49Z"
    reasoning = t.message("a-5").metadata["reasoning"]
    assert [r["content_type"] for r in reasoning] == ["thoughts", "reasoning_recap"]
    assert all("snack per 90 minutes" not in m.content for m in t.messages)
    assert all(no_nulls(m.metadata) for m in t.messages)


def _chatgpt() -> list[Any]:
    return json.loads(CHATGPT.read_text())


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (
            lambda d: d[0]["mapping"]["u-1"]["message"]["content"].update(parts=5),
            "[0].mapping.u-1.message.content.parts: expected a list, got int",
        ),
        (
            lambda d: d[0].update(current_node="gone"),
            "[0].current_node: no node 'gone' in mapping",
        ),
        (
            lambda d: d[0]["mapping"]["a-3"].update(parent="ghost"),
            "[0].mapping.a-3.parent: no node 'ghost' in mapping",
        ),
        (
            lambda d: d[0]["mapping"]["a-1"]["message"]["author"].update(role="critic"),
            "[0].mapping.a-1.message.author.role: unknown role 'critic'",
        ),
        (
            lambda d: d[0]["mapping"]["a-1"]["message"].update(
                content={"content_type": "hologram"}
            ),
            "[0].mapping.a-1.message.content.content_type: unknown content type 'hologram'",
        ),
    ],
)
def test_chatgpt_bad_export_names_the_path(tmp_path: Path, damage: Any, expected: str) -> None:
    doc = _chatgpt()
    damage(doc)
    path = write_json(tmp_path / "conversations.json", doc)
    text = error_of(path, select="Lisbon trip")
    assert text == f"{path}: {expected}" or text.startswith(f"{path}: {expected}")
    assert "\n" not in text


def test_chatgpt_skip_invalid_skips_one_message(tmp_path: Path) -> None:
    doc = _chatgpt()
    doc[0]["mapping"]["a-1"]["message"]["author"]["role"] = "critic"
    path = write_json(tmp_path / "conversations.json", doc)
    t = load(path, select="Lisbon trip", skip_invalid=True)
    assert t.skipped == 1 and "a-1" not in ids(t) and len(t.messages) == 10


def test_truncated_export_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    path.write_text(CHATGPT.read_text()[:5000])
    text = error_of(path)
    assert "invalid JSON" in text and "truncated?" in text and "\n" not in text


def test_export_zip_as_downloaded(tmp_path: Path) -> None:
    import zipfile

    path = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("chat.html", "<html></html>")
        archive.write(CHATGPT, "conversations.json")
    t = load(path, select="Lisbon trip")
    assert t.format == "chatgpt" and len(t.messages) == 11
    assert t.path == f"{path}/conversations.json"
    empty = tmp_path / "other.zip"
    with zipfile.ZipFile(empty, "w") as archive:
        archive.writestr("notes.txt", "hi")
    text = error_of(empty)
    assert "without conversations.json" in text and "notes.txt" in text


# --- Claude.ai export ---------------------------------------------------------------------


def test_claude_export_reads_current_branch() -> None:
    t = load(CLAUDE, select="Lisbon trip")
    assert t.format == "claude"
    assert ids(t) == [
        "c1-h1", "c1-a1", "c1-h2", "c1-a2", "c1-a2#2", "c1-a2#3", "c1-h3", "c1-a3",
    ]  # fmt: skip
    assert roles(t) == [
        "user", "assistant", "user", "assistant", "tool", "assistant", "user", "assistant",
    ]  # fmt: skip
    assert any("1 message(s) on other branches" in w for w in t.warnings)
    call = t.message("c1-a2")
    assert call.content == "Let me check." and call.tool_calls[0]["id"] == "toolu_01WsLis"
    assert t.message("c1-a2#2").tool_call_id == "toolu_01WsLis"
    assert "operations are normal" in t.message("c1-a2#2").content
    assert_tool_pairs(t)


def test_claude_export_attachments_are_text_and_thinking_is_not() -> None:
    t = load(CLAUDE, select="Lisbon trip")
    first = t.message("c1-h1")
    assert "[attachment trip-plan.txt]\nDay 1: Lisbon, hotel Alfama Patio." in first.content
    assert first.metadata["files"][0]["file_name"] == "passport.jpg"
    assert "extracted_content" not in first.metadata["attachments"][0]
    reply = t.message("c1-a1")
    assert reply.content == "Noted, Mia: no peanuts. You stay at Alfama Patio on day 1."
    assert reply.metadata["reasoning"][0]["type"] == "thinking"
    assert all(no_nulls(m.metadata) for m in t.messages)


def test_claude_export_all_and_listing() -> None:
    t = load(CLAUDE, select="all")
    assert len(t.sessions) == 2 and len(t.messages) == 10
    with pytest.raises(ChoiceNeeded, match="holds 2 conversations"):
        load(CLAUDE)


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (
            lambda d: d[0]["chat_messages"][3].update(parent_message_uuid="ghost"),
            "[0].chat_messages[3].parent_message_uuid: no message 'ghost' in chat_messages",
        ),
        (
            lambda d: d[0]["chat_messages"][6].update(sender="robot"),
            "[0].chat_messages[6].sender: unknown sender 'robot'",
        ),
        (
            lambda d: d[0]["chat_messages"][4]["content"].pop(1),
            "[0].chat_messages[4].content[1]: tool_result 'toolu_01WsLis' has no tool_use",
        ),
    ],
)
def test_claude_bad_export_names_the_path(tmp_path: Path, damage: Any, expected: str) -> None:
    doc = json.loads(CLAUDE.read_text())
    damage(doc)
    path = write_json(tmp_path / "conversations.json", doc)
    assert error_of(path, select="Lisbon trip").startswith(f"{path}: {expected}")


# --- LangChain / LangGraph ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["model_dump.json", "thread_state.json", "dumpd_state.json"])
def test_langgraph_dumps_are_read_alike(name: str) -> None:
    t = load(LANGGRAPH / name)
    assert t.format == "langchain"
    assert roles(t) == ["system", "user", "assistant", "user", "assistant", "tool", "assistant"]
    assert ids(t)[0] == "sys" and ids(t)[2] == "ai-1" and ids(t)[-1] == "ai-3"
    raw = json.loads((LANGGRAPH / "model_dump.json").read_text())
    assert ids(t)[1] == raw[1]["id"]  # the ids LangGraph gave the human messages
    assert t.message("ai-2").tool_calls[0]["id"] == "call_flights_1"
    assert t.messages[5].tool_call_id == "call_flights_1"
    assert t.messages[5].name == "search_flights"
    assert_tool_pairs(t)
    # the dump's nulls and empty fields are gone; a tool message keeps its status
    assert [m.metadata for m in t.messages if m.metadata] == [{"status": "success"}]


def test_langgraph_thread_state_names_the_session() -> None:
    assert load(LANGGRAPH / "thread_state.json").sessions == ("mia",)


def test_langgraph_state_values_not_misread_as_openai(tmp_path: Path) -> None:
    raw = json.loads((LANGGRAPH / "model_dump.json").read_text())
    path = write_json(tmp_path / "values.json", {"messages": raw})
    assert detect_format(read_source(path)) == "langchain"
    path = tmp_path / "msgs.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in raw))
    assert load(path).format == "langchain"


def test_langgraph_history_reads_the_newest_state(tmp_path: Path) -> None:
    state = json.loads((LANGGRAPH / "thread_state.json").read_text())
    older = copy.deepcopy(state)
    older["values"]["messages"] = older["values"]["messages"][:3]
    older["created_at"] = "2000-01-01T00:00:00+00:00"
    path = write_json(tmp_path / "history.json", [state, older])
    assert len(load(path).messages) == 7


def test_langchain_bad_message_names_its_path(tmp_path: Path) -> None:
    state = json.loads((LANGGRAPH / "thread_state.json").read_text())
    state["values"]["messages"][2]["type"] = "alien"
    path = write_json(tmp_path / "state.json", state)
    text = error_of(path, fmt="langchain")
    assert text.startswith(f"{path}: values.messages[2].type: unknown message type 'alien'")


# --- every reader: canonical round trip, damage, CLI ------------------------------------

SELECTED = [
    (RESPONSES, None),
    (AGENT_DB, "all"),
    (CHATGPT, "Lisbon trip"),
    (CLAUDE, "all"),
    (LANGGRAPH / "thread_state.json", None),
    (LANGGRAPH / "dumpd_state.json", None),
]


@pytest.mark.parametrize(("path", "select"), SELECTED, ids=lambda v: getattr(v, "name", v))
def test_round_trip_through_canonical(tmp_path: Path, path: Path, select: str | None) -> None:
    first = load(path, select=select)
    out = tmp_path / "out.jsonl"
    with out.open("w", encoding="utf-8") as fp:
        write_canonical(first, fp)
    again = load(out)
    assert again.format == "canonical"
    assert [
        (m.id, m.role, m.content, m.session, m.tool_calls, m.tool_call_id) for m in again.messages
    ] == [
        (m.id, m.role, m.content, m.session, m.tool_calls, m.tool_call_id) for m in first.messages
    ]


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for k, v in enumerate(doc):
            out += _paths(v, (*prefix, k))
    return out


JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.none(), max_size=2),
)


@pytest.mark.parametrize(
    ("path", "select"),
    [s for s in SELECTED if s[0] != AGENT_DB],
    ids=lambda v: getattr(v, "name", v),
)
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_damaged_exports_give_input_errors_only(
    tmp_path: Path, path: Path, select: str | None, data: st.DataObject
) -> None:
    """Whatever part of a valid file is replaced or deleted: a transcript or an InputError."""
    doc = json.loads(path.read_text())
    for _ in range(data.draw(st.integers(1, 3))):
        places = _paths(doc)[1:]
        if not places:
            break
        where = data.draw(st.sampled_from(places))
        parent = doc
        for step in where[:-1]:
            parent = parent[step]
        if data.draw(st.booleans()):
            del parent[where[-1]]
        else:
            parent[where[-1]] = data.draw(JSON_VALUES)
    damaged = write_json(tmp_path / "d.json", doc)
    for skip in (False, True):
        with contextlib.suppress(InputError):
            load(damaged, select=select, skip_invalid=skip)
        with contextlib.suppress(InputError):
            detect_format(read_source(damaged, skip))


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


def test_cli_diagnose_an_export_conversation() -> None:
    result = runner.invoke(
        app,
        ["diagnose", str(CLAUDE), "--conversation", "Lisbon trip", "--fact",
         "allergic to peanuts", "--at", "3", "--budget", "80", "--format", "json"],
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.stderr
    out = json.loads(result.stdout)
    diagnosis = out["diagnoses"][0]
    assert diagnosis["evidence"][0]["id"] == "c1-h1"
    assert (
        diagnosis["verdict"] == "short_term_dropped" and diagnosis["details"]["lost_at_turn"] == 2
    )


def test_cli_select_on_a_plain_transcript_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n')
    result = runner.invoke(app, ["convert", str(path), "--conversation", "x"])
    assert result.exit_code == 2 and "--session/--conversation choose" in result.stderr
    result = runner.invoke(app, ["convert", str(CHATGPT), "--session", "a", "--conversation", "b"])
    assert result.exit_code == 2 and "not both" in result.stderr


# --- null-filled fields of the OpenAI and Anthropic SDK dumps ------------------------------

SDK_DUMPS = FORMATS / "sdk_dumps"


@pytest.mark.parametrize(
    ("name", "fmt"), [("chat_completions.json", "openai"), ("anthropic_messages.json", "anthropic")]
)
def test_sdk_dump_nulls_are_not_copied(tmp_path: Path, name: str, fmt: str) -> None:
    path = SDK_DUMPS / name
    assert "null" in path.read_text()
    t = load(path)
    assert t.format == fmt
    assert roles(t) == ["system", "user", "assistant", "user", "assistant", "tool", "assistant"]
    assert_tool_pairs(t)
    out = tmp_path / "out.jsonl"
    with out.open("w", encoding="utf-8") as fp:
        write_canonical(t, fp)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(no_nulls(r) for r in records)
    for key in ("refusal", "audio", "function_call", "stop_sequence", "container"):
        assert all(key not in r for r in records)
    if fmt == "anthropic":  # what the provider reported stays
        assert records[2]["usage"] == {"input_tokens": 40, "output_tokens": 9}


def test_check_case_names_its_conversation(tmp_path: Path) -> None:
    spec = tmp_path / "checks.yaml"
    spec.write_text(
        "cases:\n"
        "  - name: the allergy is in the window\n"
        f"    transcript: {CLAUDE}\n"
        "    conversation: Lisbon trip\n"
        "    strategy: {name: sliding_window, budget: 4000}\n"
        "    expect:\n"
        "      - kept: allergic to peanuts\n"
        "  - name: the SDK session too\n"
        f"    transcript: {AGENT_DB}\n"
        "    conversation: mia-trip\n"
        "    expect:\n"
        "      - kept: allergic to peanuts\n"
    )
    result = runner.invoke(app, ["check", str(spec), "--format", "json"])
    assert result.exit_code == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["passed"] == 2
    spec.write_text(spec.read_text().replace("    conversation: mia-trip\n", ""))
    result = runner.invoke(app, ["check", str(spec), "--format", "json"])
    assert result.exit_code == 2 and "holds 2 sessions" in result.stderr


def test_inline_images_are_not_copied_whole(tmp_path: Path) -> None:
    blob = "data:image/png;base64," + "iVBORw0KGgo" * 2000
    items = [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is on this photo?"},
                {"type": "input_image", "image_url": blob, "detail": "auto"},
                {"type": "input_file", "filename": "a.pdf", "file_data": blob},
            ],
        }
    ]
    t = load(write_json(tmp_path / "items.json", items))
    blocks = t.messages[0].metadata["blocks"]
    assert blocks[0]["image_url"] == f"<inline data, {len(blob)} chars>"
    assert blocks[1]["file_data"].startswith("<inline data") and blocks[1]["filename"] == "a.pdf"


ADVANCED_DB = FORMATS / "agents_sqlite" / "advanced.db"


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


# --- property: tool calls stay paired whatever the shape of a Responses history -----------


@st.composite
def responses_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Turns of: a user message, rounds of parallel calls (outputs in any order, reasoning
    before or not), then a reply."""
    items: list[dict[str, Any]] = []
    n = 0
    for turn in range(draw(st.integers(1, 4))):
        items.append({"role": "user", "content": f"question {turn}"})
        for _ in range(draw(st.integers(0, 3))):
            if draw(st.booleans()):
                items.append({"type": "reasoning", "id": f"rs_{n}", "summary": []})
            calls = [f"call_{n}_{k}" for k in range(draw(st.integers(1, 3)))]
            n += 1
            items += [
                {"type": "function_call", "call_id": c, "name": "f", "arguments": "{}"}
                for c in calls
            ]
            for c in draw(st.permutations(calls)):
                items.append({"type": "function_call_output", "call_id": c, "output": c})
        items.append({"type": "message", "role": "assistant", "content": f"answer {turn}"})
    return items


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(history=responses_histories())
def test_responses_tool_calls_stay_paired(tmp_path: Path, history: list[dict[str, Any]]) -> None:
    t = load(write_json(tmp_path / "h.json", history), fmt="openai_responses")
    assert_tool_pairs(t)
    calls = [c for m in t.messages for c in m.tool_call_ids]
    outputs = [m.tool_call_id for m in t.messages if m.role == "tool"]
    assert (
        sorted(calls)
        == sorted(outputs)
        == sorted(i["call_id"] for i in history if i.get("type") == "function_call")
    )
    # parallel calls are one assistant message, answered before anything else is said
    for m in t.messages:
        if m.tool_calls:
            after = t.messages[m.index + 1 : m.index + 1 + len(m.tool_calls)]
            assert {a.tool_call_id for a in after} == set(m.tool_call_ids)
    assert not any("rs_" in m.content for m in t.messages)


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
