"""Step 2 of docs/reference.md#verdicts: the fact was stated in T's session, so replay the strategy
to T.

``in_context`` / ``short_term_dropped`` / ``short_term_summarized_away``, plus a what-if over
strategies and the smallest sliding-window budget that keeps the fact.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from memdiag.diagnosis.verdicts import Failure, Outcome, ShortTermDetails, Verdict, WhatIf
from memdiag.replay import ReplayContext, StrategyReplay, replay
from memdiag.strategies import Unit, WindowView

if TYPE_CHECKING:
    from memdiag.survival import FactSurvival


def decide_short_term(
    rctx: ReplayContext,
    strategy: str,
    failure: Failure,
    what_if: bool,
    batch: Sequence[str] = (),
) -> tuple[Outcome, ShortTermDetails]:
    """Replay ``strategy`` to the failure turn: was the fact in the window, and if not, why?

    ``batch``: the facts of the run's other failures at the same turn (see ``_tracked``).
    """
    # the failure turn's session alone (the evidence is in it: that replay gives the same window)
    res, survival = _tracked(rctx, strategy, failure.fact, failure.at_turn, None, batch)
    last = res.turns[-1]
    base = ShortTermDetails(
        strategy, rctx.budget, last.tokens["total"], dict(last.tokens), survival.stated_at_turn
    )
    if survival.lost_at_turn is None and survival.kept_by is not None:
        conflicts = tuple(conflicts_in_window(rctx, res.final, failure.fact))
        kept = replace(base, kept_by=survival.kept_by, conflicting_ids=conflicts)
        flags = ("conflict_in_context",) if conflicts else ()
        return Outcome(Verdict.in_context, fixes_in_context(failure.at_turn, kept), flags), kept
    verdict = (
        Verdict.short_term_summarized_away
        if survival.mechanism == "summarized_away"
        else Verdict.short_term_dropped
    )
    lost = replace(
        base,
        lost_at_turn=survival.lost_at_turn,
        mechanism=survival.mechanism,
        what_if=what_if_short_term(rctx, failure, batch) if what_if else None,
    )
    return Outcome(verdict, fixes_short_term(verdict, lost)), lost


def _tracked(
    rctx: ReplayContext,
    strategy: str,
    fact: str,
    turn: int,
    budget: int | None = None,
    batch: Sequence[str] = (),
) -> tuple[StrategyReplay, FactSurvival]:
    """``strategy`` replayed from the start of ``turn``'s session to ``turn`` under ``budget``
    (None: the run's), and ``fact``'s survival in it.

    The window does not depend on the facts tracked, and each fact's survival is its own (a
    test holds a diagnosis of many facts equal to each diagnosed alone). So a replay given
    ``batch`` (the facts of the run's failures at that turn) is kept, and the first of a
    (strategy, turn, budget) tracks them all: the verdicts and what-ifs of the other failures
    there take their fact's survival from it, if its evidence is still the one the replay
    tracked (a diagnosis may remember more first); else the fact is replayed alone, and that
    replay is kept for it. Replays without ``batch`` (a budget search's) are not kept.
    """
    budget = rctx.budget if budget is None else budget
    kept = rctx.session_replays.get((strategy, turn, budget))
    for res, tracked in kept or ():
        found = tracked.get(fact)
        if found is not None and found[1] == rctx.evidence_of(fact):
            return res, res.facts[found[0]]
    sized = rctx if budget == rctx.budget else rctx.with_budget(budget)
    facts = [fact] if kept else list(dict.fromkeys((fact, *batch)))
    res = replay(sized, strategy, facts, until_turn=turn, from_session_of=turn)
    if batch:
        tracked = {f: (k, rctx.evidence_of(f)) for k, f in enumerate(facts)}
        rctx.session_replays.setdefault((strategy, turn, budget), []).append((res, tracked))
    return res, res.facts[0]


def kept_at(
    rctx: ReplayContext,
    strategy: str,
    fact: str,
    turn: int,
    budget: int | None = None,
    batch: Sequence[str] = (),
) -> bool:
    """Is ``fact`` in the window at ``turn`` under ``strategy`` (optionally another budget)?
    ``batch``: the facts of the other failures at ``turn``, tracked by the same replay."""
    return _kept(_tracked(rctx, strategy, fact, turn, budget, batch)[1])


def _kept(s: FactSurvival) -> bool:
    return s.kept_by is not None and s.lost_at_turn is None


def smallest_budget(
    rctx: ReplayContext, fact: str, turn: int, batch: Sequence[str] = ()
) -> int | None:
    """The smallest budget at which the sliding window keeps ``fact`` at ``turn``.

    Kept-ness is monotone in the budget for the sliding window (the window is always a suffix of
    the session's messages, longer with a larger budget). So a budget that keeps the fact while
    one token less does not is the answer. The window at ``turn`` under a budget that fits
    everything names it: the fixed sections plus the units from the latest statement of the fact
    to the newest (``_threshold``; 1 when the newest states it, which is never evicted), and
    replays confirm it. When they do not (the fact also in the injected memories), a binary
    search over the budget finds it, exactly as well.
    None when no budget keeps it (e.g. max_turns evicts it first). ``batch``: the facts of the
    other failures at ``turn``, which share the replay under that budget (``_tracked``).
    """
    hi = fits_everything(rctx)
    whole, survival = _tracked(rctx, "sliding_window", fact, turn, hi, batch)
    if not _kept(survival):
        return None
    guess = _threshold(rctx, whole, fact)
    if (
        guess is not None
        and 1 <= guess < hi
        and kept_at(rctx, "sliding_window", fact, turn, guess)
        and (guess == 1 or not kept_at(rctx, "sliding_window", fact, turn, guess - 1))
    ):
        return guess
    return searched_budget(rctx, fact, turn, hi)


def fits_everything(rctx: ReplayContext) -> int:
    """A budget that every window of the run fits in (the top of the budget search)."""
    return sum(rctx.costs) + rctx.memory_tokens + rctx.counter.overhead.reply_priming + 1


def searched_budget(rctx: ReplayContext, fact: str, turn: int, hi: int) -> int:
    """The smallest budget up to ``hi`` (which keeps ``fact``) at which the sliding window keeps
    it at ``turn``, by binary search: exact, kept-ness being monotone in the budget. ``lo`` = 1
    keeps it exact whatever the message sizes (a bound taken from some other message could
    exceed the answer)."""
    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        if kept_at(rctx, "sliding_window", fact, turn, mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def _begins(item: tuple[int, Unit]) -> int:
    return item[0]  # (index of the unit's first message, unit)


def _threshold(rctx: ReplayContext, whole: StrategyReplay, fact: str) -> int | None:
    """The budget at which the latest statement of ``fact`` in ``whole``'s final window (a
    replay in which everything fits) is the oldest unit the sliding window still keeps."""
    if whole.final is None or not whole.final.indices or not whole.turns:
        return None
    window = whole.final.indices
    stated = set(rctx.evidence_of(fact)).intersection(window)
    if not stated:
        return None
    units = rctx.units
    first = bisect.bisect_left(units, window[0], key=_begins)
    last = bisect.bisect_right(units, window[-1], key=_begins)
    tokens = 0
    for k, (_, unit) in enumerate(reversed(units[first:last])):
        tokens += unit.tokens
        if stated.intersection(unit.indices):
            if k == 0:  # the newest unit, never evicted: any budget keeps it
                return 1
            t = whole.turns[-1].tokens  # the sliding window's fixed sections at that turn
            return t["system"] + t["memories"] + rctx.counter.overhead.reply_priming + tokens
    return None


def what_if_short_term(rctx: ReplayContext, failure: Failure, batch: Sequence[str] = ()) -> WhatIf:
    """Which strategies keep the fact at the same budget, and the smallest sliding budget.
    ``batch``: the facts of the run's failures at the same turn: one replay per strategy
    tracks them all (``_tracked``)."""
    from memdiag.strategies import SIMULATED

    kept = {}
    for name in SIMULATED:  # `observed` is what happened, not a strategy one could pick
        try:
            kept[name] = kept_at(rctx, name, failure.fact, failure.at_turn, None, batch)
        except ImportError:  # a strategy module that is not installed
            continue
    return WhatIf(kept, smallest_budget(rctx, failure.fact, failure.at_turn, batch))


def conflicts_in_window(rctx: ReplayContext, view: WindowView | None, fact: str) -> list[str]:
    """Messages in the window that give a different value for the same single-valued field."""
    from memdiag.extract import default_extractor

    ex = default_extractor()
    fields = ex.stated(fact, single_only=True)
    if not fields or view is None:
        return []
    out = []
    for i in view.indices:
        m = rctx.transcript.messages[i]
        if m.role != "user":
            continue
        stated = ex.stated(m.content, single_only=True)
        if any(name in stated and stated[name] != value for name, value in fields.items()):
            out.append(m.id)
    return out


def fixes_in_context(at_turn: int, det: ShortTermDetails) -> tuple[str, ...]:
    fixes = [
        f"Memory delivered it: the fact was in the window at turn {at_turn} ({det.kept_by}). "
        "Look at the prompt and the model, not at memory: instruct the model to check "
        "constraints, or move the fact closer to the question."
    ]
    if det.conflicting_ids:
        fixes.append(
            "A contradicting statement is in the window too "
            f"({', '.join(det.conflicting_ids)}): resolve it (keep the latest value only)."
        )
    return tuple(fixes)


def fixes_short_term(verdict: Verdict, det: ShortTermDetails) -> tuple[str, ...]:
    fixes = []
    lost = det.lost_at_turn
    if verdict is Verdict.short_term_summarized_away:
        fixes.append(
            f"The summary dropped it at turn {lost}: make the summarizer keep constraints and "
            "strong facts (names, allergies, prohibitions), raise summary_max_tokens, or pin it."
        )
    else:
        fixes.append(
            f"It was evicted at turn {lost} by {det.strategy} under a budget of "
            f"{det.budget} tokens."
        )
    wi = det.what_if
    keepers = [k for k, v in wi.kept_by_strategy.items() if v] if wi else []
    if "scratchpad" in keepers:
        fixes.append("Pin it: the scratchpad strategy keeps this fact pinned at the same budget.")
    elif keepers:
        fixes.append(f"Strategies that keep it at the same budget: {', '.join(keepers)}.")
    smallest = wi.smallest_sliding_window_budget if wi else None
    if smallest is not None:
        fixes.append(
            f"Raise the sliding-window budget to at least {smallest} tokens "
            f"(now {det.budget}), or shrink what crowds it out (long tool results)."
        )
    fixes.append(
        "Restate the constraint before the question, or start a clean session that opens with it."
    )
    return tuple(fixes)
