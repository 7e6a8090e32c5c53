"""What one run shares between its replays (docs/engine.md): the transcript's counts and units,
and the caches its word searches, evidence and statements fill as they are asked.

``prepare`` makes a :class:`ReplayContext`; within ``transcripts_shared`` (a check run, the
pytest plugin's cases of one spec file) every context made of one transcript shares what is
derived from the transcript alone. ``memdiag.replay`` replays strategies through a context.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from memdiag.config import Settings
from memdiag.facts import FUZZY_THRESHOLD, FactSet, Match, TermIndex, fold, match, text_terms
from memdiag.strategies import Unit, WindowView
from memdiag.strategies.base import RunMemo
from memdiag.strategies.observed import CallTokens
from memdiag.survival import FactSurvival
from memdiag.text import mask_non_statements
from memdiag.tokens import TokenCounter
from memdiag.transcript.model import Transcript
from memdiag.turn_records import TurnRecords

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
    # (strategy, turn, budget) -> a diagnosis's replays of that turn's session, each with the
    # facts it tracked: fact -> (its place in the replay's facts, the evidence it was tracked
    # with); the first tracks the facts of every failure at the turn (diagnosis.short_term)
    session_replays: dict[
        tuple[str, int, int], list[tuple[StrategyReplay, dict[str, tuple[int, tuple[int, ...]]]]]
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
    if key not in derived.costs:
        derived.costs[key] = counter.message_costs(messages)
    grouping = (*key, settings.keep_system)
    if grouping not in derived.units:
        derived.units[grouping] = group_units(transcript, derived.costs[key], settings)
    c = derived.caches
    return ReplayContext(
        transcript,
        settings,
        counter,
        derived.costs[key],
        derived.units[grouping],
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
