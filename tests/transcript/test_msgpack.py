"""The MessagePack decoder that reads LangGraph checkpoints: the format's own byte examples,
the checkpoints a real SqliteSaver wrote (against LangGraph's own reading of them), and
properties (round trips through an encoder written from the specification; any bytes give a
value or a ValueError, nothing else)."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdiag.transcript.checkpoints import read_thread, thread_summaries
from memdiag.transcript.msgpack import Ext, unpack
from tests.transcript.realdata import FORMATS

CHECKPOINTS = FORMATS / "langgraph_sqlite"


@pytest.mark.parametrize(
    ("data", "value"),
    [
        (b"\x00", 0),
        (b"\x7f", 127),
        (b"\xff", -1),
        (b"\xe0", -32),
        (b"\xcc\xff", 255),
        (b"\xcd\x01\x00", 256),
        (b"\xd0\x80", -128),
        (b"\xd3\x80\x00\x00\x00\x00\x00\x00\x00", -(2**63)),
        (b"\xcf\xff\xff\xff\xff\xff\xff\xff\xff", 2**64 - 1),
        (b"\xc0", None),
        (b"\xc2", False),
        (b"\xc3", True),
        (b"\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00", 1.5),
        (b"\xca\x3f\xc0\x00\x00", 1.5),
        (b"\xa3abc", "abc"),
        (b"\xd9\x03\xc3\xa9a", "éa"),
        (b"\xc4\x02\x01\x02", b"\x01\x02"),
        (b"\x93\x01\x02\x03", [1, 2, 3]),
        (b"\xdc\x00\x01\xc0", [None]),
        (b"\x82\xa1a\x01\xa1b\x92\x02\x03", {"a": 1, "b": [2, 3]}),
        (b"\x81\x01\xa1x", {1: "x"}),  # JsonPlusSerializer packs with non-str keys allowed
        (b"\x81\x92\x01\x02\xa1x", {(1, 2): "x"}),  # an array key: a tuple
        (b"\xd4\x05\x07", Ext(5, b"\x07")),
        (b"\xd5\xff\x01\x02", Ext(-1, b"\x01\x02")),
        (b"\xc7\x03\x05abc", Ext(5, b"abc")),
    ],
)
def test_the_specifications_examples(data: bytes, value: Any) -> None:
    assert unpack(data) == value


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"", "1 bytes wanted at byte 0"),
        (b"\xa5ab", "5 bytes wanted at byte 1"),
        (b"\xc1", "invalid byte 0xc1 at byte 0"),
        (b"\xdd\xff\xff\xff\xff", "4294967295 elements claimed"),
        (b"\x01\x02", "1 bytes after the value"),
        (b"\xa2\xff\xfe", "invalid UTF-8"),
        (b"\x81\x80\x01", "map key"),
        (b"\x91" * 200 + b"\xc0", "nested deeper than"),
    ],
)
def test_corrupt_bytes_are_one_clear_error(data: bytes, says: str) -> None:
    with pytest.raises(ValueError, match="msgpack: ") as info:
        unpack(data)
    assert says in str(info.value)


def test_the_checkpoints_of_a_real_sqlite_saver_decode_to_langgraphs_states() -> None:
    """states.json is LangGraph's own get_state_history() of the threads in the database."""
    db = str(CHECKPOINTS / "checkpoints.sqlite")
    truth = json.loads((CHECKPOINTS / "states.json").read_text())
    assert [t for t, _, _ in thread_summaries(db)] == list(truth)
    for tid, states in truth.items():
        thread = read_thread(db, tid)
        assert thread.other_branches == 0 and thread.subgraph_checkpoints == 0
        got = [
            (c.id, c.step, c.source, [m["id"] for _, m in c.messages or ()])
            for c in thread.checkpoints
        ]
        assert got == [(s["checkpoint_id"], s["step"], s["source"], s["messages"]) for s in states]


# --- properties, against an encoder written from the specification -----------------------


def _pack(v: Any) -> bytes:
    if v is None:
        return b"\xc0"
    if v is True or v is False:
        return b"\xc3" if v else b"\xc2"
    if isinstance(v, int):
        if 0 <= v <= 0x7F:
            return bytes([v])
        if -32 <= v < 0:
            return struct.pack(">b", v)
        if v >= 0:
            return b"\xcf" + struct.pack(">Q", v)
        return b"\xd3" + struct.pack(">q", v)
    if isinstance(v, float):
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, str):
        raw = v.encode("utf-8")
        if len(raw) < 32:
            return bytes([0xA0 | len(raw)]) + raw
        return b"\xdb" + struct.pack(">I", len(raw)) + raw
    if isinstance(v, bytes):
        return b"\xc6" + struct.pack(">I", len(v)) + v
    if isinstance(v, Ext):
        if len(v.data) in (1, 2, 4, 8, 16):
            head = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}[len(v.data)]
            return bytes([head]) + struct.pack(">b", v.code) + v.data
        return b"\xc9" + struct.pack(">I", len(v.data)) + struct.pack(">b", v.code) + v.data
    if isinstance(v, list):
        head = bytes([0x90 | len(v)]) if len(v) < 16 else b"\xdd" + struct.pack(">I", len(v))
        return head + b"".join(_pack(x) for x in v)
    assert isinstance(v, dict)
    head = bytes([0x80 | len(v)]) if len(v) < 16 else b"\xdf" + struct.pack(">I", len(v))
    return head + b"".join(_pack(k) + _pack(x) for k, x in v.items())


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
    | st.binary(max_size=40)
    | st.builds(Ext, st.integers(-128, 127), st.binary(max_size=20))
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=20) | st.dictionaries(st.text(max_size=8), inner, max_size=20)
    ),
    max_leaves=60,
)


@given(_values)
@settings(max_examples=200, deadline=None)
def test_decoding_undoes_encoding(value: Any) -> None:
    assert unpack(_pack(value)) == value


@given(st.binary(max_size=64))
@settings(max_examples=300, deadline=None)
def test_any_bytes_give_a_value_or_a_value_error(data: bytes) -> None:
    try:
        unpack(data)
    except ValueError as exc:
        assert str(exc).startswith("msgpack: ")


def test_a_float32_is_read_as_its_value() -> None:
    assert math.isclose(unpack(b"\xca" + struct.pack(">f", 0.1)), 0.1, rel_tol=1e-7)
