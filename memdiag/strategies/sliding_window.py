"""`sliding_window`: keep the most recent messages by token budget and/or number of turns."""

from __future__ import annotations

from memdiag.strategies.base import Fit, StrategyContext, Unit, UnitQueue, WindowView, min_turn_for
from memdiag.transcript.model import SummaryEvent


class SlidingWindow:
    name = "sliding_window"

    def __init__(self, ctx: StrategyContext, budget: int, max_turns: int | None = None) -> None:
        self.ctx = ctx
        self.budget = budget
        self.max_turns = max_turns
        self.queue = UnitQueue()

    def reset(self) -> list[int]:
        return self.queue.clear()

    def add(self, unit: Unit) -> None:
        self.queue.append(unit)

    def add_summary(self, event: SummaryEvent) -> None:
        return None

    def fit(self, turn: int, fixed_tokens: int) -> Fit:
        fit = Fit()
        limit = self.budget - fixed_tokens
        self.queue.evict_to(limit, fit.evicted, min_turn_for(turn, self.max_turns))
        fit.message_tokens = self.queue.tokens
        fit.overflow = self.queue.tokens > limit
        return fit

    def view(self) -> WindowView:
        return WindowView(self.queue.indices())
