"""Reading input files and reporting bad records: file, line and field, or skipped."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdiag.errors import InputError
from memdiag.transcript import detect_format, load, read_source
from tests.transcript.common import (
    FIXTURES,
    LOCOMO,
    write_json,
    write_jsonl,
)


def test_invalid_json_line_and_skip_invalid(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text(
        '{"role": "user", "content": "a"}\n'
        '{"role": "assistant", \n'
        '{"role": "user", "content": "b"}\n'
    )
    with pytest.raises(InputError, match=r"t.jsonl:2: invalid JSON"):
        load(p)
    t = load(p, skip_invalid=True)
    assert t.skipped == 1 and len(t.messages) == 2


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty file"),
        (b"\x00\x01\x02binary", "binary"),
        (b'{"role": "user", "content": "\xff"}', "UTF-8"),
    ],
)
def test_unreadable_files(tmp_path, data, message):
    p = tmp_path / "x.jsonl"
    p.write_bytes(data)
    with pytest.raises(InputError, match=message):
        load(p)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load(tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match="directory"):
        load(tmp_path)


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
    if name in ("locomo", "longmemeval"):  # the probes are read along, then checked
        calls.append(lambda skip: load(damaged, name, skip_invalid=skip).checked_probes())
    for call in calls:
        for skip in (False, True):
            with contextlib.suppress(InputError):
                call(skip)


# --- JSON values one after another (OpenTelemetry's ConsoleSpanExporter) ---------------------

CONSOLE = (
    Path(__file__).resolve().parents[2] / "fixtures" / "formats" / "traces" / "otel_console.log"
)


def test_console_span_exporter_output_is_read_by_the_otel_reader() -> None:
    """The SDK's ConsoleSpanExporter prints each span pretty-printed, one after another
    (fixtures/formats/traces/make_otel_console.py): every span is a record at its own line."""
    text = CONSOLE.read_text(encoding="utf-8")
    with pytest.raises(json.JSONDecodeError, match="Extra data"):
        json.loads(text)  # neither one JSON document ...
    assert any(line.strip() == "{" for line in text.splitlines())  # ... nor JSON Lines
    source = read_source(CONSOLE)
    starts = [k + 1 for k, line in enumerate(text.splitlines()) if line == "{"]
    assert [line for line, _ in source.records] == starts  # each span at the line it starts
    assert [r["name"] for _, r in source.records] == [
        "chat gpt-4o",
        "chat gpt-4o",
        "invoke_agent travel",
    ]
    t = load(CONSOLE)
    assert t.format == "otel"
    assert [(m.role, m.content) for m in t.messages if m.role != "system"] == [
        ("user", "Hi, I'm Mia. I'm allergic to peanuts."),
        ("assistant", "Noted, Mia! I'll keep that in mind."),
        ("user", "Suggest a snack for my flight."),
        ("assistant", "Try a pack of salted pretzels."),
    ]
    assert len(t.windows) == 2
    assert tuple(t.sessions) == ("conv-1",)


def test_concatenated_values_are_read_for_every_format(tmp_path: Path) -> None:
    """The source layer reads them, so a canonical file of pretty-printed messages works too."""
    records = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    path = tmp_path / "pretty.json"
    path.write_text("".join(json.dumps(r, indent=2) + "\n" for r in records), encoding="utf-8")
    t = load(path)
    assert t.format == "canonical"
    assert [m.content for m in t.messages] == ["hi", "hello"]
    assert [m.line for m in t.messages] == [1, 5]


def test_a_broken_value_among_concatenated_ones_names_its_line(tmp_path: Path) -> None:
    text = CONSOLE.read_text(encoding="utf-8")
    cut = text.rindex("}", 0, len(text) - 2)  # the last span loses its closing brace
    path = tmp_path / "cut.log"
    path.write_text(text[:cut], encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load(path)
    message = str(exc.value)
    assert message.startswith(f"{path}:")
    assert "truncated?" in message and "value 3 of a file of JSON values" in message


_FIELD_VALUES = st.none() | st.text(max_size=3) | st.integers() | st.floats() | st.booleans()
_FIELD_VALUES |= st.lists(st.integers(), max_size=1)


@given(
    st.dictionaries(
        st.sampled_from(["id", "session", "ts", "timestamp", "name", "tool_call_id"]),
        _FIELD_VALUES,
    )
)
def test_message_string_fields_are_read_as_opt_str_reads_them(fields: dict[str, object]) -> None:
    """The shortcut for fields that are absent or strings gives what reading each field with
    opt_str gives, in the same order: the same values, or the first wrong field's error."""
    from memdiag.transcript.source import message_from_dict, opt_str

    obj = {"role": "user", "content": "hi", **fields}

    def one_by_one() -> object:  # the order of RawMessage's arguments
        mid, session = opt_str(obj, "id"), opt_str(obj, "session")
        ts = opt_str(obj, "ts") or opt_str(obj, "timestamp")
        return (mid, session, ts, opt_str(obj, "name"), opt_str(obj, "tool_call_id"))

    def read() -> object:
        m = message_from_dict(obj, 1)
        return (m.id, m.session, m.ts, m.name, m.tool_call_id)

    def outcome(f) -> object:  # type: ignore[no-untyped-def]
        try:
            return f()
        except ValueError as exc:
            return str(exc)

    expected = outcome(one_by_one)
    assert outcome(read) == expected
