"""Step 1 of docs/reference.md#verdicts: where fact F was stated before turn T, as a ranking.

Evidence named by a benchmark probe comes first (method ``given``). Otherwise every message
before T, from every speaker, is ranked by :mod:`memdiag.ranking` (exact, lexical, semantic and
temporal rankers, fused); the top candidates are reported with their score and method whatever
their absolute score, and the fact counts as stated when one of the top three reaches a
threshold calibrated on a real conversation (benchmarks/bench_evidence.py). Those candidates
("decisive") place the fact in a session, and the replay is told about them, since the fact's
words need not match theirs.

All facts of one ``diagnose`` are ranked in one pass: every message is embedded once per run
(and cached across runs unless ``cache`` is off).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from memdiag.diagnosis.verdicts import Failure
from memdiag.facts import Evidence
from memdiag.ranking import Candidate, IndexStats, Params, Ranking, evidence_index
from memdiag.replay import EVIDENCE_ROLES, ReplayContext

TOP = 5  # candidates reported per fact


@dataclass(frozen=True)
class EvidenceSearch:
    """The ranked candidates (best first), which of them place the fact, and how it was found."""

    found: tuple[Evidence, ...]  # reported: the top candidates, stated or not
    decisive: tuple[Evidence, ...]  # those that reach the threshold (empty: never stated)
    semantic_search: str | None = None  # what the semantic ranker did, or why it did not run
    reason: str | None = None  # why the fact counts as stated or not


def rank_failures(
    rctx: ReplayContext,
    failures: Sequence[Failure],
    *,
    cache: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[Ranking | None], str | None]:
    """One ranking per failure (None where a probe names its evidence), in one pass, and what
    the semantic ranker did (or why it did not run); ``progress(done, total)``: the texts the
    model has embedded so far (``EvidenceIndex.rank``)."""
    t = rctx.transcript
    wanted = [
        (k, f.fact, t.turn(f.at_turn).user_index + 1)
        for k, f in enumerate(failures)
        if not given_evidence(rctx, f, t.turn(f.at_turn).user_index, remember=False)
    ]
    out: list[Ranking | None] = [None] * len(failures)
    if not wanted:
        return out, None
    index, note = evidence_index(t, cache=cache, roles=EVIDENCE_ROLES, folded=rctx.folded())
    try:
        ranked = index.rank([(fact, before) for _, fact, before in wanted], TOP, progress)
    finally:
        if index.cache is not None:
            index.cache.close()
    if index.embedder is not None:
        note = semantic_note(index.stats, index.params, index.cache is not None)
    for (k, _, _), r in zip(wanted, ranked, strict=True):
        out[k] = r
    return out, note


def semantic_note(s: IndexStats, params: Params, cached: bool) -> str:
    """What the semantic ranker compared (``details.semantic_search``). How many came from the
    embedding cache is left out: it differs between two runs of the same command, and JSON
    output does not (docs/reference.md#json-output)."""
    note = f"{s.sentences} sentences of every speaker compared" + ("" if cached else " (cache off)")
    if s.dense_from:
        note += f"; the {s.dense_from} oldest messages by their words only"
    if s.dense_left_out:
        note += (
            f"; {s.dense_left_out} more by their words only (past the "
            f"{params.dense_max_sentences:,} sentences the model compares, newest first)"
        )
    return note


def search_evidence(
    rctx: ReplayContext,
    failure: Failure,
    ranking: Ranking | None = None,
    note: str | None = None,
    *,
    cache: bool = True,
    facts: tuple[str, ...] = (),
) -> EvidenceSearch:
    """The evidence of one failure: given by its probe, or ranked (see ``rank_failures``,
    which ranks the facts of a whole run at once; alone, this ranks just ``failure``)."""
    t = rctx.transcript
    user_index = t.turn(failure.at_turn).user_index
    given = given_evidence(rctx, failure, user_index)
    if given:
        return EvidenceSearch(tuple(given), tuple(given))
    if ranking is None:
        (ranking,), note = rank_failures(rctx, [failure], cache=cache)
        assert ranking is not None
    # the fact's own words, nearly all of them, in one message: these place the fact first
    # (as before ranking existed); the ranking's calibrated candidates only when there are none
    matched = stated_before(rctx, failure.fact, user_index + 1, facts)
    ranked = [_evidence(c) for c in ranking.candidates]
    if matched:
        strong = {e.index for e in matched}
        found = tuple(replace(e, passes=e.index in strong) for e in ranked)
        decisive = tuple(matched)
        reason = f"{matched[0].method} match ({matched[0].score:.2f})"
    else:
        found = tuple(ranked)
        decisive = tuple(e for e in found if e.passes) if ranking.stated else ()
        reason = ranking.reason
    if not decisive:
        return EvidenceSearch(found, (), note, reason)
    # the replay follows these messages as well as those whose words match the fact's
    known = rctx.evidence_of(failure.fact)
    rctx.remember_evidence(failure.fact, [*known, *(e.index for e in decisive)])
    return EvidenceSearch(found, decisive, note, reason)


def stated_before(
    rctx: ReplayContext, fact: str, before: int, facts: tuple[str, ...] = ()
) -> list[Evidence]:
    """The messages before index ``before`` whose words state ``fact`` (the run's matches,
    ``ReplayContext.word_matches``), best first, then the later first; a `forgot` marker and
    a text that holds the words only in what states nothing are left out
    (``ReplayContext.statement_states``; ``facts``: every fact the run asks it of)."""
    msgs = rctx.transcript.messages
    states: dict[str, bool] = {}  # a text that recurs is judged once
    judge = rctx.statement_states(facts)
    found = []
    for i, hit in rctx.word_matches(fact):
        if i >= before:
            break  # the matches are in message order
        m = msgs[i]
        if m.forgot:
            continue
        said = states.get(m.content)
        if said is None:
            said = states[m.content] = judge(fact, m.content)
        if said:
            found.append(
                Evidence(m.index, m.id, m.turn, m.session, m.content, hit.score, hit.method)
            )
    found.sort(key=lambda e: (-e.score, -e.index))
    return found


def _evidence(c: Candidate) -> Evidence:
    """A candidate as evidence: its score is the one of the method that placed it."""
    score = c.scores.get(c.method, 0.0)
    scores = {**c.scores, "fused": c.score}
    return Evidence(
        c.index, c.id, c.turn, c.session, c.text, round(score, 3), c.method, scores, c.passes
    )


def given_evidence(
    rctx: ReplayContext, failure: Failure, user_index: int, *, remember: bool = True
) -> list[Evidence]:
    """Evidence named by a benchmark probe (dia_id / has_answer), when it resolves."""
    if not failure.evidence_ids:
        return []
    by_id = {m.id: m for m in rctx.transcript.messages}
    found = [
        Evidence(m.index, m.id, m.turn, m.session, m.content, 1.0, "given", {}, True)
        for m in (by_id.get(i) for i in failure.evidence_ids)
        if m is not None and m.index <= user_index
    ]
    if found and remember:  # the replay follows these: the answer need not be worded as in them
        rctx.remember_evidence(failure.fact, [e.index for e in found])
    return sorted(found, key=lambda e: -e.index)
