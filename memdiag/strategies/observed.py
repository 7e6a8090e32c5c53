"""`observed`: replay the windows a trace recorded (docs/reference.md#observed-windows) instead of
simulating one.

At each turn the window is the request that answered the turn's user message (the first
recorded request of the turn: what the model saw when it answered it; later requests of a tool
loop hold the tool results too). Messages that the request did not hold leave the window:
``summarized`` when an opaque compaction or a summary in the request covers them, else
``evicted``. Content of the request that is not a transcript message (``extra``) counts in its
token section; injected memories and pinned blocks are shown as pinned text, summaries as the
summary. A turn with no recorded request keeps the previous request plus what arrived since
(nothing is known to have left). The budget is ignored: the agent's real window is the fact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memdiag.strategies.base import Fit, StrategyContext, Unit, WindowView
from memdiag.transcript.events import WindowEvent
from memdiag.transcript.model import SummaryEvent, Transcript

if TYPE_CHECKING:
    from memdiag.tokens import TokenCounter


@dataclass(frozen=True, slots=True)
class CallTokens:
    """One recorded request: tokens recounted exactly, and what the provider reported."""

    turn: int
    before: str  # id of the message the request produced
    recounted: int
    reported: int | None
    model: str | None = None
    source: str | None = None
    exact: bool = True  # False: an opaque item of unknown size (a compaction) is not counted

    @property
    def difference(self) -> int | None:
        """reported − recounted (positive: the provider billed more than the messages show)."""
        return None if self.reported is None else self.reported - self.recounted


def request_tokens(w: WindowEvent, costs: Sequence[int], counter: TokenCounter) -> int:
    """A request's tokens: its messages, its extra content, and the reply priming."""
    extra = sum(
        e.tokens if e.opaque and e.tokens is not None else counter.section_cost(e.content)
        for e in w.extra
    )
    return sum(costs[i] for i in w.indices) + extra + counter.overhead.reply_priming


def size_known(w: WindowEvent) -> bool:
    """Whether every part of the request can be counted (an opaque item needs its `tokens`)."""
    return not any(e.opaque and e.tokens is None for e in w.extra)


def call_tokens(
    transcript: Transcript, counter: TokenCounter, costs: Sequence[int] | None = None
) -> list[CallTokens]:
    """Every recorded request recounted (tiktoken, chat overhead) beside its reported count."""
    if costs is None:
        costs = counter.message_costs(transcript.messages)
    return [
        CallTokens(
            transcript.messages[w.before].turn,
            w.before_id,
            request_tokens(w, costs, counter),
            w.prompt_tokens,
            w.model,
            w.source,
            size_known(w),
        )
        for w in transcript.windows
    ]


def first_requests(transcript: Transcript) -> dict[int, WindowEvent]:
    """turn number → the first recorded request of that turn."""
    out: dict[int, WindowEvent] = {}
    for w in transcript.windows:
        turn = transcript.messages[w.before].turn
        if turn > 0 and turn not in out:
            out[turn] = w
    return out


class Observed:
    name = "observed"

    def __init__(self, ctx: StrategyContext, budget: int) -> None:
        self.ctx = ctx
        self.budget = budget
        self.requests = first_requests(ctx.transcript)
        # message id → index, only needed when a request stands in for messages (a summary)
        covers = any(e.covers for w in ctx.transcript.windows for e in w.extra)
        self._ids = {m.id: m.index for m in ctx.transcript.messages} if covers else {}
        self.window: list[int] = []  # message indices in the window, in request order
        self.inside: set[int] = set()
        self.fed: set[int] = set()  # indices the engine has fed (entered) this session
        self.gone: set[int] = set()  # fed and already reported as out
        self.summary = ""
        self.pinned = ""
        self.summary_tokens = 0
        self.pinned_tokens = 0
        self.memory_tokens = 0
        self.system_tokens: int | None = None

    def reset(self) -> list[int]:
        dropped = [i for i in self.window]
        self.window, self.inside, self.fed, self.gone = [], set(), set(), set()
        self.summary = self.pinned = ""
        self.summary_tokens = self.pinned_tokens = self.memory_tokens = 0
        self.system_tokens = None
        return dropped

    def add(self, unit: Unit) -> None:
        for i in unit.indices:
            self.fed.add(i)
            if i not in self.inside:
                self.window.append(i)
                self.inside.add(i)

    def add_summary(self, event: SummaryEvent) -> None:
        return None

    def fit(self, turn: int, fixed_tokens: int) -> Fit:
        fit = Fit()
        request = self.requests.get(turn)
        msgs = self.ctx.transcript.messages
        if request is not None:
            keep = [i for i in request.indices if i in self.fed and msgs[i].role != "system"]
            keep_set = set(keep)
            covered = {self._ids[mid] for e in request.extra for mid in e.covers}
            for i in self.window:
                if i not in keep_set and i not in self.gone:
                    (fit.summarized if i in covered else fit.evicted).append(i)
                    self.gone.add(i)
            # a message that left and comes back (re-injected) cannot re-enter the engine's
            # deltas; it stays counted as gone, its tokens count again
            self.window, self.inside = keep, keep_set
            summary, pinned = self._extra(request)
            fit.summary_changed = summary != self.summary
            fit.pinned_changed = pinned != self.pinned
            self.summary, self.pinned = summary, pinned
            # the request's own system prompt: not every system message the stream held so
            # far (a session's prompt is not the next session's, docs/traces.md)
            self.system_tokens = sum(
                self.ctx.costs[i] for i in request.indices if msgs[i].role == "system"
            )
        fit.system_tokens = self.system_tokens
        fit.summary_tokens = self.summary_tokens
        fit.scratchpad_tokens = self.pinned_tokens
        fit.memory_tokens = self.memory_tokens
        fit.message_tokens = sum(self.ctx.costs[i] for i in self.window)
        return fit

    def _extra(self, request: WindowEvent) -> tuple[str, str]:
        counter = self.ctx.counter
        summary: list[str] = []
        pinned: list[str] = []
        self.summary_tokens = self.pinned_tokens = self.memory_tokens = 0
        for e in request.extra:
            tokens = (
                e.tokens if e.opaque and e.tokens is not None else counter.section_cost(e.content)
            )
            if e.section == "summary":
                self.summary_tokens += tokens
                summary.append(e.content)
            elif e.section == "memories":
                self.memory_tokens += tokens
                pinned.append(e.content)
            else:  # system, scratchpad, messages: content beside the transcript's messages
                self.pinned_tokens += tokens
                pinned.append(e.content)
        return "\n".join(s for s in summary if s), "\n".join(p for p in pinned if p)

    def view(self) -> WindowView:
        return WindowView(tuple(self.window), self.summary, self.pinned)
