"""The call model and its interpreter (docs/traces.md), as a caller: calls in, transcript out.

The rules are the framework-independent ones: auxiliary calls (summarizers, memory writers) are
no turns, what varies in the leading system messages is a section, the main agent is the one
the human talks to. Then the call sources added on the model, each on a fixture its real
library made.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.transcript import load
from memdiag.transcript.calls import SUMMARIZATION, Call
from memdiag.transcript.calls.interpret import auxiliary, interpret
from memdiag.transcript.model import RawMessage, build
from memdiag.transcript.source import Source
from tests.conftest import FIXTURES

TRACES = FIXTURES / "formats" / "traces"
runner = CliRunner()
SYSTEM = "You are a travel assistant."


def msg(role: str, content: str) -> RawMessage:
    return RawMessage(role, content)


def call(inputs: list[tuple[str, str]], reply: str, **kw: object) -> Call:
    return Call(
        "x",
        tuple(msg(r, c) for r, c in inputs),
        (msg("assistant", reply),),
        **kw,  # type: ignore[arg-type]
    )


def transcript(calls: list[Call], agent: str | None = None):  # type: ignore[no-untyped-def]
    source = Source("calls.json", [], is_jsonl=False)
    items = list(interpret(calls, source, agent=agent))
    return build(items, path="calls.json", format="otel", warnings=source.warnings)


# --- auxiliary calls ------------------------------------------------------------------------

CONVERSATION = [
    ("I'm allergic to peanuts, remember it.", "Noted: no peanuts."),
    ("I fly to Lisbon on Friday morning.", "Have a good flight!"),
]
SUMMARY = "The user flies to Lisbon on Friday morning."


def summarized_calls(marker: bool = False) -> list[Call]:
    (q1, a1), (q2, a2) = CONVERSATION
    return [
        call([("system", SYSTEM), ("user", q1)], a1),
        call([("system", SYSTEM), ("user", q1), ("assistant", a1), ("user", q2)], a2),
        call(
            [("user", f"Summarize:\nhuman: {q1}\nai: {a1}\nhuman: {q2}\nai: {a2}")],
            SUMMARY,
            markers=frozenset({SUMMARIZATION}) if marker else frozenset(),
        ),
        call(
            [("system", SYSTEM), ("user", f"Summary so far: {SUMMARY}"), ("user", "A snack?")],
            "Peanuts!",
        ),
    ]


def test_a_summarizer_is_no_turn_and_its_summary_covers_what_it_replaced() -> None:
    calls = summarized_calls()
    assert auxiliary(calls) == {2: SUMMARY}
    t = transcript(calls)
    assert [m.content for m in t.messages if m.role == "user"] == [
        CONVERSATION[0][0],
        CONVERSATION[1][0],
        "A snack?",
    ]
    last = t.windows[-1]
    (summary,) = last.extra
    assert summary.section == "summary" and SUMMARY in summary.content
    stated = next(m.id for m in t.messages if "peanuts, remember" in m.content)
    assert stated in summary.covers and stated not in last.ids
    (event,) = t.summaries
    assert SUMMARY in event.content


def test_the_marker_confirms_a_summarizer_whose_output_never_came_back() -> None:
    calls = summarized_calls(marker=True)[:3]  # the file ends before the summary is used
    assert set(auxiliary(calls)) == {2}
    assert not auxiliary(summarized_calls()[:3])  # without it: the last call is a turn


def test_replies_quoted_to_a_summarizer_stay_replies() -> None:
    # the summarizer's prompt quotes every earlier reply; they came back as themselves before
    calls = summarized_calls()
    t = transcript(calls)
    assert [m.content for m in t.messages if m.role == "assistant"] == [
        CONVERSATION[0][1],
        CONVERSATION[1][1],
        "Peanuts!",
    ]


# --- injected sections ----------------------------------------------------------------------


def test_what_varies_in_the_system_prompt_is_the_memories_section() -> None:
    calls = [
        call([("system", SYSTEM), ("user", "Hi there, it's Mia.")], "Hello Mia."),
        call(
            [("system", f"{SYSTEM}\nMemories:\n- Lives in Porto"), ("user", "Weather?")],
            "Sunny.",
            session="s2",
        ),
    ]
    t = transcript(calls)
    assert {m.content for m in t.messages if m.role == "system"} == {SYSTEM}
    assert t.windows[0].extra == ()
    (memories,) = t.windows[1].extra
    assert memories.section == "memories" and memories.content == "Memories:\n- Lives in Porto"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["- Lives in Porto", "- Likes jazz", "- Vegan"]), min_size=2))
def test_the_stable_prompt_and_the_sections_make_up_each_request(memories: list[str]) -> None:
    calls = [
        call([("system", f"{SYSTEM}\n{m}\nBe brief."), ("user", f"Question number {k}?")], f"A{k}")
        for k, m in enumerate(memories)
    ]
    t = transcript(calls)
    varied = len(set(memories)) > 1
    for c, w in zip(calls, t.windows, strict=True):
        system = t.messages[w.indices[0]].content
        extra = "".join(e.content for e in w.extra)
        sent = c.inputs[0].content
        if varied:
            # the stable prompt once, the memory line as the section: nothing else differs
            assert system == f"{SYSTEM}\nBe brief." and extra == memories[calls.index(c)]
            assert len(system) + len(extra) + 1 == len(sent)  # the memory line's own line end
        else:
            assert system == sent and not w.extra


# --- agents ---------------------------------------------------------------------------------


def test_the_agent_answering_as_a_tool_is_left_out_and_selectable() -> None:
    found = "Casa Vegetariana, in Graça, is the best one."
    question = msg("user", "Dinner ideas for a vegetarian?")
    ask = {"id": "c1", "type": "function", "function": {"name": "helper", "arguments": "{}"}}
    asking = RawMessage("assistant", "", tool_calls=(ask,))
    calls = [
        Call("x", (question,), (asking,), agent="main"),
        call([("user", "Vegetarian dinner in Lisbon")], found, agent="helper"),
        Call(
            "x",
            (question, asking, RawMessage("tool", found, tool_call_id="c1")),
            (msg("assistant", "Try Casa Vegetariana."),),
            agent="main",
        ),
    ]
    t = transcript(calls)
    assert [m.content for m in t.messages if m.role == "user"] == ["Dinner ideas for a vegetarian?"]
    assert any("helper (1)" in w for w in t.warnings)
    helper = transcript(calls, agent="helper")
    assert [m.content for m in helper.messages if m.role == "assistant"] == [found]


# --- call sources ---------------------------------------------------------------------------


def conversation(path: Path) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in load(path).messages]


def test_openllmetry_flat_attributes_read_like_the_genai_conventions() -> None:
    # the same agent, instrumented by OpenLLMetry 0.47.5 (flat) and 0.62.4 (gen_ai.*.messages)
    flat = load(TRACES / "otel_openllmetry_flat.json")
    assert conversation(TRACES / "otel_openllmetry_flat.json") == conversation(
        TRACES / "otel_openai_traceloop.json"
    )
    spans = json.loads((TRACES / "otel_openllmetry_flat.json").read_text())
    reported = [s["attributes"]["gen_ai.usage.prompt_tokens"] for s in spans]
    assert [w.prompt_tokens for w in flat.windows] == reported
    call = next(m for m in flat.messages if m.tool_calls)
    assert call.tool_calls[0]["function"]["name"] == "get_weather"
    res = runner.invoke(
        app,
        [
            "diagnose",
            str(TRACES / "otel_openllmetry_flat.json"),
            "--fact",
            "allergic to peanuts",
            "--at",
            "4",
            "--format",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert '"verdict": "short_term_dropped"' in res.stdout


def test_content_only_in_log_records_is_joined_to_its_span() -> None:
    # opentelemetry-util-genai with EVENT_ONLY capture: spans without content, and one
    # gen_ai.client.inference.operation.details log record per call naming its span
    path = TRACES / "otel_log_events.jsonl"
    t = load(path)
    assert [m.content for m in t.messages if m.role == "user"] == [
        "Hi, I'm Mia. I'm allergic to peanuts.",
        "I'm flying to Lisbon on Friday.",
        "Yes, near Alfama please.",
        "Suggest a snack for my flight.",
    ]
    assert t.messages[0].role == "system" and len(t.windows) == 4
    assert [w.prompt_tokens for w in t.windows] == [29, 47, 56, 56]
    stated = t.messages[1].id
    assert stated in t.windows[1].ids and stated not in t.windows[3].ids  # trimmed to 4
    res = runner.invoke(
        app,
        ["diagnose", str(path), "--fact", "allergic to peanuts", "--at", "4", "--format", "json"],
    )
    assert res.exit_code == 0, res.output
    assert '"verdict": "short_term_dropped"' in res.stdout


def test_a_span_without_content_and_without_its_log_record_still_says_so(tmp_path: Path) -> None:
    spans_only = (TRACES / "otel_log_events.jsonl").read_text().splitlines()[0]
    path = tmp_path / "spans.jsonl"
    path.write_text(spans_only + "\n")
    res = runner.invoke(app, ["convert", str(path)])
    assert res.exit_code == 2
    assert "has no input messages" in res.output and "content capture off" in res.output


CALLS = FIXTURES / "formats" / "calls"


def test_request_response_log_lines_are_calls() -> None:
    path = CALLS / "request_log.jsonl"
    t = load(path)
    assert t.format == "request_log" and t.sessions == ("trip-1",)
    assert [m.role for m in t.messages[:3]] == ["system", "user", "assistant"]
    assert len(t.turns) == 4 and len(t.windows) == 4
    logged = [json.loads(x) for x in path.read_text().splitlines()]
    assert [w.prompt_tokens for w in t.windows] == [
        x["response"]["usage"]["prompt_tokens"] for x in logged
    ]
    # the profile line the agent writes into its system prompt is the memories section
    assert {m.content for m in t.messages if m.role == "system"} == {
        "You are a travel assistant. Be brief."
    }
    assert [e.content for e in t.windows[-1].extra] == [
        "About the user: name is Mia; flies to Lisbon on Friday"
    ]
    res = runner.invoke(
        app,
        ["diagnose", str(path), "--fact", "allergic to peanuts", "--at", "4", "--format", "json"],
    )
    assert res.exit_code == 0, res.output
    assert '"verdict": "short_term_dropped"' in res.stdout


def test_a_bad_request_log_line_names_the_line_and_field(tmp_path: Path) -> None:
    lines = (CALLS / "request_log.jsonl").read_text().splitlines()
    entry = json.loads(lines[1])
    entry["request"]["messages"][1]["role"] = "robot"
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(entry), *lines[2:]]) + "\n")
    res = runner.invoke(app, ["convert", str(path)])
    assert res.exit_code == 2
    assert "line 2.request.messages[1]" in res.output and "robot" in res.output
    skipped = load(path, skip_invalid=True)
    assert skipped.skipped == 1 and len(skipped.windows) == 3


def test_litellm_logging_payloads_are_one_conversation_of_calls() -> None:
    # what LiteLLM's logging integrations receive: once misread as four fine-tuning lines
    path = CALLS / "litellm.jsonl"
    t = load(path)
    assert t.format == "litellm" and t.sessions == ("trip-1",)  # the shared trace_id
    assert [m.content for m in t.messages if m.role == "user"] == [
        "Hi, I'm Mia. I'm allergic to peanuts.",
        "I'm flying to Lisbon on Friday.",
        "Yes, near Alfama please.",
        "Suggest a snack for my flight.",
    ]
    assert [m.content for m in t.messages if m.role == "assistant"][
        -1
    ] == "Try a peanut butter bar!"
    assert len(t.windows) == 4 and all(w.model == "gpt-4o-mini" for w in t.windows)
    res = runner.invoke(
        app,
        ["diagnose", str(path), "--fact", "allergic to peanuts", "--at", "4", "--format", "json"],
    )
    assert res.exit_code == 0, res.output
    assert '"verdict": "short_term_dropped"' in res.stdout


def test_litellm_per_call_trace_ids_are_no_sessions(tmp_path: Path) -> None:
    lines = [json.loads(x) for x in (CALLS / "litellm.jsonl").read_text().splitlines()]
    for k, p in enumerate(lines):
        p["trace_id"] = f"fresh-{k}"  # LiteLLM's default: a new id per call
        p["metadata"].pop("session_id", None)
    path = tmp_path / "litellm.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in lines))
    t = load(path)
    assert len(t.sessions) == 1 and len(t.turns) == 4


def test_openai_batch_files_are_joined_by_custom_id() -> None:
    # either file reads the pair: the output's lines come back in another order
    a, b = load(CALLS / "batch_input.jsonl"), load(CALLS / "batch_output.jsonl")
    assert a.format == b.format == "openai_batch"
    assert [(m.role, m.content) for m in a.messages] == [(m.role, m.content) for m in b.messages]
    replies = [m.content for m in a.messages if m.role == "assistant"]
    assert replies == [
        "Noted, Mia!",
        "Lovely. Need a hotel?",
        "Memmo Alfama is a good pick.",
        "Try a peanut butter bar!",
    ]
    assert len(a.turns) == 5 and len(a.windows) == 4  # the failed request has no reply
    assert a.windows[0].source == "batch_input.jsonl:1"
    res = runner.invoke(
        app,
        [
            "diagnose",
            str(CALLS / "batch_input.jsonl"),
            "--fact",
            "allergic to peanuts",
            "--at",
            "4",
            "--format",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert '"verdict": "short_term_dropped"' in res.stdout


def test_a_batch_output_alone_says_where_the_requests_are(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text((CALLS / "batch_output.jsonl").read_text())
    res = runner.invoke(app, ["convert", str(path)])
    assert res.exit_code == 2 and "input file" in res.output
    alone = tmp_path / "in.jsonl"
    path.unlink()
    alone.write_text((CALLS / "batch_input.jsonl").read_text())
    t = load(alone)
    assert not t.windows and any("without their replies" in w for w in t.warnings)


def test_mlflow_traces_chat_model_spans_and_retriever() -> None:
    path = CALLS / "mlflow_traces.jsonl"
    t = load(path)
    assert t.format == "mlflow" and t.sessions == ("trip-1",)
    assert next(m.content for m in t.messages if m.role == "user") == (
        "Hi, I'm Mia. I'm allergic to peanuts."
    )
    assert len(t.turns) == 4 and len(t.windows) == 4
    (search,) = t.retrievals
    assert [(r.id, r.score) for r in search.records] == [("mem-3", 0.41), ("mem-7", 0.33)]
    assert t.messages[search.before].turn == 4
    res = runner.invoke(
        app,
        ["diagnose", str(path), "--fact", "allergic to peanuts", "--at", "4", "--format", "json"],
    )
    assert res.exit_code == 0, res.output
    assert '"verdict": "short_term_dropped"' in res.stdout


def test_a_bad_mlflow_attribute_names_its_path(tmp_path: Path) -> None:
    lines = (CALLS / "mlflow_traces.jsonl").read_text().splitlines()
    trace = json.loads(lines[1])
    chat = next(
        s for s in trace["data"]["spans"] if s["attributes"]["mlflow.spanType"] == '"CHAT_MODEL"'
    )
    chat["attributes"]["mlflow.spanInputs"] = '{"messages": [{"role": "robot"}]}'
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(trace), *lines[2:]]) + "\n")
    res = runner.invoke(app, ["convert", str(path)])
    assert res.exit_code == 2
    assert "line 2.data.spans[1].attributes.mlflow.spanInputs.messages[0]" in res.output


def test_smolagents_steps_read_as_one_conversation() -> None:
    # `tool-call` / `tool-response` roles (once "unknown role 'tool-call'"), final_answer as
    # the reply the user reads
    path = CALLS / "smolagents_steps.json"
    t = load(path)
    assert t.format == "smolagents_steps" and len(t.turns) == 3
    assert [m.role for m in t.messages] == [
        "system", "user", "assistant", "user", "assistant", "tool", "assistant", "user",
        "assistant",
    ]  # fmt: skip
    assert t.messages[4].tool_calls[0]["function"]["name"] == "get_weather"
    assert t.messages[5].tool_call_id == "call_2"
    assert t.messages[-1].content == "Try a bag of honey-roasted peanuts!"
    # every step's request is a window; the last one still held the allergy
    assert len(t.windows) == 4
    stated = t.messages[1].id
    assert stated in t.windows[-1].ids
    res = runner.invoke(
        app,
        ["diagnose", str(path), "--fact", "allergic to peanuts", "--at", "3", "--format", "json"],
    )
    assert res.exit_code == 0, res.output
    assert '"verdict": "in_context"' in res.stdout


@settings(max_examples=40, deadline=None)
@given(
    st.integers(min_value=2, max_value=9),
    st.sets(st.integers(min_value=1, max_value=8), max_size=3),
    st.integers(min_value=1, max_value=3),
)
def test_summarizer_calls_never_shift_the_users_turns(
    turns: int, summarize_after: set[int], keep: int
) -> None:
    """An agent that summarizes its history at random turns (the summarizer's prompt quotes
    the transcript, its summary comes back as a message): the turns are the user's, the
    summarizer's prompt is no message, and each summary covers what its request dropped."""
    calls: list[Call] = []
    history: list[tuple[str, str]] = []
    summary: str | None = None
    for n in range(1, turns + 1):
        history.append(("user", f"This is the user's message number {n}, about topic {n}."))
        head = [("system", SYSTEM)] + ([("user", summary)] if summary else [])
        calls.append(call([*head, *history], f"This is the assistant's reply number {n}."))
        history.append(("assistant", f"This is the assistant's reply number {n}."))
        if n in summarize_after and n < turns:
            quoted = "\n".join(f"{r}: {c}" for r, c in history)
            summary = f"Summary so far, up to turn {n}, of {len(history)} messages."
            calls.append(call([("user", f"Summarize this conversation:\n{quoted}")], summary))
            history = history[-2 * keep :]
    t = transcript(calls)
    assert len(t.turns) == turns
    users = [m.content for m in t.messages if m.role == "user"]
    assert users == [
        f"This is the user's message number {n}, about topic {n}." for n in range(1, turns + 1)
    ]
    assert not any("Summarize this conversation" in m.content for m in t.messages)
    for w in t.windows:
        for e in w.extra:
            assert e.section == "summary" and not set(e.covers) & set(w.ids)


def test_memories_written_as_the_first_user_message_are_a_section() -> None:
    # no call asked them: every message of the human is some call's new question
    q1, q2, q3 = "Hi, I'm Mia from Porto.", "What's the weather?", "And tomorrow?"
    memo1, memo2 = "Relevant memories: lives in Porto", "Relevant memories: lives in Porto; vegan"
    calls = [
        call([("system", SYSTEM), ("user", q1)], "Hello Mia."),
        call([("system", SYSTEM), ("user", memo1), ("user", q1), ("assistant", "Hello Mia."),
              ("user", q2)], "Sunny in Porto."),
        call([("system", SYSTEM), ("user", memo2), ("user", q1), ("assistant", "Hello Mia."),
              ("user", q2), ("assistant", "Sunny in Porto."), ("user", q3)], "Rain."),
    ]  # fmt: skip
    t = transcript(calls)
    assert [m.content for m in t.messages if m.role == "user"] == [q1, q2, q3]
    assert len(t.turns) == 3
    assert [[(e.section, e.content) for e in w.extra] for w in t.windows] == [
        [],
        [("memories", memo1)],
        [("memories", memo2)],
    ]
