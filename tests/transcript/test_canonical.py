"""The canonical JSON Lines reader (docs/reference.md#transcript-input) and what build() makes of
it."""

from __future__ import annotations

import pytest

from memdiag.errors import InputError
from memdiag.transcript import load
from tests.transcript.common import (
    write,
)


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


def test_duplicate_ids_rejected(tmp_path):
    p = write(
        tmp_path,
        [{"role": "user", "content": "a", "id": "x"}, {"role": "user", "content": "b", "id": "x"}],
    )
    with pytest.raises(InputError, match="duplicate message id 'x'"):
        load(p)


def test_messages_and_turns_compare_and_hash_as_frozen_records(tmp_path):
    """Message and Turn are plain slots records at run time (frozen for the type checker, see
    memdiag/transcript/model.py), with the equality and hash a frozen dataclass gives."""
    import dataclasses

    rows = [{"role": "user", "content": "Hi, I'm Mia."}, {"role": "assistant", "content": "Hi"}]
    a, b = load(write(tmp_path, rows)), load(write(tmp_path, rows, "again.jsonl"))
    assert a.messages == b.messages and a.turns == b.turns
    assert {*a.turns, *b.turns} == set(a.turns)  # by value
    with pytest.raises(TypeError):  # as a frozen one: its metadata, a dict, has no hash
        hash(a.messages[0])
    other = dataclasses.replace(a.messages[0], content="Hi, I'm Leo.")
    assert other != a.messages[0] and dataclasses.fields(other) == dataclasses.fields(a.messages[0])
    assert not hasattr(a.messages[0], "__dict__")  # slots: no per-message dict


def test_a_load_leaves_no_reference_cycle(tmp_path):
    """Nothing a load makes waits for the cyclic collector: a cycle (an exception kept with its
    traceback holds the reader's frames) would keep every record read until a full collection.
    The file starts like a JSON document, so the reader tries it as one first and fails."""
    import gc

    rows = [{"role": "user", "content": f"message {k}"} for k in range(50)]
    p = write(tmp_path, rows)
    gc.collect()
    gc.disable()
    try:
        t = load(p)
        del t
        assert gc.collect() == 0
    finally:
        gc.enable()
