"""AutoGen AgentChat saved state (fixtures/formats/autogen): an AssistantAgent's
`save_state()` and a RoundRobinGroupChat's, made with ReplayChatCompletionClient."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from memdiag.transcript import load
from memdiag.transcript.formats.base import Selection
from memdiag.transcript.source import ChoiceNeeded
from tests.transcript.realdata import FORMATS, assert_tool_pairs, error_of, ids, roles, write_json

AGENT = FORMATS / "autogen" / "agent_state.json"
TEAM = FORMATS / "autogen" / "team_state.json"
RAW_AGENT = json.loads(AGENT.read_text())
RAW_TEAM = json.loads(TEAM.read_text())


def test_an_agents_model_context() -> None:
    t = load(AGENT)
    assert t.format == "autogen" and t.sessions == ("travel_agent",)
    assert len(t.messages) == len(RAW_AGENT["llm_context"]["messages"]) and len(t.turns) == 5
    assert roles(t)[:6] == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    assert ids(t)[:2] == ["travel_agent-1", "travel_agent-2"]
    assert t.messages[1].name == "travel_agent"
    call = t.messages[3].tool_calls[0]
    assert call["id"] == "call_weather_1" and call["function"]["name"] == "get_weather"
    assert t.messages[4].tool_call_id == "call_weather_1" and t.messages[4].name == "get_weather"
    assert_tool_pairs(t)
    assert any("does not save the agent's system prompt" in n for n in t.notes)


def test_a_team_reads_its_thread_and_names_its_agents() -> None:
    """Without --agent, the conversation the human takes part in; a wrong name lists them."""
    t = load(TEAM)
    assert t.sessions == ("team",)
    assert any("--agent NAME (planner, checker)" in w for w in t.warnings)
    with pytest.raises(ChoiceNeeded) as info:
        load(TEAM, selection=Selection(agent="critic"))
    assert [c.id for c in info.value.choices] == ["team", "planner", "checker"]
    assert "--agent ID" in str(info.value)


def test_the_teams_thread_keeps_its_ids() -> None:
    t = load(TEAM, selection=Selection(agent="team"))
    thread = RAW_TEAM["agent_states"]["RoundRobinGroupChatManager"]["message_thread"]
    assert ids(t)[:3] == [m["id"] for m in thread[:3]]
    assert [m.name for m in t.messages if m.role == "assistant"][:2] == ["planner", "checker"]
    assert roles(t).count("user") == 2 == len(t.turns)  # the human's tasks are the turns
    assert_tool_pairs(t)
    assert t.message(thread[4]["id"]).tool_calls[0]["id"] == "call_weather_2"


def test_each_agent_of_a_team_is_its_own_context() -> None:
    planner = load(TEAM, selection=Selection(agent="planner"))
    inner = RAW_TEAM["agent_states"]["planner"]["agent_state"]["llm_context"]["messages"]
    assert len(planner.messages) == len(inner)
    # what the checker said reaches the planner's model as a user message, named
    assert [(m.role, m.name) for m in planner.messages][2] == ("user", "checker")
    both = load(TEAM, selection=Selection(agent="all"))
    assert both.sessions == ("team", "planner", "checker")


def test_session_is_not_a_choice_of_autogen_files() -> None:
    from memdiag.errors import UsageError

    with pytest.raises(UsageError, match="autogen files are read whole"):
        load(AGENT, select="travel_agent")


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            lambda d: d["llm_context"]["messages"][1].update(type="TelepathyMessage"),
            "llm_context.messages[1].type: unknown message type 'TelepathyMessage'",
        ),
        (
            lambda d: d["llm_context"]["messages"][3]["content"][0].pop("name"),
            "llm_context.messages[3].content[0].name: expected a string, got null",
        ),
        (
            lambda d: d["llm_context"]["messages"][4].update(content="oops"),
            "llm_context.messages[4].content: expected a list of function results",
        ),
    ],
)
def test_bad_messages_are_one_line_naming_the_path(tmp_path: Path, change, says) -> None:
    doc = copy.deepcopy(RAW_AGENT)
    change(doc)
    assert says in error_of(write_json(tmp_path / "a.json", doc))
