"""Coding-agent sessions (docs/coding-agents.md): Claude Code sessions and Codex rollouts as the
programs wrote them (fixtures/formats/claude_code, fixtures/formats/codex: real files that public
repositories commit, see their SOURCES.md), and sessions derived from them to forget a rule at a
compaction (make_forgetting.py changes message text only)."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.config import Settings
from memdiag.diagnosis import Failure, diagnose
from memdiag.errors import InputError, UsageError
from memdiag.memory_files import load_memory_files
from memdiag.transcript import claude_chain, load
from memdiag.transcript.formats.base import Selection
from tests.transcript.common import FORMATS_DIR

CC = FORMATS_DIR / "claude_code"
CODEX = FORMATS_DIR / "codex"
MAIN = CC / "3a7770b4-aba3-46dd-b677-8fc2d71d4e06.jsonl"  # Claude Code 1.0.89, main chain
AGENT = CC / "agent-a0294d5.jsonl"  # Claude Code 2.0.76, a subagent
COMPACTED = CC / "dag_compact_after_rewind.jsonl"  # a rewind, then a compaction
FORGETS = CC / "forgets_rule.jsonl"  # derived from COMPACTED by make_forgetting.py
CLAUDE_MD = CC / "CLAUDE.md"
CODEX_REAL = CODEX / "sample_codex_session.jsonl"  # Codex CLI 0.77.0
CODEX_TOOLS = CODEX / "rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl"
runner = CliRunner()


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


# --- Claude Code: the real files -----------------------------------------------------------


def test_a_real_main_session_joins_a_split_reply_and_pairs_its_tool_result() -> None:
    raw = lines(MAIN)
    t = load(MAIN)
    assert t.format == "claude_code"
    # the two assistant lines share message.id: one message, its text and its tool call
    assistant = [r for r in raw if r["type"] == "assistant"]
    assert len({r["message"]["id"] for r in assistant}) == 1 and len(assistant) == 2
    roles = [m.role for m in t.messages]
    assert roles == ["user", "assistant", "tool"]  # the hook's system line is not a message
    reply = t.messages[1]
    assert reply.content == assistant[0]["message"]["content"][0]["text"]
    use = assistant[1]["message"]["content"][0]
    assert [c["id"] for c in reply.tool_calls] == [use["id"]]
    assert json.loads(reply.tool_calls[0]["function"]["arguments"]) == use["input"]
    assert t.messages[2].tool_call_id == use["id"]
    # the request that produced the reply: the provider's prompt size from its usage
    usage = assistant[-1]["message"]["usage"]
    reported = sum(
        usage[k] for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    (w,) = t.windows
    assert w.before_id == reply.id and w.ids == (t.messages[0].id,)
    assert w.prompt_tokens == reported
    assert t.sessions == (raw[0]["sessionId"],)


def test_a_real_subagent_file_is_that_agent_and_four_lines_are_one_reply() -> None:
    raw = lines(AGENT)
    assert all(r["isSidechain"] for r in raw)
    t = load(AGENT)
    assistants = [m for m in t.messages if m.role == "assistant"]
    tools = [m for m in t.messages if m.role == "tool"]
    split = [r for r in raw if r["type"] == "assistant"]
    assert len(split) == 4 and len(assistants) == 1  # one API reply over four lines
    uses = [b["id"] for r in split for b in r["message"]["content"] if b["type"] == "tool_use"]
    assert [c["id"] for c in assistants[0].tool_calls] == uses
    # the results arrive out of call order; each answers one of the calls
    assert sorted(m.tool_call_id or "" for m in tools) == sorted(uses)
    assert [m.tool_call_id for m in tools] != uses
    with pytest.raises(InputError, match=r"--agent nope: no such agent; this session has: agent-"):
        load(AGENT, selection=Selection(agent="nope"))


def _project(tmp_path: Path) -> Path:
    """A project directory laid out as Claude Code 2.1 does: a session and its subagents."""
    project = tmp_path / "-Users-me-proj"
    sub = project / MAIN.stem / "subagents"
    sub.mkdir(parents=True)
    shutil.copy(MAIN, project / MAIN.name)
    shutil.copy(AGENT, sub / AGENT.name)
    return project


def test_subagents_are_listed_and_read_with_agent(tmp_path: Path) -> None:
    project = _project(tmp_path)
    main = load(project / MAIN.name)
    assert [m.role for m in main.messages] == ["user", "assistant", "tool"]
    assert any("agent-a0294d5" in w and "--agent" in w for w in main.warnings)
    sub = load(project / MAIN.name, selection=Selection(agent="a0294d5"))
    assert sub.messages[0].content == lines(AGENT)[0]["message"]["content"]
    # the directory lists its sessions, and --session reads one
    with pytest.raises(InputError, match="holds 2 Claude Code sessions"):
        load(_two_sessions(tmp_path))
    picked = load(_two_sessions(tmp_path), select=MAIN.stem)
    assert picked.sessions == main.sessions


def _two_sessions(tmp_path: Path) -> Path:
    d = tmp_path / "two"
    if not d.exists():
        d.mkdir()
        shutil.copy(MAIN, d / MAIN.name)
        shutil.copy(COMPACTED, d / COMPACTED.name)
    return d


def test_a_compaction_is_a_recorded_summary_and_a_rewound_branch_is_left_out() -> None:
    raw = lines(COMPACTED)
    t = load(COMPACTED)
    by_uuid = {r["uuid"]: r for r in raw}
    boundary = next(r for r in raw if r.get("subtype") == "compact_boundary")
    summary_line = next(r for r in raw if r.get("isCompactSummary"))
    # b1u/b1a: an attempt the user rewound (b2u has the same parent): not the conversation
    rewound = [u for u, r in by_uuid.items() if r.get("parentUuid") == "a1" and u != "b2u"]
    assert rewound and not {m.id for m in t.messages} & {*rewound, "b1a"}
    assert any("off the conversation's chain" in w for w in t.warnings)
    (ev,) = t.summaries
    assert ev.content == summary_line["message"]["content"][0]["text"]
    assert t.messages[ev.replaces_through].id == boundary["logicalParentUuid"]
    assert ev.meta["trigger"] == boundary["compactMetadata"]["trigger"]
    assert ev.meta["pre_tokens"] == boundary["compactMetadata"]["preTokens"]
    assert ev.meta["line"] == raw.index(boundary) + 1
    # the request after it held the summary (covering all before) and what came after
    after = [w for w in t.windows if w.before > ev.replaces_through]
    assert after and all(w.extra[0].section == "summary" for w in after)
    assert set(after[0].extra[0].covers) == {m.id for m in t.messages[: ev.replaces_through + 1]}
    assert "cs" not in {m.id for m in t.messages}  # the summary is not the user's words


def test_claude_ai_exports_are_still_read_as_claude() -> None:
    t = load(FORMATS_DIR / "claude" / "conversations.json", select="all")
    assert t.format == "claude"
    # a session is not an export: one error saying what it is, not 0-message conversations
    with pytest.raises(InputError, match=r"a Claude Code session .* --from claude_code"):
        load(MAIN, "claude")


def test_from_claude_code_with_a_hyphen(tmp_path: Path) -> None:
    assert load(MAIN, "claude-code").format == "claude_code"


def test_meta_lines_and_command_wrappers_are_not_the_users_words(tmp_path: Path) -> None:
    raw = lines(MAIN)
    first = raw[0]
    meta = {**first, "uuid": "meta-1", "isMeta": True}
    meta["message"] = {"role": "user", "content": "Caveat: The messages below were generated"}
    wrapper = {**first, "uuid": "cmd-1", "parentUuid": "meta-1"}
    wrapper["message"] = {
        "role": "user",
        "content": "<command-name>/model</command-name>\n<command-args>opus</command-args>",
    }
    real = {**first, "parentUuid": "cmd-1"}
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in (meta, wrapper, real, *raw[1:])) + "\n")
    t = load(p)
    assert [m.id for m in t.messages if m.role == "user"] == [first["uuid"]]


def test_a_bad_line_is_one_error_naming_its_line(tmp_path: Path) -> None:
    raw = lines(MAIN)
    raw[1] = {**raw[1], "message": "not an object"}
    p = tmp_path / "bad.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in raw) + "\n")
    with pytest.raises(InputError, match=r"bad.jsonl:2: message: missing"):
        load(p)
    skipped = load(p, skip_invalid=True)
    assert skipped.skipped == 1
    r = invoke("replay", str(p))
    assert r.exit_code == 2 and "Traceback" not in r.output


@given(st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=40))
@settings(max_examples=60, deadline=None)
def test_the_chain_runs_from_a_root_to_the_last_line(parents: list[int]) -> None:
    """Each line's parent is an earlier line (or none): the chain ends at the last line, each
    step is a real parent link, and it starts at a line without a parent."""
    recs = []
    for k, p in enumerate(parents):
        parent = None if k == 0 or p % 4 == 0 else f"u{p % k}"
        recs.append(
            claude_chain.Line(k + 1, {"type": "user", "uuid": f"u{k}", "parentUuid": parent})
        )
    path, off, missing = claude_chain.chain(recs)
    assert path[-1].uuid == f"u{len(recs) - 1}"
    assert path[0].parent is None and missing == 0
    for a, b in itertools.pairwise(path):
        assert b.parent == a.uuid
    assert off == len(recs) - len(path)


def test_a_session_with_lines_removed_is_followed_in_file_order(tmp_path: Path) -> None:
    """A sanitized copy strips lines (attachments, snapshots) that others name as parent: the
    real session with its hook line removed still reads whole, and says so."""
    raw = lines(MAIN)
    hook = next(k for k, r in enumerate(raw) if r["type"] == "system")
    rows = [r for k, r in enumerate(raw) if k != hook]
    rows.append({**raw[0], "uuid": "after-hook", "parentUuid": raw[hook]["uuid"]})
    p = tmp_path / "stripped.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    t = load(p)
    assert [m.id for m in t.messages][:3] == [m.id for m in load(MAIN).messages]
    assert t.messages[-1].id == "after-hook"
    assert any("not in the file" in w for w in t.warnings)


# --- forgetting a rule at the compaction ----------------------------------------------------


def test_the_derived_session_is_rebuilt_identically_and_changes_text_only(tmp_path: Path) -> None:
    script = CC / "make_forgetting.py"
    copy = tmp_path / "cc"
    shutil.copytree(CC, copy)
    (copy / FORGETS.name).unlink()
    subprocess.run([sys.executable, str(copy / script.name)], check=True, capture_output=True)
    assert (copy / FORGETS.name).read_bytes() == FORGETS.read_bytes()
    for a, b in zip(lines(COMPACTED), lines(FORGETS), strict=True):
        assert list(a) == list(b)
        assert {k: v for k, v in a.items() if k != "message"} == {
            k: v for k, v in b.items() if k != "message"
        }


def _diagnose(fact: str, **kw: Any) -> Any:
    t = load(FORGETS)
    (d,) = diagnose(t, Settings(), [Failure(fact, len(t.turns))], cache=False, **kw)
    return d.to_dict()


def test_a_rule_the_summary_dropped_is_summarized_away_naming_the_compaction() -> None:
    raw = lines(FORGETS)
    boundary = next(r for r in raw if r.get("subtype") == "compact_boundary")
    d = _diagnose("never add Co-Authored-By")
    assert d["verdict"] == "short_term_summarized_away"
    assert d["details"]["mechanism"] == "summarized_away"
    comp = d["details"]["compaction"]
    assert comp["line"] == raw.index(boundary) + 1
    assert comp["trigger"] == boundary["compactMetadata"]["trigger"]
    assert comp["tokens_before"] == boundary["compactMetadata"]["preTokens"]
    assert comp["ts"] == boundary["timestamp"]
    assert comp["tokens_after"] > 0 and comp["tokens_after_source"] == "recounted"
    t = load(FORGETS)
    after = next(m for m in t.messages if m.id == "p1u")
    assert d["details"]["lost_at_turn"] == after.turn  # the first turn after the compaction
    text = " ".join(d["fixes"])
    assert f"line {comp['line']}" in text and "Never add Co-Authored-By trailers" in text
    assert "should have carried it" in text and "Put it in CLAUDE.md" in text


def test_a_rule_the_summary_carried_is_in_context_with_the_summary_as_evidence() -> None:
    d = _diagnose("always run make test before committing")
    assert d["verdict"] == "in_context"
    assert d["details"]["kept_by"] == "summary"
    assert d["details"]["compaction"]["line"] == 9
    assert "in the summary of the compaction at line 9" in d["fixes"][0]


def test_a_rule_stated_only_on_a_rewound_branch_was_never_stated() -> None:
    assert _diagnose("use the staging database")["verdict"] == "never_stated"


def test_a_rule_in_claude_md_is_delivered_by_the_instruction_file() -> None:
    files = load_memory_files([CLAUDE_MD])
    d = _diagnose("never add Co-Authored-By", memory_files=files)
    assert d["verdict"] == "in_context" and d["layer"] == "none"
    assert d["details"]["kept_by"] == "memory_file"
    n = next(
        k for k, x in enumerate(CLAUDE_MD.read_text().splitlines(), 1) if "Co-Authored-By" in x
    )
    assert d["details"]["memory_file"]["line"] == n


def test_memory_file_rules_are_read_with_the_extractor() -> None:
    (f,) = load_memory_files([CLAUDE_MD])
    kinds = {r.kind for r in f.rules}
    assert {"prohibition", "always", "command"} <= kinds
    assert any("Co-Authored-By" in r.text and r.kind == "prohibition" for r in f.rules)
    with pytest.raises(InputError, match=r"nope\.md"):
        load_memory_files([CC / "nope.md"])


def test_replay_lists_what_the_compaction_kept_and_dropped() -> None:
    r = invoke("replay", str(FORGETS), "--format", "json")
    assert r.exit_code == 0, r.output
    (comp,) = json.loads(r.stdout)["compactions"]
    assert comp["line"] == 9 and comp["tokens_before"] == 150000
    assert [s["text"] for s in comp["kept"]] == ["Always run make test before you commit."]
    (dropped,) = comp["dropped"]
    assert dropped["text"] == "Never add Co-Authored-By trailers to commit messages."
    assert set(dropped["kept_by"]) == {"sliding_window", "summary", "scratchpad"}
    assert dropped["kept_by"]["scratchpad"] is True  # a pinned prohibition survives
    table = invoke("replay", str(FORGETS))
    assert "compaction 1" in table.stdout and "dropped" in table.stdout
    assert "its summary" in table.stdout


def test_replay_json_stream_equals_the_document_with_compactions() -> None:
    from memdiag.render.jsonout import dumps, replay_json, replay_json_chunks
    from memdiag.replay import run

    report = run(load(FORGETS), Settings())
    report.memory_files = load_memory_files([CLAUDE_MD])
    extra = report.extra()
    assert list(extra) == ["memory_files", "compactions"]
    doc = dumps(replay_json(FORGETS.name, report.encoding, report.budget, report.results, extra))
    chunks = replay_json_chunks(FORGETS.name, report.encoding, report.budget, report.results, extra)
    assert "".join(chunks) == doc
    assert json.loads(doc)["compactions"] == extra["compactions"]


def test_memory_files_take_room_in_every_window() -> None:
    plain = json.loads(invoke("replay", str(FORGETS), "--format", "json").stdout)
    with_md = json.loads(
        invoke("replay", str(FORGETS), "--memory-file", str(CLAUDE_MD), "--format", "json").stdout
    )
    a = plain["strategies"]["sliding_window"]["turns"]
    b = with_md["strategies"]["sliding_window"]["turns"]
    extra = {y["tokens"]["memories"] - x["tokens"]["memories"] for x, y in zip(a, b, strict=True)}
    (grown,) = extra
    from memdiag.memory_files import memory_text

    assert grown == Settings().token_counter().section_cost(
        memory_text(load_memory_files([CLAUDE_MD]))
    )


def test_diagnose_cli_with_memory_file_and_agent_flags() -> None:
    r = invoke(
        "diagnose",
        str(FORGETS),
        "--fact",
        "never add Co-Authored-By",
        "--memory-file",
        str(CLAUDE_MD),
        "--format",
        "json",
        "--no-cache",
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["diagnoses"][0]["details"]["kept_by"] == "memory_file"
    r = invoke("replay", str(FORMATS_DIR / "sharegpt.jsonl"), "--agent", "x")
    assert r.exit_code == 2 and "--agent" in r.output


# --- Codex ----------------------------------------------------------------------------------


def test_a_real_codex_rollout_separates_injected_instructions_from_the_users_words() -> None:
    raw = lines(CODEX_REAL)
    t = load(CODEX_REAL)
    assert t.format == "codex"
    assert t.sessions == (raw[0]["payload"]["id"],)
    users = [m for m in t.messages if m.role == "user"]
    request = next(r for r in raw if r["type"] == "event_msg")["payload"]["message"]
    assert [m.content for m in users] == [request]  # event_msg repeats it: read once
    system = [m for m in t.messages if m.role == "system"]
    assert system[0].content.startswith("# AGENTS.md instructions")
    assert system[1].content.startswith("<environment_context>")


def test_codex_tool_calls_pair_with_their_outputs_and_each_request_is_a_window() -> None:
    raw = lines(CODEX_TOOLS)
    t = load(CODEX_TOOLS)
    calls = [r["payload"]["call_id"] for r in raw if r["payload"].get("type", "").endswith("call")]
    made = [c["id"] for m in t.messages for c in m.tool_calls]
    assert made == calls
    answered = [m.tool_call_id for m in t.messages if m.role == "tool"]
    assert answered == calls
    model = next(r for r in raw if r["type"] == "turn_context")["payload"]["model"]
    assert t.windows and all(w.model == model for w in t.windows)
    # a window per request: each follows a user message or a tool result
    for w in t.windows:
        assert t.messages[w.before - 1].role in ("user", "tool")


def _codex_with_compaction(tmp_path: Path) -> Path:
    """The real-format rollout above, continued by a `compacted` line and `token_count` events
    as Codex's protocol defines them (codex-rs/protocol: CompactedItem {message,
    replacement_history}, TokenCountEvent {info: {last_token_usage}}): no real rollout with them
    was found committed; these lines are built, the rest is the fixture's."""
    raw = lines(CODEX_TOOLS)
    ts = "2026-01-02T03:05:00.000Z"

    def tc(n: int) -> dict[str, Any]:
        usage = {
            "input_tokens": n,
            "cached_input_tokens": 0,
            "output_tokens": 5,
            "total_tokens": n + 5,
        }
        info = {
            "total_token_usage": usage,
            "last_token_usage": usage,
            "model_context_window": 272000,
        }
        return {
            "timestamp": ts,
            "type": "event_msg",
            "payload": {"type": "token_count", "info": info},
        }

    def item(role: str, text: str) -> dict[str, Any]:
        kind = "input_text" if role == "user" else "output_text"
        payload = {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}
        return {"timestamp": ts, "type": "response_item", "payload": payload}

    first = item("user", "Never delete alpha.txt. Always keep beta.txt sorted.")
    head = [raw[0], raw[1], first, *raw[4:6], tc(1200), *raw[6:13], tc(1800)]
    summary = "The user listed the files alpha.txt and beta.txt; keep beta.txt sorted."
    compacted = {
        "timestamp": ts,
        "type": "compacted",
        "payload": {"message": summary, "replacement_history": [first["payload"]]},
    }
    tail = [compacted, item("user", "Now tidy the folder."), item("assistant", "Done."), tc(300)]
    p = tmp_path / "rollout-2026-01-02T03-04-05-compacted.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in [*head, *tail]) + "\n")
    return p


def test_codex_compaction_and_token_counts(tmp_path: Path) -> None:
    t = load(_codex_with_compaction(tmp_path))
    (ev,) = t.summaries
    assert ev.meta["trigger"] == "compacted"
    assert "keep beta.txt sorted" in ev.content
    last = t.windows[-1]
    assert last.prompt_tokens == 300 and last.extra[0].section == "summary"
    assert t.windows[0].prompt_tokens == 1200
    d = diagnose(t, Settings(), [Failure("never delete alpha.txt", len(t.turns))], cache=False)
    # the replacement history kept the first user message verbatim: it is in the summary
    assert d[0].verdict.value == "in_context"


def test_codex_directory_lists_rollouts(tmp_path: Path) -> None:
    day = tmp_path / "sessions" / "2026" / "01" / "02"
    day.mkdir(parents=True)
    shutil.copy(CODEX_TOOLS, day / CODEX_TOOLS.name)
    shutil.copy(_codex_with_compaction(tmp_path), day)
    with pytest.raises(InputError, match="holds 2 Codex rollouts"):
        load(tmp_path / "sessions")
    one = load(tmp_path / "sessions", select=CODEX_TOOLS.stem)
    assert one.format == "codex" and len(one.windows) == len(load(CODEX_TOOLS).windows)
    both = load(tmp_path / "sessions", select="all")
    assert len(both.sessions) == 1  # the same session id in both: counted as one
    assert len({m.id for m in both.messages}) == len(both.messages)


def test_agent_flag_on_a_plain_transcript_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        load(FORMATS_DIR / "sharegpt.jsonl", selection=Selection(agent="x"))


@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), max_size=60))
@settings(max_examples=80, deadline=None)
def test_kept_requests_are_each_turns_first_and_last_and_the_first_after_a_compaction(
    requests: list[tuple[int, bool]],
) -> None:
    from memdiag.transcript.events import RawWindow
    from memdiag.transcript.session_dirs import kept_requests

    turns = sorted(t for t, _ in requests)  # requests come in turn order
    flags = [f for _, f in requests]
    rows = [
        (t, f, RawWindow(f"r{k}", ())) for k, (t, f) in enumerate(zip(turns, flags, strict=True))
    ]
    kept = {w.before for w in kept_requests(rows)}
    for t in set(turns):
        of_turn = [w.before for tt, _, w in rows if tt == t]
        assert of_turn[0] in kept and of_turn[-1] in kept
    assert all(w.before in kept for _, f, w in rows if f)
    middle = {
        w.before
        for k, (t, f, w) in enumerate(rows)
        if not f and 0 < k < len(rows) - 1 and rows[k - 1][0] == t == rows[k + 1][0]
    }
    assert not kept & middle


def test_a_summary_that_says_the_opposite_does_not_carry_a_prohibition(tmp_path: Path) -> None:
    """The derived session with only its summary's text changed again: it now says to add the
    trailer, which shares every word of the rule but not its polarity."""
    from memdiag.compactions import states

    rows = lines(FORGETS)
    summary = next(r for r in rows if r.get("isCompactSummary"))
    summary["message"]["content"][0]["text"] = (
        "Summary: the user is fixing the login bug. Add Co-Authored-By trailers to commits. "
        "Always run make test before committing."
    )
    p = tmp_path / "opposite.jsonl"
    p.write_text("\n".join(json.dumps(r, separators=(",", ":")) for r in rows) + "\n")
    t = load(p)
    (d,) = diagnose(t, Settings(), [Failure("never add Co-Authored-By", len(t.turns))], cache=False)
    assert d.verdict.value == "short_term_summarized_away"
    (kept,) = diagnose(t, Settings(), [Failure("always run make test", len(t.turns))], cache=False)
    assert kept.verdict.value == "in_context"
    assert not states("never add Co-Authored-By", "Add Co-Authored-By trailers to commits.")
    assert states("never add Co-Authored-By", "The user said: do not add Co-Authored-By lines.")


def test_a_sealed_codex_compaction_is_opaque(tmp_path: Path) -> None:
    """A remote compaction keeps an encrypted `compaction` item in its replacement history
    (built as codex-rs defines it, appended to the rollout fixture): what it kept cannot be
    read, and the verdict says so."""
    rows = lines(_codex_with_compaction(tmp_path))
    compacted = next(r for r in rows if r["type"] == "compacted")
    compacted["payload"] = {
        "message": "",
        "replacement_history": [{"type": "compaction", "encrypted_content": "gAAAA-sealed"}],
    }
    p = tmp_path / "rollout-sealed.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    t = load(p)
    assert t.windows[-1].extra[-1].opaque
    (d,) = diagnose(t, Settings(), [Failure("never delete alpha.txt", len(t.turns))], cache=False)
    assert d.verdict.value == "short_term_summarized_away"
    assert "opaque_compaction" in d.flags


def test_convert_keeps_the_compaction(tmp_path: Path) -> None:
    r = invoke("convert", str(FORGETS))
    assert r.exit_code == 0, r.output
    out = tmp_path / "canonical.jsonl"
    out.write_text(r.stdout)
    (summary,) = [json.loads(x) for x in r.stdout.splitlines() if '"summary"' in x[:20]]
    assert summary["compaction"]["line"] == 9 and summary["compaction"]["trigger"] == "auto"
    again = load(out)
    assert again.format == "canonical"
    assert again.summaries[0].meta == load(FORGETS).summaries[0].meta
    d = _diagnose_path(out, "never add Co-Authored-By")
    assert d["verdict"] == "short_term_summarized_away" and d["details"]["compaction"]["line"] == 9


def _diagnose_path(path: Path, fact: str) -> Any:
    t = load(path)
    (d,) = diagnose(t, Settings(), [Failure(fact, len(t.turns))], cache=False)
    return d.to_dict()


def test_the_coding_agent_json_follows_the_schemas() -> None:
    """The fields a coding-agent session adds (compactions, memory files, the compaction and
    the memory file of a diagnosis) are in memdiag/schemas, and validate."""
    from tests.test_json_contract import validate

    replayed = invoke("replay", str(FORGETS), "--memory-file", str(CLAUDE_MD), "--format", "json")
    doc = validate("replay", replayed.stdout)
    assert doc["compactions"] and doc["memory_files"]
    for fact, flags in (
        ("never add Co-Authored-By", []),
        ("never add Co-Authored-By", ["--memory-file", str(CLAUDE_MD)]),
        ("always run make test", []),
    ):
        r = invoke(
            "diagnose", str(FORGETS), "--fact", fact, *flags, "--format", "json", "--no-cache"
        )
        (d,) = validate("diagnose", r.stdout)["diagnoses"]
        assert "compaction" in d["details"] or "memory_file" in d["details"]
    import jsonschema

    from tests.test_json_contract import schema

    bad = json.loads(replayed.stdout)
    bad["compactions"][0]["kept"] = [{"text": 1}]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema("replay")).validate(bad)
