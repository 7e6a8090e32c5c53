"""The Strategy protocol that the replay engine drives (docs/reference.md#strategies).

The engine feeds a strategy *units* — a message, or an assistant tool call together with its
tool results, which must enter and leave the window together — and, at every user message,
asks it to ``fit`` the window into the budget. A strategy keeps its own state incrementally,
so one replay is O(number of messages): no window is ever copied per turn.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from memdiag.extract import Extractor
    from memdiag.tokens import TokenCounter
    from memdiag.transcript.model import Message, SummaryEvent, Transcript


@dataclass(slots=True)
class Unit:
    """Messages that enter and leave the window together (a tool call and its results)."""

    indices: list[int]
    tokens: int
    turn: int


@dataclass
class RunMemo:
    """Work that every replay of one run shares, done once (docs/engine.md).

    One memoized extractor per rules file (each distinct text is extracted once, whichever
    strategy or what-if replay asks) and the summarizer's sentence scores (a sentence's score is
    a property of the sentence and its role, not of the summary that carries it).
    """

    extractors: dict[str | None, Extractor] = field(default_factory=dict)
    scores: dict[str | None, dict[str, int]] = field(default_factory=dict)

    def extractor(self, rules: str | None) -> Extractor:
        """``load_extractor(rules)``, loaded once for the run, with its memo."""
        found = self.extractors.get(rules)
        if found is None:
            from memdiag.extract import load_extractor

            found = self.extractors[rules] = load_extractor(rules).memoized()
        return found

    def sentence_scores(self, rules: str | None) -> dict[str, int]:
        """Score of each ``"role: sentence"`` under ``rules`` (filled by the summarizer)."""
        return self.scores.setdefault(rules, {})


@dataclass(frozen=True)
class StrategyContext:
    """What every strategy of one run shares: the transcript and its per-message costs."""

    transcript: Transcript
    costs: Sequence[int]  # tokens of each message in the window, computed once per run
    counter: TokenCounter
    memo: RunMemo = field(default_factory=RunMemo)

    def text(self, index: int) -> str:
        return self.transcript.messages[index].content

    def message(self, index: int) -> Message:
        return self.transcript.messages[index]

    def text_tokens(self, index: int) -> int:
        """Tokens of a message's content (its window cost without the chat overhead)."""
        m = self.transcript.messages[index]
        overhead = self.counter.overhead.per_message + self.counter.role_tokens.get(m.role, 0)
        return max(0, self.costs[index] - overhead)


@dataclass(frozen=True, slots=True)
class PinChange:
    """A scratchpad field that was set (or overwritten) at a turn."""

    field: str
    value: str
    previous: str | None
    message_id: str


@dataclass(slots=True)
class Fit:
    """What ``fit`` did at one turn; token counts are of the window after the fit."""

    evicted: list[int] = field(default_factory=list)
    summarized: list[int] = field(default_factory=list)
    scratchpad_tokens: int = 0
    summary_tokens: int = 0
    message_tokens: int = 0
    memory_tokens: int = 0  # memories the strategy itself put in the window (observed)
    # the system prompt the strategy knows the window held (observed: the request's own);
    # None: the system messages of the stream so far
    system_tokens: int | None = None
    overflow: bool = False  # the newest unit alone does not fit the budget
    summary_changed: bool = False
    pinned_changed: bool = False
    pins: list[PinChange] = field(default_factory=list)


@dataclass(frozen=True)
class WindowView:
    """The window at one moment: message indices kept verbatim, summary and pinned text."""

    indices: tuple[int, ...]
    summary: str = ""
    pinned: str = ""
    fields: dict[str, str] = field(default_factory=dict)


class Strategy(Protocol):
    """A short-term memory strategy. Implementations must be deterministic."""

    name: str

    def reset(self) -> list[int]:
        """Session start: empty the window; return the message indices that leave with it."""
        ...

    def add(self, unit: Unit) -> None:
        """A unit enters the stream (before the next ``fit``)."""
        ...

    def add_summary(self, event: SummaryEvent) -> None:
        """A summary the agent really produced (only the recorded summarizer uses it)."""
        ...

    def fit(self, turn: int, fixed_tokens: int) -> Fit:
        """Make the window fit ``budget - fixed_tokens`` (system prompt, memories, priming)."""
        ...

    def view(self) -> WindowView:
        """A snapshot of the current window (O(window) — not for per-turn use)."""
        ...


class UnitQueue:
    """The verbatim part of a window: units in order with a running token sum.

    Shared by every strategy so that eviction rules (never split a tool pair, never evict the
    newest unit) live in one place.
    """

    def __init__(self) -> None:
        self.units: deque[Unit] = deque()
        self.tokens = 0

    def __len__(self) -> int:
        return len(self.units)

    def append(self, unit: Unit) -> None:
        self.units.append(unit)
        self.tokens += unit.tokens

    def popleft(self) -> Unit:
        unit = self.units.popleft()
        self.tokens -= unit.tokens
        return unit

    def clear(self) -> list[int]:
        dropped = [i for u in self.units for i in u.indices]
        self.units.clear()
        self.tokens = 0
        return dropped

    def evict_to(self, limit: int, out: list[int], min_turn: int | None = None) -> None:
        """Evict oldest units until tokens ≤ limit and no unit is older than ``min_turn``.

        The newest unit (the current user message) is never evicted.
        """
        while len(self.units) > 1 and (
            self.tokens > limit or (min_turn is not None and self.units[0].turn < min_turn)
        ):
            out.extend(self.popleft().indices)

    def indices(self) -> tuple[int, ...]:
        return tuple(i for u in self.units for i in u.indices)


def min_turn_for(turn: int, max_turns: int | None) -> int | None:
    """Oldest turn a window of ``max_turns`` turns may still hold at ``turn``."""
    return None if max_turns is None else turn - max_turns + 1
