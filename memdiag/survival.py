"""Fact survival: where each tracked fact was stated and when (and how) it left the window.

The tracker is incremental: a counter of a fact's evidence messages in the window plus a check
of the summary and pinned text when those change, so following facts keeps a replay O(messages)
(docs/reference.md#replay-json: the `facts` of each strategy).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from memdiag.facts import FactSet, LineTerms, fold, match
from memdiag.strategies.base import Fit, RunMemo, Strategy, WindowView
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
    """Incremental fact survival: O(1) per evidence event, O(summary) when the summary changes.

    Facts stated by the same messages share one counter of those messages in the window (a
    hundred tracked sentences of one conversation often fall into a few such groups), and a
    fact is looked at only in a turn where its counter reached or left zero, its evidence
    entered, or the summary or pins it is in changed: otherwise whether it is kept cannot have
    changed. The answers are those of following every fact through every event (a property
    test holds them equal).
    """

    def __init__(self, facts: Sequence[str], rctx: Facts) -> None:
        self.facts = list(facts)
        n = len(self.facts)
        self.active = bool(self.facts)
        self.evidence: dict[int, list[int]] = {}  # message index -> groups it states
        self.state: list[FactSurvival] = []
        self.group_of: list[int] = []  # fact -> its group (the facts of the same evidence)
        self.members: list[list[int]] = []  # group -> its facts
        self.in_summary = [False] * n
        self.pinned = [False] * n
        self.kept = [False] * n
        self.first = True  # no turn evaluated yet
        self.line_terms = LineTerms()  # summary and pinned lines recur from turn to turn
        self.fact_set: FactSet | None = None  # made when a summary or pins first appear
        # the injected profile is the same at every turn: a fact it states is always there
        self.in_memory = [
            bool(rctx.memory_text) and match(f, rctx.memory_text) is not None for f in self.facts
        ]
        msgs = rctx.transcript.messages
        groups: dict[tuple[int, ...], int] = {}
        for k, fact in enumerate(self.facts):
            found = tuple(rctx.evidence_of(fact))
            g = groups.get(found)
            if g is None:
                g = groups[found] = len(self.members)
                self.members.append([])
                for i in found:
                    self.evidence.setdefault(i, []).append(g)
            self.members[g].append(k)
            self.group_of.append(g)
            ids = [msgs[i].id for i in found]
            self.state.append(FactSurvival(fact, ids, ids[0] if ids else None))
        self.in_window = [0] * len(self.members)  # per group: its messages in the window
        self.seen = [False] * len(self.members)  # per group: its evidence entered once

    def update(
        self, turn: int, strategy: Strategy, fit: Fit, entered: list[int], dropped: list[int]
    ) -> None:
        evidence = self.evidence
        if not (self.first or dropped or fit.summary_changed or fit.pinned_changed):
            stated = evidence.keys()  # no evidence moved, nothing else changed: done
            if all(map(stated.isdisjoint, (entered, fit.evicted, fit.summarized))):
                return
        n = len(self.facts)
        count = self.in_window
        crossed: set[int] = set()  # groups whose counter reached or left zero this turn
        why: dict[int, str] = {}  # group -> how its evidence left (the first way this turn)
        reset: set[int] = set()  # facts in the summary or pins when the session ended
        if dropped:
            for i in dropped:
                for g in evidence.get(i, ()):
                    c = count[g] = count[g] - 1
                    if c <= 0:
                        crossed.add(g)
                    why[g] = "session_end"
            reset = {k for k in range(n) if self.in_summary[k] or self.pinned[k]}
            self.in_summary = [False] * n
            self.pinned = [False] * n
        arrived: set[int] = set()
        for i in entered:
            for g in evidence.get(i, ()):
                c = count[g]
                if c <= 0:
                    crossed.add(g)
                count[g] = c + 1
                arrived.add(g)
                if not self.seen[g]:
                    self.seen[g] = True
                    for k in self.members[g]:
                        self.state[k].stated_at_turn = turn
        for moved, how in ((fit.evicted, "evicted"), (fit.summarized, "summarized_away")):
            for i in moved:
                for g in evidence.get(i, ()):
                    c = count[g] = count[g] - 1
                    if c <= 0:
                        crossed.add(g)
                    why.setdefault(g, how)
        flipped: dict[int, str | None] = {}  # fact -> how the summary or pins let it go
        if fit.summary_changed or fit.pinned_changed:
            view = strategy.view()
            # each text folded once, and each term of the facts looked for once (FactSet)
            summary = self._stated(view.summary) if fit.summary_changed else set()
            pinned = self._stated(view.pinned) if fit.pinned_changed else set()
            for k in range(n):
                if fit.summary_changed:
                    was = self.in_summary[k]
                    self.in_summary[k] = now = k in summary
                    if was != now:
                        flipped.setdefault(k, "summarized_away" if was else None)
                if fit.pinned_changed:
                    was = self.pinned[k]
                    self.pinned[k] = now = k in pinned
                    if was != now:
                        if was and flipped.get(k) is None:
                            flipped[k] = "unpinned"
                        else:
                            flipped.setdefault(k, None)
        # whether a fact is kept changes only when one of its parts changed (all of them at
        # the first turn): O(events) per turn, not O(facts)
        if self.first:
            touched: Iterable[int] = range(n)
        else:
            touched = {k for g in crossed for k in self.members[g]}
            touched.update(flipped, reset)
        self.first = False
        group_of = self.group_of
        for k in touched:
            g = group_of[k]
            kept = count[g] > 0 or self.in_summary[k] or self.pinned[k] or self.in_memory[k]
            st = self.state[k]
            if kept and not self.kept[k]:
                st.history.append({"turn": turn, "event": "kept"})
                st.lost_at_turn = None
                st.mechanism = None
            elif not kept and (self.kept[k] or g in arrived):
                # (or: stated and pushed out within the same turn, never seen by the model)
                mech = "session_end" if k in reset else why.get(g) or flipped.get(k) or "evicted"
                st.history.append({"turn": turn, "event": "lost", "mechanism": mech})
                st.lost_at_turn = turn
                st.mechanism = mech
            self.kept[k] = kept

    def _stated(self, text: str) -> set[int]:
        """The facts that a summary or pinned text states (none when it is empty)."""
        if not text:
            return set()
        if self.fact_set is None:
            self.fact_set = FactSet.of(tuple(self.facts))
        return set(self.fact_set.stated_in_lines(text, self.line_terms))

    def results(self, final: WindowView) -> list[FactSurvival]:
        for k, st in enumerate(self.state):
            if self.kept[k]:
                st.kept_by = self._holder(k)
        return self.state

    def _holder(self, k: int) -> str:
        """What keeps fact ``k`` in the window, strongest first."""
        if self.in_window[self.group_of[k]] > 0:
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
