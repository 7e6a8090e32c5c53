"""The replay engine: drive a strategy turn by turn and record compact per-turn deltas.

For every user message (turn) the window the model would see is evaluated: messages that
arrived since the previous turn enter, the strategy fits the window into the budget, and the
engine records what entered, what was evicted or summarized, and tokens by section. Session
starts reset the window. Facts are tracked incrementally (a counter of their evidence messages
in the window plus a check of the summary/pinned text when those change), so one replay is
O(messages) in time and memory.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memdiag.collector import collections_paused
from memdiag.config import Settings
from memdiag.facts import FUZZY_THRESHOLD, FactSet, Match, TermIndex, fold, match, text_terms
from memdiag.strategies import StrategyContext, Unit, WindowView, make_strategy
from memdiag.strategies.base import Fit, RunMemo, Strategy
from memdiag.strategies.observed import CallTokens, call_tokens, request_tokens, size_known
from memdiag.survival import FactSurvival, FactTracker, tracked_facts
from memdiag.text import mask_non_statements
from memdiag.tokens import TokenCounter
from memdiag.transcript.model import Transcript
from memdiag.turn_records import TurnRecords

if TYPE_CHECKING:
    from memdiag.compactions import Compaction
    from memdiag.memory_files import MemoryFile

Observer = Callable[[int, Strategy, Fit], None]
EVIDENCE_ROLES = ("user", "assistant", "tool")


@dataclass
class StrategyReplay:
    name: str
    budget: int
    turns: TurnRecords  # compact columns; a sequence of TurnRecord for those who ask
    facts: list[FactSurvival]
    final: WindowView | None = None  # the window at the last evaluated turn
    calls: list[CallTokens] = field(default_factory=list)  # observed: every recorded request


@dataclass(frozen=True)
class ReplayContext:
    """Everything shared by the strategies of one run: transcript, counts, fixed sections."""

    transcript: Transcript
    settings: Settings
    counter: TokenCounter
    costs: Sequence[int]
    units: list[tuple[int, Unit]]  # (index of the unit's first message, unit), in order
    memory_tokens: int = 0  # injected long-term memories, every turn
    memory_text: str = ""  # what those memories say (a fact found there is kept)
    _evidence: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False)
    _remembered: set[str] = field(default_factory=set, repr=False)  # not found by the words
    # what the words found for a fact whose evidence was then remembered (lexical() gives it)
    _by_words: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False)
    memo: RunMemo = field(default_factory=RunMemo, repr=False)  # shared by with_budget copies
    _folded_texts: dict[int, str] = field(default_factory=dict, repr=False)
    _term_index: list[TermIndex] = field(default_factory=list, repr=False)  # built on first use
    _system: list[tuple[int, ...]] = field(default_factory=list, repr=False)  # on first use
    _message_terms: dict[str, tuple[frozenset[str], str]] = field(default_factory=dict, repr=False)
    _word_matches: dict[str, tuple[tuple[int, Match], ...]] = field(
        default_factory=dict, repr=False
    )
    _statements: dict[str, str] = field(default_factory=dict, repr=False)  # text -> statement
    # (strategy, turn, budget) -> a diagnosis's replay of that turn's session, and the facts
    # it tracked: fact -> (its place in the replay's facts, the evidence it was tracked with)
    session_replays: dict[
        tuple[str, int, int], tuple[StrategyReplay, dict[str, tuple[int, tuple[int, ...]]]]
    ] = field(default_factory=dict, repr=False)
    # facts asked together -> text -> which of them its statement states
    _stating: dict[tuple[str, ...], dict[str, frozenset[str]]] = field(
        default_factory=dict, repr=False
    )

    @property
    def budget(self) -> int:
        return self.settings.effective_budget()

    def evidence_of(self, fact: str) -> tuple[int, ...]:
        """Indices of the messages that state ``fact`` (searched once per run and fact; see
        ``word_matches``), or the evidence remembered for it."""
        found = self._evidence.get(fact)
        if found is None:
            found = self._evidence[fact] = tuple(i for i, _ in self.word_matches(fact))
        return found

    def word_matches(self, fact: str) -> tuple[tuple[int, Match], ...]:
        """(index, match) of each message that can be evidence and whose words state ``fact``,
        in order; found once per run and fact (remembered evidence plays no part).

        The run's term index names the few messages that can state it; ``match`` judges those
        (the answers of matching every message: a property test holds them equal).
        """
        found = self._word_matches.get(fact)
        if found is None:
            msgs = self.transcript.messages
            folded = self.folded()
            keys = self._index().candidates(fact, FUZZY_THRESHOLD)
            pairs = folded.items() if keys is None else ((i, folded[i]) for i in keys)
            terms, bounded = self.terms_of, keys is not None
            hits = []
            # the answer depends on the folded text only: a text that recurs (a repeated
            # request, a tool's same output) is judged once
            judged: dict[str, Match | None] = {}
            for i, text in pairs:
                if text in judged:
                    hit = judged[text]
                else:
                    hit = judged[text] = match(
                        fact, msgs[i].content, FUZZY_THRESHOLD, text, terms, bounded
                    )
                if hit is not None:
                    hits.append((i, hit))
            found = self._word_matches[fact] = tuple(hits)
        return found

    def statement(self, text: str) -> str:
        """``mask_non_statements`` of a message's text, kept for the run (every fact whose
        words a question holds asks it again)."""
        found = self._statements.get(text)
        if found is None:
            found = self._statements[text] = mask_non_statements(text)
        return found

    def statement_states(self, facts: tuple[str, ...] = ()) -> Callable[[str, str], bool]:
        """``states(fact, text)``: whether a message's text still matches ``fact`` once what
        states nothing is blanked (``statement``); a question ("Am I allergic to peanuts?")
        holds the fact's words but does not state it.

        ``facts``: every fact the run asks this of. A text is then read once for all of them,
        one scan of their terms (``FactSet``), whichever fact asks first; the answers are
        ``match``'s for each (a property test holds them equal).
        """
        memo = self._stating.get(facts)
        if memo is None:
            memo = self._stating[facts] = {}
        known = frozenset(facts)
        statement, terms = self.statement, self.terms_of

        def states(fact: str, text: str) -> bool:
            masked = statement(text)
            if masked == text:
                return True
            if fact not in known:
                return match(fact, masked, terms=terms) is not None
            found = memo.get(masked)
            if found is None:
                stated = FactSet.of(facts).stated_in(masked, terms=terms)
                found = memo[masked] = frozenset(facts[k] for k in stated)
            return fact in found

        return states

    def remember_evidence(self, fact: str, indices: Sequence[int]) -> None:
        """Evidence found another way (semantic search) for a fact whose words do not match."""
        if fact in self._evidence and fact not in self._remembered:
            self._by_words[fact] = self._evidence[fact]  # searched already: lexical() has it
        self._evidence[fact] = tuple(sorted(set(indices)))
        self._remembered.add(fact)

    def lexical(self) -> ReplayContext:
        """The same counts, index and memo, with only the evidence the facts' words find
        (what a fresh ``prepare`` would give; remembered evidence is left out, and what the
        words found for those facts, if they were searched, is given back)."""
        kept = {f: v for f, v in self._evidence.items() if f not in self._remembered}
        kept.update(self._by_words)  # every one of them a remembered fact
        return dataclasses.replace(self, _evidence=kept, _remembered=set(), _by_words={})

    def system_indices(self) -> tuple[int, ...]:
        """Indices of the system messages, found once per run."""
        if not self._system:
            msgs = self.transcript.messages
            self._system.append(tuple(m.index for m in msgs if m.role == "system"))
        return self._system[0]

    def folded(self) -> dict[int, str]:
        """Folded text (``fold``) of every message that can be evidence, by index, computed once
        per run (the word search and the evidence ranker both read it)."""
        folded = self._folded_texts
        if not folded:
            for m in self.transcript.messages:
                if m.role in EVIDENCE_ROLES:
                    text = m.content  # fold, with its ASCII case written out (most messages)
                    folded[m.index] = text.casefold() if text.isascii() else fold(text)
        return folded

    def terms_of(self, text: str) -> tuple[frozenset[str], str]:
        """``text_terms`` of a message's text, kept for the run: many facts match one message."""
        found = self._message_terms.get(text)
        if found is None:
            found = self._message_terms[text] = text_terms(text)
        return found

    def _index(self) -> TermIndex:
        """The term index of those messages, built once per run (docs/engine.md)."""
        if not self._term_index:
            self._term_index.append(TermIndex(self.folded().items()))
        return self._term_index[0]

    def with_budget(self, budget: int) -> ReplayContext:
        """The same counts and evidence under another budget (for what-if searches)."""
        return dataclasses.replace(self, settings=self.settings.with_overrides(budget=budget))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (a `check --jobs` worker's context, for the --html report): the transcript,
        its counts and the evidence found; not the run's caches (rebuilt on first use) nor
        the encoding, which the receiving process loads itself, by name."""
        counter = (self.counter.encoding_name, self.counter.overhead)
        memory = (self.memory_tokens, self.memory_text)
        found = (dict(self._evidence), set(self._remembered), dict(self._by_words))
        args = (self.transcript, self.settings, counter, tuple(self.costs), memory, *found)
        return (_unpickled, args)


def _unpickled(
    transcript: Transcript,
    settings: Settings,
    counter: tuple[str, Any],
    costs: tuple[int, ...],
    memory: tuple[int, str],
    evidence: dict[str, tuple[int, ...]],
    remembered: set[str],
    by_words: dict[str, tuple[int, ...]],
) -> ReplayContext:
    units = group_units(transcript, costs, settings)
    counted = TokenCounter(*counter)
    return ReplayContext(
        transcript, settings, counted, costs, units, *memory, evidence, remembered, by_words
    )


@dataclass
class _Derived:
    """What ``prepare`` derives from one transcript alone, for every context made of it while
    transcripts are shared: the counts (per encoding and overhead), the units (per counts
    and ``keep_system``), and the caches that contexts fill as they are asked (folded texts,
    term index, word matches, statements...)."""

    messages: tuple[Any, ...]  # held: the key, their id, stays theirs
    costs: dict[tuple[str, Any], list[int]] = field(default_factory=dict)
    units: dict[tuple[str, Any, bool], list[tuple[int, Unit]]] = field(default_factory=dict)
    caches: dict[str, Any] = field(default_factory=dict)


# id of a transcript's messages -> what prepare derived from it; None unless shared
_SHARED: dict[int, _Derived] | None = None
SHARED_TRANSCRIPTS = 4  # the most recently prepared are kept


@contextmanager
def transcripts_shared() -> Iterator[None]:
    """Within: ``prepare`` counts, groups and indexes a transcript (the same object) once for
    every context made of it, whatever its settings (the cases of a check over one file,
    under other strategies and budgets). What a context finds of a fact (its evidence) stays
    its own. Same contexts as unshared ones (a test holds their replays and diagnoses equal).
    """
    global _SHARED
    outer = _SHARED
    if outer is None:
        _SHARED = {}
    try:
        yield
    finally:
        if outer is None:
            _SHARED = None


def prepare(
    transcript: Transcript,
    settings: Settings,
    counter: TokenCounter | None = None,
    memory_tokens: int = 0,
    memory_text: str = "",
) -> ReplayContext:
    """Count every message once and group tool calls with their results into units
    (once per transcript while ``transcripts_shared``)."""
    if counter is None:
        counter = settings.token_counter()
    shared = _SHARED
    if shared is None:
        costs = counter.message_costs(transcript.messages)
        units = group_units(transcript, costs, settings)
        return ReplayContext(
            transcript, settings, counter, costs, units, memory_tokens, memory_text
        )
    messages = transcript.messages
    derived = shared.pop(id(messages), None)  # put back last: the most recently used
    if derived is None or derived.messages is not messages:
        derived = _Derived(messages)
    shared[id(messages)] = derived
    while len(shared) > SHARED_TRANSCRIPTS:
        del shared[next(iter(shared))]
    key = (counter.encoding_name, counter.overhead)
    costs = derived.costs.get(key)  # type: ignore[assignment]
    if costs is None:
        costs = derived.costs[key] = counter.message_costs(messages)
    grouping = (*key, settings.keep_system)
    units = derived.units.get(grouping)  # type: ignore[assignment]
    if units is None:
        units = derived.units[grouping] = group_units(transcript, costs, settings)
    c = derived.caches
    return ReplayContext(
        transcript,
        settings,
        counter,
        costs,
        units,
        memory_tokens,
        memory_text,
        _folded_texts=c.setdefault("folded", {}),
        _term_index=c.setdefault("term_index", []),
        _system=c.setdefault("system", []),
        _message_terms=c.setdefault("message_terms", {}),
        _word_matches=c.setdefault("word_matches", {}),
        _statements=c.setdefault("statements", {}),
        _stating=c.setdefault("stating", {}),
    )


def group_units(
    transcript: Transcript, costs: Sequence[int], settings: Settings
) -> list[tuple[int, Unit]]:
    """An assistant message with tool calls and the tool results answering it form one unit."""
    units: list[tuple[int, Unit]] = []
    open_calls: set[str] = set()
    current: Unit | None = None
    session = ""  # the session of ``current``
    skip_system = settings.keep_system
    for m in transcript.messages:
        role = m.role
        if role == "system" and skip_system:
            continue
        if (
            current is not None
            and role == "tool"
            and m.session == session
            and (not m.tool_call_id or m.tool_call_id in open_calls or not open_calls)
        ):
            current.indices.append(m.index)
            current.tokens += costs[m.index]
            if m.tool_call_id:
                open_calls.discard(m.tool_call_id)
            continue
        current = Unit([m.index], costs[m.index], m.turn)
        units.append((m.index, current))
        if role == "assistant" and m.tool_calls:
            open_calls = set(m.tool_call_ids)
            session = m.session
        elif role == "tool":  # a result without its call: later results join it
            open_calls = set()
            session = m.session
        else:
            current = None
    return units


def replay(
    rctx: ReplayContext,
    strategy_name: str,
    facts: Sequence[str] = (),
    until_turn: int | None = None,
    progress: Callable[[int], None] | None = None,
    from_session_of: int | None = None,
    observe: Observer | None = None,
) -> StrategyReplay:
    """Replay ``strategy_name`` through the transcript (up to ``until_turn``).

    ``from_session_of=T`` starts at the first turn of turn T's session instead of turn 1: every
    strategy starts empty at a session start, so the window at T is the same, for the cost of
    that session alone (diagnose and its what-if searches replay to one turn many times).
    Turn records and fact survival then cover that session only. ``observe(turn, strategy,
    fit)`` is called after every fit (the HTML report records summary and pinned text with it).
    """
    t = rctx.transcript
    msgs = t.messages
    budget = rctx.budget
    sctx = StrategyContext(t, rctx.costs, rctx.counter, rctx.memo)
    strategy: Strategy = make_strategy(strategy_name, sctx, rctx.settings, budget)
    priming = rctx.counter.overhead.reply_priming
    tracker = FactTracker(facts, rctx)

    system_tokens = 0
    units = rctx.units
    summaries = t.summaries
    next_unit = 0
    next_summary = 0
    records = TurnRecords(t.turns, msgs)
    session: str | None = None
    last = len(t.turns) if until_turn is None else min(until_turn, len(t.turns))
    # system messages are counted as they appear in the stream
    system = rctx.system_indices() if rctx.settings.keep_system else ()
    next_system = 0
    first = 0
    if from_session_of is not None:
        first = from_session_of - 1
        while first > 0 and t.turns[first - 1].session == t.turns[from_session_of - 1].session:
            first -= 1
        start = t.turns[first - 1].end if first > 0 else 0  # where the session's stream begins
        while next_unit < len(units) and units[next_unit][0] < start:
            next_unit += 1
        while next_summary < len(summaries) and summaries[next_summary].after_index < start - 1:
            next_summary += 1
        system_tokens = _system_tokens(rctx, start)
        next_system = bisect.bisect_left(system, start)
    records.first = first
    memory_tokens = rctx.memory_tokens
    n_units, n_summaries, add = len(units), len(summaries), strategy.add
    for turn in t.turns[first:last]:
        dropped: list[int] = []
        if turn.session != session:
            if session is not None:
                dropped = strategy.reset()
            session = turn.session
        entered: list[int] = []
        user_index = turn.user_index
        # feed everything up to and including this turn's user message
        while next_unit < n_units:
            begins, unit = units[next_unit]  # (index of the unit's first message, unit)
            if begins > user_index:
                break
            while next_summary < n_summaries and summaries[next_summary].after_index < begins:
                strategy.add_summary(summaries[next_summary])
                next_summary += 1
            next_unit += 1
            if msgs[begins].session != session and begins < user_index:
                continue  # tail of an earlier session (e.g. its last assistant reply): gone
            add(unit)
            entered.extend(unit.indices)
        while next_system < len(system) and system[next_system] <= turn.user_index:
            system_tokens += rctx.costs[system[next_system]]
            next_system += 1
        fixed = system_tokens + memory_tokens + priming
        fit = strategy.fit(turn.number, fixed)
        shown = system_tokens if fit.system_tokens is None else fit.system_tokens
        memories = memory_tokens + fit.memory_tokens
        messages = fit.message_tokens + priming
        records.append(
            (
                shown,
                fit.scratchpad_tokens,
                fit.summary_tokens,
                memories,
                messages,
                shown + fit.scratchpad_tokens + fit.summary_tokens + memories + messages,
            ),
            entered,
            fit.evicted,
            fit.summarized,
            dropped,
            fit.pins,
            fit.overflow,
        )
        if tracker.active:
            tracker.update(turn.number, strategy, fit, entered, dropped)
        if observe is not None:
            observe(turn.number, strategy, fit)
        if progress is not None:
            progress(turn.number)
    final = strategy.view()
    return StrategyReplay(strategy_name, budget, records, tracker.results(final), final)


def _system_tokens(rctx: ReplayContext, end: int) -> int:
    """Tokens of the system messages before message ``end`` (the system prompt so far)."""
    if not rctx.settings.keep_system:
        return 0
    msgs = rctx.transcript.messages
    return sum(rctx.costs[i] for i in range(end) if msgs[i].role == "system")


@dataclass
class ReplayReport:
    """The result of `memdiag replay`: one StrategyReplay per strategy over the same counts."""

    transcript: Transcript
    encoding: str
    budget: int
    results: list[StrategyReplay]
    facts: list[str]
    facts_found: bool  # True when the facts were found by the strong-fact extractor
    costs: Sequence[int] = ()  # window tokens of each message, counted once for the run
    budget_recorded: bool = False  # the budget is the trace's largest recorded request
    # a coding agent's recorded compactions: what each kept and dropped (docs/coding-agents.md)
    compactions: Sequence[Compaction] = ()
    # the instruction files given with --memory-file (injected at every turn)
    memory_files: Sequence[MemoryFile] = ()

    def extra(self) -> dict[str, Any]:
        """What a coding-agent session adds to the JSON output (nothing for other transcripts)."""
        out: dict[str, Any] = {}
        if self.memory_files:
            out["memory_files"] = [f.to_dict() for f in self.memory_files]
        if self.compactions:
            out["compactions"] = [c.to_dict() for c in self.compactions]
        return out


def recorded_compactions(rctx: ReplayContext) -> list[Compaction]:
    """The recorded compactions, with the what-if of what each dropped (memdiag.compactions)."""
    from memdiag.compactions import recorded

    return recorded(rctx, replay)


def strategy_names(name: str, transcript: Transcript | None = None) -> list[str]:
    """The strategies of a run: 'all' is every simulated one, plus `observed` when the
    transcript recorded its windows (docs/reference.md#observed-windows)."""
    from memdiag.strategies import SIMULATED

    if name == "all":
        observed = transcript is not None and bool(transcript.windows)
        return [*SIMULATED, *(["observed"] if observed else [])]
    if name == "observed" and transcript is not None and not transcript.windows:
        from memdiag.errors import UsageError

        raise UsageError(
            f"{transcript.path}: no observed windows; --strategy observed needs a trace that "
            "records each request (OpenTelemetry, LangSmith, Langfuse, Letta, or window events)"
        )
    return [name]


def run(
    transcript: Transcript,
    settings: Settings,
    facts: Sequence[str] = (),
    progress: Callable[[int], None] | None = None,
    memory: tuple[str, int] = ("", 0),
    observe: Callable[[str], Observer] | None = None,
) -> ReplayReport:
    """Replay every strategy named by ``settings.strategy`` ('all' for all of them).

    ``memory`` is the injected long-term profile (text, tokens), present at every turn;
    ``observe(name)`` gives the observer of strategy ``name`` (see :func:`replay`).
    """
    # a replay's collections walk every object of the transcript and find no garbage (on
    # 50,000 messages, two full collections of ~0.06 s per replay): paused for the run
    with collections_paused():
        return _run(transcript, settings, facts, progress, memory, observe)


def _run(
    transcript: Transcript,
    settings: Settings,
    facts: Sequence[str],
    progress: Callable[[int], None] | None,
    memory: tuple[str, int],
    observe: Callable[[str], Observer] | None,
) -> ReplayReport:
    rctx = prepare(transcript, settings, memory_tokens=memory[1], memory_text=memory[0])
    recorded = recorded_budget(rctx)
    if recorded is not None:
        rctx = rctx.with_budget(recorded)
    found = not facts
    tracked = list(facts) if facts else tracked_facts(transcript, rctx.memo)
    results = [
        replay(rctx, name, tracked, progress=progress, observe=observe(name) if observe else None)
        for name in strategy_names(settings.strategy, transcript)
    ]
    for res in results:
        if res.name == "observed":  # recounted exactly, beside what the provider reported
            res.calls = call_tokens(transcript, rctx.counter, rctx.costs)
    comps: Sequence[Compaction] = ()
    if any(ev.meta for ev in transcript.summaries):
        comps = recorded_compactions(rctx)
    return ReplayReport(
        transcript,
        rctx.counter.encoding_name,
        rctx.budget,
        results,
        tracked,
        found,
        rctx.costs,
        budget_recorded=recorded is not None,
        compactions=comps,
    )


def recorded_budget(rctx: ReplayContext) -> int | None:
    """Without --budget, a trace's simulated windows get the agent's own size: its largest
    recorded request (whose size is known), not the model's whole context beside it."""
    t = rctx.transcript
    if rctx.settings.budget is not None or not t.windows:
        return None
    sizes = [request_tokens(w, rctx.costs, rctx.counter) for w in t.windows if size_known(w)]
    return max(sizes) if sizes else None
