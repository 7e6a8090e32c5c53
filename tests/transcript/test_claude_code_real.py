"""Real Claude Code 2.1.39 sessions with a real compaction (fixtures/formats/claude_code/spotter,
copied byte for byte from marot/spotter, MIT; see SOURCES.md there): what a user's bug report
"it forgot after compaction" is, on the real lines (docs/coding-agents.md).

The files are stored xz-compressed; each test reads them decompressed into a temporary folder
that keeps Claude Code's layout (`<session>.jsonl` beside `<session>/subagents/*.jsonl`), after
checking the sha256 of the uncompressed bytes against SOURCES.md."""

from __future__ import annotations

import hashlib
import json
import lzma
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.transcript import claude_chain, load
from memdiag.transcript.formats.base import Selection
from memdiag.transcript.source import read_source
from tests.transcript.common import FORMATS_DIR
from tests.transcript.realdata import assert_tool_pairs

SPOTTER = FORMATS_DIR / "claude_code" / "spotter"
MANUAL = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"  # /compact (manual) at line 1481
AUTO = "258c7280-ae70-4798-800f-63464d01a85d"  # auto-compaction at line 1256
# sha256 of the uncompressed bytes, as SOURCES.md lists them
SHA256 = {
    f"{MANUAL}.jsonl": "099bffa9cbfee4eb43713a56bc9e53de46435729a1c185c14ad5cd2169f8700d",
    f"{MANUAL}/subagents/agent-acompact-946d2b.jsonl": (
        "7a22d2e81b3f51bbd105ee19d49b2c50b8bed80003fee1c5aaef29734fb60702"
    ),
    f"{MANUAL}/subagents/agent-aac57f5.jsonl": (
        "7ad8cd8708b877921eadefbd3bf21323cb000157029075459da40d9bdbb493b1"
    ),
    f"{AUTO}.jsonl": "a98f838510e41961a74c1d9a8f4bea2ec34e692fc885ecc1e1c2501dc65ed33e",
    f"{AUTO}/subagents/agent-acompact-fffbd0.jsonl": (
        "9a40f2fc4c61dce3c944559185fd05d9be78d46fef9014f723805b5d95909617"
    ),
    f"{AUTO}/subagents/agent-a881341.jsonl": (
        "f8ddd502622a6cec9a74d8621f1db00d85058ca2e31a9923657991ea702b2876"
    ),
}
runner = CliRunner()


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project folder: every file decompressed, its sha256 checked first."""
    out = tmp_path_factory.mktemp("project")
    for name, digest in SHA256.items():
        data = lzma.decompress((SPOTTER / f"{name}.xz").read_bytes())
        assert hashlib.sha256(data).hexdigest() == digest, name
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    return out


def test_the_fixtures_are_the_files_sources_md_lists() -> None:
    stored = {str(p.relative_to(SPOTTER))[: -len(".xz")] for p in SPOTTER.rglob("*.xz")}
    assert stored == set(SHA256)
    sources = (SPOTTER.parent / "SOURCES.md").read_text(encoding="utf-8")
    assert all(digest in sources for digest in SHA256.values())
    assert "MIT License" in (SPOTTER / "LICENSE").read_text(encoding="utf-8")


def invoke(*args: str) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def diagnosis(session: Path, fact: str, at: int) -> dict[str, Any]:
    out = invoke("diagnose", str(session), "--fact", fact, "--at", str(at), "--format", "json")
    (d,) = json.loads(out.stdout)["diagnoses"]
    return d


# --- the reader on the real lines ---------------------------------------------------------


def test_parallel_tool_results_beside_the_chain_are_read_and_nothing_is_called_rewound(
    sessions: Path,
) -> None:
    """Claude Code 2.1.39 writes each parallel tool call and each result as its own line, hook
    `progress` lines between them: the parent chain from the last line passes through only
    some. The others were in the request (the reply and its results), not a rewound branch."""
    for sid in (MANUAL, AUTO):
        t = load(sessions / f"{sid}.jsonl")
        assert not [w for w in t.warnings if "off the conversation" in w or "parent" in w]
        assert_tool_pairs(t)  # every tool_use answered, every result answering one
        mids = [m.metadata.get("message_id") for m in t.messages if m.role == "assistant"]
        assert len(mids) == len(set(mids))  # one API reply, one message
    t = load(sessions / f"{MANUAL}.jsonl")
    # line 18 answers the first of two parallel calls (lines 10 and 15); its parent is line 10
    first = next(m for m in t.messages if m.line == 18)
    assert first.role == "tool" and first.tool_call_id == "toolu_01LX8KZFM6Z7TecXCsyGYKow"
    # lines 1758, 1763, 1771: one reply of three calls, its first result (1766) in between
    reply = next(m for m in t.messages if m.line == 1757)
    assert [c["id"] for c in reply.tool_calls] == [
        "toolu_01MB4CJvxS7EhxSp8w4RSZRw",
        "toolu_01WKdPBcQVFrHm9Lca9LVB5h",
        "toolu_01KPdC2GhErhKnfqeiSsYdrn",
    ]


def test_turns_are_the_users_prompts_and_injected_lines_are_marked(sessions: Path) -> None:
    t = load(sessions / f"{MANUAL}.jsonl")
    assert [(m.turn, m.line, m.content) for m in t.messages if m.role == "user"] == [
        (1, 7, t.messages[0].content),
        (2, 1491, "continue implementation"),
    ]
    assert t.messages[0].content.startswith("Work on bead spotter-4te.")
    auto = load(sessions / f"{AUTO}.jsonl")
    users = [m for m in auto.messages if m.role == "user"]
    assert [m.metadata.get("injected") for m in users] == [
        None,
        "interruption",
        "task-notification",
        "task-notification",
        None,
    ]
    assert [users[0].content, users[-1].content] == ["Implement spotter-gqc", "did you push?"]
    # the two prompts typed are the two turns; the interruption marker and the two task
    # notifications are messages of the turn they arrive in (all of turn 1 here)
    assert [auto.messages[x.user_index].content for x in auto.turns] == [
        "Implement spotter-gqc",
        "did you push?",
    ]
    assert [(m.line, m.turn) for m in users if m.metadata.get("injected")] == [
        (495, 1),
        (496, 1),
        (1847, 1),
    ]


def test_at_a_turn_is_the_users_typed_prompt(sessions: Path) -> None:
    """`--at 2` is the second prompt typed ("did you push?"), not a task notification; there is
    no turn 3 (the session had 5 "turns" when notifications opened them)."""
    d = diagnosis(sessions / f"{AUTO}.jsonl", "did you push", 2)
    assert d["verdict"] == "in_context"
    assert d["evidence"][0]["id"] == next(
        m.id for m in load(sessions / f"{AUTO}.jsonl").messages if m.line == 1858
    )
    out = runner.invoke(
        app, ["diagnose", str(sessions / f"{AUTO}.jsonl"), "--fact", "x", "--at", "3"]
    )
    assert out.exit_code == 2 and "--at 3: the transcript has turns 1..2" in out.output


def test_convert_keeps_the_turns_and_what_was_sent(sessions: Path, tmp_path: Path) -> None:
    """The canonical file keeps `injected` on its messages and the memories on its windows: the
    same turns, the same recount."""
    from memdiag.strategies.observed import call_tokens
    from memdiag.tokens import TokenCounter

    counter = TokenCounter("o200k_base")
    for sid in (AUTO, MANUAL):
        out = tmp_path / f"{sid}.canonical.jsonl"
        invoke("convert", str(sessions / f"{sid}.jsonl"), "-o", str(out))
        a, b = load(sessions / f"{sid}.jsonl"), load(out)
        assert [(m.id, m.turn) for m in a.messages] == [(m.id, m.turn) for m in b.messages]
        assert [x.user_index for x in a.turns] == [x.user_index for x in b.turns]
        assert [c.recounted for c in call_tokens(a, counter)] == [
            c.recounted for c in call_tokens(b, counter)
        ]


def test_the_real_compactions_line_time_trigger_sizes_and_summarizer(sessions: Path) -> None:
    out = invoke("replay", str(sessions / f"{MANUAL}.jsonl"), "--format", "json")
    (c,) = json.loads(out.stdout)["compactions"]
    assert {k: c[k] for k in ("line", "ts", "trigger", "tokens_before", "after_turn")} == {
        "line": 1481,
        "ts": "2026-02-12T14:48:36.922Z",
        "trigger": "manual",
        "tokens_before": 142431,
        "after_turn": 1,
    }
    assert c["tokens_after_source"] == "recounted"  # 2.1.39 writes no postTokens
    assert c["instructions"] == "and continue with the reamining tasks"  # /compact's arguments
    # the summarizer's own call: its agent file, its request's size as the provider reported it
    assert c["summarizer"] == {"agent": "agent-acompact-946d2b", "prompt_tokens": 139534}
    assert c["summary"].startswith("This session is being continued from a previous")
    # the user's one prompt before it: Claude Code's summary quotes every user message
    assert [k["text"] for k in c["kept"]] == [
        "Run bd show spotter-4te to see the issue details and bd ready to find available subtasks."
    ]
    assert c["dropped"] == []
    out = invoke("replay", str(sessions / f"{AUTO}.jsonl"), "--format", "json")
    (a,) = json.loads(out.stdout)["compactions"]
    assert (a["line"], a["trigger"], a["tokens_before"], a["summarizer"]["agent"]) == (
        1256,
        "auto",
        167094,
        "agent-acompact-fffbd0",
    )
    assert "instructions" not in a


def test_the_summarizer_is_listed_as_such_and_read_as_one_call(sessions: Path) -> None:
    main = sessions / f"{MANUAL}.jsonl"
    t = load(main)
    assert any(
        "agent-acompact-946d2b (2 lines, a compaction's summarizer)" in w for w in t.warnings
    )
    s = load(main, selection=Selection(agent="acompact-946d2b"))
    # its one request: the summarization prompt (its parent is the main conversation's last
    # line before the boundary: where it forked, not a missing line) and the summary it wrote
    assert [m.role for m in s.messages] == ["user", "assistant"]
    assert not s.warnings[1:]
    assert s.messages[0].content.startswith("Your task is to create a detailed summary")
    assert s.windows[0].prompt_tokens == 139534
    by_agent = claude_chain.agents(read_source(main))
    assert sorted(by_agent) == ["agent-aac57f5", "agent-acompact-946d2b", "main"]
    # the auto one: two hook reminders hang off the main conversation before the prompt
    auto = load(sessions / f"{AUTO}.jsonl", selection=Selection(agent="acompact-fffbd0"))
    assert [m.role for m in auto.messages] == ["user", "assistant"]
    assert not [w for w in auto.warnings if "parent" in w or "off the" in w]


def test_every_agent_and_the_html_report_read(sessions: Path, tmp_path: Path) -> None:
    main = str(sessions / f"{MANUAL}.jsonl")
    out = invoke("replay", main, "--agent", "all", "--strategy", "all", "--format", "json")
    doc = json.loads(out.stdout)
    assert len(doc["compactions"]) == 1
    html = tmp_path / "r.html"
    invoke("replay", main, "--strategy", "all", "--html", str(html))
    text = html.read_text(encoding="utf-8")
    assert "1481" in text and "manual" in text


# --- the bug report: what it forgot after /compact -----------------------------------------


def test_a_constraint_the_summary_dropped_is_summarized_away_naming_the_compaction(
    sessions: Path,
) -> None:
    """The user's epic (read with `bd show` at line 18, before the compaction) says "No schema
    migrations and no API route changes."; the real summary never says it."""
    d = diagnosis(sessions / f"{MANUAL}.jsonl", "No schema migrations and no API route changes", 2)
    assert d["verdict"] == "short_term_summarized_away"
    assert d["evidence"][0]["id"] == "1025e09f-7f95-43f5-a375-e3b28298d313"
    details = d["details"]
    assert details["mechanism"] == "summarized_away"
    assert (details["lost_at_turn"], details["observed"]["last_seen_turn"]) == (2, 1)
    comp = details["compaction"]
    assert (comp["line"], comp["trigger"], comp["tokens_before"]) == (1481, "manual", 142431)
    assert (
        "the compaction at line 1481 (2026-02-12T14:48:36.922Z, manual, 142431 tokens before"
        in (d["fixes"][0])
    )
    assert "'- No schema migrations and no API route changes.'" in d["fixes"][1]


def test_what_the_summary_carried_is_in_context_quoting_it(sessions: Path) -> None:
    d = diagnosis(sessions / f"{MANUAL}.jsonl", "Start with the first ready task", 2)
    assert d["verdict"] == "in_context"
    assert d["details"]["kept_by"] == "summary"
    assert d["details"]["compaction"]["line"] == 1481
    assert (
        "'**Initial Request**: User asked to work on bead spotter-4te, starting with the first "
        "ready task.'" in d["fixes"][0]
    )


def test_what_was_said_after_the_compaction_is_in_context_verbatim(sessions: Path) -> None:
    d = diagnosis(sessions / f"{MANUAL}.jsonl", "continue implementation", 2)
    assert d["verdict"] == "in_context"
    assert d["details"]["kept_by"] == "verbatim"
    assert d["evidence"][0]["id"] == "212245f4-0953-4348-a407-3715867dee85"


def test_the_console_names_the_instructions_and_the_summarizer(sessions: Path) -> None:
    out = invoke("replay", str(sessions / f"{MANUAL}.jsonl"))
    flat = " ".join(out.stdout.split())
    assert "trigger manual · 142431 tokens before → 5934 after (recounted)" in flat
    assert "asked to: and continue with the reamining tasks" in flat
    assert "summarized by agent-acompact-946d2b (its request: 139534 tokens reported)" in flat


def _line(
    n: int, kind: str, uuid: str, parent: str | None, content: list[Any], mid: str = ""
) -> Any:
    msg: dict[str, Any] = {"role": kind, "content": content}
    if mid:
        msg["id"] = mid
    obj = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s", "message": msg}
    return claude_chain.Line(n, obj)


def test_only_a_reply_of_the_chain_and_results_of_its_calls_are_taken_back() -> None:
    """The shape of the real files, reduced: a reply of two parallel calls (a1, a2) whose first
    result (r1) hangs off a1; a rewound attempt (b1 and its result) and a second result for a
    call already answered stay out."""
    use = [{"type": "tool_use", "id": "t1"}]
    lines = [
        _line(1, "user", "u1", None, [{"type": "text", "text": "go"}]),
        _line(2, "assistant", "b1", "u1", [{"type": "tool_use", "id": "t9"}], "m0"),
        _line(3, "user", "rb", "b1", [{"type": "tool_result", "tool_use_id": "t9"}]),
        _line(4, "assistant", "a1", "u1", use, "m1"),
        _line(5, "assistant", "a2", "a1", [{"type": "tool_use", "id": "t2"}], "m1"),
        _line(6, "user", "r1", "a1", [{"type": "tool_result", "tool_use_id": "t1"}]),
        _line(7, "user", "r2", "a2", [{"type": "tool_result", "tool_use_id": "t2"}]),
        _line(8, "user", "r1bis", "a1", [{"type": "tool_result", "tool_use_id": "t2"}]),
        _line(9, "assistant", "a3", "r2", [{"type": "text", "text": "done"}], "m2"),
    ]
    path, off, missing = claude_chain.chain(lines)
    assert [ln.uuid for ln in path] == ["u1", "a1", "a2", "r1", "r2", "a3"]
    assert (off, missing) == (3, 0)


def test_a_call_id_that_is_a_list_or_an_object_names_no_call() -> None:
    """A damaged line whose `tool_use_id` (or `id`) is a list or an object is not a result of
    the chain (it raised TypeError: unhashable, found by the long fuzz profile on the real
    1.0.89 session); the lines of the chain are read as before."""
    for bad in (["t2"], {"id": "t2"}):
        lines = [
            _line(1, "user", "u1", None, [{"type": "text", "text": "go"}]),
            _line(2, "assistant", "a1", "u1", [{"type": "tool_use", "id": "t1"}], "m1"),
            _line(3, "assistant", "a2", "a1", [{"type": "tool_use", "id": bad}], "m1"),
            _line(4, "user", "r1", "a1", [{"type": "tool_result", "tool_use_id": "t1"}]),
            _line(5, "user", "r2", "a2", [{"type": "tool_result", "tool_use_id": bad}]),
            _line(6, "assistant", "a3", "r1", [{"type": "text", "text": "done"}], "m2"),
        ]
        path, _, _ = claude_chain.chain(lines)
        assert [ln.uuid for ln in path] == ["u1", "a1", "a2", "r1", "a3"], bad


def test_what_claude_code_sends_beside_the_conversation_is_counted(sessions: Path) -> None:
    """The skill body Claude Code loaded at line 102 (an `isMeta` line) and the /compact command
    lines after the summary (its caveat, the command, its output with the PreCompact hook's
    text) are sent to the model: the `memories` section of the requests after them, never a
    message, a turn or a statement of the user's."""
    t = load(sessions / f"{MANUAL}.jsonl")
    by_line = {w.line: w for w in t.windows}
    skill = [e.content for e in by_line[1473].extra if e.section == "memories"]
    assert len(skill) == 1 and skill[0].startswith("Base directory for this skill:")
    after = [e.content[:40] for e in by_line[1492].extra if e.section == "memories"]
    assert [a.split(">")[0] for a in after] == [
        "<local-command-caveat",
        "<command-name",
        "<local-command-stdout",
    ]  # the compaction replaced the skill body
    assert not any(m.content.startswith("Base directory for this skill") for m in t.messages)
    out = invoke("replay", str(sessions / f"{MANUAL}.jsonl"), "--format", "json")
    doc = json.loads(out.stdout)
    # the user's statements the compaction kept or dropped: only what was typed
    (c,) = doc["compactions"]
    said = json.dumps([c["kept"], c["dropped"], [s["facts"] for s in doc["strategies"].values()]])
    assert "Run bd show spotter-4te" in said
    assert "Base directory" not in said and "Caveat" not in said and "PreCompact" not in said
    # the recount against the provider's usage, request by request (o200k_base): the gap left
    # is the system prompt and tool definitions (about 26 thousand tokens on the first request)
    # and the tokenizer (docs/coding-agents.md)
    from memdiag.strategies.observed import call_tokens
    from memdiag.tokens import TokenCounter

    calls = {c.before: c for c in call_tokens(t, TokenCounter("o200k_base"))}
    got = [(w.line, calls[w.before_id].recounted, w.prompt_tokens) for w in t.windows]
    assert got == [
        (8, 45, 26010),
        (1473, 69640, 141787),
        (1492, 5934, 45263),
        (2380, 47560, 102168),
    ]
    auto = load(sessions / f"{AUTO}.jsonl")
    calls = {c.before: c for c in call_tokens(auto, TokenCounter("o200k_base"))}
    got = [(w.line, calls[w.before_id].recounted, w.prompt_tokens) for w in auto.windows]
    # the last request before the auto-compaction (mid-turn) is kept too
    assert got == [
        (6, 12, 25882),
        (1244, 109598, 166759),
        (1261, 3464, 33960),
        (1852, 33813, 77273),
        (1859, 33872, 77334),
    ]
