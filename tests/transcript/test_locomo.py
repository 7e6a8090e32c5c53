"""The LoCoMo reader and the probes it reads from the QA items."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memdiag.errors import InputError
from memdiag.transcript import Probe, load
from tests.transcript.common import (
    LOCOMO,
    SHAREGPT,
    write_json,
)


def test_locomo_fixture_keeps_dia_ids_roles_and_sessions() -> None:
    t = load(LOCOMO)
    assert t.sessions == ("session_1", "session_2")  # session_3 has a date and no turns
    assert t.session_ts == {
        "session_1": "10:15 am on 3 March, 2024",
        "session_2": "6:40 pm on 17 March, 2024",
    }
    assert [m.id for m in t.messages] == [
        "D1:1",
        "D1:2",
        "D1:3",
        "D1:4",
        "D1:5",
        "D2:1",
        "D2:2",
        "D2:3",
        "D2:4",
    ]
    for m in t.messages:
        assert (m.role, m.name) in {("user", "Priya"), ("assistant", "Tomás")}
    assert t.message("D1:2").role == "assistant"
    shared = t.message("D1:4")
    assert shared.content == (
        "Look what I baked for my sister's birthday yesterday! "
        "[image: a photo of a lemon cake with white frosting]"
    )
    assert shared.metadata["img_url"] == ["https://example.org/images/lemon-cake.jpg"]
    assert shared.metadata["blip_caption"] == "a photo of a lemon cake with white frosting"
    assert t.message("D1:3").metadata == {}


def test_locomo_sessions_in_numeric_order(tmp_path: Path) -> None:
    conv: dict[str, Any] = {"speaker_a": "A", "speaker_b": "B"}
    for n in (10, 2, 1):
        conv[f"session_{n}"] = [{"speaker": "A", "dia_id": f"D{n}:1", "text": f"s{n}"}]
    path = write_json(tmp_path / "l.json", [{"sample_id": "c", "conversation": conv, "qa": []}])
    assert load(path).sessions == ("session_1", "session_2", "session_10")


def _two_samples(tmp_path: Path) -> Path:
    sample = json.loads(LOCOMO.read_text(encoding="utf-8"))[0]
    second = json.loads(json.dumps(sample))
    second["sample_id"] = "demo-2"
    return write_json(tmp_path / "two.json", [sample, second])


def test_locomo_several_samples_prefix_ids(tmp_path: Path) -> None:
    t = load(_two_samples(tmp_path))
    assert t.sessions == (
        "demo-1/session_1",
        "demo-1/session_2",
        "demo-2/session_1",
        "demo-2/session_2",
    )
    assert t.messages[0].id == "demo-1/D1:1"
    assert t.messages[9].id == "demo-2/D1:1"
    assert t.messages[9].metadata["dia_id"] == "D1:1"
    assert len(t.messages) == 18


def test_locomo_probes_parse_malformed_evidence() -> None:
    t = load(LOCOMO)
    probes = t.checked_probes()
    assert [p.evidence_ids for p in probes] == [
        ("D1:3",),
        ("D1:5",),
        ("D1:4", "D2:2"),
        ("D2:3",),
        ("D1:3",),
    ]
    assert probes[1].answer == "2019"  # numbers become text
    assert probes[0] == Probe(
        id="demo-1/q1",
        question="What is Priya allergic to?",
        answer="shellfish",
        evidence_ids=("D1:3",),
        category=4,
        sample_id="demo-1",
        at=None,
        after_turn=5,
    )
    adversarial = probes[4]
    assert adversarial.answer is None
    assert adversarial.adversarial_answer == "shellfish"
    assert all(not p.unresolved_evidence for p in probes)


def test_locomo_probes_over_several_samples_name_real_messages(tmp_path: Path) -> None:
    path = _two_samples(tmp_path)
    t = load(path)
    probes = t.checked_probes()
    assert len(probes) == 10
    assert probes[7].evidence_ids == ("demo-2/D1:4", "demo-2/D2:2")
    assert [p.after_turn for p in probes] == [5] * 5 + [10] * 5
    for p in probes:
        for mid in p.evidence_ids:
            assert t.message(mid).id == mid


def test_locomo_probe_with_unknown_evidence(tmp_path: Path) -> None:
    doc = json.loads(LOCOMO.read_text(encoding="utf-8"))
    doc[0]["qa"] = [{"question": "q", "answer": "a", "evidence": ["D9:1", "see above", "D1:02"]}]
    probe = load(write_json(tmp_path / "l.json", doc)).checked_probes()[0]
    assert probe.evidence_ids == ("D1:2",)
    assert probe.unresolved_evidence == ("D9:1", "see above")


def test_locomo_probes_reject_other_formats(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="missing field 'conversation'"):
        load(SHAREGPT, "locomo")
    # read as LoCoMo with --skip-invalid, a file that does not start like one has no probes
    # to trust, even where later elements are samples
    doc = ["not a sample", *json.loads(LOCOMO.read_text(encoding="utf-8"))]
    t = load(write_json(tmp_path / "l.json", doc), "locomo", skip_invalid=True)
    assert t.skipped == 1 and len(t.probes) == 5
    with pytest.raises(InputError, match="not a LoCoMo file"):
        t.checked_probes()


def test_probes_skip_invalid_qa(tmp_path: Path) -> None:
    doc = json.loads(LOCOMO.read_text(encoding="utf-8"))
    doc[0]["qa"].insert(0, {"answer": "no question", "evidence": []})
    doc[0]["qa"].insert(0, {"question": "q", "answer": "a", "evidence": [3]})
    path = write_json(tmp_path / "l.json", doc)
    for skip in (False, True):
        t = load(path, skip_invalid=skip)  # the conversation itself is fine
        assert t.skipped == 0 and len(t.messages) == 9
        with pytest.raises(InputError, match=r"qa\[0\]: field 'evidence' must be a list"):
            t.checked_probes()
        assert len(t.probes) == 5
        assert [p.message for p in t.probe_problems] == [
            "sample 'demo-1': qa[0]: field 'evidence' must be a list of dialogue ids like 'D1:3'",
            "sample 'demo-1': qa[1]: missing field 'question' (a string)",
        ]


def test_probes_are_incomplete_when_records_were_skipped(tmp_path: Path) -> None:
    # a strict read stops at the first bad record; with --skip-invalid the transcript loads,
    # but its probes are not complete, and asking for them names that record
    doc = json.loads(LOCOMO.read_text(encoding="utf-8"))
    del doc[0]["conversation"]["session_2"][1]["text"]
    doc[0]["qa"][0]["evidence"] = 3
    path = write_json(tmp_path / "l.json", doc)
    with pytest.raises(InputError) as strict:
        load(path)
    t = load(path, skip_invalid=True)
    assert t.skipped == 1
    with pytest.raises(InputError) as probes:
        t.checked_probes()
    assert str(probes.value) == str(strict.value)
    assert len(t.probe_problems) == 2  # the skipped turn, then the bad QA item
