"""Every chat reader: canonical round trip, damaged files, CLI contracts, and the null
fields of the OpenAI and Anthropic SDK dumps."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdiag.cli import app
from memdiag.errors import InputError
from memdiag.transcript import detect_format, load, read_source
from memdiag.transcript.writer import write_canonical
from tests.transcript.realdata import (
    AGENT_DB,
    CHATGPT,
    CLAUDE,
    LANGGRAPH,
    RESPONSES,
    SDK_DUMPS,
    assert_tool_pairs,
    no_nulls,
    roles,
    runner,
    write_json,
)

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


def test_cli_select_on_a_plain_transcript_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n')
    result = runner.invoke(app, ["convert", str(path), "--conversation", "x"])
    assert result.exit_code == 2 and "--session/--conversation choose" in result.stderr
    result = runner.invoke(app, ["convert", str(CHATGPT), "--session", "a", "--conversation", "b"])
    assert result.exit_code == 2 and "not both" in result.stderr


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
