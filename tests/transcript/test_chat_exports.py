"""ChatGPT and Claude.ai data exports: samples of the documented structure (no library writes
them), with branches, hidden nodes, attachments and tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memdiag.cli import app
from memdiag.transcript import load
from memdiag.transcript.source import ChoiceNeeded
from tests.transcript.realdata import (
    AGENT_DB,
    CHATGPT,
    CLAUDE,
    assert_tool_pairs,
    error_of,
    ids,
    no_nulls,
    roles,
    runner,
    write_json,
)


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


def test_a_long_listing_is_cut(tmp_path: Path) -> None:
    one = _chatgpt()[1]
    doc = [{**one, "id": f"c-{k}", "title": f"chat {k}"} for k in range(60)]
    with pytest.raises(ChoiceNeeded) as info:
        load(write_json(tmp_path / "conversations.json", doc))
    lines = str(info.value).splitlines()
    assert len(info.value.choices) == 60 and len(lines) == 1 + 50 + 1
    assert lines[-1] == "  ... and 10 more" and "holds 60 conversations" in lines[0]
