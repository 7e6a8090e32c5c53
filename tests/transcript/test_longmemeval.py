"""The LongMemEval reader and the probes it reads from the questions."""

from __future__ import annotations

import json
from pathlib import Path

from memdiag.transcript import load
from tests.transcript.common import (
    LONGMEMEVAL,
    write_json,
)


def test_longmemeval_fixture() -> None:
    t = load(LONGMEMEVAL)
    assert t.sessions == ("sess-garden-01", "answer_sess-dog-01", "sess-travel-01", "q-dog-01")
    assert t.session_ts["answer_sess-dog-01"] == "2023/05/20 (Sat) 14:12"
    assert t.session_ts["q-dog-01"] == "2023/06/10 (Sat) 18:05"
    marked = [m.id for m in t.messages if m.metadata.get("has_answer")]
    assert marked == ["answer_sess-dog-01:1"]
    assert "has_answer" not in t.message("answer_sess-dog-01:3").metadata  # false: not kept
    question = t.messages[-1]
    assert (question.id, question.role, question.session) == ("q-dog-01", "user", "q-dog-01")
    assert question.content == "What is the name of the dog I adopted?"
    assert question.turn == len(t.turns) == 5


def test_longmemeval_probes_point_at_the_question_turn() -> None:
    t = load(LONGMEMEVAL)
    (probe,) = t.checked_probes()
    assert probe.answer == "Biscuit"
    assert probe.evidence_ids == ("answer_sess-dog-01:1",)
    assert probe.evidence_sessions == ("answer_sess-dog-01",)
    assert probe.category == "single-session-user"
    assert probe.at is not None and probe.at_id is not None
    assert t.turn(probe.at).user_index == t.message(probe.at_id).index


def test_longmemeval_several_instances(tmp_path: Path) -> None:
    inst = json.loads(LONGMEMEVAL.read_text(encoding="utf-8"))[0]
    other = json.loads(json.dumps(inst))
    other["question_id"] = "q-dog-02"
    path = write_json(tmp_path / "lme.json", [inst, other])
    t = load(path)
    assert t.sessions[3:5] == ("q-dog-01", "q-dog-02/sess-garden-01")
    probes = t.checked_probes()
    assert [p.at for p in probes] == [5, 10]
    assert probes[1].evidence_ids == ("q-dog-02/answer_sess-dog-01:1",)
    assert probes[1].evidence_sessions == ("q-dog-02/answer_sess-dog-01",)
    for p in probes:
        assert p.at_id is not None
        assert t.message(p.at_id).turn == p.at
        assert all(t.message(e).metadata["has_answer"] for e in p.evidence_ids)
