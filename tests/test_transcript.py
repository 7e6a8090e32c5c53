from __future__ import annotations

import json

import pytest

from memdiag.errors import InputError
from memdiag.transcript import load


def write(tmp_path, lines, name="t.jsonl"):
    p = tmp_path / name
    p.write_text(
        "\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8"
    )
    return p


def test_canonical_sessions_turns_ids(tmp_path):
    p = write(
        tmp_path,
        [
            {"role": "system", "content": "sys"},
            {
                "role": "user",
                "content": "Hi, I'm Mia.",
                "session": "s1",
                "ts": "2026-11-27T09:00:00Z",
            },
            {"role": "assistant", "content": "Hello"},
            {"type": "session", "id": "s2", "ts": "2026-11-28T10:00:00Z"},
            {"role": "user", "content": "Snack?"},
            {"role": "assistant", "content": "Peanuts!", "forgot": "allergic to peanuts"},
            {"type": "summary", "content": "Mia asked.", "replaces_through": "m4"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "x"}},
                ],
            },
        ],
    )
    t = load(p)
    assert t.format == "canonical"
    assert [m.id for m in t.messages] == ["m1", "m2", "m3", "m4", "m5", "m6"]
    assert t.sessions == ("s1", "s2")
    assert [m.session for m in t.messages] == ["s1", "s1", "s1", "s2", "s2", "s2"]
    assert [(x.number, x.session, x.session_turn) for x in t.turns] == [
        (1, "s1", 1),
        (2, "s2", 1),
        (3, "s2", 2),
    ]
    assert t.messages[4].forgot == "allergic to peanuts"
    assert t.summaries[0].replaces_through == 3 and t.summaries[0].after_index == 4
    assert t.messages[5].content == "look"
    assert t.messages[5].metadata["blocks"][0]["type"] == "image_url"
    assert t.session_ts["s2"] == "2026-11-28T10:00:00Z"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"content": "x"}, "missing field 'role'"),
        ({"role": "robot", "content": "x"}, "unknown role 'robot'"),
        ({"role": "user", "content": 5}, "field 'content'"),
        ({"role": "assistant", "content": "x", "forgot": 3}, "field 'forgot'"),
        ({"type": "weird"}, "field 'type'"),
        ({"type": "summary", "content": "s", "replaces_through": "nope"}, "replaces_through"),
    ],
)
def test_bad_records_name_file_line_field(tmp_path, line, message):
    p = write(tmp_path, [{"role": "user", "content": "ok"}, line])
    with pytest.raises(InputError) as exc:
        load(p)
    assert str(exc.value).startswith(f"{p}:2: ")
    assert message in str(exc.value)


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


def test_openai_formats(tmp_path):
    conv = {
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
        ]
    }
    p = write(tmp_path, [conv, conv])
    t = load(p)
    assert t.format == "openai"
    assert len(t.sessions) == 2 and len(t.messages) == 8
    assert t.messages[2].tool_call_ids == ("c1",)
    arr = tmp_path / "arr.json"
    arr.write_text(json.dumps(conv["messages"]))
    t2 = load(arr)
    assert t2.format == "openai" and len(t2.messages) == 4 and t2.sessions == ("s1",)


def test_duplicate_ids_rejected(tmp_path):
    p = write(
        tmp_path,
        [{"role": "user", "content": "a", "id": "x"}, {"role": "user", "content": "b", "id": "x"}],
    )
    with pytest.raises(InputError, match="duplicate message id 'x'"):
        load(p)
