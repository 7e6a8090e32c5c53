"""The per-turn records of a replay, kept as compact columns of numbers (docs/engine.md).

A replay of a long transcript has one record per turn and strategy: what entered, what was
evicted, summarized or dropped at a session start, and the window's tokens by section. The
engine appends each turn's numbers to a few arrays (message indices, not ids; six token counts)
instead of building a record object, four tuples of ids and a dict per turn. The JSON renderer
writes the document from these columns, and so does the HTML report's data; :class:`TurnRecord`
objects are made only for callers that ask for them (the table, a diagnosis), once, and they
are exactly the records the engine would have built (a property test holds them equal).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from memdiag.strategies.base import PinChange
    from memdiag.transcript.model import Message, Turn

# the token sections of every record, in the order the JSON writes them
SECTIONS = ("system", "scratchpad", "summary", "memories", "messages", "total")
WIDTH = len(SECTIONS)
LISTS = 4  # entered, evicted, summarized, dropped_by_session


@dataclass(frozen=True, slots=True)
class TurnRecord:
    turn: int
    session: str
    session_turn: int
    tokens: dict[str, int]
    entered: tuple[str, ...]
    evicted: tuple[str, ...]
    summarized: tuple[str, ...]
    dropped_by_session: tuple[str, ...] = ()
    pinned: tuple[PinChange, ...] = ()
    overflow: bool = False


class TurnRecords(Sequence[TurnRecord]):
    """The records of one replay: turns ``turns[first:]`` in order, one per evaluated turn.

    Columns: ``tokens`` (six numbers per turn, :data:`SECTIONS`), ``indices`` (the message
    indices of every turn's four lists, one after the other) with ``ends`` (where each list
    ends in ``indices``), the pins of the turns that set any, and the turns over budget.
    """

    def __init__(self, turns: Sequence[Turn], messages: Sequence[Message], first: int = 0):
        self.turns = turns  # the transcript's turns: record k is turns[first + k]
        self.messages = messages
        self.first = first
        self.tokens: array[int] = array("q")
        self.indices: array[int] = array("q")
        self.ends: array[int] = array("q")
        self.pins: dict[int, tuple[PinChange, ...]] = {}
        self.overflow: set[int] = set()
        self._made: list[TurnRecord] | None = None  # the records, once a caller asked for them

    def append(
        self,
        tokens: tuple[int, int, int, int, int, int],
        entered: list[int],
        evicted: list[int],
        summarized: list[int],
        dropped: list[int],
        pins: list[PinChange],
        overflow: bool,
    ) -> None:
        """One turn's numbers (``tokens`` in :data:`SECTIONS` order, ``total`` last)."""
        k = len(self.tokens) // WIDTH
        self.tokens.extend(tokens)
        indices, ends = self.indices, self.ends
        indices.extend(entered)
        ends.append(len(indices))
        indices.extend(evicted)
        ends.append(len(indices))
        indices.extend(summarized)
        ends.append(len(indices))
        indices.extend(dropped)
        ends.append(len(indices))
        if pins:
            self.pins[k] = tuple(pins)
        if overflow:
            self.overflow.add(k)
        self._made = None

    def __len__(self) -> int:
        return len(self.tokens) // WIDTH

    def span(self, k: int, which: int) -> tuple[int, int]:
        """Where list ``which`` (0 entered, 1 evicted, 2 summarized, 3 dropped) of record ``k``
        lies in ``indices``."""
        at = k * LISTS + which
        return (self.ends[at - 1] if at else 0), self.ends[at]

    def turn(self, k: int) -> Turn:
        return self.turns[self.first + k]

    def column(self, section: str) -> array[int]:
        """The tokens of ``section`` at every turn."""
        return self.tokens[SECTIONS.index(section) :: WIDTH]

    def count(self, which: int) -> int:
        """How many message indices list ``which`` holds over all the turns."""
        ends = self.ends
        total, start = 0, 0
        for at in range(len(ends)):
            if at % LISTS == which:
                total += ends[at] - start
            start = ends[at]
        return total

    def changed(self, k: int) -> bool:
        """Whether something left the window, was pinned or went over budget at record ``k``
        (the turns the table lists by default)."""
        ends = self.ends
        at = k * LISTS
        return ends[at + 3] > ends[at] or k in self.pins or k in self.overflow

    def _records(self) -> list[TurnRecord]:
        made = self._made
        if made is None:
            made = self._made = [self._make(k) for k in range(len(self))]
        return made

    def _make(self, k: int) -> TurnRecord:
        msgs, indices = self.messages, self.indices
        t = self.turn(k)
        row = self.tokens[k * WIDTH : (k + 1) * WIDTH]
        lists = []
        for which in range(LISTS):
            start, end = self.span(k, which)
            lists.append(tuple(msgs[i].id for i in indices[start:end]))
        return TurnRecord(
            turn=t.number,
            session=t.session,
            session_turn=t.session_turn,
            tokens=dict(zip(SECTIONS, row, strict=True)),
            entered=lists[0],
            evicted=lists[1],
            summarized=lists[2],
            dropped_by_session=lists[3],
            pinned=self.pins.get(k, ()),
            overflow=k in self.overflow,
        )

    @overload
    def __getitem__(self, k: int) -> TurnRecord: ...
    @overload
    def __getitem__(self, k: slice) -> list[TurnRecord]: ...
    def __getitem__(self, k: int | slice) -> TurnRecord | list[TurnRecord]:
        if self._made is not None or isinstance(k, slice):
            return self._records()[k]
        n = len(self)
        if not -n <= k < n:
            raise IndexError(k)
        return self._make(k % n)  # one record (a diagnosis reads the last): make only it

    def __iter__(self) -> Iterator[TurnRecord]:
        return iter(self._records())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TurnRecords):
            return self._records() == other._records()
        if isinstance(other, list):
            return self._records() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TurnRecords({len(self)} turns)"
