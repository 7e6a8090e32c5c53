"""The reader toolkit (memdiag/transcript/toolkit.py): one way to refuse a record, one path
error, and typed accessors that refuse a wrong value with that error and nothing else."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memdiag.errors import InputError
from memdiag.transcript.source import Source
from memdiag.transcript.toolkit import (
    PathError,
    expect,
    get_dict,
    get_list,
    get_str,
    reject,
    step,
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


def _source() -> Source:
    return Source("chats.json", [], is_jsonl=False)


def test_reject_raises_one_line_naming_file_line_and_path() -> None:
    with pytest.raises(InputError) as exc:
        reject(_source(), False, PathError("[3].messages[1].role", "unknown role 'robot'"), 12)
    assert str(exc.value) == "chats.json:12: [3].messages[1].role: unknown role 'robot'"
    assert exc.value.exit_code == 2
    with pytest.raises(InputError, match=r"^chats.json: missing field 'id'$"):
        reject(_source(), False, "missing field 'id'")  # no line inside one JSON document


def test_reject_with_skip_invalid_counts_warns_and_records_the_problem() -> None:
    source = _source()
    reject(source, True, PathError("[0].text", "expected a string, got list"), 4)
    reject(source, True, PathError("[1]", "expected an object", line=9))  # the error's own line
    assert source.skipped == 2
    assert source.warnings == [
        "chats.json:4: skipped: [0].text: expected a string, got list",
        "chats.json:9: skipped: [1]: expected an object",
    ]
    assert [(p.message, p.line) for p in source.problems] == [
        ("[0].text: expected a string, got list", 4),
        ("[1]: expected an object", 9),
    ]


def test_path_steps_and_messages() -> None:
    assert step("", "messages") == "messages"
    assert step("messages", 2) == "messages[2]"
    assert step("messages[2]", "role") == "messages[2].role"
    assert str(PathError("", "empty file")) == "empty file"
    assert isinstance(PathError("a", "b"), ValueError)  # caught by `except ValueError` too


def test_accessors_read_what_is_there_and_default_what_is_not() -> None:
    obj: dict[str, Any] = {"n": 7, "s": "x", "d": {"k": 1}, "l": [1], "null": None}
    assert get_str(obj, "s") == "x"
    assert get_str(obj, "n") == "7"  # ids are often numbers
    assert get_str(obj, "missing") is None and get_str(obj, "null") is None
    assert get_dict(obj, "d") == {"k": 1} and get_dict(obj, "missing") == {}
    assert get_list(obj, "l") == [1] and get_list(obj, "null") == []
    assert expect(3, int, "n") == 3


def test_accessors_refuse_a_wrong_type_at_its_path() -> None:
    obj: dict[str, Any] = {"s": ["a"], "d": "text", "b": True}
    with pytest.raises(PathError, match=r"^msg\.s: expected a string, got list$"):
        get_str(obj, "s", "msg")
    with pytest.raises(PathError, match=r"^msg\.d: expected an object, got string$"):
        get_dict(obj, "d", "msg")
    with pytest.raises(PathError, match=r"^msg\.gone: expected a list, got null$"):
        get_list(obj, "gone", "msg", required=True)
    with pytest.raises(PathError, match=r"^b: expected an integer, got boolean$"):
        expect(obj["b"], int, "b")  # a bool is never a count
    with pytest.raises(PathError, match=r"^b: expected a string, got boolean$"):
        get_str(obj, "b")
    with pytest.raises(PathError, match=r"expected a list of turns, got object"):
        expect({}, list, "turns", "a list of turns")


@given(value=JSON, required=st.booleans())
def test_accessors_never_raise_anything_but_a_path_error(value: Any, required: bool) -> None:
    """Whatever JSON holds, an accessor returns the right type or raises PathError: a reader
    built on them cannot turn bad input into a KeyError or TypeError (exit 3)."""
    obj = {"k": value}
    for get, kind in ((get_str, str), (get_dict, dict), (get_list, list)):
        try:
            got = get(obj, "k", "r", required=required)  # type: ignore[operator]
        except PathError as exc:
            assert exc.where == "r.k"
        else:
            assert got is None or isinstance(got, kind)
