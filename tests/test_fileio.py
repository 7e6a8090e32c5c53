"""The one bounded reader and safe writer (memdiag.fileio)."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memdiag.errors import InputError
from memdiag.fileio import (
    MAX_DEPTH,
    atomic_write,
    clip,
    json_loads,
    read_bytes,
    read_text,
)


def test_read_bounded_not_trusting_st_size() -> None:
    # /dev/zero reports size 0 and never ends: refused as not a regular file, without reading
    with pytest.raises(InputError, match="not a regular file"):
        read_bytes("/dev/zero", 1024)


def test_read_limit(tmp_path: Path) -> None:
    f = tmp_path / "big.jsonl"
    f.write_bytes(b"x" * 2049)
    assert read_bytes(f, 4096) == b"x" * 2049
    with pytest.raises(InputError, match=r"larger than 2 KiB"):
        read_bytes(f, 2048, "transcript")


def test_read_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_bytes(tmp_path / "missing", 10)
    with pytest.raises(InputError, match="is a directory"):
        read_bytes(tmp_path, 10)
    with pytest.raises(InputError, match="file name too long"):
        read_bytes(tmp_path / ("a" * 300), 10)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\nok\n\xff\n")
    with pytest.raises(InputError, match=r"bad.txt:3: not valid UTF-8 \(byte 0xff\)"):
        read_text(bad, 100)


def test_json_limits() -> None:
    with pytest.raises(ValueError, match="nested deeper"):
        json_loads("[" * 5000 + "]" * 5000)
    with pytest.raises(ValueError, match="nested deeper"):
        json_loads("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert json_loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    with pytest.raises(ValueError, match="5000 digits"):
        json_loads('{"budget": ' + "9" * 5000 + "}")
    with pytest.raises(ValueError, match="out of range"):
        json_loads('{"updated_at": 1e400}')
    with pytest.raises(ValueError, match="NaN is not valid JSON"):
        json_loads("[NaN]")


def test_lone_surrogates_replaced() -> None:
    data = json_loads('{"content": "a\\ud800b", "\\udfff": ["x\\ud800"]}')
    assert data == {"content": "a\ufffdb", "\ufffd": ["x\ufffd"]}
    json.dumps(data, ensure_ascii=False).encode("utf-8")  # no UnicodeEncodeError


@given(
    st.recursive(
        st.text(),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(), c, max_size=3),
        max_leaves=20,
    )
)
def test_json_roundtrip_encodes(value: object) -> None:
    # whatever the text (surrogates included), what json_loads returns encodes as UTF-8
    parsed = json_loads(json.dumps(value))
    json.dumps(parsed, ensure_ascii=False).encode("utf-8")


def _outcome(f, text: str):  # type: ignore[no-untyped-def]
    try:
        return ("value", f(text))
    except ValueError as exc:
        return (type(exc).__name__, str(exc))


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(), c, max_size=3),
    max_leaves=10,
)
_SPACE = st.text(alphabet=" \t\n\r\ufeff\x0b", max_size=2)


@given(
    st.one_of(
        st.tuples(_SPACE, _JSON_VALUES.map(json.dumps), _SPACE, st.text(max_size=3)).map("".join),
        st.text(max_size=20),
    )
)
def test_decoding_is_json_loads_with_the_hooks(text: str) -> None:
    """The fast decoding path gives what json.loads with the limit hooks gives, or raises its
    error: whitespace on either side, a BOM, extra data, garbage, the empty string."""
    from memdiag.fileio import _constant, _decode, _parse_float, _parse_int

    def reference(t: str) -> object:
        return json.loads(
            t, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_constant
        )

    assert _outcome(_decode, text) == _outcome(reference, text)


@given(_JSON_VALUES.map(lambda v: json.dumps(v, ensure_ascii=False)))
def test_no_escape_check_for_text_without_escapes(text: str) -> None:
    """A line of a UTF-8 file with no \\u in it reads the same without the surrogate check."""
    if "\\u" in text or any("\ud800" <= c <= "\udfff" for c in text):
        return
    assert _outcome(lambda t: json_loads(t, escapes=False), text) == _outcome(json_loads, text)


_SURROGATE_TEXT = st.text(alphabet=st.sampled_from("\\udUD89aAfFb0 xé中\ud800\udbff\udc00\udfff"))


# "\\u" + a hex digit or not + a second one: a surrogate's escape or one a digit away from it
_ESCAPES = st.tuples(
    st.text(max_size=3), st.sampled_from("dDeEc0"), st.text("789abcdefABCDEFG", min_size=1)
).map(lambda t: f"{t[0]}\\u{t[1]}{t[2]}")


@given(st.one_of(_SURROGATE_TEXT, _ESCAPES, st.text(), _JSON_VALUES.map(json.dumps)))
def test_surrogate_check_is_the_one_pattern(text: str) -> None:
    """The two-part check finds what the single alternation it replaced finds: a surrogate's
    escape (either case, high or low) or a surrogate itself, in ASCII and other text."""
    from memdiag.fileio import _maybe_surrogate

    one = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")
    assert _maybe_surrogate(text) == (one.search(text) is not None)


def test_clip() -> None:
    assert clip("short") == "short"
    long = "x" * 1000
    assert clip(long) == "x" * 80 + "… (920 more characters)"
    assert "\n" not in clip("a\nb")


def test_atomic_write_replaces_whole(tmp_path: Path) -> None:
    out = tmp_path / "report.xml"
    out.write_text("old")
    os.chmod(out, 0o640)
    with atomic_write(out) as fp:
        fp.write("new")
    assert out.read_text() == "new"
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.xml"]


def test_atomic_write_failure_leaves_target(tmp_path: Path) -> None:
    out = tmp_path / "report.xml"
    out.write_text("old")
    with pytest.raises(RuntimeError), atomic_write(out) as fp:
        fp.write("half")
        raise RuntimeError("boom")
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.xml"]


def test_atomic_write_ignores_planted_tmp_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "out.html.tmp").symlink_to(victim)
    mine = tmp_path / "notes.tmp"
    mine.write_text("mine")
    with atomic_write(tmp_path / "out.html") as fp:
        fp.write("<html>")
    assert victim.read_text() == "precious"
    assert (tmp_path / "out.html").read_text() == "<html>"
    assert mine.read_text() == "mine"


def test_atomic_write_refuses_special_targets(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory"), atomic_write(tmp_path):
        pass
    with pytest.raises(InputError, match="not a regular file"), atomic_write("/dev/null"):
        pass
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(InputError, match="parent is not a directory"), atomic_write(f / "x"):
        pass
    assert f.read_text() == "x"


def test_atomic_write_unwritable_place(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    # root ignores directory modes; sysfs refuses new files even to root
    target = ro / "x" if not os.access(ro, os.W_OK) else Path("/sys/kernel/memdiag-test.xml")
    try:
        with pytest.raises(InputError, match="permission denied"), atomic_write(target):
            pass
    finally:
        ro.chmod(0o700)
    proc = "/proc/1/memdiag-test.xml"
    refused = r"cannot create a file here|permission denied"
    with pytest.raises(InputError, match=refused), atomic_write(proc):
        pass
