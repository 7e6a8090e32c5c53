"""Step 1 of SPEC §7: where fact F was stated before turn T.

Evidence named by a benchmark probe comes first; else a lexical search of the messages before
T; else, when the embedding model is at hand, a semantic search of user sentences (paraphrases).
The replay is told about evidence found by id or meaning, since the fact's words need not match.
"""

from __future__ import annotations

from dataclasses import dataclass

from memdiag.diagnosis.verdicts import Failure
from memdiag.facts import Evidence, find_evidence
from memdiag.replay import EVIDENCE_ROLES, ReplayContext


@dataclass(frozen=True)
class EvidenceSearch:
    """The evidence found (best first) and, when it ran, what the semantic search did."""

    found: tuple[Evidence, ...]
    semantic_search: str | None = None


def search_evidence(rctx: ReplayContext, failure: Failure) -> EvidenceSearch:
    t = rctx.transcript
    user_index = t.turn(failure.at_turn).user_index
    found = given_evidence(rctx, failure, user_index) or find_evidence(
        failure.fact, t.messages, before=user_index + 1, roles=EVIDENCE_ROLES
    )
    if found:
        return EvidenceSearch(tuple(found))
    semantic, note = semantic_evidence(rctx, failure.fact, user_index + 1)
    if semantic:  # the replay follows these messages, since the words do not match
        rctx.remember_evidence(failure.fact, [e.index for e in semantic])
    return EvidenceSearch(tuple(semantic), note)


def given_evidence(rctx: ReplayContext, failure: Failure, user_index: int) -> list[Evidence]:
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


def semantic_evidence(rctx: ReplayContext, fact: str, before: int) -> tuple[list[Evidence], str]:
    """Paraphrases, when lexical search found nothing and the embedding model is at hand."""
    from memdiag.facts import find_semantic_evidence
    from memdiag.stores.embeddings import default_embedder

    embedder, reason = default_embedder()
    if embedder is None:
        return [], f"skipped: {reason}"
    found, searched = find_semantic_evidence(fact, rctx.transcript.messages, before, embedder)
    return found, f"{searched} user sentences compared"
