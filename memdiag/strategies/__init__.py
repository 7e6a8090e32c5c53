"""Short-term memory strategies behind one registry (docs/reference.md#strategies)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from memdiag.errors import UsageError
from memdiag.strategies.base import Fit, Strategy, StrategyContext, Unit, WindowView

if TYPE_CHECKING:
    from memdiag.config import Settings


def _sliding(ctx: StrategyContext, settings: Settings, budget: int) -> Strategy:
    from memdiag.strategies.sliding_window import SlidingWindow

    return SlidingWindow(ctx, budget, settings.sliding_window.max_turns)


def _summary(ctx: StrategyContext, settings: Settings, budget: int) -> Strategy:
    from memdiag.strategies.summary import make_summary

    return make_summary(ctx, budget, settings.summary, settings.llm, settings.scratchpad.rules)


def _scratchpad(ctx: StrategyContext, settings: Settings, budget: int) -> Strategy:
    from memdiag.strategies.scratchpad import make_scratchpad

    return make_scratchpad(ctx, budget, settings.scratchpad, settings.sliding_window.max_turns)


def _observed(ctx: StrategyContext, settings: Settings, budget: int) -> Strategy:
    from memdiag.strategies.observed import Observed

    return Observed(ctx, budget)


STRATEGIES: dict[str, Callable[[StrategyContext, Settings, int], Strategy]] = {
    "sliding_window": _sliding,
    "summary": _summary,
    "scratchpad": _scratchpad,
    # the windows a trace recorded (docs/reference.md#observed-windows), not a simulation
    "observed": _observed,
}
SIMULATED = ("sliding_window", "summary", "scratchpad")


def _unknown_strategy(name: str) -> UsageError:
    return UsageError(f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}, all")


def make_strategy(name: str, ctx: StrategyContext, settings: Settings, budget: int) -> Strategy:
    """The strategy ``name`` from the registry; each factory passes on only its own settings."""
    try:
        factory = STRATEGIES[name]
    except KeyError:
        raise _unknown_strategy(name) from None
    return factory(ctx, settings, budget)


def validate_settings(settings: Settings) -> Settings:
    """``settings.validate()`` plus the names only the registries know (strategy, summarizer)."""
    from memdiag.strategies.summarizers import check_summarizer

    settings.validate()
    if settings.strategy != "all" and settings.strategy not in STRATEGIES:
        raise _unknown_strategy(settings.strategy)
    check_summarizer(settings.summary.summarizer)
    return settings


__all__ = [
    "SIMULATED",
    "STRATEGIES",
    "Fit",
    "Strategy",
    "StrategyContext",
    "Unit",
    "WindowView",
    "make_strategy",
    "validate_settings",
]
