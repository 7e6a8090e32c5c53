"""Fact survival: where each tracked fact was stated and when (and how) it left the window.

The tracker is incremental: a counter of a fact's evidence messages in the window plus a check
of the summary and pinned text when those change, so following facts keeps a replay O(messages)
(docs/reference.md#replay-json: the `facts` of each strategy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from memdiag.facts import FactSet, LineTerms, fold, match
from memdiag.strategies.base import RunMemo, Strategy, WindowView
from memdiag.transcript.model import Transcript, opens_turn


class Facts(Protocol):
    """What the tracker reads of a replay's context (memdiag.replay.ReplayContext)."""

    @property
    def transcript(self) -> Transcript: ...

    @property
    def memory_text(self) -> str: ...

    def evidence_of(self, fact: str) -> Sequence[int]: ...


@dataclass
class FactSurvival:
    """Where a tracked fact was stated and whether (and how) it left the window."""

    fact: str
    evidence_ids: list[str]
    evidence_id: str | None = None
    stated_at_turn: int | None = None
    lost_at_turn: int | None = None  # None while kept (or never stated)
    mechanism: str | None = None  # evicted | summarized_away | session_end | unpinned
    kept_by: str | None = None  # verbatim | summary | pinned (at the last evaluated turn)
    history: list[dict[str, object]] = field(default_factory=list)  # every loss and regain

    def gaps(self) -> list[tuple[int, int, str]]:
        """Closed losses: (lost at turn, last turn out of the window, mechanism)."""
        out = []
        lost: dict[str, object] | None = None
        for event in self.history:
            if event["event"] == "lost":
                lost = event
            elif lost is not None:
                start, back = lost["turn"], event["turn"]
                assert isinstance(start, int) and isinstance(back, int)
                out.append((start, back - 1, str(lost["mechanism"])))
                lost = None
        return out


class FactTracker:
    """Incremental fact survival: O(1) per evidence event, O(summary) when the summary changes."""

    def __init__(self, facts: Sequence[str], rctx: Facts) -> None:
        self.facts = list(facts)
        self.active = bool(self.facts)
        self.evidence: dict[int, list[int]] = {}  # message index -> facts it states
        self.state: list[FactSurvival] = []
        self.in_window = [0] * len(self.facts)
        self.in_summary = [False] * len(self.facts)
        self.pinned = [False] * len(self.facts)
        self.kept = [False] * len(self.facts)
        self.first = True  # no turn evaluated yet
        self.line_terms = LineTerms()  # summary and pinned lines recur from turn to turn
        self.fact_set: FactSet | None = None  # made when a summary or pins first appear
        # the injected profile is the same at every turn: a fact it states is always there
        self.in_memory = [
            bool(rctx.memory_text) and match(f, rctx.memory_text) is not None for f in self.facts
        ]
        msgs = rctx.transcript.messages
        for k, fact in enumerate(self.facts):
            ids: list[str] = []
            for i in rctx.evidence_of(fact):
                self.evidence.setdefault(i, []).append(k)
                ids.append(msgs[i].id)
            self.state.append(FactSurvival(fact, ids, ids[0] if ids else None))

    def update(
        self, turn: int, strategy: Strategy, fit: object, entered: list[int], dropped: list[int]
    ) -> None:
        from memdiag.strategies.base import Fit

        assert isinstance(fit, Fit)
        if not (self.first or dropped or fit.summary_changed or fit.pinned_changed):
            stated = self.evidence.keys()  # no evidence moved, nothing else changed: done
            if all(map(stated.isdisjoint, (entered, fit.evicted, fit.summarized))):
                return
        reason: dict[int, str] = {}
        if dropped:
            for i in dropped:
                for k in self.evidence.get(i, ()):
                    self.in_window[k] -= 1
                    reason[k] = "session_end"
            for k in range(len(self.facts)):
                if self.in_summary[k] or self.pinned[k]:
                    reason[k] = "session_end"
            self.in_summary = [False] * len(self.facts)
            self.pinned = [False] * len(self.facts)
        arrived: set[int] = set()
        flipped: set[int] = set()
        for i in entered:
            for k in self.evidence.get(i, ()):
                self.in_window[k] += 1
                arrived.add(k)
                st = self.state[k]
                if st.stated_at_turn is None:
                    st.stated_at_turn = turn
        for i in fit.evicted:
            for k in self.evidence.get(i, ()):
                self.in_window[k] -= 1
                reason.setdefault(k, "evicted")
        for i in fit.summarized:
            for k in self.evidence.get(i, ()):
                self.in_window[k] -= 1
                reason.setdefault(k, "summarized_away")
        if fit.summary_changed or fit.pinned_changed:
            view = strategy.view()
            # each text folded once, and each term of the facts looked for once (FactSet)
            summary = self._stated(view.summary) if fit.summary_changed else set()
            pinned = self._stated(view.pinned) if fit.pinned_changed else set()
            for k in range(len(self.facts)):
                if fit.summary_changed:
                    was = self.in_summary[k]
                    self.in_summary[k] = k in summary
                    if was != self.in_summary[k]:
                        flipped.add(k)
                    if was and not self.in_summary[k]:
                        reason.setdefault(k, "summarized_away")
                if fit.pinned_changed:
                    was = self.pinned[k]
                    self.pinned[k] = k in pinned
                    if was != self.pinned[k]:
                        flipped.add(k)
                    if was and not self.pinned[k]:
                        reason.setdefault(k, "unpinned")
        # only a fact whose evidence, summary or pins changed this turn can change (all of them
        # at the first turn): O(events) per turn, not O(facts)
        touched = range(len(self.state)) if self.first else {*reason, *arrived, *flipped}
        self.first = False
        for k in touched:
            st = self.state[k]
            kept = (
                self.in_window[k] > 0 or self.in_summary[k] or self.pinned[k] or self.in_memory[k]
            )
            if kept and not self.kept[k]:
                st.history.append({"turn": turn, "event": "kept"})
                st.lost_at_turn = None
                st.mechanism = None
            elif not kept and (self.kept[k] or k in arrived):
                # (or: stated and pushed out within the same turn, never seen by the model)
                mech = reason.get(k, "evicted")
                st.history.append({"turn": turn, "event": "lost", "mechanism": mech})
                st.lost_at_turn = turn
                st.mechanism = mech
            self.kept[k] = kept

    def _stated(self, text: str) -> set[int]:
        """The facts that a summary or pinned text states (none when it is empty)."""
        if not text:
            return set()
        if self.fact_set is None:
            self.fact_set = FactSet(self.facts)
        return set(self.fact_set.stated_in(text, fold(text), self.line_terms))

    def results(self, final: WindowView) -> list[FactSurvival]:
        for k, st in enumerate(self.state):
            if self.kept[k]:
                st.kept_by = self._holder(k)
        return self.state

    def _holder(self, k: int) -> str:
        """What keeps fact ``k`` in the window, strongest first."""
        if self.in_window[k] > 0:
            return "verbatim"
        if self.pinned[k]:
            return "pinned"
        if self.in_summary[k]:
            return "summary"
        return "memories"


def auto_facts(transcript: Transcript, memo: RunMemo | None = None) -> list[str]:
    """Strong facts stated by the user, worded as the scratchpad pins them (deduplicated).

    "allergic to peanuts", "花生过敏", "time zone UTC+8"; a name is tracked by itself ("Mia"),
    since people state it as "I'm Mia" rather than with the word "name".
    """
    from memdiag.extract import default_extractor

    # the run's memoized extractor: the scratchpad reads the same user messages again
    ex = default_extractor() if memo is None else memo.extractor(None)
    seen: dict[str, None] = {}
    said = [m for m in transcript.messages if opens_turn(m)]  # the human's, not injected lines
    # every user message read in one pass (Extractor.extract_many); the memo keeps them
    for m, found in zip(said, ex.extract_many([m.content for m in said]), strict=True):
        for x in found:
            if not x.strong:
                continue
            shown = ex.render_value(x.field, x.value)
            text = shown
            if x.field != "name" and shown == x.value:
                labelled = f"{ex.label(x.field, x.value)} {x.value}"
                # the label reads naturally for most fields ("allergic to peanuts"); where it
                # does not ("rule never give up") the fact must still match its own statement
                if match(labelled, m.content) is not None:
                    text = labelled
            seen.setdefault(text, None)
    return list(seen)


def tracked_facts(transcript: Transcript, memo: RunMemo | None = None) -> list[str]:
    """What replay follows without --fact: the strong facts the user stated, then the facts of
    the `forgot` markers (the failures the transcript names), each once."""
    facts = dict.fromkeys(auto_facts(transcript, memo))
    known = [fold(f) for f in facts]
    for m in transcript.messages:
        if not m.forgot:
            continue
        marker = fold(m.forgot)
        # "对花生过敏" is the extractor's "花生过敏": one fact, tracked once
        if any(k == marker or (k in marker and len(k) >= 0.6 * len(marker)) for k in known):
            continue
        facts.setdefault(m.forgot, None)
        known.append(marker)
    return list(facts)
