"""The summary and pinned text of each strategy of a replay, at the turns where they changed.

A replay's turn records hold token counts, not the text of its summary or pins; the HTML
report shows that text, so it replays with these observers (:func:`memdiag.replay.replay`'s
``observe``). `check` attaches one to a case's replay when the report will want it, so the
report can show that replay instead of running it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memdiag.replay import StrategyReplay
    from memdiag.strategies.base import Fit, Strategy
    from memdiag.transcript.model import Transcript


@dataclass
class WindowTexts:
    """Summary and pinned text of one strategy, recorded at the turns where they changed."""

    summary: list[tuple[int, str]] = field(default_factory=list)
    pinned: list[tuple[int, str]] = field(default_factory=list)


class TextRecorder:
    """Observers for :func:`memdiag.replay.run`: the summary and pinned text of each strategy.

    ``strategy.view()`` costs O(window), so it is only taken when the fit says the summary or
    the pins changed, or at a session start (a reset empties both without saying so).
    """

    def __init__(self, transcript: Transcript) -> None:
        self.turn_sessions = [t.session for t in transcript.turns]
        self.by_strategy: dict[str, WindowTexts] = {}

    def __call__(self, name: str) -> Callable[[int, Strategy, Fit], None]:
        texts = self.by_strategy.setdefault(name, WindowTexts())
        state: dict[str, Any] = {"summary": "", "pinned": "", "session": None}
        sessions = self.turn_sessions

        def observe(turn: int, strategy: Strategy, fit: Fit) -> None:
            session = sessions[turn - 1]
            new_session = session != state["session"]
            state["session"] = session
            if not (fit.summary_changed or fit.pinned_changed or new_session):
                return
            view = strategy.view()
            if view.summary != state["summary"]:
                texts.summary.append((turn, view.summary))
                state["summary"] = view.summary
            if view.pinned != state["pinned"]:
                texts.pinned.append((turn, view.pinned))
                state["pinned"] = view.pinned

        return observe

    def texts(self, name: str) -> WindowTexts:
        return self.by_strategy.get(name, WindowTexts())

    def adopt(self, name: str, texts: WindowTexts) -> None:
        """Take the texts recorded while strategy ``name`` replayed elsewhere (RecordedReplay)."""
        self.by_strategy[name] = texts


@dataclass(frozen=True)
class RecordedReplay:
    """A replay of a whole transcript with the texts recorded while it ran: what the report
    would get by replaying that strategy again with the same facts."""

    result: StrategyReplay
    texts: WindowTexts
