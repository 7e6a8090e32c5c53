"""The replay engine: drive a strategy turn by turn and record compact per-turn deltas.

For every user message (turn) the window the model would see is evaluated: messages that
arrived since the previous turn enter, the strategy fits the window into the budget, and the
engine records what entered, what was evicted or summarized, and tokens by section. Session
starts reset the window. Facts are tracked incrementally (a counter of their evidence messages
in the window plus a check of the summary/pinned text when those change), so one replay is
O(messages) in time and memory.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memdiag.collector import collections_paused
from memdiag.config import Settings
from memdiag.run_context import EVIDENCE_ROLES as EVIDENCE_ROLES
from memdiag.run_context import ReplayContext, StrategyReplay, prepare
from memdiag.run_context import group_units as group_units
from memdiag.run_context import transcripts_shared as transcripts_shared
from memdiag.strategies import StrategyContext, make_strategy
from memdiag.strategies.base import Fit, Strategy
from memdiag.strategies.observed import call_tokens, request_tokens, size_known
from memdiag.survival import FactTracker, tracked_facts
from memdiag.transcript.model import Transcript
from memdiag.turn_records import TurnRecords

if TYPE_CHECKING:
    from memdiag.compactions import Compaction
    from memdiag.memory_files import MemoryFile

Observer = Callable[[int, Strategy, Fit], None]


def replay(
    rctx: ReplayContext,
    strategy_name: str,
    facts: Sequence[str] = (),
    until_turn: int | None = None,
    progress: Callable[[int], None] | None = None,
    from_session_of: int | None = None,
    observe: Observer | None = None,
) -> StrategyReplay:
    """Replay ``strategy_name`` through the transcript (up to ``until_turn``).

    ``from_session_of=T`` starts at the first turn of turn T's session instead of turn 1: every
    strategy starts empty at a session start, so the window at T is the same, for the cost of
    that session alone (diagnose and its what-if searches replay to one turn many times).
    Turn records and fact survival then cover that session only. ``observe(turn, strategy,
    fit)`` is called after every fit (the HTML report records summary and pinned text with it).
    """
    t = rctx.transcript
    msgs = t.messages
    budget = rctx.budget
    sctx = StrategyContext(t, rctx.costs, rctx.counter, rctx.memo)
    strategy: Strategy = make_strategy(strategy_name, sctx, rctx.settings, budget)
    priming = rctx.counter.overhead.reply_priming
    tracker = FactTracker(facts, rctx)

    system_tokens = 0
    units = rctx.units
    summaries = t.summaries
    next_unit = 0
    next_summary = 0
    records = TurnRecords(t.turns, msgs)
    session: str | None = None
    last = len(t.turns) if until_turn is None else min(until_turn, len(t.turns))
    # system messages are counted as they appear in the stream
    system = rctx.system_indices() if rctx.settings.keep_system else ()
    next_system = 0
    first = 0
    if from_session_of is not None:
        first = from_session_of - 1
        while first > 0 and t.turns[first - 1].session == t.turns[from_session_of - 1].session:
            first -= 1
        start = t.turns[first - 1].end if first > 0 else 0  # where the session's stream begins
        while next_unit < len(units) and units[next_unit][0] < start:
            next_unit += 1
        while next_summary < len(summaries) and summaries[next_summary].after_index < start - 1:
            next_summary += 1
        system_tokens = _system_tokens(rctx, start)
        next_system = bisect.bisect_left(system, start)
    records.first = first
    memory_tokens = rctx.memory_tokens
    n_units, n_summaries, add = len(units), len(summaries), strategy.add
    for turn in t.turns[first:last]:
        dropped: list[int] = []
        if turn.session != session:
            if session is not None:
                dropped = strategy.reset()
            session = turn.session
        entered: list[int] = []
        user_index = turn.user_index
        # feed everything up to and including this turn's user message
        while next_unit < n_units:
            begins, unit = units[next_unit]  # (index of the unit's first message, unit)
            if begins > user_index:
                break
            while next_summary < n_summaries and summaries[next_summary].after_index < begins:
                strategy.add_summary(summaries[next_summary])
                next_summary += 1
            next_unit += 1
            if msgs[begins].session != session and begins < user_index:
                continue  # tail of an earlier session (e.g. its last assistant reply): gone
            add(unit)
            entered.extend(unit.indices)
        while next_system < len(system) and system[next_system] <= turn.user_index:
            system_tokens += rctx.costs[system[next_system]]
            next_system += 1
        fixed = system_tokens + memory_tokens + priming
        fit = strategy.fit(turn.number, fixed)
        shown = system_tokens if fit.system_tokens is None else fit.system_tokens
        memories = memory_tokens + fit.memory_tokens
        messages = fit.message_tokens + priming
        records.append(
            (
                shown,
                fit.scratchpad_tokens,
                fit.summary_tokens,
                memories,
                messages,
                shown + fit.scratchpad_tokens + fit.summary_tokens + memories + messages,
            ),
            entered,
            fit.evicted,
            fit.summarized,
            dropped,
            fit.pins,
            fit.overflow,
        )
        if tracker.active:
            tracker.update(turn.number, strategy, fit, entered, dropped)
        if observe is not None:
            observe(turn.number, strategy, fit)
        if progress is not None:
            progress(turn.number)
    final = strategy.view()
    return StrategyReplay(strategy_name, budget, records, tracker.results(final), final)


def _system_tokens(rctx: ReplayContext, end: int) -> int:
    """Tokens of the system messages before message ``end`` (the system prompt so far)."""
    if not rctx.settings.keep_system:
        return 0
    msgs = rctx.transcript.messages
    return sum(rctx.costs[i] for i in range(end) if msgs[i].role == "system")


@dataclass
class ReplayReport:
    """The result of `memdiag replay`: one StrategyReplay per strategy over the same counts."""

    transcript: Transcript
    encoding: str
    budget: int
    results: list[StrategyReplay]
    facts: list[str]
    facts_found: bool  # True when the facts were found by the strong-fact extractor
    costs: Sequence[int] = ()  # window tokens of each message, counted once for the run
    budget_recorded: bool = False  # the budget is the trace's largest recorded request
    # a coding agent's recorded compactions: what each kept and dropped (docs/coding-agents.md)
    compactions: Sequence[Compaction] = ()
    # the instruction files given with --memory-file (injected at every turn)
    memory_files: Sequence[MemoryFile] = ()

    def extra(self) -> dict[str, Any]:
        """What a coding-agent session adds to the JSON output (nothing for other transcripts)."""
        out: dict[str, Any] = {}
        if self.memory_files:
            out["memory_files"] = [f.to_dict() for f in self.memory_files]
        if self.compactions:
            out["compactions"] = [c.to_dict() for c in self.compactions]
        return out


def recorded_compactions(rctx: ReplayContext) -> list[Compaction]:
    """The recorded compactions, with the what-if of what each dropped (memdiag.compactions)."""
    from memdiag.compactions import recorded

    return recorded(rctx, replay)


def strategy_names(name: str, transcript: Transcript | None = None) -> list[str]:
    """The strategies of a run: 'all' is every simulated one, plus `observed` when the
    transcript recorded its windows (docs/reference.md#observed-windows)."""
    from memdiag.strategies import SIMULATED

    if name == "all":
        observed = transcript is not None and bool(transcript.windows)
        return [*SIMULATED, *(["observed"] if observed else [])]
    if name == "observed" and transcript is not None and not transcript.windows:
        from memdiag.errors import UsageError

        raise UsageError(
            f"{transcript.path}: no observed windows; --strategy observed needs a trace that "
            "records each request (OpenTelemetry, LangSmith, Langfuse, Letta, or window events)"
        )
    return [name]


def run(
    transcript: Transcript,
    settings: Settings,
    facts: Sequence[str] = (),
    progress: Callable[[int], None] | None = None,
    memory: tuple[str, int] = ("", 0),
    observe: Callable[[str], Observer] | None = None,
) -> ReplayReport:
    """Replay every strategy named by ``settings.strategy`` ('all' for all of them).

    ``memory`` is the injected long-term profile (text, tokens), present at every turn;
    ``observe(name)`` gives the observer of strategy ``name`` (see :func:`replay`).
    """
    # a replay's collections walk every object of the transcript and find no garbage (on
    # 50,000 messages, two full collections of ~0.06 s per replay): paused for the run
    with collections_paused():
        return _run(transcript, settings, facts, progress, memory, observe)


def _run(
    transcript: Transcript,
    settings: Settings,
    facts: Sequence[str],
    progress: Callable[[int], None] | None,
    memory: tuple[str, int],
    observe: Callable[[str], Observer] | None,
) -> ReplayReport:
    rctx = prepare(transcript, settings, memory_tokens=memory[1], memory_text=memory[0])
    recorded = recorded_budget(rctx)
    if recorded is not None:
        rctx = rctx.with_budget(recorded)
    found = not facts
    tracked = list(facts) if facts else tracked_facts(transcript, rctx.memo)
    results = [
        replay(rctx, name, tracked, progress=progress, observe=observe(name) if observe else None)
        for name in strategy_names(settings.strategy, transcript)
    ]
    for res in results:
        if res.name == "observed":  # recounted exactly, beside what the provider reported
            res.calls = call_tokens(transcript, rctx.counter, rctx.costs)
    comps: Sequence[Compaction] = ()
    if any(ev.meta for ev in transcript.summaries):
        comps = recorded_compactions(rctx)
    return ReplayReport(
        transcript,
        rctx.counter.encoding_name,
        rctx.budget,
        results,
        tracked,
        found,
        rctx.costs,
        budget_recorded=recorded is not None,
        compactions=comps,
    )


def recorded_budget(rctx: ReplayContext) -> int | None:
    """Without --budget, a trace's simulated windows get the agent's own size: its largest
    recorded request (whose size is known), not the model's whole context beside it."""
    t = rctx.transcript
    if rctx.settings.budget is not None or not t.windows:
        return None
    sizes = [request_tokens(w, rctx.costs, rctx.counter) for w in t.windows if size_known(w)]
    return max(sizes) if sizes else None
