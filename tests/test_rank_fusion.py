"""The evidence ranker's fusion (memdiag/ranking/rank.py, docs/engine.md): kept as one dict of
shares per ranker, it ranks as the definition does, one dict of shares per message, summed.

The reference below is that definition, as the ranker computed it before (3 December 2026):
every message that any ranker finds gets a dict of method → share, the turns around a
candidate get a share of its sum, and the fused score is the sum of each message's dict. The
dense ranker's cosines are drawn, not embedded: the fusion only reads them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdiag.ranking import Params, evidence_index
from memdiag.ranking.lexical import terms
from memdiag.ranking.rank import EvidenceIndex, Ranking
from memdiag.ranking.temporal import fact_intervals, temporal_score
from memdiag.text import normalize
from memdiag.transcript.model import RawItem, RawMessage, RawSession, build


def _reference_dense(
    index: EvidenceIndex,
    row: np.ndarray,
    add: Callable[[int, str, float], None],
    scores: dict[int, dict[str, float]],
    p: Params,
) -> None:
    depth = min(p.dense_depth, row.size)
    best = np.argpartition(-row, depth - 1)[:depth]
    best = best[np.lexsort((-best, -row[best]))]
    hi = float(row[best[0]])
    lo = float(np.median(row[row > -1.0]))
    for r, pos in enumerate(int(b) for b in best):
        if p.fusion == "rrf":
            add(pos, "semantic", p.semantic_weight / (p.rrf_k + r + 1))
        else:
            add(pos, "semantic", p.semantic_weight * max(0.0, row[pos] - lo) / max(hi - lo, 1e-6))
        scores.setdefault(pos, {})
    if p.fusion != "rrf":
        taken = {int(b) for b in best}
        for pos in list(scores):
            if pos not in taken:
                share = max(0.0, float(row[pos]) - lo) / max(hi - lo, 1e-6)
                add(pos, "semantic", p.semantic_weight * share)


def _reference(
    index: EvidenceIndex, fact: str, limit: int, row: np.ndarray | None, top: int
) -> Ranking:
    p = index.params
    lex = index.lexical.score(terms(fact), limit)
    bm25 = lex.bm25
    ranked = sorted(bm25, reverse=True)
    ranked.sort(key=bm25.__getitem__, reverse=True)
    w = p.lexical_weight
    contrib: dict[int, dict[str, float]]
    if p.fusion == "rrf":
        k = p.rrf_k
        contrib = {pos: {"lexical": 0.0 + w / (k + r + 1)} for r, pos in enumerate(ranked)}
    else:
        best = bm25[ranked[0]] if ranked else 1.0
        contrib = {pos: {"lexical": 0.0 + w * bm25[pos] / best} for pos in ranked}
    coverage = {pos: lex.coverage(pos) for pos in bm25}
    scores: dict[int, dict[str, float]] = {pos: {"lexical": coverage[pos]} for pos in ranked}

    def add(pos: int, method: str, value: float) -> None:
        c = contrib.setdefault(pos, {})
        c[method] = c.get(method, 0.0) + float(value)

    unit = 1.0 / (p.rrf_k + 1) if p.fusion == "rrf" else 1.0
    semantic = row is not None and row.size > 0 and float(row.max()) > -1.0
    if semantic:
        assert row is not None
        _reference_dense(index, row, add, scores, p)
    wanted = fact_intervals(fact)
    if wanted and p.temporal_weight:
        pointing = [pos for pos in range(limit) if index._said_at(pos)]
        for pos in sorted(set(contrib) | set(pointing)):
            t = temporal_score(wanted, index._said_at(pos), index.when[pos])
            if pos not in contrib and t < 1.0:
                continue
            scores.setdefault(pos, {})
            if t:
                add(pos, "temporal", p.temporal_weight * unit * t)
                scores[pos]["temporal"] = t
    nf = normalize(fact)
    if p.speaker_weight:
        for pos in contrib:
            sp = index.speakers[pos]
            if sp and sp in nf:
                add(pos, "speaker", p.speaker_weight * unit)
    if p.neighbor_weight:
        base = {pos: sum(c.values()) for pos, c in contrib.items()}
        for pos, v in base.items():
            if v <= 0.0:
                continue
            share = p.neighbor_weight * v
            for nb in (pos - 1, pos + 1):
                if 0 <= nb < limit and index.sessions[nb] == index.sessions[pos]:
                    c = contrib.setdefault(nb, {})
                    c["context"] = c.get("context", 0.0) + float(share)
                    s = scores.setdefault(nb, {})
                    s["context"] = max(s.get("context", 0.0), share)
    exact = [pos for pos in index.lexical.containing(nf) if pos < limit] if nf else []
    for pos in exact:
        scores.setdefault(pos, {})["exact"] = 1.0
        add(pos, "exact", 100.0)
    if semantic:
        assert row is not None
        for pos, s in scores.items():
            if row[pos] > -1.0:
                s.setdefault("semantic", round(float(row[pos]), 3))
    fused = {pos: sum(c.values()) for pos, c in contrib.items()}
    order = sorted(fused, key=lambda k: (-fused[k], -k))[:top]
    for pos in order:
        s = scores[pos]
        for key in ("lexical", "context"):
            if key in s:
                s[key] = round(s[key], 3)
    judged = {pos: index._statement_scores(pos, fact, scores[pos], None) for pos in order}
    cands = tuple(
        index._candidate(pos, fused[pos], contrib[pos], scores[pos], judged[pos], semantic)
        for pos in order
    )
    stated, reason = index._judge([judged[pos] for pos in order[: p.judged]], semantic)
    return Ranking(fact, cands, stated, reason, limit, semantic)


WORDS = ["peanuts", "allergic", "Mia", "Berlin", "window", "seat", "flight", "the", "I'm", "to"]
DATED = ["yesterday", "last week", "on 3 May 2023", "in June 2023", "today"]
SENTENCE = st.lists(st.sampled_from(WORDS + DATED), min_size=1, max_size=7).map(" ".join)
MESSAGE = st.tuples(
    st.sampled_from(["user", "assistant", "tool"]),
    SENTENCE | st.just("I'm allergic to peanuts."),
    st.sampled_from([None, "Mia", "Tom"]),
)
FACTS = st.sampled_from(
    [
        "allergic to peanuts",
        "Mia flew to Berlin on 3 May 2023",
        "window seat",
        "Tom prefers the window seat in June 2023",
        "peanuts",
        "nothing in common here",
    ]
)
PARAMS = st.builds(
    Params,
    fusion=st.sampled_from(["linear", "rrf"]),
    neighbor_weight=st.sampled_from([0.0, 0.3]),
    speaker_weight=st.sampled_from([0.0, 0.1]),
    temporal_weight=st.sampled_from([0.0, 1.0]),
    dense_depth=st.sampled_from([1, 3, 100]),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(MESSAGE, min_size=1, max_size=6), min_size=1, max_size=4),
    FACTS,
    PARAMS,
    st.booleans(),
    st.integers(1, 8),
    st.data(),
)
def test_fusion_ranks_as_one_dict_of_shares_per_message(
    sessions, fact, params, semantic, top, data
) -> None:
    items: list[RawItem] = []
    for k, session in enumerate(sessions):
        items.append(RawSession(f"s{k}", ts=f"2023-05-0{k + 1}T10:00:00Z"))
        items += [RawMessage(role, text, name=name) for role, text, name in session]
    t = build(items, path="<fusion>", format="canonical")
    index, _ = evidence_index(t, semantic=False, params=params)
    n = len(index.messages)
    limit = data.draw(st.integers(0, n))
    row = None
    if semantic:  # cosines as the dense ranker gives them: -1 where a message is not embedded
        cos = data.draw(
            st.lists(st.sampled_from([-1.0, 0.1, 0.3, 0.5, 0.9]), min_size=n, max_size=n)
        )
        row = np.array(cos, dtype=np.float32)[:limit]
    got = index._rank_one(fact, limit, row, top)
    want = _reference(index, fact, limit, row, top)
    assert got == want


def test_the_reference_can_tell_a_ranking_apart() -> None:
    """The property compares whole rankings: a share left out changes what it compares."""
    items: list[RawItem] = [
        RawSession("s1"),
        RawMessage("user", "Do I like window seats?"),
        RawMessage("assistant", "You said you prefer the window seat."),
        RawMessage("user", "I'm allergic to peanuts."),
    ]
    index, _ = evidence_index(build(items, path="<t>", format="canonical"), semantic=False)
    want = _reference(index, "window seat", 3, None, 3)
    got = index._rank_one("window seat", 3, None, 3)
    assert got == want
    assert "context" in got.candidates[-1].scores or any(
        "context" in c.scores for c in got.candidates
    )
    index.params = Params(neighbor_weight=0.0)
    with pytest.raises(AssertionError):
        assert index._rank_one("window seat", 3, None, 3) == want


@pytest.mark.parametrize("fusion", ["linear", "rrf"])
def test_a_message_only_said_during_the_dates_is_no_candidate(fusion: str) -> None:
    """The temporal ranker's half score (said during the fact's dates) is a bonus for the
    other rankers' candidates; a message that shares no word with the fact and points at
    another day is not one. Its full score (its words point at the date: "yesterday") is."""
    items: list[RawItem] = [
        RawSession("s1", ts="2023-05-01T10:00:00Z"),
        RawMessage("user", "I'm flying to Berlin soon."),
        RawSession("s2", ts="2023-05-04T10:00:00Z"),
        RawMessage("user", "It rained yesterday."),  # said during, points at 3 May
        RawMessage("user", "We met on 1 January 2022."),  # said during, points at another day
    ]
    index, _ = evidence_index(
        build(items, path="<t>", format="canonical"),
        semantic=False,
        params=Params(fusion=fusion, neighbor_weight=0.0),  # no share for the turns around
    )
    fact = "Mia flew to Berlin on 3 May 2023"
    got = index._rank_one(fact, 3, None, 5)
    assert got == _reference(index, fact, 3, None, 5)
    texts = [c.text for c in got.candidates]
    assert "It rained yesterday." in texts
    assert "We met on 1 January 2022." not in texts
