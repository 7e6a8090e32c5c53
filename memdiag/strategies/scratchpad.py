"""`scratchpad`: pin key entities from user messages at the top, slide a window for the rest.

Every user message entering the stream runs the extractor (built-in rules plus
``scratchpad.rules``). For a single-valued field a later value overwrites the earlier one; a
multi-valued field (``multi: true`` in the rules file: allergy, medical, prohibition, diet,
preference) accumulates distinct values. Every change is kept in ``history`` (a list of
:class:`PinChange`) and reported once in ``Fit.pins``.

The pinned section renders one line per field ("allergic to: peanuts; shellfish") and costs at
most ``scratchpad_max_tokens`` as ``counter.section_cost(text)``. When over, values are dropped
least important first: weak before strong, and within the same strength the value set longest
ago first. The pinned section also yields to the newest unit, so the window fits the budget
whenever the newest unit does. The rest of the budget runs a sliding window (``max_turns``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memdiag.strategies.base import (
    Fit,
    PinChange,
    StrategyContext,
    Unit,
    UnitQueue,
    WindowView,
    min_turn_for,
)
from memdiag.transcript.model import SummaryEvent, opens_turn

if TYPE_CHECKING:
    from memdiag.config import ScratchpadSettings
    from memdiag.extract import Extractor

PINNED_HEADER = "Pinned facts:"


@dataclass(slots=True)
class _Pin:
    field: str
    value: str
    strong: bool
    seq: int  # when it was (last) set: a larger number is more recent
    tokens: int  # estimated cost of its part of the pinned text


class Scratchpad:
    """Pinned fields + sliding window (see the module docstring for the rules)."""

    name = "scratchpad"

    def __init__(
        self,
        ctx: StrategyContext,
        budget: int,
        extractor: Extractor,
        scratchpad_max_tokens: int,
        max_turns: int | None = None,
    ) -> None:
        self.ctx = ctx
        self.budget = budget
        self.extractor = extractor
        self.max_tokens = scratchpad_max_tokens
        self.max_turns = max_turns
        self.queue = UnitQueue()
        self.history: list[PinChange] = []  # every change of the run, sessions included
        self.values: dict[str, list[_Pin]] = {}  # field -> current values, in order first set
        self._seq = 0
        self._pending: list[PinChange] = []
        self._dirty = False  # values changed since the pinned text was rendered
        self._cap = -1  # the token cap the cached text was rendered for
        self.pinned = ""
        self.pinned_tokens = 0
        self._shown: dict[str, str] = {}  # fields as rendered in the pinned text
        self._last_pinned = ""  # pinned text at the previous fit

    def reset(self) -> list[int]:
        self.values.clear()
        self._pending = []
        self._dirty = True
        self._last_pinned = ""  # the engine accounts for the session end itself
        self._render(self.max_tokens)
        return self.queue.clear()

    def add(self, unit: Unit) -> None:
        for i in unit.indices:
            m = self.ctx.message(i)
            if opens_turn(m):  # what the human stated, not a line the agent wrote in
                for e in self.extractor.extract(m.content):
                    self._set(e.field, e.value, e.strong, m.id)
        self.queue.append(unit)

    def add_summary(self, event: SummaryEvent) -> None:
        return None

    def _set(self, field: str, value: str, strong: bool, message_id: str) -> None:
        self._seq += 1
        pins = self.values.setdefault(field, [])
        key = value.casefold()
        if self.extractor.is_multi(field):
            for pin in pins:
                if pin.value.casefold() == key:
                    self._restate(pin)
                    return
            change = PinChange(field, value, None, message_id)
            pins.append(_Pin(field, value, strong, self._seq, self._cost(field, value)))
        else:
            previous = pins[0].value if pins else None
            if previous is not None and previous.casefold() == key:
                self._restate(pins[0])
                return
            change = PinChange(field, value, previous, message_id)
            pins[:] = [_Pin(field, value, strong, self._seq, self._cost(field, value))]
        self.history.append(change)
        self._pending.append(change)
        self._dirty = True

    def _restate(self, pin: _Pin) -> None:
        """A value stated again is recent again; only a value not shown needs a re-render."""
        pin.seq = self._seq
        if pin.field not in self._shown or pin.value not in self._shown[pin.field].split("; "):
            self._dirty = True

    def _cost(self, field: str, value: str) -> int:
        shown = self.extractor.render_value(field, value)
        # as it follows the header or the previous line in the text (newline first)
        return self.ctx.counter.count(f"\n- {self.extractor.label(field, value)}: {shown}")

    def _render(self, cap: int) -> None:
        """Render the pinned text within ``cap`` tokens, dropping the least important values."""
        counter = self.ctx.counter
        pins = [p for field_pins in self.values.values() for p in field_pins]
        # most important first: strong, then most recently set
        ranked = sorted(pins, key=lambda p: (not p.strong, -p.seq))
        base = counter.section_cost(PINNED_HEADER)
        kept: list[_Pin] = []
        if pins and base < cap:
            used = base
            for p in ranked:
                # a prefix of the ranking: what is dropped is always the least important.
                # p.tokens (a line of its own) is an estimate; the exact check below corrects it
                if used + p.tokens > cap:
                    break
                kept.append(p)
                used += p.tokens
        text = self._text(kept)
        while kept and counter.section_cost(text) > cap:
            kept.pop()  # the least important kept value
            text = self._text(kept)
        # BPE merges across line ends (":\n" is one token), so the estimate runs high: extend
        # the prefix while the exact count still fits
        while len(kept) < len(ranked):
            longer = self._text([*kept, ranked[len(kept)]])
            if counter.section_cost(longer) > cap:
                break
            kept.append(ranked[len(kept)])
            text = longer
        self.pinned = text
        self.pinned_tokens = counter.section_cost(text)
        self._shown = {f: "; ".join(p.value for p in pins) for f, pins in self._by_field(kept)}
        self._cap = cap
        self._dirty = False

    def _by_field(self, kept: list[_Pin]) -> list[tuple[str, list[_Pin]]]:
        """Kept values grouped by field, fields in the order they were first set."""
        chosen = {id(p) for p in kept}
        out = []
        for field, pins in self.values.items():
            values = [p for p in pins if id(p) in chosen]
            if values:
                out.append((field, values))
        return out

    def _text(self, kept: list[_Pin]) -> str:
        if not kept:
            return ""
        lines = [PINNED_HEADER]
        # one line per field, in a stable order, so the text changes only where values do
        for field, pins in self._by_field(kept):
            shown = "; ".join(self.extractor.render_value(field, p.value) for p in pins)
            lines.append(f"- {self.extractor.label(field, pins[0].value)}: {shown}")
        return "\n".join(lines)

    def fit(self, turn: int, fixed_tokens: int) -> Fit:
        fit = Fit()
        limit = self.budget - fixed_tokens
        newest = self.queue.newest_tokens()
        # pinned facts come before older messages, but never push out the newest unit
        cap = max(0, min(self.max_tokens, limit - newest))
        if self._dirty or cap != self._cap:
            self._render(cap)
        self.queue.evict_to(
            limit - self.pinned_tokens, fit.evicted, min_turn_for(turn, self.max_turns)
        )
        fit.scratchpad_tokens = self.pinned_tokens
        fit.message_tokens = self.queue.tokens
        fit.overflow = self.queue.tokens > limit
        fit.pins, self._pending = self._pending, []
        fit.pinned_changed = bool(fit.pins) or self.pinned != self._last_pinned
        self._last_pinned = self.pinned
        return fit

    def view(self) -> WindowView:
        return WindowView(self.queue.indices(), pinned=self.pinned, fields=dict(self._shown))


def make_scratchpad(
    ctx: StrategyContext, budget: int, s: ScratchpadSettings, max_turns: int | None
) -> Scratchpad:
    """The `scratchpad` strategy: its own settings and the sliding window's ``max_turns``."""
    # the run's memoized extractor: a user message is read once, whatever replays read it
    return Scratchpad(ctx, budget, ctx.memo.extractor(s.rules), s.scratchpad_max_tokens, max_turns)
