"""`summary`: compress the oldest messages into a running summary, keep the newest verbatim.

When the window (fixed sections + summary + verbatim messages) passes ``trigger_tokens``
(default 80% of the budget), the oldest units are compressed into the summary until at most
``keep_recent_tokens`` (default 40% of the budget) of messages stay verbatim. Units are atomic
(a tool call stays with its results) and the newest unit (the current user message) always
stays. The summary section costs at most ``summary_max_tokens`` as
``counter.section_cost(summary)``; if the window still does not fit, the oldest units are
evicted and, as a last resort, the summary is shrunk to the room left beside the newest unit.

With the ``recorded`` summarizer nothing triggers: each summary event of the transcript
replaces the summary verbatim and moves the messages it covers out of the verbatim window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memdiag.strategies.base import Fit, StrategyContext, Unit, UnitQueue, WindowView
from memdiag.strategies.summarizers import Summarizer, make_summarizer
from memdiag.transcript.model import SummaryEvent

if TYPE_CHECKING:
    from memdiag.config import LLMSettings, SummarySettings

TRIGGER_SHARE = 0.8
KEEP_RECENT_SHARE = 0.4


class SummaryStrategy:
    """Running summary + verbatim recent units (see the module docstring for the rules)."""

    name = "summary"

    def __init__(
        self,
        ctx: StrategyContext,
        budget: int,
        summarizer: Summarizer,
        summary_max_tokens: int,
        trigger_tokens: int | None = None,
        keep_recent_tokens: int | None = None,
    ) -> None:
        self.ctx = ctx
        self.budget = budget
        self.summarizer = summarizer
        self.summary_max_tokens = summary_max_tokens
        self.trigger_tokens = (
            int(budget * TRIGGER_SHARE) if trigger_tokens is None else trigger_tokens
        )
        self.keep_recent_tokens = (
            int(budget * KEEP_RECENT_SHARE) if keep_recent_tokens is None else keep_recent_tokens
        )
        self.queue = UnitQueue()
        self.summary = ""
        self.summary_tokens = 0
        self.session: str | None = None
        # recorded events wait for the next unit: only then is their session known to be current
        self._events: list[SummaryEvent] = []
        self._summarized: list[int] = []  # moved by events, reported at the next fit
        self._changed = False

    def reset(self) -> list[int]:
        self._set_summary("")
        self._changed = False  # the engine accounts for session ends itself
        self._summarized = []
        self._events = []
        self.session = None
        return self.queue.clear()

    def add(self, unit: Unit) -> None:
        if self._events:
            self._apply_events(self.ctx.message(unit.indices[0]).session)
        if not self.summarizer.compresses:  # only recorded events ask for the session
            self.session = self.ctx.message(unit.indices[0]).session
        self.queue.append(unit)

    def add_summary(self, event: SummaryEvent) -> None:
        if not self.summarizer.compresses:
            self._events.append(event)

    def _apply_events(self, session: str | None) -> None:
        for event in self._events:
            if event.session != session:
                continue  # a summary of a session that has ended: it left with that session
            while self.queue.units and self.queue.units[0].indices[-1] <= event.replaces_through:
                self._summarized.extend(self.queue.popleft().indices)
            self._set_summary(event.content)
        self._events = []

    def _set_summary(self, text: str) -> None:
        if text != self.summary:
            self.summary = text
            self.summary_tokens = self.ctx.counter.section_cost(text)
            self._changed = True

    def fit(self, turn: int, fixed_tokens: int) -> Fit:
        fit = Fit()
        if self._events:
            self._apply_events(self.session)
        fit.summarized, self._summarized = self._summarized, []
        limit = self.budget - fixed_tokens
        queue = self.queue
        if (
            self.summarizer.compresses
            and fixed_tokens + self.summary_tokens + queue.tokens > self.trigger_tokens
        ):
            chunk: list[int] = []
            queue.evict_to(self.keep_recent_tokens, chunk)  # the oldest units, newest kept
            if chunk:
                # token counts from the run's single encoding pass let the summarizer
                # estimate sentence costs instead of encoding every sentence again
                messages = self.ctx.texts_with_tokens(chunk)
                self._set_summary(
                    self.summarizer.summarize(self.summary, messages, self.summary_max_tokens)
                )
                fit.summarized.extend(chunk)
        queue.evict_to(limit - self.summary_tokens, fit.evicted)
        if self.summary and self.summary_tokens + queue.tokens > limit:
            # even the newest unit alone leaves no room for the whole summary: shrink it
            room = max(0, limit - queue.tokens)
            self._set_summary(self.summarizer.shrink(self.summary, room) if room else "")
        fit.summary_tokens = self.summary_tokens
        fit.message_tokens = queue.tokens
        fit.overflow = queue.tokens > limit
        fit.summary_changed, self._changed = self._changed, False
        return fit

    def view(self) -> WindowView:
        return WindowView(self.queue.indices(), summary=self.summary)


def make_summary(
    ctx: StrategyContext, budget: int, s: SummarySettings, llm: LLMSettings, rules: str | None
) -> SummaryStrategy:
    """The `summary` strategy: its own settings, the LLM endpoint and the extraction rules."""
    from memdiag.strategies.summarizers import ExtractiveSummarizer

    extractor = ctx.memo.extractor(rules) if s.summarizer == "extractive" else None
    summarizer = make_summarizer(s.summarizer, ctx.counter, llm, extractor)
    if isinstance(summarizer, ExtractiveSummarizer):
        summarizer.scores = ctx.memo.sentence_scores(rules)  # shared by the run's replays
    return SummaryStrategy(
        ctx, budget, summarizer, s.summary_max_tokens, s.trigger_tokens, s.keep_recent_tokens
    )
