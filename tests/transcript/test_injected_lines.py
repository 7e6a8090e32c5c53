"""Turns are the human's (docs/reference.md#concepts): a user message the agent wrote in
(metadata `injected`) never opens a turn, on any stream `build` reads; Claude Code's `isMeta`
and command lines are the requests' `memories` section, never a message (docs/coding-agents.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memdiag.transcript import load
from memdiag.transcript.model import RawMessage, RawSession, build, opens_turn
from tests.transcript.common import FORMATS_DIR

MAIN = FORMATS_DIR / "claude_code" / "3a7770b4-aba3-46dd-b677-8fc2d71d4e06.jsonl"

# (role, injected) of each message, in sessions one after another
_message = st.tuples(st.sampled_from(["system", "user", "assistant", "tool"]), st.booleans())


@given(st.lists(st.lists(_message, max_size=15), min_size=1, max_size=3))
@settings(max_examples=150, deadline=None)
def test_injected_lines_never_open_a_turn(sessions: list[list[tuple[str, bool]]]) -> None:
    items: list[Any] = []
    for s, spec in enumerate(sessions):
        items.append(RawSession(f"s{s}"))
        for k, (role, injected) in enumerate(spec):
            meta = {"injected": "task-notification"} if injected else {}
            items.append(RawMessage(role, f"text {k}", id=f"s{s}m{k}", metadata=meta))
    t = build(items, path="x", format="canonical")
    humans = [m for m in t.messages if m.role == "user" and not m.metadata.get("injected")]
    # one turn per message of the human, each opened by one
    assert [t.messages[x.user_index] for x in t.turns] == humans
    assert all(opens_turn(t.messages[x.user_index]) for x in t.turns)
    # every other message (an injected user line too) is part of the turn of the human's last
    # message before it in its session (0: none yet), inside that turn's span
    current: dict[str, int] = {}
    for m in t.messages:
        if opens_turn(m):
            current[m.session] = m.turn
            continue
        assert m.turn == current.get(m.session, 0)
        if m.turn:
            x = t.turns[m.turn - 1]
            assert x.user_index < m.index < x.end


def _line(base: dict[str, Any], uuid: str, parent: str, content: Any, **more: Any) -> Any:
    return {
        **base,
        "uuid": uuid,
        "parentUuid": parent,
        "message": {"role": "user", "content": content},
        **more,
    }


def test_a_task_notification_and_an_interruption_stay_in_the_turn(tmp_path: Path) -> None:
    raw = [json.loads(x) for x in MAIN.read_text(encoding="utf-8").splitlines()]
    first, last = raw[0], raw[-1]
    extra = [
        _line(
            first,
            "int-1",
            last["uuid"],
            [{"type": "text", "text": "[Request interrupted by user]"}],
        ),
        _line(first, "note-1", "int-1", "<task-notification>\n<task-id>b1</task-id>\n"),
    ]
    reply = {**raw[1], "uuid": "reply-2", "parentUuid": "note-1"}
    reply["message"] = {**raw[1]["message"], "id": "msg_after_notification"}
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in (*raw, *extra, reply)) + "\n")
    before, t = load(MAIN), load(p)
    assert len(t.turns) == len(before.turns)
    added = [t.message("int-1"), t.message("note-1")]
    assert [m.metadata["injected"] for m in added] == ["interruption", "task-notification"]
    assert {m.turn for m in added} == {t.turns[-1].number}
    # in the window of the request they preceded, as messages
    w = t.windows[-1]
    assert w.before_id == "reply-2" and {"int-1", "note-1"} <= set(w.ids)


def test_meta_and_command_lines_are_the_next_requests_memories(tmp_path: Path) -> None:
    raw = [json.loads(x) for x in MAIN.read_text(encoding="utf-8").splitlines()]
    first = raw[0]
    skill = "Base directory for this skill: /s\n\n# Always run the linter first"
    lines = [
        _line(first, "meta-1", None, [{"type": "text", "text": skill}], isMeta=True),  # type: ignore[arg-type]
        _line(first, "cmd-1", "meta-1", "<command-name>/model</command-name>"),
        {**first, "parentUuid": "cmd-1"},
        *raw[1:],
    ]
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    t = load(p)
    assert [m.id for m in t.messages if m.role == "user"] == [first["uuid"]]
    assert not any(skill in m.content for m in t.messages)
    assert len(t.turns) == len(load(MAIN).turns)
    for w in t.windows:  # every request after them holds both, as memories
        assert [e.content for e in w.extra if e.section == "memories"] == [
            skill,
            "<command-name>/model</command-name>",
        ]
