"""Trace formats (docs/reference.md#observed-windows): OpenTelemetry GenAI, LangSmith, Langfuse,
Letta agent files.

Fixtures in fixtures/formats/traces/ were made by the real libraries (make_*.py beside them):
a travel agent that trims its history, calls a tool, and searches a memory store in a second
conversation. Expected ids are the fixture's own (LangSmith reply ids, Letta message ids) or the
readers' stable content ids, which all three OpenTelemetry encodings must agree on.
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.errors import InputError
from memdiag.transcript import Transcript, load
from memdiag.transcript.model import RawMessage, RawWindow, build
from memdiag.transcript.tracing import CallLedger
from memdiag.transcript.writer import write_canonical
from tests.conftest import FIXTURES

TRACES = FIXTURES / "formats" / "traces"
OTEL = [TRACES / "otel_spans.json", TRACES / "otel_otlp.json", TRACES / "otel_events.json"]
runner = CliRunner()


def roles(t: Transcript) -> list[str]:
    return [m.role for m in t.messages]


def tool_pairs_intact(t: Transcript) -> bool:
    """Every tool result answers a call made just before it (same assistant message)."""
    open_calls: set[str] = set()
    for m in t.messages:
        if m.role == "assistant":
            open_calls = set(m.tool_call_ids)
        elif m.role == "tool":
            if m.tool_call_id not in open_calls:
                return False
            open_calls.discard(m.tool_call_id)
    return True


def window_text(t: Transcript, before_id: str) -> list[str]:
    w = next(w for w in t.windows if w.before_id == before_id)
    return [t.messages[i].content for i in w.indices]


# --- OpenTelemetry --------------------------------------------------------------------------


@pytest.mark.parametrize("path", OTEL, ids=lambda p: p.stem)
def test_otel_encodings_read_the_same_conversation(path: Path) -> None:
    t = load(path)
    assert t.format == "otel"
    assert t.sessions == ("conv-1", "conv-2")
    assert len(t.messages) == 24 and len(t.turns) == 10
    assert roles(t)[:4] == ["system", "user", "assistant", "user"]
    assert roles(t).count("tool") == 1 and tool_pairs_intact(t)
    call = next(m for m in t.messages if m.tool_calls)
    assert call.tool_calls[0]["id"] == "call_weather_1"
    assert call.tool_calls[0]["function"]["name"] == "get_weather"
    # one window per chat span of the travel agent; the sub-agent's span is left out, said so
    assert len(t.windows) == 11
    assert any("sub-agent" in w for w in t.warnings)
    assert not any("Find a dinner place" in m.content for m in t.messages)
    # two memory searches, one before each reply of conv-2, with the span's records
    assert [r.before_id for r in t.retrievals] == [w.before_id for w in t.windows[-2:]]
    assert [(r.id, r.score) for r in t.retrievals[1].records] == [
        ("mem-1", 0.41),
        ("mem-2", 0.33),
    ]


def test_otel_encodings_agree_on_ids_windows_and_tokens() -> None:
    spans, otlp, events = (load(p) for p in OTEL)
    for other in (otlp, events):
        assert [(m.id, m.role, m.content, m.session) for m in other.messages] == [
            (m.id, m.role, m.content, m.session) for m in spans.messages
        ]
        assert [(w.before_id, w.ids, w.prompt_tokens) for w in other.windows] == [
            (w.before_id, w.ids, w.prompt_tokens) for w in spans.windows
        ]


def test_otel_observed_window_at_each_call() -> None:
    t = load(OTEL[0])
    user = {m.content: m.id for m in t.messages if m.role == "user"}
    u1 = user["Hi, I'm Mia. I'm allergic to peanuts."]
    # the agent sends the system prompt + its last 6 messages: u1 is in the first 3 requests
    holding = [t.messages[w.before].turn for w in t.windows if u1 in w.ids]
    assert holding == [1, 2, 3]
    last = t.window_at(8)
    assert last is not None
    assert window_text(t, last.before_id)[0] == "You are a travel assistant. Be brief."
    assert window_text(t, last.before_id)[-1] == "Suggest a snack for my flight."
    assert len(last.ids) == 7
    # turn 4 has two requests (tool call, then the answer): the turn's window is the last one
    turn4 = [w for w in t.windows if t.messages[w.before].turn == 4]
    assert len(turn4) == 2 and t.window_at(4) == turn4[1]
    assert t.messages[turn4[1].indices[-1]].role == "tool"


# --- LangSmith, Langfuse, Letta ------------------------------------------------------------


def test_langsmith_runs() -> None:
    t = load(TRACES / "langsmith_runs.json")
    assert t.format == "langsmith"
    assert t.sessions == ("thread-1", "thread-2")
    assert roles(t) == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "system",
        "system",
        "user",
        "assistant",
    ]
    assert tool_pairs_intact(t)
    # replies keep LangChain's own message ids; the next request refers to them
    replies = [m.id for m in t.messages if m.role == "assistant"]
    assert all(r.startswith("lc_run--") for r in replies)
    assert replies[0] in t.windows[1].ids
    assert [w.prompt_tokens for w in t.windows] == [31, 45, 52, 70, 61, 48]
    assert len(t.retrievals) == 1 and t.retrievals[0].before_id == replies[-1]
    assert t.retrievals[0].query.startswith("Planning a trip to Porto")
    # the injected memories are a message of the request, added once
    assert window_text(t, replies[-1])[1].startswith("Memories:")


def test_langfuse_observations() -> None:
    t = load(TRACES / "langfuse_observations.json")
    assert t.format == "langfuse"
    assert t.sessions == ("sess-1", "sess-2")
    assert len(t.messages) == 14 and len(t.turns) == 5
    assert tool_pairs_intact(t)
    assert any("sub-agent" in w for w in t.warnings)
    assert not any(m.content == "Restaurants in Alfama?" for m in t.messages)
    assert [w.model for w in t.windows] == ["gpt-4o-mini"] * 6
    assert [r.id for r in t.retrievals[0].records] == ["mem-1", "mem-2"]


def test_letta_agent_file_window_is_in_context_ids() -> None:
    t = load(TRACES / "letta_agent.af")
    assert t.format == "letta"
    assert [m.id for m in t.messages if m.role == "user"] == [
        "message-1",
        "message-3",
        "message-5",
        "message-10",
    ]
    # the user's words, out of Letta's JSON envelope
    assert t.message("message-1").content == "Hi, I'm Mia. I'm allergic to peanuts."
    (w,) = t.windows
    assert w.before_id == "message-11"
    assert w.ids == ("message-0", "message-5", "message-6", "message-7", "message-8", "message-10")
    (summary,) = w.extra
    assert summary.section == "summary" and "flying to Lisbon" in summary.content
    assert summary.covers == ("message-1", "message-2", "message-3", "message-4")
    # the archival memory search (a tool call and its result) is a recorded retrieval
    (r,) = t.retrievals
    assert r.query == "where the user lives" and r.records[0].content == "Mia lives in Berlin."
    assert r.before_id == "message-8"


def test_letta_group_reads_the_main_agent_and_says_so() -> None:
    t = load(TRACES / "letta_group.af")
    assert {m.id for m in t.messages} <= {f"message-{k}" for k in range(12)}
    assert len(t.warnings) == 1 and "left out: agent-1" in t.warnings[0]


def test_letta_double_encoded_json_string(tmp_path: Path) -> None:
    doc = json.loads((TRACES / "letta_agent.af").read_text())
    path = tmp_path / "agent.af"
    path.write_text(json.dumps(json.dumps(doc)))  # as some published examples are
    assert [m.id for m in load(path).messages] == [
        m.id for m in load(TRACES / "letta_agent.af").messages
    ]


# --- canonical events and convert ----------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        *OTEL[:1],
        TRACES / "langsmith_runs.json",
        TRACES / "langfuse_observations.json",
        TRACES / "letta_agent.af",
    ],
    ids=lambda p: p.stem,
)
def test_convert_keeps_windows_and_retrievals(path: Path, tmp_path: Path) -> None:
    t = load(path)
    out = tmp_path / "out.jsonl"
    buf = io.StringIO()
    write_canonical(t, buf)
    out.write_text(buf.getvalue())
    back = load(out)
    assert back.format == "canonical"
    strip = {"line": 0}
    assert [dataclasses.replace(w, **strip) for w in back.windows] == [
        dataclasses.replace(w, **strip) for w in t.windows
    ]
    assert [dataclasses.replace(r, **strip) for r in back.retrievals] == [
        dataclasses.replace(r, **strip) for r in t.retrievals
    ]
    assert [(m.id, m.role, m.content) for m in back.messages] == [
        (m.id, m.role, m.content) for m in t.messages
    ]


def test_cli_convert_writes_events() -> None:
    res = runner.invoke(app, ["convert", str(OTEL[1])])
    assert res.exit_code == 0, res.output
    kinds = [json.loads(x).get("type") for x in res.stdout.splitlines() if x.startswith("{")]
    assert kinds.count("window") == 11 and kinds.count("retrieval") == 2


def canonical(tmp_path: Path, lines: list[dict[str, Any]]) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


BASE = [
    {"role": "user", "content": "I'm allergic to peanuts.", "id": "u1"},
    {"role": "assistant", "content": "Noted.", "id": "a1"},
    {"role": "user", "content": "Snack?", "id": "u2"},
    {"role": "assistant", "content": "Peanuts!", "id": "a2"},
]


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (
            {"type": "window", "before": "a2", "ids": ["u2", "zz"]},
            "field 'ids'[1]: no message with id 'zz'",
        ),
        ({"type": "window", "before": "a1", "ids": ["u2"]}, "'u2' does not come before 'a1'"),
        ({"type": "window", "ids": ["u2"]}, "missing field 'before'"),
        (
            {
                "type": "window",
                "before": "a2",
                "ids": ["u2"],
                "extra": [{"section": "x", "content": ""}],
            },
            "'extra'[0].section",
        ),
        (
            {"type": "retrieval", "before": "a2", "query": "q", "records": [{"id": 1}]},
            "'records'[0].content",
        ),
        (
            {"type": "retrieval", "before": "nope", "query": "q", "records": []},
            "no message with id 'nope'",
        ),
    ],
)
def test_bad_canonical_events_name_file_and_line(
    tmp_path: Path, event: dict[str, Any], message: str
) -> None:
    path = canonical(tmp_path, [*BASE, event])
    with pytest.raises(InputError) as exc:
        load(path)
    assert message in str(exc.value)
    assert str(exc.value).startswith(f"{path}:5: ")
    res = runner.invoke(app, ["replay", str(path)])
    assert res.exit_code == 2 and "Traceback" not in res.output


# --- bad trace input ----------------------------------------------------------------------


def spans_without_content(tmp_path: Path) -> Path:
    spans = json.loads(OTEL[0].read_text())
    chat = [
        k for k, s in enumerate(spans) if s["attributes"].get("gen_ai.operation.name") == "chat"
    ]
    for key in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions"):
        spans[chat[2]]["attributes"].pop(key)
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(spans))
    return path


def test_span_with_no_messages_is_an_error_naming_the_span(tmp_path: Path) -> None:
    path = spans_without_content(tmp_path)
    with pytest.raises(InputError) as exc:
        load(path)
    text = str(exc.value)
    assert text.startswith(f"{path}: [")
    assert "has no input messages" in text and "\n" not in text
    res = runner.invoke(app, ["diagnose", str(path), "--fact", "peanuts"])
    assert res.exit_code == 2
    assert "has no input messages" in res.stderr and "Traceback" not in res.output


def test_skip_invalid_skips_the_span_and_counts_it(tmp_path: Path) -> None:
    path = spans_without_content(tmp_path)
    t = load(path, skip_invalid=True)
    assert t.skipped == 1
    assert len(t.windows) == 10
    res = runner.invoke(app, ["replay", str(path), "--skip-invalid", "--format", "json"])
    assert res.exit_code == 0
    assert "skipped" in res.stderr


def test_unknown_role_names_the_path(tmp_path: Path) -> None:
    spans = json.loads(OTEL[0].read_text())
    first = next(s for s in spans if "gen_ai.input.messages" in s["attributes"])
    msgs = json.loads(first["attributes"]["gen_ai.input.messages"])
    msgs[0]["role"] = "robot"
    first["attributes"]["gen_ai.input.messages"] = json.dumps(msgs)
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(spans))
    with pytest.raises(
        InputError, match=r"attributes\.gen_ai\.input\.messages\[0\]\.role: unknown role 'robot'"
    ):
        load(path)


def test_unknown_item_in_otlp_document(tmp_path: Path) -> None:
    path = tmp_path / "otlp.json"
    path.write_text(json.dumps([json.loads(OTEL[1].read_text()), {"hello": 1}]))
    with pytest.raises(InputError, match=r"otlp.json: \[1\]: not an OpenTelemetry span"):
        load(path, "otel")


def test_letta_missing_in_context_id(tmp_path: Path) -> None:
    doc = json.loads((TRACES / "letta_agent.af").read_text())
    doc["agents"][0]["in_context_message_ids"].append("message-99")
    path = tmp_path / "agent.af"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as exc:
        load(path)
    assert str(exc.value) == (
        f"{path}: agents[0].in_context_message_ids[8]: no message with id 'message-99'"
    )


def test_langsmith_text_completion_run_is_refused(tmp_path: Path) -> None:
    runs = json.loads((TRACES / "langsmith_runs.json").read_text())
    k = next(k for k, r in enumerate(runs) if r["run_type"] == "llm")
    runs[k]["inputs"] = {"prompts": ["Human: hi"]}
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(runs))
    with pytest.raises(InputError, match=rf"\[{k}\]\.inputs\.prompts: a text-completion run"):
        load(path)


# --- the ledger: messages added once, windows exact ----------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 12),
    keep=st.integers(1, 6),
    texts=st.lists(
        st.sampled_from(["ok", "yes", "peanuts", "Lisbon", "hi"]), min_size=24, max_size=24
    ),
)
def test_ledger_rebuilds_a_trimmed_conversation(n: int, keep: int, texts: list[str]) -> None:
    """An agent sends its last `keep` messages each turn; repeated words are separate messages.

    The ledger must give back the conversation exactly once, in order, and each request's ids.
    """
    ledger = CallLedger()
    history: list[tuple[str, str]] = []
    ids_of: list[str] = []
    items: list[Any] = []
    for k in range(n):
        history.append(("user", texts[2 * k]))
        window = list(range(max(0, len(history) - keep), len(history)))
        inputs = [RawMessage(history[i][0], history[i][1]) for i in window]
        out = ledger.call(inputs, [RawMessage("assistant", texts[2 * k + 1])])
        items.extend(out)
        new = [x for x in out if isinstance(x, RawMessage)]
        ids_of.extend(m.id for m in new if m.id is not None)
        (w,) = [x for x in out if isinstance(x, RawWindow)]
        assert list(w.ids) == [ids_of[i] for i in window]
        history.append(("assistant", texts[2 * k + 1]))
    t = build(items, path="mem", format="test")
    assert [(m.role, m.content) for m in t.messages] == history
    assert len({m.id for m in t.messages}) == len(history)


def test_otlp_json_lines_as_a_collector_writes_them(tmp_path: Path) -> None:
    doc = json.loads(OTEL[1].read_text())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    half = len(spans) // 2
    lines = []
    for part in (spans[:half], spans[half:]):
        one = json.loads(json.dumps(doc))
        one["resourceSpans"][0]["scopeSpans"][0]["spans"] = part
        lines.append(json.dumps(one))
    path = tmp_path / "otel.jsonl"
    path.write_text("\n".join(lines) + "\n")
    t = load(path)
    assert t.format == "otel"
    assert [w.ids for w in t.windows] == [w.ids for w in load(OTEL[1]).windows]
    assert t.windows[0].source is not None and t.windows[0].source.startswith("line ")


OPENAI_INSTRUMENTED = [
    TRACES / "otel_openai_v2.jsonl",  # OpenTelemetry's own, per-message log events
    TRACES / "otel_openai_traceloop.json",  # OpenLLMetry, gen_ai.input.messages
    TRACES / "otel_openai_openinference.json",  # Arize OpenInference, llm.input_messages.N.*
]


@pytest.mark.parametrize("path", OPENAI_INSTRUMENTED, ids=lambda p: p.stem)
def test_real_openai_instrumentations_give_the_same_transcript(path: Path) -> None:
    t = load(path)
    reference = load(OPENAI_INSTRUMENTED[1])
    assert t.format == "otel" and t.sessions == ("s1",)  # no conversation id: one conversation
    assert [(m.id, m.role, m.content, m.tool_call_id) for m in t.messages] == [
        (m.id, m.role, m.content, m.tool_call_id) for m in reference.messages
    ]
    assert roles(t) == [
        "system", "user", "assistant", "user", "assistant", "user", "assistant", "tool",
        "assistant", "user", "assistant",
    ]  # fmt: skip
    assert tool_pairs_intact(t)
    # the mock provider bills 11 tokens a message + 57 for the tool definitions
    assert [w.prompt_tokens for w in t.windows] == [11 * len(w.ids) + 57 for w in t.windows]
    # the agent kept the system prompt and its last 4 messages
    assert [len(w.ids) for w in t.windows] == [2, 4, 5, 5, 5]
    u1 = t.messages[1].id
    assert [u1 in w.ids for w in t.windows] == [True, True, False, False, False]


def test_langsmith_wrap_openai_runs() -> None:
    """`wrap_openai` records OpenAI-style messages and the raw completion (choices, usage)."""
    t = load(TRACES / "langsmith_wrap_openai.json")
    assert t.format == "langsmith" and t.sessions == ("thread-7",)
    assert roles(t) == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    # the agent sends the system prompt and its last 2 messages; the provider bills 9 a message + 3
    assert [len(w.ids) for w in t.windows] == [2, 3, 3]
    assert [w.prompt_tokens for w in t.windows] == [9 * len(w.ids) + 3 for w in t.windows]
    assert t.windows[1].ids[1:] == (t.messages[2].id, t.messages[3].id)
    assert [w.model for w in t.windows] == ["gpt-4o-mini"] * 3


def test_langsmith_unknown_item_names_its_place(tmp_path: Path) -> None:
    runs = json.loads((TRACES / "langsmith_runs.json").read_text())
    runs.insert(3, {"hello": "world"})
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(runs))
    with pytest.raises(InputError) as exc:
        load(path, "langsmith")
    assert str(exc.value) == f"{path}: [3]: not a LangSmith run (expected run_type and inputs)"


def test_langfuse_generation_without_input_skipped_and_counted(tmp_path: Path) -> None:
    doc = json.loads((TRACES / "langfuse_observations.json").read_text())
    k = next(k for k, o in enumerate(doc["data"]) if o["type"] == "GENERATION")
    del doc["data"][k]["input"]
    path = tmp_path / "obs.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=rf"data\[{k}\]\.input: generation with no input"):
        load(path)
    t = load(path, skip_invalid=True)
    assert t.skipped == 1 and len(t.windows) == 5
