"""Judging from what really happened (docs/reference.md#observed-windows): a trace's recorded
requests and memory searches.

- :func:`decide_observed_short_term`: the fact was stated in the failure's session; the request
  that produced the failing reply held it, or not ("the request of turn 8 did not contain u1; it
  was dropped between turn 3 and turn 4"); the simulated strategies become the what-if, at the
  agent's own size.
- :func:`decide_recorded_long_term`: stated in an earlier session and no store given; the
  request held it (memory delivered it), or the recorded search returned it (not injected), or
  did not (not retrieved).
- :func:`compare_with_store`: with a store too, flag where the recorded search and a fresh
  query of the store disagree.

Each returns an :class:`Outcome` and typed details; nothing is mutated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from memdiag.compactions import Compaction, best_sentence, compaction_before, compactions, states
from memdiag.diagnosis.short_term import kept_at, smallest_budget
from memdiag.diagnosis.verdicts import (
    Failure,
    LongTermDetails,
    ObservedDetails,
    Outcome,
    RecordedDetails,
    RecordedSearch,
    Verdict,
    WhatIf,
)
from memdiag.facts import match
from memdiag.replay import ReplayContext
from memdiag.strategies.observed import request_tokens, size_known
from memdiag.transcript.events import RetrievalEvent, WindowEvent
from memdiag.transcript.model import Transcript


def request_for(t: Transcript, turn: int, marker_id: str | None = None) -> WindowEvent | None:
    """The request that produced the failing reply: the marked message's, else the turn's last."""
    if marker_id is not None:
        for w in t.windows:
            if w.before_id == marker_id:
                return w
    return t.window_at(turn)


def _holds(fact: str, w: WindowEvent, indices: set[int], polarity: bool = False) -> str | None:
    """What in request ``w`` holds the fact: 'verbatim', or the section of a readable extra.

    ``polarity``: a summary must state it with the same polarity (a coding agent's compaction
    summary that says "add X" does not carry "never add X"; docs/coding-agents.md)."""
    if indices & set(w.indices):
        return "verbatim"
    for e in w.extra:
        if e.opaque or not e.content:
            continue
        if states(fact, e.content) if polarity else match(fact, e.content) is not None:
            return e.section
    return None


@dataclass(frozen=True, slots=True)
class InjectedConflict:
    """Two values of one single-valued field in what a request injected (its memories or
    summary sections): the older, the newer, and whether the reply used the older."""

    field: str
    older: str
    newer: str
    used_older: bool


def injected_conflict(t: Transcript, fact: str, w: WindowEvent) -> InjectedConflict | None:
    """From the trace alone: do the request's injected sections hold an older and a newer
    value of the fact's field (a location, a name)? The newer is the one the conversation
    (its user messages, the earlier requests' sections) came to later; between two first seen
    at once, the later line. ``used_older``: the reply names the older and not the newer."""
    from memdiag.extract import default_extractor

    ex = default_extractor()
    fields = ex.stated(fact, single_only=True)
    if not fields:
        return None
    name = next(iter(fields))

    def values(text: str) -> list[str]:
        return [x.value.casefold() for x in ex.extract(text) if x.field == name]

    injected: list[str] = []
    for e in w.extra:
        if e.section in ("memories", "summary") and not e.opaque:
            injected += [v for v in values(e.content) if v not in injected]
    if len(injected) < 2:
        return None
    first: dict[str, int] = {}  # value → where the conversation first came to it
    for m in t.messages[: w.before]:
        if m.role == "user":
            for v in values(m.content):
                first.setdefault(v, m.index)
    for other in t.windows:
        if other.before < w.before:
            for e in other.extra:
                for v in values(e.content) if e.section in ("memories", "summary") else ():
                    first.setdefault(v, other.before)
    ranked = sorted(injected, key=lambda v: (first.get(v, w.before), injected.index(v)))
    older, newer = ranked[0], ranked[-1]
    reply = t.messages[w.before].content.casefold()
    return InjectedConflict(name, older, newer, older in reply and newer not in reply)


def _with_conflict(outcome: Outcome, conflict: InjectedConflict | None, turn: int) -> Outcome:
    """in_context, flagged when the injected memories disagree; long_term_stale when the
    reply used the older value."""
    if conflict is None:
        return outcome
    said = (
        f"The request of turn {turn} injected two values of {conflict.field}: "
        f"{conflict.older!r} (older) and {conflict.newer!r} (newer)"
    )
    if conflict.used_older:
        fix = (
            f"{said}, and the reply used the older one: the write path keeps the outdated "
            "memory. Update or delete it when the user states a new value, or inject only the "
            "newest by time."
        )
        return Outcome(
            Verdict.long_term_stale, (fix,), ("conflict_in_context", "judged_from_trace")
        )
    fix = f"{said}: resolve it (keep the latest value only)."
    return replace(
        outcome, fixes=(*outcome.fixes, fix), flags=(*outcome.flags, "conflict_in_context")
    )


def decide_observed_short_term(
    rctx: ReplayContext,
    failure: Failure,
    evidence: Sequence[int],
    request: WindowEvent,
    what_if: bool,
    batch: Sequence[str] = (),
) -> tuple[Outcome, ObservedDetails]:
    """Verdict from the recorded requests of the failure's session (evidence in that session).
    ``batch``: the facts of the run's failures at the same turn, whose what-ifs share replays."""
    t = rctx.transcript
    at = set(evidence)
    msgs = t.messages
    base = ObservedDetails(
        request.before_id,
        msgs[request.before].turn,
        request.ids,
        request_tokens(request, rctx.costs, rctx.counter),
        request.prompt_tokens,
        request.source,
        size_known(request),
    )
    polar = any(ev.meta for ev in t.summaries)  # a coding agent's recorded compactions
    held = _holds(failure.fact, request, at, polar)
    recorded = compactions(t, rctx.costs, rctx.counter) if t.summaries else []
    if held is not None:
        where = held
        comp: Compaction | None = None
        if held == "summary" and recorded:
            k = compaction_before(t, request.before)
            comp = recorded[k - 1] if k else None
        if comp is not None:
            said = _quote(best_sentence(failure.fact, comp.summary))
            where = f"in the summary of {comp.label()}: {said}"
        fix = (
            f"The request of turn {failure.at_turn} held it ({where}): memory delivered it. Look "
            "at the prompt and the model, not at memory."
        )
        kept = replace(base, kept_by=held, compaction=_brief(comp) if comp else None)
        outcome = Outcome(Verdict.in_context, (fix,))
        conflict = injected_conflict(t, failure.fact, request) if held != "verbatim" else None
        return _with_conflict(outcome, conflict, failure.at_turn), kept
    session = msgs[request.before].session
    earlier = [
        w
        for w in t.windows
        if w.before < request.before
        and msgs[w.before].session == session
        and max(evidence) < w.before
    ]
    last_seen = next((w for w in reversed(earlier) if _holds(failure.fact, w, at, polar)), None)
    after = [w for w in (*earlier, request) if last_seen is None or w.before > last_seen.before]
    dropped_in = after[0]
    covered = {mid for e in dropped_in.extra for mid in e.covers}
    opaque = {mid for e in dropped_in.extra if e.opaque for mid in e.covers}
    ids = [msgs[i].id for i in sorted(at)]
    flags: tuple[str, ...] = ()
    if any(i in opaque for i in ids):
        mechanism, flags = "compacted", ("opaque_compaction",)
    elif any(i in covered for i in ids):
        mechanism = "summarized_away"
    else:
        mechanism = "evicted"
    lost_turn = msgs[dropped_in.before].turn
    seen_turn = msgs[last_seen.before].turn if last_seen is not None else None
    where = (
        f"it was dropped between turn {seen_turn} and turn {lost_turn}"
        if last_seen is not None
        else "no recorded request after it held it"
    )
    how = {
        "compacted": " (replaced by an opaque compaction item: what it kept cannot be read)",
        "summarized_away": " (replaced by a summary that does not state it)",
        "evicted": "",
    }[mechanism]
    comp = None
    if mechanism != "evicted" and recorded:
        k = compaction_before(t, dropped_in.before, ids)
        comp = recorded[k - 1] if k else None
    if comp is not None:
        how = (
            f" (replaced by the summary of {comp.label()}, which does not state it)"
            if mechanism == "summarized_away"
            else f" (replaced by {comp.label()}, whose content cannot be read)"
        )
    text = f"the request of turn {failure.at_turn} did not contain {', '.join(ids)}; {where}{how}"
    details = replace(
        base,
        last_seen_turn=seen_turn,
        last_seen_request=last_seen.before_id if last_seen is not None else None,
        lost_at_turn=lost_turn,
        mechanism=mechanism,
        explanation=text,
        compaction=_brief(comp) if comp else None,
    )
    fixes = [text[0].upper() + text[1:] + "."]
    if comp is not None:
        first = msgs[min(at)]
        said = _quote(best_sentence(failure.fact, first.content))
        summary_line = comp.meta.get("summary_line", comp.line)
        fixes.append(
            f"Stated in {first.id} (turn {first.turn}{_line(first.line)}): {said}; the summary "
            f"that replaced it (line {summary_line}) should have carried it, and says: "
            f"{_quote(comp.summary)}"
        )
        fixes.append(_instruction_file_fix(t.format))
    if what_if:
        budget, wi = _what_if(rctx, failure, session, batch)
        details = replace(details, what_if=wi, what_if_budget=budget)
        fixes += _what_if_fixes(budget, wi)
    verdict = (
        Verdict.short_term_dropped
        if mechanism == "evicted"
        else (Verdict.short_term_summarized_away)
    )
    return Outcome(verdict, tuple(fixes), flags), details


def _quote(text: str, limit: int = 240) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


def _line(line: int) -> str:
    return f", line {line}" if line else ""


def _brief(c: Compaction) -> dict[str, Any]:
    """A compaction as a diagnosis names it (the replay lists its kept/dropped statements)."""
    out = c.to_dict()
    out.pop("kept")
    out.pop("dropped")
    return out


def instruction_file(fmt: str) -> str:
    return {"claude_code": "CLAUDE.md", "codex": "AGENTS.md"}.get(fmt, "an instruction file")


def _instruction_file_fix(fmt: str) -> str:
    name = instruction_file(fmt)
    return (
        f"Put it in {name}: instruction files are injected whole at every session start and "
        "after every compaction, so a rule there survives it (or restate it after compacting; "
        "check with --memory-file)."
    )


def _what_if(
    rctx: ReplayContext, failure: Failure, session: str, batch: Sequence[str]
) -> tuple[int, WhatIf]:
    """The simulated strategies at the agent's own size: --budget, else its largest request
    (whose size is known: an opaque compaction without a size is not), else the model's."""
    from memdiag.strategies import SIMULATED

    t = rctx.transcript
    sizes = [
        request_tokens(w, rctx.costs, rctx.counter)
        for w in t.windows
        if t.messages[w.before].session == session and size_known(w)
    ]
    budget = rctx.settings.budget or (max(sizes) if sizes else rctx.budget)
    sized = rctx.with_budget(budget)
    fact, turn = failure.fact, failure.at_turn
    kept = {name: kept_at(sized, name, fact, turn, None, batch) for name in SIMULATED}
    return budget, WhatIf(kept, smallest_budget(sized, fact, turn, batch))


def _what_if_fixes(budget: int, wi: WhatIf) -> list[str]:
    keepers = [k for k, v in wi.kept_by_strategy.items() if v]
    fixes = [
        f"With the same {budget} tokens, "
        + (
            f"{', '.join(keepers)} would have kept it."
            if keepers
            else "none of the simulated strategies keeps it."
        )
    ]
    if "scratchpad" in keepers:
        fixes.append("Pin it: a scratchpad of strong facts keeps it at the same budget.")
    smallest = wi.smallest_sliding_window_budget
    if smallest is not None and "sliding_window" not in keepers:
        fixes.append(f"A sliding window keeps it from {smallest} tokens on.")
    return fixes


# --- long-term ----------------------------------------------------------------------------


def retrievals_for(t: Transcript, request: WindowEvent) -> list[RetrievalEvent]:
    """The searches recorded for this request (else for any request of its turn before it)."""
    own = [r for r in t.retrievals if r.before == request.before]
    if own:
        return own
    turn = t.messages[request.before].turn
    return [
        r for r in t.retrievals if t.messages[r.before].turn == turn and r.before <= request.before
    ]


def _searches(searches: Sequence[RetrievalEvent]) -> tuple[RecordedSearch, ...]:
    return tuple(
        RecordedSearch(s.query, s.before_id, tuple((r.id, r.score) for r in s.records))
        for s in searches
    )


def _found(fact: str, searches: Sequence[RetrievalEvent]) -> tuple[str, ...]:
    return tuple(
        rec.id for s in searches for rec in s.records if match(fact, rec.content) is not None
    )


def decide_recorded_long_term(
    t: Transcript, failure: Failure, request: WindowEvent
) -> tuple[Outcome | None, RecordedDetails]:
    """Judge the long-term layer from the request and its recorded searches (no store given).

    The outcome is None when the trace records no search to judge from (the details then say
    what the request held, for the store-less verdict).
    """
    at = failure.at_turn
    fact = failure.fact
    for i in request.indices:
        m = t.messages[i]
        if match(fact, m.content) is not None:
            fix = (
                f"The request of turn {at} held it in {m.id}: long-term memory delivered it. Look "
                "at the prompt and the model."
            )
            kept = f"message {m.id} ({m.role})"
            return Outcome(Verdict.in_context, (fix,)), RecordedDetails(
                request.before_id, kept_by=kept
            )
    held = _holds(fact, request, set())
    if held is not None:
        fix = f"The request of turn {at} held it ({held}): memory delivered it."
        outcome = _with_conflict(
            Outcome(Verdict.in_context, (fix,)), injected_conflict(t, fact, request), at
        )
        return outcome, RecordedDetails(request.before_id, kept_by=held)
    searches = retrievals_for(t, request)
    if not searches:
        text = (
            f"the request of turn {at} ({request.before_id}) did not contain it, and the trace "
            "records no memory search for it"
        )
        return None, RecordedDetails(request.before_id, explanation=text)
    found = _found(fact, searches)
    details = RecordedDetails(request.before_id, _searches(searches), found)
    if found:
        fix = (
            f"The memory search at turn {at} returned it ({found[0]}) but the request did not "
            "hold it: the injection step dropped it (budget, filter, or the result never reached "
            "the prompt)."
        )
        return Outcome(Verdict.long_term_not_injected, (fix,), ("judged_from_trace",)), details
    queries = "; ".join(repr(s.query) for s in searches)
    fix = (
        f"The memory search at turn {at} ({queries}) returned "
        f"{sum(len(s.records) for s in searches)} record(s), none stating it: either it was "
        "never written (check the store: --facts-file / --chroma) or the query does not reach "
        "it (rewrite the query, raise top_k, read strong facts by exact key)."
    )
    return Outcome(Verdict.long_term_not_retrieved, (fix,), ("judged_from_trace",)), details


def compare_with_store(
    t: Transcript,
    failure: Failure,
    request: WindowEvent,
    outcome: Outcome,
    store: LongTermDetails,
) -> tuple[Outcome, RecordedDetails | None]:
    """Flag where the recorded search and a fresh query of the given store disagree."""
    searches = retrievals_for(t, request)
    if not searches:
        return outcome, None
    found = _found(failure.fact, searches)
    vector = store.vector_store
    fresh: bool | None = None
    if vector is not None:
        fresh = (
            bool(vector.found)
            and store.retrieval is not None
            and (outcome.verdict is not Verdict.long_term_not_retrieved)
        )
        if vector.found and store.retrieval is None:
            fresh = None  # retrieval was not checked (no embedding function)
    details = RecordedDetails(
        request.before_id, _searches(searches), found, fresh_query_found=fresh
    )
    if fresh is None or fresh == bool(found):
        return outcome, details
    fix = (
        f"The search the agent recorded at turn {failure.at_turn} "
        + ("returned" if found else "did not return")
        + " this fact, but a fresh query of the store "
        + ("does" if fresh else "does not")
        + ": the store changed since the run, or the agent queried another store or with other "
        "settings (top_k, filters)."
    )
    return (
        replace(
            outcome,
            flags=(*outcome.flags, "retrieval_disagreement"),
            fixes=(*outcome.fixes, fix),
        ),
        details,
    )
