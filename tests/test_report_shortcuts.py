"""The shortcuts of fact tracking and of the report's data give the direct computation's
answers (docs/engine.md): the fact tracker's shared counters and its turns skipped, the fact
set's line by line search, the report's strategy columns read from the turn records."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdiag.config import Settings
from memdiag.facts import FactSet, LineTerms, match
from memdiag.replay import prepare, replay
from memdiag.strategies.base import Fit
from memdiag.survival import FactSurvival
from tests.helpers import TEXT, transcripts

FACTS = st.sampled_from(
    ["allergic to peanuts", "Mia", "花生过敏", "prefer hotel", "museum tomorrow", "euros", "42"]
)
EDGES = st.lists(
    st.sampled_from(
        ["e", "\u0301", "ﬁ", "ß", "Ａ", "\u2028", "\r", "\xa0", " ", "!", "过敏", "Mia"]
    ),
    max_size=6,
).map("".join)


class DirectTracker:
    """Every fact followed through every evidence event and turn on its own counter (the
    tracker as it was before facts shared counters and untouched facts were skipped)."""

    def __init__(self, facts, rctx) -> None:
        self.facts = list(facts)
        self.active = bool(self.facts)
        n = len(self.facts)
        self.evidence: dict[int, list[int]] = {}
        self.state: list[FactSurvival] = []
        self.in_window, self.in_summary = [0] * n, [False] * n
        self.pinned, self.kept = [False] * n, [False] * n
        self.in_memory = [
            bool(rctx.memory_text) and match(f, rctx.memory_text) is not None for f in self.facts
        ]
        self.first = True
        msgs = rctx.transcript.messages
        for k, fact in enumerate(self.facts):
            ids = []
            for i in rctx.evidence_of(fact):
                self.evidence.setdefault(i, []).append(k)
                ids.append(msgs[i].id)
            self.state.append(FactSurvival(fact, ids, ids[0] if ids else None))

    def update(self, turn, strategy, fit: Fit, entered, dropped) -> None:
        n = len(self.facts)
        reason: dict[int, str] = {}
        if dropped:
            for i in dropped:
                for k in self.evidence.get(i, ()):
                    self.in_window[k] -= 1
                    reason[k] = "session_end"
            for k in range(n):
                if self.in_summary[k] or self.pinned[k]:
                    reason[k] = "session_end"
            self.in_summary, self.pinned = [False] * n, [False] * n
        arrived: set[int] = set()
        for i in entered:
            for k in self.evidence.get(i, ()):
                self.in_window[k] += 1
                arrived.add(k)
                if self.state[k].stated_at_turn is None:
                    self.state[k].stated_at_turn = turn
        for moved, how in ((fit.evicted, "evicted"), (fit.summarized, "summarized_away")):
            for i in moved:
                for k in self.evidence.get(i, ()):
                    self.in_window[k] -= 1
                    reason.setdefault(k, how)
        view = strategy.view()
        for k, fact in enumerate(self.facts):
            if fit.summary_changed:
                was = self.in_summary[k]
                self.in_summary[k] = bool(view.summary) and match(fact, view.summary) is not None
                if was and not self.in_summary[k]:
                    reason.setdefault(k, "summarized_away")
            if fit.pinned_changed:
                was = self.pinned[k]
                self.pinned[k] = bool(view.pinned) and match(fact, view.pinned) is not None
                if was and not self.pinned[k]:
                    reason.setdefault(k, "unpinned")
        for k in range(n):  # every fact, every turn
            st_ = self.state[k]
            kept = (
                self.in_window[k] > 0 or self.in_summary[k] or self.pinned[k] or self.in_memory[k]
            )
            if kept and not self.kept[k]:
                st_.history.append({"turn": turn, "event": "kept"})
                st_.lost_at_turn = st_.mechanism = None
            elif not kept and (self.kept[k] or k in arrived):
                mech = reason.get(k, "evicted")
                st_.history.append({"turn": turn, "event": "lost", "mechanism": mech})
                st_.lost_at_turn, st_.mechanism = turn, mech
            self.kept[k] = kept
        self.first = False

    def results(self, final) -> list[FactSurvival]:
        for k, st_ in enumerate(self.state):
            if self.kept[k]:
                st_.kept_by = (
                    "verbatim"
                    if self.in_window[k] > 0
                    else "pinned"
                    if self.pinned[k]
                    else "summary"
                    if self.in_summary[k]
                    else "memories"
                )
        return self.state


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    transcripts(),
    st.integers(40, 300),
    st.sampled_from(["sliding_window", "summary", "scratchpad"]),
    st.lists(FACTS | TEXT, min_size=1, max_size=8),
    st.booleans(),
)
def test_the_fact_tracker_follows_every_fact_as_the_direct_tracker(
    transcript, budget, name, facts, memory
):
    """Facts repeated or stated by the same messages (one shared counter), a profile stating
    some of them, every strategy: the same survival, history and holder of every fact."""
    import memdiag.replay as engine

    text = "allergic to peanuts, call me Mia" if memory else ""
    rctx = prepare(transcript, Settings(budget=budget), memory_text=text)
    fast = replay(rctx, name, facts)
    real = engine.FactTracker
    engine.FactTracker = DirectTracker  # type: ignore[misc,assignment]
    try:
        direct = replay(rctx, name, facts)
    finally:
        engine.FactTracker = real  # type: ignore[misc]
    assert fast.facts == direct.facts


@settings(max_examples=200, deadline=None)
@given(
    st.lists(FACTS | TEXT | st.text(max_size=12), min_size=1, max_size=12),
    st.lists(TEXT | st.text(max_size=20) | EDGES, min_size=1, max_size=6),
    st.data(),
)
def test_a_fact_set_states_line_by_line_what_matching_every_fact_states(facts, lines, data):
    facts_ = FactSet(facts)
    terms = LineTerms()
    for _ in range(3):  # lines recur in the next texts, as in a running summary
        text = "\n".join(data.draw(st.permutations(lines)))
        direct = [k for k, f in enumerate(facts) if match(f, text) is not None]
        assert facts_.stated_in_lines(text, terms) == direct
        assert facts_.stated_in_lines(text) == direct
        for line in text.split("\n"):  # one line alone, as the report's table of lines asks
            assert facts_.stated_by_line(line) == facts_.stated_in(line)
        lines = [*lines[1:], data.draw(TEXT | EDGES)]


def _direct_strategy(res, pos):
    """The report's strategy lists as read from TurnRecord objects (before the columns)."""

    def ids(seq):
        return [pos[i] for i in seq if i in pos]

    turns = list(res.turns)
    return {
        "first_turn": turns[0].turn if turns else 1,
        "tokens": {
            s: [r.tokens.get(s, 0) for r in turns]
            for s in ("system", "scratchpad", "summary", "memories", "messages")
        },
        "entered": [ids(r.entered) for r in turns],
        "evicted": [ids(r.evicted) for r in turns],
        "summarized": [ids(r.summarized) for r in turns],
        "dropped": [ids(r.dropped_by_session) for r in turns],
        "pins": [
            [r.turn, p.field, p.value, p.previous, pos.get(p.message_id)]
            for r in turns
            for p in r.pinned
        ],
        "overflow": [r.turn for r in turns if r.overflow],
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    transcripts(),
    st.integers(60, 400),
    st.sampled_from(["sliding_window", "summary", "scratchpad"]),
    st.integers(0, 3),
)
def test_the_report_reads_the_turn_records_as_the_records_say(transcript, budget, name, skip):
    from memdiag.recorder import TextRecorder
    from memdiag.render.report.data import _compact, _Lines, _strategy

    rctx = prepare(transcript, Settings(budget=budget))
    last = len(transcript.turns)
    res = replay(rctx, name, ["allergic to peanuts"], from_session_of=max(1, last - skip))
    pos = {m.id: m.index for m in transcript.messages}
    got = _strategy(res, pos, TextRecorder(transcript).texts(name), _Lines(["x"]))
    want = _direct_strategy(res, pos)
    want["tokens"] = {s: _compact(v) for s, v in want["tokens"].items()}
    assert {k: got[k] for k in want} == want
