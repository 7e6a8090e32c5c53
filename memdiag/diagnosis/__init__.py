"""The verdict decision tree of docs/reference.md#verdicts: which memory layer lost fact F at turn
T, and why.

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
from dataclasses import replace
from typing import TYPE_CHECKING

from memdiag.config import Settings
from memdiag.diagnosis.evidence import TOP, EvidenceSearch, rank_failures, search_evidence
from memdiag.diagnosis.long_term import decide_long_term
from memdiag.diagnosis.observed import (
    compare_with_store,
    decide_observed_short_term,
    decide_recorded_long_term,
    request_for,
    retrievals_for,
)
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
    from memdiag.memory_files import MemoryFile
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
    observed: bool = True,
    *,
    cache: bool = True,
    memory_files: Sequence[MemoryFile] = (),
    keep: list[ReplayContext] | None = None,
    embedding: Callable[[int, int], None] | None = None,
) -> list[Diagnosis]:
    """Diagnose each failure; the transcript is counted once, and its evidence ranked once, for
    all of them.

    ``progress(done, total)`` is called after each failure. With ``observed`` (the default), a
    transcript that recorded its requests (docs/reference.md#observed-windows) is judged from them,
    and the simulated
    strategies become the what-if. ``cache``: keep the embeddings of the evidence ranking in the
    user cache dir. ``memory_files``: the agent's instruction files (CLAUDE.md, AGENTS.md), the
    procedural layer injected whole at every session start: a fact they state is delivered.
    ``keep``: the run's replay context is appended to it (the --html report replays from it
    instead of counting the transcript again). ``embedding(done, total)``: the texts the
    evidence ranking's model has embedded (or found in the cache), before the first failure.
    """
    memory_text, memory_tokens = stores.profile_section(settings) if stores else NO_MEMORY
    if memory_files:
        from memdiag.memory_files import with_memory_files

        memory_text, memory_tokens = with_memory_files(
            (memory_text, memory_tokens), memory_files, settings.token_counter()
        )
    rctx = prepare(transcript, settings, memory_tokens=memory_tokens, memory_text=memory_text)
    if keep is not None:
        keep.append(rctx)
    simulated = settings.strategy not in ("all", "observed")
    strategy = settings.strategy if simulated else "sliding_window"
    observed = observed and bool(transcript.windows)
    rankings, note = rank_failures(rctx, failures, cache=cache, progress=embedding)
    facts = tuple(dict.fromkeys(f.fact for f in failures))  # each message read once for all
    at_turn: dict[int, list[str]] = {}  # the facts of each failure turn: one replay of it
    for f in failures:
        at_turn.setdefault(f.at_turn, []).append(f.fact)
    out = []
    for f, ranking in zip(failures, rankings, strict=True):
        search = search_evidence(rctx, f, ranking, note, cache=cache, facts=facts)
        found = _in_memory_file(rctx, f, memory_files, search) if memory_files else None
        batch = at_turn[f.at_turn]
        out.append(
            found or diagnose_one(rctx, strategy, f, stores, what_if, observed, search, batch)
        )
        if progress is not None:
            progress(len(out), len(failures))
    return out


def _in_memory_file(
    rctx: ReplayContext, failure: Failure, files: Sequence[MemoryFile], search: EvidenceSearch
) -> Diagnosis | None:
    """An instruction file that states the fact: the procedural layer delivered it."""
    from memdiag.memory_files import find_in_files

    hit = find_in_files(failure.fact, files)
    if hit is None:
        return None
    f, line, text = hit
    where = f"{f.name}, line {line}" if line else f.name
    fix = (
        f"{where} states it ({text!r}), and instruction files are injected whole at every "
        "session start and after every compaction: the procedural layer delivered it. Look at "
        "the prompt and the model (a rule in the window was not followed), not at memory."
    )
    return Diagnosis(
        failure.fact,
        failure.at_turn,
        Verdict.in_context,
        evidence=search.found[:TOP],
        details=Details(
            ProbeInfo.of(failure.probe) if failure.probe is not None else None,
            search.semantic_search,
            memory_file={"path": f.path, "line": line, "text": text},
        ),
        fixes=(fix,),
        marker_id=failure.marker_id,
        session=rctx.transcript.turn(failure.at_turn).session,
    )


def diagnose_one(
    rctx: ReplayContext,
    strategy: str,
    failure: Failure,
    stores: LongTermStores | None,
    what_if: bool,
    observed: bool = False,
    search: EvidenceSearch | None = None,
    batch: Sequence[str] = (),
) -> Diagnosis:
    """One failure's verdict. ``batch``: the facts of the run's failures at the same turn
    (one replay of its session tracks them all: ``short_term.decide_short_term``)."""
    t = rctx.transcript
    turn = t.turn(failure.at_turn)
    request = request_for(t, failure.at_turn, failure.marker_id) if observed else None
    if search is None:
        search = search_evidence(rctx, failure)
    evidence = search.found[:TOP]
    probe = ProbeInfo.of(failure.probe) if failure.probe is not None else None
    if not search.decisive:
        searched = f"{turn.user_index + 1} messages before turn {turn.number}"
        if search.reason:
            searched += f"; {search.reason}"
        return Diagnosis(
            failure.fact,
            failure.at_turn,
            Verdict.never_stated,
            evidence=evidence,  # the best candidates, none of them close enough
            details=Details(probe, search.semantic_search, searched),
            fixes=(
                "Not a memory failure: the fact was never stated before this turn. Check the fact "
                "text, or whether the information should come from a tool or the system prompt.",
            ),
            marker_id=failure.marker_id,
            session=turn.session,
        )
    decisive = search.decisive
    same_session = [e for e in decisive if e.session == turn.session]
    if same_session and request is not None:
        indices = [e.index for e in same_session]
        outcome, seen = decide_observed_short_term(rctx, failure, indices, request, what_if, batch)
        details = Details(probe, search.semantic_search, observed=seen)
    elif same_session:
        outcome, short = decide_short_term(rctx, strategy, failure, what_if, batch)
        details = Details(probe, search.semantic_search, short_term=short)
    else:
        recorded = None
        if request is not None and (stores is None or stores.empty):
            judged, recorded = decide_recorded_long_term(t, failure, request)
            if judged is not None:
                return Diagnosis(
                    failure.fact,
                    failure.at_turn,
                    judged.verdict,
                    flags=judged.flags,
                    evidence=evidence,
                    details=Details(probe, search.semantic_search, recorded=recorded),
                    fixes=judged.fixes,
                    marker_id=failure.marker_id,
                    session=turn.session,
                )
        searches = retrievals_for(t, request) if request is not None else []
        # what the agent itself asked its memory, when the config or the trace says it
        agent_query = rctx.settings.store.query or next(
            (s.query for s in searches if s.query), None
        )
        query = failure.query or agent_query or t.messages[turn.user_index].content
        outcome, long_ = decide_long_term(
            failure.fact,
            query,
            [e.text for e in decisive],
            sorted({e.session for e in decisive}),
            stores,
            rctx.settings,
            rctx.counter,
            failure.at_turn,
            agent_query,
            _user_names(rctx),
        )
        if request is not None and recorded is None:
            outcome, recorded = compare_with_store(t, failure, request, outcome, long_)
        elif recorded is not None and recorded.explanation:  # no store, no recorded search
            said = recorded.explanation
            outcome = replace(outcome, fixes=(said[0].upper() + said[1:] + ".", *outcome.fixes))
        details = Details(probe, search.semantic_search, long_term=long_, recorded=recorded)
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


def _user_names(rctx: ReplayContext) -> Callable[[], tuple[str, ...]]:
    """The names the user gives themself in the transcript ("I'm Mia"), read on first call:
    whose memories are the user's in a store that names people but not the user."""
    got: list[tuple[str, ...]] = []

    def names() -> tuple[str, ...]:
        if not got:
            ex = rctx.memo.extractor(None)
            said = (
                e.value
                for m in rctx.transcript.messages
                if m.role == "user"
                for e in ex.extract(m.content)
                if e.field == "name"
            )
            got.append(tuple(dict.fromkeys(said)))
        return got[0]

    return names


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
