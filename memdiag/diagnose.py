"""The verdict decision tree of SPEC §7: which memory layer lost fact F at turn T, and why.

1. evidence: where F was stated before T (none → ``never_stated``);
2. evidence in T's session → short-term: replay the configured strategy to T
   (``in_context`` / ``short_term_dropped`` / ``short_term_summarized_away``), plus a what-if
   over strategies and the smallest sliding-window budget that keeps F;
3. evidence only in earlier sessions → long-term: the facts file (profile layer, injected whole
   at every session start) and the vector store (write → retrieve → inject).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memdiag.config import Settings
from memdiag.errors import UsageError
from memdiag.facts import Evidence, find_evidence
from memdiag.replay import ReplayContext, prepare, replay
from memdiag.transcript.model import Transcript

if TYPE_CHECKING:
    from memdiag.longterm import LongTermStores

LAYER = {
    "never_stated": "none",
    "in_context": "none",
    "short_term_dropped": "short_term",
    "short_term_summarized_away": "short_term",
    "long_term_not_written": "long_term",
    "long_term_not_retrieved": "long_term",
    "long_term_stale": "long_term",
    "long_term_not_injected": "long_term",
    "long_term_unchecked": "long_term",
}
LAYERS = ("none", "short_term", "long_term")


@dataclass(frozen=True)
class Failure:
    """A fact the agent failed to use at a turn: from a `forgot` marker or from --fact/--at."""

    fact: str
    at_turn: int
    marker_id: str | None = None  # the assistant message carrying the `forgot` marker
    query: str | None = None  # retrieval query; default: the user message of at_turn
    evidence_ids: tuple[str, ...] = ()  # known evidence (benchmark probes); else searched
    probe: dict[str, Any] | None = None  # the benchmark QA item this failure comes from


@dataclass
class Diagnosis:
    fact: str
    at_turn: int
    verdict: str
    layer: str
    flags: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    fixes: list[str] = field(default_factory=list)
    marker_id: str | None = None
    session: str | None = None


def failures_from(
    transcript: Transcript, facts: Sequence[str] = (), at: int | None = None
) -> list[Failure]:
    """--fact (+ --at, default the last turn) or, with no --fact, every `forgot` marker."""
    if not transcript.turns:
        raise UsageError(f"{transcript.path}: no user messages, so no turn to diagnose")
    if facts:
        turn = at if at is not None else len(transcript.turns)
        if not 1 <= turn <= len(transcript.turns):
            raise UsageError(f"--at {turn}: the transcript has turns 1..{len(transcript.turns)}")
        return [Failure(f, turn) for f in facts]
    if at is not None:
        raise UsageError("--at needs --fact (markers carry their own turn)")
    found = [
        Failure(m.forgot, m.turn, m.id) for m in transcript.messages if m.forgot and m.turn > 0
    ]
    if not found:
        raise UsageError(
            f"{transcript.path}: no `forgot` markers; "
            "pass --fact TEXT [--at TURN] to diagnose a fact"
        )
    return found


def failures_from_probes(transcript: Transcript, path: str) -> tuple[list[Failure], int]:
    """One failure per QA item of a LoCoMo or LongMemEval file, with its known evidence.

    The fact is the answer, the retrieval query the question, the turn the question's (LoCoMo
    asks after the conversation: its last turn). Adversarial items without an answer are left
    out; returns (failures, items left out).
    """
    if transcript.format not in ("locomo", "longmemeval"):
        raise UsageError(
            f"--probes needs a LoCoMo or LongMemEval file; {transcript.path} is {transcript.format}"
        )
    if not transcript.turns:
        raise UsageError(f"{transcript.path}: no user messages, so no turn to diagnose")
    last = len(transcript.turns)
    failures = []
    skipped = 0
    for p in (probe.as_dict() for probe in transcript.checked_probes()):
        if p.get("answer") is None:
            skipped += 1
            continue
        at = p.get("at") or p.get("after_turn") or last
        failures.append(
            Failure(
                str(p["answer"]),
                min(int(at), last),
                query=p.get("question"),
                evidence_ids=tuple(p.get("evidence_ids") or ()),
                probe=p,
            )
        )
    return failures, skipped


def diagnose(
    transcript: Transcript,
    settings: Settings,
    failures: Sequence[Failure],
    stores: LongTermStores | None = None,
    what_if: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> list[Diagnosis]:
    """Diagnose each failure; the transcript is counted once for all of them.

    ``progress(done, total)`` is called after each failure.
    """
    memory_text, memory_tokens = stores.profile_section(settings) if stores else ("", 0)
    rctx = prepare(transcript, settings, memory_tokens=memory_tokens, memory_text=memory_text)
    strategy = settings.strategy if settings.strategy != "all" else "sliding_window"
    out = []
    for f in failures:
        out.append(_one(rctx, strategy, f, stores, what_if))
        if progress is not None:
            progress(len(out), len(failures))
    return out


def _one(
    rctx: ReplayContext,
    strategy: str,
    failure: Failure,
    stores: LongTermStores | None,
    what_if: bool,
) -> Diagnosis:
    t = rctx.transcript
    turn = t.turn(failure.at_turn)
    evidence = _given_evidence(rctx, failure, turn.user_index) or find_evidence(
        failure.fact, t.messages, before=turn.user_index + 1, roles=("user", "assistant", "tool")
    )
    d = Diagnosis(
        failure.fact,
        failure.at_turn,
        "never_stated",
        "none",
        evidence=evidence[:5],
        marker_id=failure.marker_id,
        session=turn.session,
    )
    if failure.probe is not None:
        p = failure.probe
        d.details["probe"] = {k: p.get(k) for k in ("id", "question", "category", "evidence_ids")}
    if not evidence:
        evidence = _semantic_fallback(failure.fact, t, turn.user_index + 1, d)
        d.evidence = evidence[:5]
        if evidence:  # the replay follows these messages, since the words do not match
            rctx.remember_evidence(failure.fact, [e.index for e in evidence])
    if not evidence:
        d.details["searched"] = f"{turn.user_index + 1} messages before turn {turn.number}"
        d.fixes = [
            "Not a memory failure: the fact was never stated before this turn. Check the fact "
            "text, or whether the information should come from a tool or the system prompt."
        ]
        return d
    same_session = [e for e in evidence if e.session == turn.session]
    if same_session:
        d.evidence = same_session[:5]
        _short_term(rctx, strategy, failure, d, what_if)
    else:
        _long_term(rctx, failure, d, stores)
    d.layer = LAYER[d.verdict]
    return d


def _given_evidence(rctx: ReplayContext, failure: Failure, user_index: int) -> list[Evidence]:
    """Evidence named by a benchmark probe (dia_id / has_answer), when it resolves."""
    if not failure.evidence_ids:
        return []
    by_id = {m.id: m for m in rctx.transcript.messages}
    found = [
        Evidence(m.index, m.id, m.turn, m.session, m.content, 1.0, "given")
        for m in (by_id.get(i) for i in failure.evidence_ids)
        if m is not None and m.index <= user_index
    ]
    if found:  # the replay follows these messages: the answer need not be worded as in them
        rctx.remember_evidence(failure.fact, [e.index for e in found])
    return sorted(found, key=lambda e: -e.index)


def _semantic_fallback(fact: str, t: Transcript, before: int, d: Diagnosis) -> list[Evidence]:
    """Paraphrases, when lexical search found nothing and the embedding model is at hand."""
    from memdiag.facts import find_semantic_evidence
    from memdiag.stores.embeddings import default_embedder

    embedder, reason = default_embedder()
    if embedder is None:
        d.details["semantic_search"] = f"skipped: {reason}"
        return []
    found, searched = find_semantic_evidence(fact, t.messages, before, embedder)
    d.details["semantic_search"] = f"{searched} user sentences compared"
    return found


# --- short-term ---------------------------------------------------------------------------


def _short_term(
    rctx: ReplayContext, strategy: str, failure: Failure, d: Diagnosis, what_if: bool
) -> None:
    # the evidence is in the failure's session: replaying that session alone gives the same window
    res = replay(
        rctx, strategy, [failure.fact], until_turn=failure.at_turn, from_session_of=failure.at_turn
    )
    survival = res.facts[0]
    last = res.turns[-1]
    d.details.update(
        strategy=strategy,
        budget=rctx.budget,
        window_tokens=last.tokens["total"],
        tokens=dict(last.tokens),
        stated_at_turn=survival.stated_at_turn,
    )
    if survival.lost_at_turn is None and survival.kept_by is not None:
        d.verdict = "in_context"
        d.details["kept_by"] = survival.kept_by
        conflicts = _conflicts_in_window(rctx, res.final, failure.fact)
        if conflicts:
            d.flags.append("conflict_in_context")
            d.details["conflicting_ids"] = conflicts
        d.fixes = _fixes_in_context(d)
        return
    d.details["lost_at_turn"] = survival.lost_at_turn
    d.details["mechanism"] = survival.mechanism
    d.verdict = (
        "short_term_summarized_away"
        if survival.mechanism == "summarized_away"
        else "short_term_dropped"
    )
    if what_if:
        d.details["what_if"] = what_if_short_term(rctx, failure)
    d.fixes = _fixes_short_term(d)


def kept_at(
    rctx: ReplayContext, strategy: str, fact: str, turn: int, budget: int | None = None
) -> bool:
    """Is ``fact`` in the window at ``turn`` under ``strategy`` (optionally another budget)?"""
    if budget is not None and budget != rctx.budget:
        rctx = rctx.with_budget(budget)
    s = replay(rctx, strategy, [fact], until_turn=turn, from_session_of=turn).facts[0]
    return s.kept_by is not None and s.lost_at_turn is None


def smallest_budget(rctx: ReplayContext, fact: str, turn: int) -> int | None:
    """The smallest budget at which the sliding window keeps ``fact`` at ``turn`` (searched).

    Kept-ness is monotone in the budget for the sliding window (the window is always a suffix of
    the session's messages, longer with a larger budget), so a binary search is exact. None when
    no budget keeps it (e.g. max_turns evicts it first).
    """
    # everything fits in `hi`; `lo` = 1 keeps the search exact whatever the message sizes (a
    # bound taken from some other message could exceed the answer)
    hi = sum(rctx.costs) + rctx.memory_tokens + rctx.counter.overhead.reply_priming + 1
    if not kept_at(rctx, "sliding_window", fact, turn, hi):
        return None
    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        if kept_at(rctx, "sliding_window", fact, turn, mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def what_if_short_term(rctx: ReplayContext, failure: Failure) -> dict[str, Any]:
    """Which strategies keep the fact at the same budget, and the smallest sliding budget."""
    from memdiag.strategies import STRATEGIES

    kept = {}
    for name in STRATEGIES:
        try:
            kept[name] = kept_at(rctx, name, failure.fact, failure.at_turn)
        except ImportError:  # a strategy module that is not installed
            continue
    return {
        "kept_by_strategy": kept,
        "smallest_sliding_window_budget": smallest_budget(rctx, failure.fact, failure.at_turn),
    }


def _conflicts_in_window(rctx: ReplayContext, view: Any, fact: str) -> list[str]:
    """Messages in the window that give a different value for the same single-valued field."""
    from memdiag.extract import default_extractor

    ex = default_extractor()
    fields = ex.stated(fact, single_only=True)
    if not fields:
        return []
    out = []
    for i in view.indices:
        m = rctx.transcript.messages[i]
        if m.role != "user":
            continue
        stated = ex.stated(m.content, single_only=True)
        if any(name in stated and stated[name] != value for name, value in fields.items()):
            out.append(m.id)
    return out


def _fixes_in_context(d: Diagnosis) -> list[str]:
    kept_by = d.details.get("kept_by")
    fixes = [
        f"Memory delivered it: the fact was in the window at turn {d.at_turn} ({kept_by}). "
        "Look at the prompt and the model, not at memory: instruct the model to check "
        "constraints, or move the fact closer to the question."
    ]
    if "conflict_in_context" in d.flags:
        fixes.append(
            "A contradicting statement is in the window too "
            f"({', '.join(d.details['conflicting_ids'])}): resolve it (keep the latest value only)."
        )
    return fixes


def _fixes_short_term(d: Diagnosis) -> list[str]:
    det = d.details
    fixes = []
    lost = det.get("lost_at_turn")
    if d.verdict == "short_term_summarized_away":
        fixes.append(
            f"The summary dropped it at turn {lost}: make the summarizer keep constraints and "
            "strong facts (names, allergies, prohibitions), raise summary_max_tokens, or pin it."
        )
    else:
        fixes.append(
            f"It was evicted at turn {lost} by {det.get('strategy')} under a budget of "
            f"{det.get('budget')} tokens."
        )
    wi = det.get("what_if", {})
    keepers = [k for k, v in wi.get("kept_by_strategy", {}).items() if v]
    if "scratchpad" in keepers:
        fixes.append("Pin it: the scratchpad strategy keeps this fact pinned at the same budget.")
    elif keepers:
        fixes.append(f"Strategies that keep it at the same budget: {', '.join(keepers)}.")
    smallest = wi.get("smallest_sliding_window_budget")
    if smallest is not None:
        fixes.append(
            f"Raise the sliding-window budget to at least {smallest} tokens "
            f"(now {det.get('budget')}), or shrink what crowds it out (long tool results)."
        )
    fixes.append(
        "Restate the constraint before the question, or start a clean session that opens with it."
    )
    return fixes


# --- long-term ----------------------------------------------------------------------------


def _long_term(
    rctx: ReplayContext, failure: Failure, d: Diagnosis, stores: LongTermStores | None
) -> None:
    t = rctx.transcript
    turn = t.turn(failure.at_turn)
    d.details["evidence_sessions"] = sorted({e.session for e in d.evidence})
    if stores is None or stores.empty:
        d.verdict = "long_term_not_written"
        d.flags.append("no_store_checked")
        d.details["stores_checked"] = []
        d.fixes = [
            "Stated in an earlier session and no long-term store was given, so nothing carried it "
            "over: long-term memory was never built for this. Write strong facts to a facts file "
            "(exact key lookup) at the end of each session; check with --facts-file / --chroma.",
            "No rewording of the prompt will bring it back: fix the write path first.",
        ]
        return
    query = failure.query or rctx.settings.store.query or t.messages[turn.user_index].content
    stores.decide(failure.fact, query, rctx.settings, rctx.counter, d)
    if d.verdict == "never_stated":  # decide() found nothing in any store
        d.verdict = "long_term_not_written"
