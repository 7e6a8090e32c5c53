"""The canonical writer (`memdiag convert`): what it writes loads back the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdiag.transcript import load
from memdiag.transcript.writer import to_canonical
from tests.transcript.common import (
    FIXTURES,
    assert_same,
    canonical_text,
    write_jsonl,
)


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
