"""Google ADK sessions (fixtures/formats/adk): `session.model_dump_json()` of a real
InMemoryRunner run, and a list of two sessions."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from memdiag.transcript import load
from memdiag.transcript.source import ChoiceNeeded
from tests.transcript.realdata import FORMATS, assert_tool_pairs, error_of, ids, roles, write_json

SESSION = FORMATS / "adk" / "session.json"
SESSIONS = FORMATS / "adk" / "sessions.json"
RAW = json.loads(SESSION.read_text())


def test_a_session_is_its_events() -> None:
    t = load(SESSION)
    assert t.format == "adk" and t.sessions == ("mia-trip",)
    assert ids(t) == [e["id"] for e in RAW["events"]]  # one message per event here
    assert roles(t)[:6] == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    assert len(t.turns) == 5
    assert {m.name for m in t.messages if m.role == "assistant"} == {"travel_agent"}
    call = t.messages[3].tool_calls[0]
    assert call["id"] == "call_weather_1" and call["function"]["arguments"] == {"city": "Lisbon"}
    tool = t.messages[4]
    assert tool.tool_call_id == "call_weather_1" and tool.content == "sunny, 24 °C"
    assert_tool_pairs(t)
    assert t.messages[0].ts is not None and t.messages[0].ts.endswith("Z")
    assert any("does not save the agent's system prompt" in n for n in t.notes)


def test_several_sessions_are_listed_then_chosen() -> None:
    with pytest.raises(ChoiceNeeded) as info:
        load(SESSIONS)
    assert [c.id for c in info.value.choices] == ["mia-trip", "mia-followup"]
    assert len(load(SESSIONS, select="mia-followup").turns) == 2
    assert load(SESSIONS, select="all").sessions == ("mia-trip", "mia-followup")


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            lambda d: d["events"][0]["content"]["parts"][0].update(text=None),
            "events[0].content.parts[0]: a part with none of text, function_call",
        ),
        (
            lambda d: d["events"][3]["content"]["parts"][0]["function_call"].pop("name"),
            "events[3].content.parts[0].function_call.name: expected a string, got null",
        ),
        (lambda d: d["events"][2].update(content="hi"), "events[2].content: expected an object"),
    ],
)
def test_bad_events_are_one_line_naming_the_path(tmp_path: Path, change, says) -> None:
    doc = copy.deepcopy(RAW)
    change(doc)
    assert says in error_of(write_json(tmp_path / "s.json", doc))


def test_thoughts_are_metadata_and_state_events_are_not_messages(tmp_path: Path) -> None:
    doc = copy.deepcopy(RAW)
    doc["events"][1]["content"]["parts"].insert(0, {"text": "She is allergic.", "thought": True})
    doc["events"].insert(2, {"author": "travel_agent", "id": "st", "actions": {"state_delta": {}}})
    t = load(write_json(tmp_path / "s.json", doc))
    assert t.messages[1].content == "Noted, Mia: no peanuts, ever."
    assert t.messages[1].metadata["reasoning"] == ["She is allergic."]
    assert "st" not in ids(t)


COMPACTED = FORMATS / "adk" / "compacted_session.json"


def test_event_compactions_are_recorded_summaries() -> None:
    """EventsCompactionConfig(compaction_interval=2, overlap_size=0): after turns 2 and 4 ADK
    appends a compaction; later requests send both summaries in place of their events."""
    raw = json.loads(COMPACTED.read_text())
    comps = [e["actions"]["compaction"] for e in raw["events"] if e["actions"].get("compaction")]
    texts = ["".join(p["text"] for p in c["compacted_content"]["parts"]) for c in comps]
    t = load(COMPACTED)
    assert len(t.messages) == len(raw["events"]) - len(comps)  # a compaction is no message
    assert [s.content for s in t.summaries] == [texts[0], texts[0] + "\n\n" + texts[1]]
    for s, c in zip(t.summaries, comps, strict=True):
        last = t.messages[s.replaces_through]
        assert (
            last.id
            == max(
                (e for e in raw["events"] if e["timestamp"] <= c["end_timestamp"] and e["content"]),
                key=lambda e: e["timestamp"],
            )["id"]
        )


def test_diagnose_replays_the_compactions_that_dropped_the_allergy() -> None:
    from memdiag.cli import app
    from tests.transcript.realdata import runner

    res = runner.invoke(
        app,
        [
            "diagnose",
            str(COMPACTED),
            "--fact",
            "allergic to peanuts",
            "-s",
            "summary",
            "--summarizer",
            "recorded",
            "-f",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    (d,) = json.loads(res.stdout)["diagnoses"]
    assert d["verdict"] == "short_term_summarized_away" and d["at_turn"] == 5
