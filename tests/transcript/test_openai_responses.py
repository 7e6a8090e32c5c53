"""OpenAI Responses items: the fixture dumped by the `openai` SDK's own models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdiag.transcript import detect_format, load, read_source
from tests.transcript.realdata import (
    RESPONSES,
    assert_tool_pairs,
    error_of,
    no_nulls,
    roles,
    write_json,
)


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
        reason="the observed-window events (docs/reference.md#observed-windows) are not built",
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


def test_canonical_with_responses_blocks_stays_canonical(tmp_path: Path) -> None:
    """docs/reference.md#transcript-input lets canonical messages hold OpenAI content blocks;
    chat-style tool calls and
    `tool` messages tell them from Responses items."""
    path = tmp_path / "chat.jsonl"
    records = [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    t = load(path)
    assert t.format == "canonical" and [m.role for m in t.messages] == ["user", "assistant", "tool"]
