"""Importers (anthropic, langchain, sharegpt, locomo, longmemeval) and the canonical writer."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdiag.errors import InputError
from memdiag.transcript import Transcript, detect_format, load, read_source
from memdiag.transcript.importers import locomo_probes, longmemeval_probes
from memdiag.transcript.writer import to_canonical, write_canonical

FORMATS_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
ANTHROPIC = FORMATS_DIR / "anthropic.jsonl"
LANGCHAIN = FORMATS_DIR / "langchain.json"
SHAREGPT = FORMATS_DIR / "sharegpt.jsonl"
LOCOMO = FORMATS_DIR / "locomo_sample.json"
LONGMEMEVAL = FORMATS_DIR / "longmemeval_sample.json"

FIXTURES = [
    (ANTHROPIC, "anthropic"),
    (LANGCHAIN, "langchain"),
    (SHAREGPT, "sharegpt"),
    (LOCOMO, "locomo"),
    (LONGMEMEVAL, "longmemeval"),
]


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_json(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def roles(t: Transcript) -> list[str]:
    return [m.role for m in t.messages]


def canonical_text(t: Transcript) -> str:
    buf = io.StringIO()
    write_canonical(t, buf)
    return buf.getvalue()


def assert_same(a: Transcript, b: Transcript, *, exact_turns: bool = True) -> None:
    """Same messages, summaries, sessions and turns; only source lines may differ."""
    changes: dict[str, Any] = {"line": 0} if exact_turns else {"line": 0, "session_turn": 0}
    assert [dataclasses.replace(m, **changes) for m in a.messages] == [
        dataclasses.replace(m, **changes) for m in b.messages
    ]
    assert [dataclasses.replace(s, line=0) for s in a.summaries] == [
        dataclasses.replace(s, line=0) for s in b.summaries
    ]
    assert a.sessions == b.sessions
    assert a.session_ts == b.session_ts
    assert [t.user_index for t in a.turns] == [t.user_index for t in b.turns]
    if exact_turns:
        assert a.turns == b.turns


# --- detection ----------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "name"), FIXTURES, ids=[n for _, n in FIXTURES])
def test_fixture_is_auto_detected(path: Path, name: str) -> None:
    assert detect_format(read_source(path)) == name
    assert load(path).format == name


def test_openai_messages_are_not_taken_by_anthropic(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "openai.jsonl",
        [
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hey"},
                ]
            },
            {
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "weather?"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "w", "arguments": "{}"},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
                ]
            },
        ],
    )
    assert load(path).format == "openai"


def test_anthropic_is_detected_by_blocks_in_a_later_conversation(tmp_path: Path) -> None:
    # no system prompt and plain first conversation: only the tool blocks further on tell
    path = write_jsonl(
        tmp_path / "a.jsonl",
        [
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hey"},
                ]
            },
            {
                "messages": [
                    {"role": "user", "content": "time?"},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "tool_use", "id": "tu1", "name": "clock", "input": {}}
                        ],
                    },
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "tu1", "content": "10:00"}
                        ],
                    },
                    {"role": "assistant", "content": "It is 10:00."},
                ]
            },
        ],
    )
    t = load(path)
    assert t.format == "anthropic"
    assert roles(t)[-3:] == ["assistant", "tool", "assistant"]


def test_anthropic_document_and_response_log(tmp_path: Path) -> None:
    doc = write_json(
        tmp_path / "doc.json",
        {"system": "Be kind.", "messages": [{"role": "user", "content": "hello"}]},
    )
    t = load(doc)
    assert (t.format, roles(t)) == ("anthropic", ["system", "user"])

    log = write_jsonl(
        tmp_path / "log.jsonl",
        [
            {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [{"type": "text", "text": "Hi there"}],
                "stop_reason": "end_turn",
            },
            {
                "id": "msg_02",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [{"type": "text", "text": "Again"}],
                "stop_reason": "end_turn",
            },
        ],
    )
    t = load(log)
    assert t.format == "anthropic"
    assert [m.id for m in t.messages] == ["msg_01", "msg_02"]
    assert t.messages[0].metadata["stop_reason"] == "end_turn"


def test_canonical_jsonl_with_anthropic_blocks_stays_canonical(tmp_path: Path) -> None:
    # SPEC §2 allows Anthropic blocks in canonical content; session lines must keep working
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [
            {"type": "session", "id": "a"},
            {"role": "user", "content": "search"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "tu1", "name": "s", "input": {}}],
            },
        ],
    )
    assert load(path).format == "canonical"


# --- anthropic ----------------------------------------------------------------------------


def test_anthropic_fixture_messages_sessions_and_tool_pairing() -> None:
    t = load(ANTHROPIC)
    assert t.sessions == ("trip-weather", "trip-snacks")
    assert roles(t) == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "system",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]
    # the tool_result-only user message is no turn; the one with text after its result is
    assert len(t.turns) == 4
    assert [t.messages[turn.user_index].content for turn in t.turns] == [
        "Hi, I'm Mia. I'm allergic to peanuts. What's the weather in Lisbon tomorrow?",
        "Here is my boarding pass. Which gate do I need?",
        "Suggest a snack for my flight.",
        "Something sweet, please.",
    ]
    for tool in (m for m in t.messages if m.role == "tool"):
        call = t.messages[tool.index - 1]
        assert call.role == "assistant"
        assert tool.tool_call_id in call.tool_call_ids
    first_call = t.messages[2].tool_calls[0]
    assert first_call["id"] == "toolu_01A"
    assert first_call["function"]["name"] == "get_weather"
    assert first_call["function"]["arguments"] == {"city": "Lisbon", "day": "tomorrow"}
    assert t.messages[3].content == "Sunny, 24°C, light wind from the north"
    assert t.messages[7].content == "You are a travel assistant."  # system as text blocks
    assert t.messages[10].content == '{"allergies": ["peanuts"], "diet": "none"}'
    image = t.messages[5]
    assert image.content == "Here is my boarding pass. Which gate do I need?"
    assert image.metadata["blocks"][0]["type"] == "image"


def test_anthropic_tool_error_flag_is_kept(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "a.jsonl",
        [
            {
                "system": "s",
                "messages": [
                    {"role": "user", "content": "go"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
                    },
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": "t1",
                                "content": "boom",
                                "is_error": True,
                            }
                        ],
                    },
                ],
            }
        ],
    )
    tool = load(path).messages[-1]
    assert (tool.role, tool.tool_call_id, tool.metadata) == ("tool", "t1", {"is_error": True})


# --- langchain ----------------------------------------------------------------------------


def test_langchain_fixture() -> None:
    t = load(LANGCHAIN)
    assert roles(t) == ["system", "user", "assistant", "user", "assistant", "tool", "assistant"]
    assert [m.id for m in t.messages] == [
        "m1",
        "lc-h1",
        "lc-a1",
        "lc-h2",
        "lc-a2",
        "lc-t1",
        "lc-a3",
    ]
    call = t.message("lc-a2").tool_calls[0]
    assert call == {
        "id": "call_7f3a",
        "type": "function",
        "function": {"name": "search_recipes", "arguments": {"query": "eggless pancakes"}},
    }
    tool = t.message("lc-t1")
    assert (tool.tool_call_id, tool.name) == ("call_7f3a", "search_recipes")
    assert len(t.turns) == 2
    assert t.sessions == ("s1",)


def test_langchain_jsonl_dumpd_and_several_conversations(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "lc.jsonl",
        [
            {"type": "human", "data": {"content": "hi", "id": "h1"}},
            {
                "lc": 1,
                "type": "constructor",
                "id": ["langchain", "schema", "messages", "AIMessage"],
                "kwargs": {"content": "hello", "id": "a1"},
            },
            {"type": "AIMessageChunk", "data": {"content": "more", "id": "a2"}},
        ],
    )
    t = load(path)
    assert (t.format, roles(t), [m.id for m in t.messages]) == (
        "langchain",
        ["user", "assistant", "assistant"],
        ["h1", "a1", "a2"],
    )
    nested = write_json(
        tmp_path / "lc2.json",
        [
            [{"type": "human", "data": {"content": "a"}}, {"type": "ai", "data": {"content": "b"}}],
            [{"type": "human", "data": {"content": "c"}}],
        ],
    )
    t = load(nested)
    assert t.sessions == ("s1", "s2")
    assert [m.session for m in t.messages] == ["s1", "s1", "s2"]


# --- sharegpt -----------------------------------------------------------------------------


def test_sharegpt_fixture_sessions_and_function_calls() -> None:
    t = load(SHAREGPT)
    assert t.sessions == ("sg-001", "sg-002", "s3")
    assert [sum(m.session == s for m in t.messages) for s in t.sessions] == [5, 5, 2]
    assert roles(t)[5:10] == ["system", "user", "assistant", "tool", "assistant"]
    call, result = t.messages[7], t.messages[8]
    assert call.tool_calls[0]["function"] == {
        "name": "convert_units",
        "arguments": {"value": 5, "from": "km", "to": "mi"},
    }
    assert result.tool_call_id == call.tool_call_ids[0]
    assert result.content == '{"result": 3.107}'
    assert len(t.turns) == 4


def test_sharegpt_json_array(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "sg.json",
        [
            {"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]},
            {"id": "x", "conversations": [{"from": "human", "value": "c"}]},
        ],
    )
    t = load(path)
    assert (t.format, t.sessions, roles(t)) == (
        "sharegpt",
        ("s1", "x"),
        ["user", "assistant", "user"],
    )


# --- locomo -------------------------------------------------------------------------------


def test_locomo_fixture_keeps_dia_ids_roles_and_sessions() -> None:
    t = load(LOCOMO)
    assert t.sessions == ("session_1", "session_2")  # session_3 has a date and no turns
    assert t.session_ts == {
        "session_1": "10:15 am on 3 March, 2024",
        "session_2": "6:40 pm on 17 March, 2024",
    }
    assert [m.id for m in t.messages] == [
        "D1:1",
        "D1:2",
        "D1:3",
        "D1:4",
        "D1:5",
        "D2:1",
        "D2:2",
        "D2:3",
        "D2:4",
    ]
    for m in t.messages:
        assert (m.role, m.name) in {("user", "Priya"), ("assistant", "Tomás")}
    assert t.message("D1:2").role == "assistant"
    shared = t.message("D1:4")
    assert shared.content == (
        "Look what I baked for my sister's birthday yesterday! "
        "[image: a photo of a lemon cake with white frosting]"
    )
    assert shared.metadata["img_url"] == ["https://example.org/images/lemon-cake.jpg"]
    assert shared.metadata["blip_caption"] == "a photo of a lemon cake with white frosting"
    assert t.message("D1:3").metadata == {}


def test_locomo_sessions_in_numeric_order(tmp_path: Path) -> None:
    conv: dict[str, Any] = {"speaker_a": "A", "speaker_b": "B"}
    for n in (10, 2, 1):
        conv[f"session_{n}"] = [{"speaker": "A", "dia_id": f"D{n}:1", "text": f"s{n}"}]
    path = write_json(tmp_path / "l.json", [{"sample_id": "c", "conversation": conv, "qa": []}])
    assert load(path).sessions == ("session_1", "session_2", "session_10")


def _two_samples(tmp_path: Path) -> Path:
    sample = json.loads(LOCOMO.read_text(encoding="utf-8"))[0]
    second = json.loads(json.dumps(sample))
    second["sample_id"] = "demo-2"
    return write_json(tmp_path / "two.json", [sample, second])


def test_locomo_several_samples_prefix_ids(tmp_path: Path) -> None:
    t = load(_two_samples(tmp_path))
    assert t.sessions == (
        "demo-1/session_1",
        "demo-1/session_2",
        "demo-2/session_1",
        "demo-2/session_2",
    )
    assert t.messages[0].id == "demo-1/D1:1"
    assert t.messages[9].id == "demo-2/D1:1"
    assert t.messages[9].metadata["dia_id"] == "D1:1"
    assert len(t.messages) == 18


def test_locomo_probes_parse_malformed_evidence() -> None:
    probes = locomo_probes(LOCOMO)
    assert [p["evidence_ids"] for p in probes] == [
        ["D1:3"],
        ["D1:5"],
        ["D1:4", "D2:2"],
        ["D2:3"],
        ["D1:3"],
    ]
    assert probes[1]["answer"] == "2019"  # numbers become text
    assert probes[0] == {
        "id": "demo-1/q1",
        "question": "What is Priya allergic to?",
        "answer": "shellfish",
        "evidence_ids": ["D1:3"],
        "category": 4,
        "sample_id": "demo-1",
        "at": None,
        "after_turn": 5,
    }
    adversarial = probes[4]
    assert adversarial["answer"] is None
    assert adversarial["adversarial_answer"] == "shellfish"
    assert all("unresolved_evidence" not in p for p in probes)


def test_locomo_probes_over_several_samples_name_real_messages(tmp_path: Path) -> None:
    path = _two_samples(tmp_path)
    t = load(path)
    probes = locomo_probes(path)
    assert len(probes) == 10
    assert probes[7]["evidence_ids"] == ["demo-2/D1:4", "demo-2/D2:2"]
    assert [p["after_turn"] for p in probes] == [5] * 5 + [10] * 5
    for p in probes:
        for mid in p["evidence_ids"]:
            assert t.message(mid).id == mid


def test_locomo_probe_with_unknown_evidence(tmp_path: Path) -> None:
    doc = json.loads(LOCOMO.read_text(encoding="utf-8"))
    doc[0]["qa"] = [{"question": "q", "answer": "a", "evidence": ["D9:1", "see above", "D1:02"]}]
    probe = locomo_probes(write_json(tmp_path / "l.json", doc))[0]
    assert probe["evidence_ids"] == ["D1:2"]
    assert probe["unresolved_evidence"] == ["D9:1", "see above"]


def test_locomo_probes_reject_other_formats() -> None:
    with pytest.raises(InputError, match="not a LoCoMo file"):
        locomo_probes(SHAREGPT)


# --- longmemeval --------------------------------------------------------------------------


def test_longmemeval_fixture() -> None:
    t = load(LONGMEMEVAL)
    assert t.sessions == ("sess-garden-01", "answer_sess-dog-01", "sess-travel-01", "q-dog-01")
    assert t.session_ts["answer_sess-dog-01"] == "2023/05/20 (Sat) 14:12"
    assert t.session_ts["q-dog-01"] == "2023/06/10 (Sat) 18:05"
    marked = [m.id for m in t.messages if m.metadata.get("has_answer")]
    assert marked == ["answer_sess-dog-01:1"]
    assert "has_answer" not in t.message("answer_sess-dog-01:3").metadata  # false: not kept
    question = t.messages[-1]
    assert (question.id, question.role, question.session) == ("q-dog-01", "user", "q-dog-01")
    assert question.content == "What is the name of the dog I adopted?"
    assert question.turn == len(t.turns) == 5


def test_longmemeval_probes_point_at_the_question_turn() -> None:
    t = load(LONGMEMEVAL)
    (probe,) = longmemeval_probes(LONGMEMEVAL)
    assert probe["answer"] == "Biscuit"
    assert probe["evidence_ids"] == ["answer_sess-dog-01:1"]
    assert probe["evidence_sessions"] == ["answer_sess-dog-01"]
    assert probe["category"] == "single-session-user"
    assert t.turn(probe["at"]).user_index == t.message(probe["at_id"]).index


def test_longmemeval_several_instances(tmp_path: Path) -> None:
    inst = json.loads(LONGMEMEVAL.read_text(encoding="utf-8"))[0]
    other = json.loads(json.dumps(inst))
    other["question_id"] = "q-dog-02"
    path = write_json(tmp_path / "lme.json", [inst, other])
    t = load(path)
    assert t.sessions[3:5] == ("q-dog-01", "q-dog-02/sess-garden-01")
    probes = longmemeval_probes(path)
    assert [p["at"] for p in probes] == [5, 10]
    assert probes[1]["evidence_ids"] == ["q-dog-02/answer_sess-dog-01:1"]
    assert probes[1]["evidence_sessions"] == ["q-dog-02/answer_sess-dog-01"]
    for p in probes:
        assert t.message(p["at_id"]).turn == p["at"]
        assert all(t.message(e).metadata["has_answer"] for e in p["evidence_ids"])


# --- malformed input ----------------------------------------------------------------------


def test_jsonl_error_names_file_line_and_field(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {"system": "s", "messages": [{"role": "user", "content": "hi"}]},
            {
                "system": "s",
                "messages": [
                    {"role": "user", "content": "x"},
                    {"role": "user", "content": [{"type": "tool_result", "content": "r"}]},
                ],
            },
        ],
    )
    with pytest.raises(InputError) as info:
        load(path)
    assert str(info.value) == (
        f"{path}:2: messages[1]: tool_result block 0: missing field 'tool_use_id'"
    )


def test_json_array_error_names_the_line_where_the_element_starts(tmp_path: Path) -> None:
    doc = json.loads(LOCOMO.read_text(encoding="utf-8"))
    second = json.loads(json.dumps(doc[0]))
    second["sample_id"] = "demo-2"
    del second["conversation"]["session_2"][1]["dia_id"]
    path = write_json(tmp_path / "two.json", [doc[0], second])
    start = (
        next(
            n
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
            if '"sample_id": "demo-2"' in line
        )
        - 1
    )  # the object's opening brace is the line before its first field
    with pytest.raises(InputError) as info:
        load(path)
    assert str(info.value) == (
        f"{path}:{start}: sample 'demo-2': conversation.session_2[1]: "
        "missing field 'dia_id' (a string)"
    )


@pytest.mark.parametrize(
    ("fmt", "doc", "expected"),
    [
        (
            "langchain",
            [{"type": "robot", "data": {"content": "x"}}],
            "unknown message type 'robot'",
        ),
        ("langchain", [{"type": "human", "data": {"content": 5}}], "data.content:"),
        ("langchain", [{"type": "human", "data": {"content": "x", "id": {}}}], "data.id:"),
        ("sharegpt", [{"conversations": [{"from": "alien", "value": "x"}]}], "field 'from'"),
        ("sharegpt", [{"conversations": [{"from": "human"}]}], "missing field 'value'"),
        ("sharegpt", [{"chats": []}], "missing field 'conversations'"),
        (
            "anthropic",
            [{"system": 3, "messages": [{"role": "user", "content": "x"}]}],
            "field 'system'",
        ),
        (
            "anthropic",
            [
                {
                    "messages": [
                        {
                            "role": "assistant",
                            "content": [{"type": "tool_result", "tool_use_id": "t"}],
                        }
                    ]
                }
            ],
            "belong in a user message",
        ),
        (
            "locomo",
            [{"sample_id": "c", "conversation": {"speaker_a": "A"}}],
            "conversation.speaker_b",
        ),
        (
            "locomo",
            [
                {
                    "sample_id": "c",
                    "conversation": {
                        "speaker_a": "A",
                        "speaker_b": "B",
                        "session_1": [{"speaker": "C", "dia_id": "D1:1", "text": "x"}],
                    },
                }
            ],
            "field 'speaker'",
        ),
        (
            "locomo",
            [
                {
                    "sample_id": "c",
                    "conversation": {"speaker_a": "A", "speaker_b": "B", "session_1": "x"},
                }
            ],
            "conversation.session_1",
        ),
        ("locomo", ["not a sample"], "sample 1: expected an object"),
        ("longmemeval", [{"question_id": "q", "question": "?"}], "haystack_sessions"),
        (
            "longmemeval",
            [
                {
                    "question_id": "q",
                    "question": "?",
                    "haystack_sessions": [[]],
                    "haystack_session_ids": [],
                }
            ],
            "haystack_session_ids",
        ),
        (
            "longmemeval",
            [
                {
                    "question_id": "q",
                    "question": "?",
                    "haystack_sessions": [[]],
                    "haystack_dates": ["a", "b"],
                }
            ],
            "haystack_dates",
        ),
        (
            "longmemeval",
            [
                {
                    "question_id": "q",
                    "question": "?",
                    "haystack_sessions": [[{"role": "robot", "content": "x"}]],
                }
            ],
            "field 'role'",
        ),
        ("longmemeval", [{"question": "?", "haystack_sessions": []}], "question_id"),
    ],
)
def test_malformed_records_are_input_errors(
    tmp_path: Path, fmt: str, doc: Any, expected: str
) -> None:
    path = write_json(tmp_path / "bad.json", doc)
    with pytest.raises(InputError) as info:
        load(path, fmt)
    assert str(info.value).startswith(f"{path}:")
    assert expected in str(info.value)


def test_skip_invalid_counts_skipped_records(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "sg.jsonl",
        [
            {
                "id": "a",
                "conversations": [
                    {"from": "human", "value": "one"},
                    {"from": "gpt"},  # no value
                    {"from": "gpt", "value": "two"},
                ],
            },
            {"id": "b", "turns": []},  # no conversations
            {
                "id": "c",
                "conversations": [
                    {"from": "martian", "value": "?"},
                    {"from": "human", "value": "three"},
                ],
            },
        ],
    )
    with pytest.raises(InputError, match=r"sg\.jsonl:1: conversations\[1\]: missing field 'value'"):
        load(path)
    t = load(path, skip_invalid=True)
    assert t.skipped == 3
    assert [m.content for m in t.messages] == ["one", "two", "three"]
    assert t.warnings[1] == f"{path}:2: skipped: missing field 'conversations' (a list)"


def test_probes_skip_invalid_qa(tmp_path: Path) -> None:
    doc = json.loads(LOCOMO.read_text(encoding="utf-8"))
    doc[0]["qa"].insert(0, {"answer": "no question", "evidence": []})
    doc[0]["qa"].insert(0, {"question": "q", "answer": "a", "evidence": [3]})
    path = write_json(tmp_path / "l.json", doc)
    with pytest.raises(InputError, match=r"qa\[0\]: field 'evidence' must be a list"):
        locomo_probes(path)
    assert len(locomo_probes(path, skip_invalid=True)) == 5


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "x", "D1:1", "user"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["role", "content", "type", "text", "id"]), inner, max_size=3
        )
    ),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place inside a JSON value, as a path of keys and indexes."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _mutate(doc: Any, path: tuple[Any, ...], replacement: Any, delete: bool) -> Any:
    doc = json.loads(json.dumps(doc))
    if not path:
        return replacement
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    return doc


def _fixture_records(path: Path) -> list[Any]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines()]
    return json.loads(text)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), fixture=st.sampled_from(FIXTURES))
def test_damaged_fixtures_give_input_errors_only(
    tmp_path: Path, data: st.DataObject, fixture: tuple[Path, str]
) -> None:
    """Whatever part of a valid file is replaced or deleted: a result or an InputError."""
    source, name = fixture
    doc = _fixture_records(source)
    for _ in range(data.draw(st.integers(1, 3))):
        places = _paths(doc)[1:]
        if not places:
            break
        path = data.draw(st.sampled_from(places))
        doc = _mutate(doc, path, data.draw(JSON_VALUES), data.draw(st.booleans()))
    damaged = (
        write_jsonl(tmp_path / "d.jsonl", doc)
        if source.suffix == ".jsonl" and isinstance(doc, list)
        else write_json(tmp_path / "d.json", doc)
    )
    # auto-detection runs every registered detector, so it is checked too (reading with
    # another format's reader is that reader's business)
    calls = [
        lambda skip: load(damaged, name, skip_invalid=skip),
        lambda skip: detect_format(read_source(damaged, skip)),
    ]
    if name == "locomo":
        calls.append(lambda skip: locomo_probes(damaged, skip_invalid=skip))
    if name == "longmemeval":
        calls.append(lambda skip: longmemeval_probes(damaged, skip_invalid=skip))
    for call in calls:
        for skip in (False, True):
            with contextlib.suppress(InputError):
                call(skip)


# --- canonical writer ---------------------------------------------------------------------


@pytest.mark.parametrize(("path", "name"), FIXTURES, ids=[n for _, n in FIXTURES])
def test_fixture_round_trips_through_canonical(tmp_path: Path, path: Path, name: str) -> None:
    first = load(path)
    out = tmp_path / "out.jsonl"
    out.write_text(canonical_text(first), encoding="utf-8")
    second = load(out)
    assert second.format == "canonical"
    assert_same(first, second)
    assert canonical_text(second) == canonical_text(first)


def test_writer_adds_session_lines_only_when_they_carry_information(tmp_path: Path) -> None:
    plain = write_jsonl(tmp_path / "p.jsonl", [{"role": "user", "content": "hi"}])
    assert list(to_canonical(load(plain))) == [{"role": "user", "content": "hi", "id": "m1"}]
    dated = write_jsonl(
        tmp_path / "d.jsonl", [{"role": "user", "content": "hi", "ts": "2026-01-01"}]
    )
    first = next(iter(to_canonical(load(dated))))
    assert first == {"type": "session", "id": "s1", "ts": "2026-01-01"}


def test_writer_places_summaries_and_sessions(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [
            {"role": "user", "content": "a", "session": "one"},
            {"role": "assistant", "content": "b", "forgot": "x"},
            {"type": "summary", "content": "sum", "replaces_through": "m1"},
            {"type": "session", "id": "empty"},
            {"type": "session", "id": "two", "ts": "t2"},
            {"role": "user", "content": "c", "name": "Mia"},
        ],
    )
    records = list(to_canonical(load(path)))
    assert records == [
        {"type": "session", "id": "one"},
        {"role": "user", "content": "a", "id": "m1"},
        {"role": "assistant", "content": "b", "id": "m2", "forgot": "x"},
        {"type": "summary", "content": "sum", "replaces_through": "m1"},
        {"type": "session", "id": "empty"},
        {"type": "session", "id": "two", "ts": "t2"},
        {"role": "user", "content": "c", "id": "m3", "name": "Mia"},
    ]


def test_writer_escapes_unicode_line_separators(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "u.jsonl", [{"role": "user", "content": "a\u2028b\x85c 你好"}])
    text = canonical_text(load(path))
    assert text.count("\n") == 1
    assert "你好" in text  # ensure_ascii=False: readable UTF-8


ROLES_ST = st.sampled_from(["system", "user", "assistant", "tool"])
TEXT_ST = st.text(st.characters(exclude_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["line\u2028break", "nel\x85here", "多语言 text"]
)


@st.composite
def canonical_records(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A valid canonical JSONL transcript: messages, session lines and summaries."""
    records: list[dict[str, Any]] = []
    ids: list[str] = []  # ids of the messages so far (given, or the m<N> build assigns)
    for k in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["message"] * 4 + ["session", "summary"]))
        if kind == "session":
            record: dict[str, Any] = {
                "type": "session",
                "id": draw(st.sampled_from(["s1", "s2", "x"])),
            }
            if draw(st.booleans()):
                record["ts"] = f"2026-01-0{k % 9 + 1}"
            records.append(record)
        elif kind == "summary" and ids:
            record = {"type": "summary", "content": draw(TEXT_ST)}
            through = draw(st.none() | st.sampled_from(ids))
            if through is not None:
                record["replaces_through"] = through
            records.append(record)
        else:
            role = draw(ROLES_ST)
            record = {"role": role, "content": draw(TEXT_ST)}
            if draw(st.booleans()):
                record["id"] = f"x{k}"
            for key, value in (
                ("ts", st.sampled_from(["2026-02-01", "9:00 am"])),
                ("name", st.sampled_from(["Mia", "tool_a"])),
                ("session", st.sampled_from(["s1", "s2", "y"])),
                ("has_answer", st.just(True)),
            ):
                if draw(st.integers(0, 3)) == 0:
                    record[key] = draw(value)
            if role == "assistant" and draw(st.booleans()):
                record["tool_calls"] = [
                    {
                        "id": f"c{k}",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    }
                ]
            if role == "assistant" and draw(st.integers(0, 3)) == 0:
                record["forgot"] = draw(TEXT_ST)
            if role == "tool" and draw(st.booleans()):
                record["tool_call_id"] = f"c{k}"
            records.append(record)
            ids.append(record.get("id", f"m{len(ids) + 1}"))
    if not ids:
        records.append({"role": "user", "content": "last"})
    return records


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(records=canonical_records())
def test_canonical_round_trip_property(tmp_path: Path, records: list[dict[str, Any]]) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", records)  # ASCII-escaped input
    first = load(source)
    out = tmp_path / "out.jsonl"
    out.write_text(canonical_text(first), encoding="utf-8")
    second = load(out)
    assert_same(first, second, exact_turns=not hollow_session_entry(records))
    assert canonical_text(second) == canonical_text(first)


def hollow_session_entry(records: list[dict[str, Any]]) -> bool:
    """Whether a session is entered and left before any of its messages.

    A Transcript keeps no position for such an entry, so the writer cannot put it back where it
    was; build() then numbers a resumed session's turns differently (it does not restore a
    resumed session's turn count), while ids, order and global turns stay the same.
    """
    entered: str | None = None  # a session entered by a line, with no message yet
    for record in records:
        if record.get("type") == "summary":
            continue
        target = record["id"] if record.get("type") == "session" else record.get("session")
        leaves = target is not None or "role" not in record  # a message without session stays
        if entered is not None and target != entered and leaves:
            return True
        entered = target if record.get("type") == "session" else None
    return entered is not None
