"""The Strategy protocol that the replay engine drives (docs/reference.md#strategies).

The engine feeds a strategy *units* — a message, or an assistant tool call together with its
tool results, which must enter and leave the window together — and, at every user message,
asks it to ``fit`` the window into the budget. A strategy keeps its own state incrementally,
so one replay is O(number of messages): no window is ever copied per turn.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, overload

if TYPE_CHECKING:
    from memdiag.extract import Extractor
    from memdiag.tokens import TokenCounter
    from memdiag.transcript.model import Message, SummaryEvent, Transcript


# a message to summarize: (role, text) or (role, text, tokens of its text)
Item = tuple[str, str] | tuple[str, str, int]


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

    def texts_with_tokens(self, indices: Sequence[int]) -> list[tuple[str, str, int]]:
        """(role, content, ``text_tokens``) of each message, the overheads looked up once."""
        msgs, costs, counter = self.transcript.messages, self.costs, self.counter
        per_role = {r: counter.overhead.per_message + n for r, n in counter.role_tokens.items()}
        per_message = counter.overhead.per_message
        out = []
        for i in indices:
            m = msgs[i]
            out.append((m.role, m.content, max(0, costs[i] - per_role.get(m.role, per_message))))
        return out


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
    """The verbatim part of a window: units in order, with prefix sums of their tokens.

    Shared by every strategy so that eviction rules (never split a tool pair, never evict the
    newest unit) live in one place. Units are kept in one list with a head (the oldest unit
    still in the window) and the running sums of their tokens and their turns: the window's
    tokens are a difference of two sums, and an eviction is one bisect over each array (the
    token limit, the oldest turn allowed) instead of one step per unit (docs/engine.md).
    """

    def __init__(self) -> None:
        self._units: list[Unit] = []
        self._sums: list[int] = [0]  # _sums[k]: tokens of _units[:k]
        self._turns: list[int] = []  # _units[k].turn, non-decreasing (units arrive in order)
        self._head = 0
        self.units = _Window(self)

    def __len__(self) -> int:
        return len(self._units) - self._head

    @property
    def tokens(self) -> int:
        return self._sums[-1] - self._sums[self._head]

    def newest_tokens(self) -> int:
        """Tokens of the newest unit (0 for an empty window)."""
        return self._units[-1].tokens if len(self._units) > self._head else 0

    def append(self, unit: Unit) -> None:
        self._units.append(unit)
        self._sums.append(self._sums[-1] + unit.tokens)
        self._turns.append(unit.turn)

    def popleft(self) -> Unit:
        if not len(self):
            raise IndexError("pop from an empty window")
        unit = self._units[self._head]
        self._head += 1
        self._compact()
        return unit

    def clear(self) -> list[int]:
        dropped = [i for u in self._units[self._head :] for i in u.indices]
        self._units, self._sums, self._turns, self._head = [], [0], [], 0
        return dropped

    def evict_to(self, limit: int, out: list[int], min_turn: int | None = None) -> None:
        """Evict oldest units until tokens ≤ limit and no unit is older than ``min_turn``.

        The newest unit (the current user message) is never evicted.
        """
        head, last = self._head, len(self._units) - 1
        if head >= last:
            return
        # the first unit from which the window fits: _sums[k] >= _sums[-1] - limit
        k = bisect.bisect_left(self._sums, self._sums[-1] - limit, head, last)
        if min_turn is not None:
            k = max(k, bisect.bisect_left(self._turns, min_turn, head, last))
        if k > head:
            for u in self._units[head:k]:
                out.extend(u.indices)
            self._head = k
            self._compact()

    def indices(self) -> tuple[int, ...]:
        return tuple(i for u in self._units[self._head :] for i in u.indices)

    def _compact(self) -> None:
        """Drop the evicted units once they are half the list (amortized O(1) per unit)."""
        head = self._head
        if head > 64 and head * 2 > len(self._units):
            base = self._sums[head]
            self._units = self._units[head:]
            self._turns = self._turns[head:]
            self._sums = [x - base for x in self._sums[head:]]
            self._head = 0


class _Window(Sequence[Unit]):
    """The units of a queue's window, oldest first (a view: nothing is copied)."""

    def __init__(self, queue: UnitQueue) -> None:
        self._queue = queue

    def __len__(self) -> int:
        return len(self._queue)

    @overload
    def __getitem__(self, k: int) -> Unit: ...
    @overload
    def __getitem__(self, k: slice) -> Sequence[Unit]: ...
    def __getitem__(self, k: int | slice) -> Unit | Sequence[Unit]:
        q = self._queue
        if isinstance(k, slice):
            return q._units[q._head :][k]
        n = len(q)
        if not -n <= k < n:
            raise IndexError(k)
        return q._units[q._head + k if k >= 0 else len(q._units) + k]


def min_turn_for(turn: int, max_turns: int | None) -> int | None:
    """Oldest turn a window of ``max_turns`` turns may still hold at ``turn``."""
    return None if max_turns is None else turn - max_turns + 1
