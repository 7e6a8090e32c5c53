"""Invariants of every strategy over generated transcripts (hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdiag.config import Settings
from memdiag.replay import prepare, replay
from tests.helpers import orphan_tools, transcripts, windows

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
    for r, window in windows(transcript, res):
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


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), st.integers(60, 600), st.sampled_from(STRATEGY_NAMES), st.data())
def test_replaying_one_session_gives_the_same_window(transcript, budget, name, data):
    """Strategies start empty at a session start, so diagnose may replay T's session alone."""
    rctx = prepare(transcript, Settings(budget=budget))
    turn = data.draw(st.integers(1, len(transcript.turns)))
    full = replay(rctx, name, until_turn=turn)
    part = replay(rctx, name, until_turn=turn, from_session_of=turn)
    session = transcript.turns[turn - 1].session
    tail = [r for r in full.turns if r.session == session][-len(part.turns) :]
    # the first turn of the session differs only by what the full replay dropped at its start
    assert [(r.tokens, r.evicted, r.summarized) for r in part.turns] == [
        (r.tokens, r.evicted, r.summarized) for r in tail
    ]
    assert part.final == full.final
