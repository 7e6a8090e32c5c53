"""The verdict decision tree of SPEC §7: which memory layer lost fact F at turn T, and why.

1. evidence (:mod:`.evidence`): where F was stated before T (none → ``never_stated``);
2. evidence in T's session → short-term (:mod:`.short_term`): replay the configured strategy to
   T (``in_context`` / ``short_term_dropped`` / ``short_term_summarized_away``), plus a what-if
   over strategies and the smallest sliding-window budget that keeps F;
3. evidence only in earlier sessions → long-term (:mod:`.long_term`): the facts file (profile
   layer, injected whole at every session start) and the vector store (write → retrieve →
   inject).

Each step returns its verdict; this module assembles the frozen :class:`Diagnosis`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from memdiag.config import Settings
from memdiag.diagnosis.evidence import search_evidence
from memdiag.diagnosis.long_term import decide_long_term
from memdiag.diagnosis.short_term import decide_short_term, kept_at, smallest_budget
from memdiag.diagnosis.verdicts import (
    LAYER_OF,
    LAYERS,
    VERDICTS,
    Details,
    Diagnosis,
    Failure,
    FailureLayer,
    ProbeInfo,
    Verdict,
)
from memdiag.errors import UsageError
from memdiag.replay import ReplayContext, prepare
from memdiag.stores.open import NO_MEMORY
from memdiag.transcript.model import Transcript

if TYPE_CHECKING:
    from memdiag.stores.open import LongTermStores


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
    found = marker_failures(transcript)
    if not found:
        raise UsageError(
            f"{transcript.path}: no `forgot` markers; "
            "pass --fact TEXT [--at TURN] to diagnose a fact"
        )
    return found


def marker_failures(transcript: Transcript) -> list[Failure]:
    """One failure per assistant message marked `forgot` (possibly none)."""
    return [Failure(m.forgot, m.turn, m.id) for m in transcript.messages if m.forgot and m.turn > 0]


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
    memory_text, memory_tokens = stores.profile_section(settings) if stores else NO_MEMORY
    rctx = prepare(transcript, settings, memory_tokens=memory_tokens, memory_text=memory_text)
    strategy = settings.strategy if settings.strategy != "all" else "sliding_window"
    out = []
    for f in failures:
        out.append(diagnose_one(rctx, strategy, f, stores, what_if))
        if progress is not None:
            progress(len(out), len(failures))
    return out


def diagnose_one(
    rctx: ReplayContext,
    strategy: str,
    failure: Failure,
    stores: LongTermStores | None,
    what_if: bool,
) -> Diagnosis:
    t = rctx.transcript
    turn = t.turn(failure.at_turn)
    search = search_evidence(rctx, failure)
    evidence = search.found[:5]
    probe = ProbeInfo.of(failure.probe) if failure.probe is not None else None
    if not evidence:
        searched = f"{turn.user_index + 1} messages before turn {turn.number}"
        return Diagnosis(
            failure.fact,
            failure.at_turn,
            Verdict.never_stated,
            details=Details(probe, search.semantic_search, searched),
            fixes=(
                "Not a memory failure: the fact was never stated before this turn. Check the fact "
                "text, or whether the information should come from a tool or the system prompt.",
            ),
            marker_id=failure.marker_id,
            session=turn.session,
        )
    same_session = [e for e in search.found if e.session == turn.session]
    if same_session:
        evidence = tuple(same_session[:5])
        outcome, short = decide_short_term(rctx, strategy, failure, what_if)
        details = Details(probe, search.semantic_search, short_term=short)
    else:
        query = failure.query or rctx.settings.store.query or t.messages[turn.user_index].content
        outcome, long_ = decide_long_term(
            failure.fact,
            query,
            [e.text for e in evidence],
            sorted({e.session for e in evidence}),
            stores,
            rctx.settings,
            rctx.counter,
            failure.at_turn,
        )
        details = Details(probe, search.semantic_search, long_term=long_)
    return Diagnosis(
        failure.fact,
        failure.at_turn,
        outcome.verdict,
        flags=outcome.flags,
        evidence=evidence,
        details=details,
        fixes=outcome.fixes,
        marker_id=failure.marker_id,
        session=turn.session,
    )


__all__ = [
    "LAYERS",
    "LAYER_OF",
    "VERDICTS",
    "Diagnosis",
    "Failure",
    "FailureLayer",
    "Verdict",
    "diagnose",
    "failures_from",
    "failures_from_probes",
    "kept_at",
    "marker_failures",
    "smallest_budget",
]
