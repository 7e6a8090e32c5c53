"""What the transcript tests share: fixture paths, writers and comparisons."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

from memdiag.transcript import Transcript
from memdiag.transcript.writer import write_canonical

FORMATS_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "formats"
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


def write(tmp_path, lines, name="t.jsonl"):
    p = tmp_path / name
    p.write_text(
        "\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8"
    )
    return p


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
