"""Judging from what really happened (SPEC §2b): observed windows and recorded memory searches.

- :func:`call_tokens`: every recorded request recounted exactly (tiktoken, chat overhead), beside
  the prompt tokens the provider reported, with the difference.
- :func:`short_term`: the verdict for a fact stated in the failure's session, from the request
  that produced the failing reply ("the request of turn 8 did not contain u1; it was dropped
  between turn 3 and turn 4").
- :func:`long_term`: the verdict for a fact stated in an earlier session, from the memory
  searches the agent recorded, when no store is given; :func:`compare_with_store` flags where a
  recorded search and a fresh query of the store disagree.

The functions fill a diagnosis in place, as the simulated path does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memdiag.facts import match
from memdiag.transcript.events import RetrievalEvent, WindowEvent
from memdiag.transcript.model import Transcript

if TYPE_CHECKING:
    from memdiag.diagnose import Diagnosis
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

    @property
    def difference(self) -> int | None:
        """reported − recounted (positive: the provider billed more than the messages show)."""
        return None if self.reported is None else self.reported - self.recounted


def request_tokens(w: WindowEvent, costs: Sequence[int], counter: TokenCounter) -> int:
    """The request's tokens: its messages, its extra content, and the reply priming."""
    extra = sum(
        e.tokens if e.opaque and e.tokens is not None else counter.section_cost(e.content)
        for e in w.extra
    )
    return sum(costs[i] for i in w.indices) + extra + counter.overhead.reply_priming


def call_tokens(
    transcript: Transcript, counter: TokenCounter, costs: Sequence[int] | None = None
) -> list[CallTokens]:
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
        )
        for w in transcript.windows
    ]


def request_for(t: Transcript, turn: int, marker_id: str | None = None) -> WindowEvent | None:
    """The request that produced the failing reply: the marked message's, else the turn's last."""
    if marker_id is not None:
        for w in t.windows:
            if w.before_id == marker_id:
                return w
    return t.window_at(turn)


def _holds(fact: str, w: WindowEvent, t: Transcript, indices: set[int]) -> str | None:
    """What in request ``w`` holds the fact: 'verbatim', or the section of an extra."""
    if indices & set(w.indices):
        return "verbatim"
    for e in w.extra:
        if not e.opaque and e.content and match(fact, e.content) is not None:
            return e.section
    return None


def _ids(t: Transcript, indices: Sequence[int]) -> str:
    return ", ".join(t.messages[i].id for i in indices)


def short_term(
    t: Transcript,
    fact: str,
    evidence: Sequence[int],
    request: WindowEvent,
    d: Diagnosis,
    costs: Sequence[int],
    counter: TokenCounter,
) -> None:
    """Verdict from the observed requests of the failure's session (evidence in that session)."""
    at = set(evidence)
    session = t.messages[request.before].session
    info: dict[str, Any] = {
        "request": request.before_id,
        "request_turn": t.messages[request.before].turn,
        "window_ids": list(request.ids),
        "tokens": request_tokens(request, costs, counter),
        "reported_prompt_tokens": request.prompt_tokens,
    }
    if request.source:
        info["source"] = request.source
    d.details["strategy"] = "observed"
    d.details["observed"] = info
    held = _holds(fact, request, t, at)
    if held is not None:
        d.verdict = "in_context"
        d.details["kept_by"] = held
        d.fixes = [
            f"The request of turn {d.at_turn} held it ({held}): memory delivered it. Look at "
            "the prompt and the model, not at memory."
        ]
        return
    earlier = [
        w
        for w in t.windows
        if w.before < request.before
        and t.messages[w.before].session == session
        and max(evidence) < w.before
    ]
    last_seen = next((w for w in reversed(earlier) if _holds(fact, w, t, at)), None)
    after = [w for w in (*earlier, request) if last_seen is None or w.before > last_seen.before]
    dropped_in = after[0]
    turn_of = t.messages
    if last_seen is not None:
        info["last_seen_turn"] = turn_of[last_seen.before].turn
        info["last_seen_request"] = last_seen.before_id
    lost_turn = turn_of[dropped_in.before].turn
    covered = {mid for e in dropped_in.extra for mid in e.covers}
    opaque = {mid for e in dropped_in.extra if e.opaque for mid in e.covers}
    ids = [t.messages[i].id for i in sorted(at)]
    if any(i in opaque for i in ids):
        mechanism = "compacted"
        d.flags.append("opaque_compaction")
    elif any(i in covered for i in ids):
        mechanism = "summarized_away"
    else:
        mechanism = "evicted"
    d.verdict = "short_term_summarized_away" if mechanism != "evicted" else "short_term_dropped"
    d.details.update(lost_at_turn=lost_turn, mechanism=mechanism)
    where = (
        f"it was dropped between turn {info['last_seen_turn']} and turn {lost_turn}"
        if last_seen is not None
        else "no recorded request after it held it"
    )
    how = {
        "compacted": " (replaced by an opaque compaction item: what it kept cannot be read)",
        "summarized_away": " (replaced by a summary that does not state it)",
        "evicted": "",
    }[mechanism]
    text = f"the request of turn {d.at_turn} did not contain {_ids(t, sorted(at))}; {where}{how}"
    d.details["explanation"] = text
    d.fixes = [text[0].upper() + text[1:] + "."]


def retrievals_for(t: Transcript, request: WindowEvent) -> list[RetrievalEvent]:
    """The searches recorded for this request (else for any request of its turn)."""
    own = [r for r in t.retrievals if r.before == request.before]
    if own:
        return own
    turn = t.messages[request.before].turn
    return [
        r for r in t.retrievals if t.messages[r.before].turn == turn and r.before <= request.before
    ]


def _found(fact: str, searches: Sequence[RetrievalEvent]) -> list[dict[str, Any]]:
    return [
        {"id": rec.id, "score": rec.score, "query": s.query}
        for s in searches
        for rec in s.records
        if match(fact, rec.content) is not None
    ]


def long_term(t: Transcript, fact: str, request: WindowEvent | None, d: Diagnosis) -> bool:
    """Judge the long-term layer from the request and its recorded searches (no store given).

    Returns False when nothing was recorded to judge from.
    """
    if request is None:
        return False
    for i in request.indices:
        if match(fact, t.messages[i].content) is not None:
            d.verdict = "in_context"
            d.details["kept_by"] = f"message {t.messages[i].id} ({t.messages[i].role})"
            d.fixes = [
                f"The request of turn {d.at_turn} held it in {t.messages[i].id}: long-term "
                "memory delivered it. Look at the prompt and the model."
            ]
            return True
    held = _holds(fact, request, t, set())
    if held is not None:
        d.verdict = "in_context"
        d.details["kept_by"] = held
        d.fixes = [f"The request of turn {d.at_turn} held it ({held}): memory delivered it."]
        return True
    searches = retrievals_for(t, request)
    if not searches:
        d.details["recorded_retrieval"] = None
        d.details["explanation"] = (
            f"the request of turn {d.at_turn} ({request.before_id}) did not contain it, and the "
            "trace records no memory search for it"
        )
        return False
    found = _found(fact, searches)
    d.details["recorded_retrieval"] = [
        {
            "query": s.query,
            "before": s.before_id,
            "records": [{"id": r.id, "score": r.score} for r in s.records],
        }
        for s in searches
    ]
    if found:
        d.verdict = "long_term_not_injected"
        d.details["retrieved"] = found
        d.fixes = [
            f"The memory search at turn {d.at_turn} returned it ({found[0]['id']}) but the "
            "request did not hold it: the injection step dropped it (budget, filter, or the "
            "result never reached the prompt)."
        ]
        return True
    d.verdict = "long_term_not_retrieved"
    queries = "; ".join(repr(s.query) for s in searches)
    d.fixes = [
        f"The memory search at turn {d.at_turn} ({queries}) returned "
        f"{sum(len(s.records) for s in searches)} record(s), none stating it: either it was "
        "never written (check the store: --facts-file / --chroma) or the query does not reach "
        "it (rewrite the query, raise top_k, read strong facts by exact key).",
    ]
    return True


def compare_with_store(t: Transcript, fact: str, request: WindowEvent | None, d: Diagnosis) -> None:
    """Flag where the recorded search and a fresh query of the given store disagree."""
    if request is None:
        return
    searches = retrievals_for(t, request)
    if not searches:
        return
    recorded = bool(_found(fact, searches))
    retrieval = d.details.get("retrieval")
    vector = d.details.get("vector_store") or {}
    if not isinstance(retrieval, dict) or not vector.get("found"):
        fresh: bool | None = None if not vector else False
    else:
        fresh = d.verdict != "long_term_not_retrieved"
    d.details["recorded_retrieval"] = {
        "queries": [s.query for s in searches],
        "found": recorded,
        "fresh_query_found": fresh,
    }
    if fresh is not None and fresh != recorded:
        d.flags.append("retrieval_disagreement")
        d.fixes.append(
            f"The search the agent recorded at turn {d.at_turn} "
            + ("returned" if recorded else "did not return")
            + " this fact, but a fresh query of the store "
            + ("does" if fresh else "does not")
            + ": the store changed since the run, or the agent queried another store or "
            "with other settings (top_k, filters)."
        )
