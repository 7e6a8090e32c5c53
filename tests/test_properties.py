"""Invariants of every strategy over generated transcripts (hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdiag.config import Settings
from memdiag.replay import prepare, replay
from memdiag.transcript.model import RawMessage, RawSession, build
from tests.helpers import orphan_tools

WORDS = st.sampled_from(
    "I am allergic to peanuts window seat Lisbon never book red-eye flights 42 euros "
    "我 对 花生 过敏 hotel museum tomorrow prefer call me Mia my name is Tom".split()
)
TEXT = st.lists(WORDS, min_size=1, max_size=25).map(" ".join)


@st.composite
def transcripts(draw):
    items = [RawMessage("system", draw(TEXT))]
    n_turns = draw(st.integers(1, 25))
    call = 0
    for t in range(n_turns):
        if t and draw(st.integers(0, 9)) == 0:
            items.append(RawSession(f"s{t}"))
        items.append(RawMessage("user", draw(TEXT)))
        if draw(st.booleans()):
            call += 1
            cid = f"c{call}"
            items.append(
                RawMessage(
                    "assistant",
                    "",
                    tool_calls=(
                        {"id": cid, "function": {"name": "lookup", "arguments": draw(TEXT)}},
                    ),
                )
            )
            for _ in range(draw(st.integers(1, 2))):
                items.append(RawMessage("tool", draw(TEXT), tool_call_id=cid))
        items.append(RawMessage("assistant", draw(TEXT)))
    return build(items, path="<generated>", format="canonical")


def _windows(transcript, res):
    window: list[int] = []
    index = {m.id: m.index for m in transcript.messages}
    for r in res.turns:
        gone = {index[i] for i in (*r.evicted, *r.summarized, *r.dropped_by_session)}
        window = [i for i in window if i not in gone] + [
            index[i] for i in r.entered if index[i] not in gone
        ]
        yield r, window


STRATEGY_NAMES = ["sliding_window", "summary", "scratchpad"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    transcripts(),
    st.integers(60, 600),
    st.sampled_from(STRATEGY_NAMES),
    st.none() | st.integers(1, 5),
)
def test_window_invariants(transcript, budget, name, max_turns):
    settings_ = Settings(budget=budget).with_overrides(**{"sliding_window.max_turns": max_turns})
    rctx = prepare(transcript, settings_)
    res = replay(rctx, name)
    system = sum(rctx.costs[m.index] for m in transcript.messages if m.role == "system")
    for r, window in _windows(transcript, res):
        # the system prompt stays, whatever the budget
        assert r.tokens["system"] == system
        # never over budget unless the newest unit alone cannot fit (then flagged)
        if not r.overflow:
            assert r.tokens["total"] <= budget
        else:
            assert len(window) >= 1
        # tokens of the messages section are the costs of exactly the window
        assert r.tokens["messages"] == sum(rctx.costs[i] for i in window) + 3
        # the current user message is always in its own window
        user = transcript.turns[r.turn - 1].user_index
        assert user in window
        assert not orphan_tools(transcript, [transcript.messages[i].id for i in window])
    # deterministic
    again = replay(prepare(transcript, settings_), name)
    assert again.turns == res.turns
