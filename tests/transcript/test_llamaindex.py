"""LlamaIndex chat stores, as `SimpleChatStore.persist()` wrote a FunctionAgent's memory
(fixtures/formats/llamaindex): keys as sessions, blocks, tool calls, the missing system prompt."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from memdiag.transcript import load
from memdiag.transcript.source import ChoiceNeeded
from tests.transcript.realdata import FORMATS, assert_tool_pairs, error_of, ids, roles, write_json

STORE = FORMATS / "llamaindex" / "chat_store.json"
RAW = json.loads(STORE.read_text())


def test_keys_are_listed_then_chosen() -> None:
    with pytest.raises(ChoiceNeeded) as info:
        load(STORE)
    assert [(c.id, c.messages) for c in info.value.choices] == [
        (k, len(v)) for k, v in RAW["store"].items()
    ]
    t = load(STORE, select="mia-trip")
    assert t.format == "llamaindex" and t.sessions == ("mia-trip",)
    assert len(t.messages) == len(RAW["store"]["mia-trip"]) and len(t.turns) == 5
    assert roles(t)[:6] == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    assert ids(t)[:2] == ["mia-trip-1", "mia-trip-2"]


def test_ids_are_the_same_whichever_keys_are_read() -> None:
    both = load(STORE, select="all")
    assert both.sessions == ("mia-trip", "mia-followup")
    assert ids(load(STORE, select="mia-followup")) == [
        m.id for m in both.messages if m.session == "mia-followup"
    ]


def test_tool_call_blocks_and_tool_messages_pair() -> None:
    t = load(STORE, select="mia-trip")
    asked = t.messages[3]
    assert asked.content == "Checking."  # its text block, beside the tool_call block
    assert asked.tool_calls[0]["id"] == "call_weather_1"
    assert asked.tool_calls[0]["function"] == {
        "name": "get_weather",
        "arguments": {"city": "Lisbon"},
    }
    assert (
        t.messages[4].tool_call_id == "call_weather_1" and t.messages[4].content == "sunny, 24 °C"
    )
    assert_tool_pairs(t)


def test_the_missing_system_prompt_is_said_and_can_be_given() -> None:
    t = load(STORE, select="mia-trip")
    assert any("does not save the agent's system prompt" in n for n in t.notes)
    given = load(STORE, select="mia-trip", system="You are a travel assistant.")
    assert given.messages[0].role == "system" and given.messages[0].id == "system-prompt"
    assert not given.notes and len(given.messages) == len(t.messages) + 1


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            lambda s: s["mia-trip"][3]["blocks"][1].update(block_type="hologram"),
            "store.mia-trip[3].blocks[1].block_type: unknown block type 'hologram'",
        ),
        (
            lambda s: s["mia-trip"][0].update(role="oracle"),
            "store.mia-trip[0].role: unknown role 'oracle'",
        ),
        (
            lambda s: s["mia-trip"][0]["blocks"][0].pop("block_type"),
            "store.mia-trip[0].blocks[0].block_type: expected a string, got null",
        ),
    ],
)
def test_bad_messages_are_one_line_naming_the_path(tmp_path: Path, change, says) -> None:
    doc = copy.deepcopy(RAW)
    change(doc["store"])
    assert says in error_of(write_json(tmp_path / "s.json", doc), select="mia-trip")


def test_a_store_of_older_llama_index_content_strings(tmp_path: Path) -> None:
    doc = {"store": {"u1": [{"role": "user", "content": "I'm Mia", "additional_kwargs": {}}]}}
    t = load(write_json(tmp_path / "old.json", doc))
    assert t.messages[0].content == "I'm Mia" and t.format == "llamaindex"
