"""Evidence as a ranking (SPEC §7 step 1): where was fact F stated, best candidates first.

Rankers, strict to loose:
- ``exact``: the normalized fact is contained in the message: always ranked first;
- ``lexical``: BM25 over every message (user, assistant, tool), light stems, CJK n-grams;
- ``semantic``: best sentence cosine (all-MiniLM-L6-v2), when the model is at hand;
- ``temporal``: the fact's dates against each message's session date and relative words.
They are fused by reciprocal rank (``fuse``), the temporal match acting as a bonus. Each
candidate keeps the scores of every ranker and names the method that ranked it highest.

Whether F was stated at all is a separate question, answered by the best candidate's
``support`` (0..1) against a threshold calibrated on the LoCoMo dev conversation
(benchmarks/bench_evidence.py): the share of the fact's terms in one message (IDF-weighted),
or its cosine with one sentence, whichever says more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memdiag.ranking.lexical import BM25Index, terms
from memdiag.ranking.temporal import fact_intervals, parse_date, temporal_score, text_intervals
from memdiag.text import normalize

if TYPE_CHECKING:
    import datetime as dt

    from memdiag.ranking.cache import EmbeddingCache
    from memdiag.ranking.dense import Embedder
    from memdiag.transcript.model import Message


@dataclass(frozen=True)
class Params:
    """Fusion settings; the defaults are the best measured on the dev set."""

    rrf_k: float = 60.0
    lexical_weight: float = 1.0
    semantic_weight: float = 1.0
    temporal_weight: float = 1.0  # bonus, in units of a first-rank RRF contribution
    speaker_weight: float = 0.0  # bonus when the fact names the message's speaker
    dense_depth: int = 100  # messages per fact taken from the dense ranking
    strip_names: bool = True
    whole_messages: bool = False
    # never_stated thresholds (calibrated; see module doc)
    lexical_threshold: float = 0.5
    semantic_threshold: float = 0.5
    semantic_only_lexical: float = 0.0


DEFAULT = Params()


@dataclass(frozen=True, slots=True)
class Candidate:
    """A message that may state the fact, with its fused score and each ranker's score."""

    index: int
    id: str
    turn: int
    session: str
    text: str
    score: float  # fused score (rank-based; only its order means something)
    method: str  # exact | lexical | semantic | temporal: the ranker that placed it highest
    support: float  # 0..1: how well this one message states the fact
    scores: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Ranking:
    fact: str
    candidates: tuple[Candidate, ...]  # best first
    stated: bool  # the best support passes the calibrated threshold
    support: float
    searched: int  # messages searched


@dataclass
class IndexStats:
    messages: int = 0
    sentences: int = 0
    embedded: int = 0
    semantic: str = ""  # why the semantic ranker ran or not


class EvidenceIndex:
    """All messages of a transcript, indexed once; ``rank`` answers many facts in one pass."""

    def __init__(
        self,
        messages: Sequence[Message],
        session_dates: Mapping[str, str] | None = None,
        *,
        embedder: Embedder | None = None,
        cache: EmbeddingCache | None = None,
        roles: Sequence[str] = ("user", "assistant", "tool"),
        params: Params = DEFAULT,
    ) -> None:
        self.messages = [m for m in messages if m.role in roles and m.content.strip()]
        self.params = params
        self.embedder = embedder
        self.cache = cache
        self.stats = IndexStats(messages=len(self.messages))
        dates = session_dates or {}
        self.norm = [normalize(m.content) for m in self.messages]
        self.lexical = BM25Index(terms(m.content) for m in self.messages)
        self.when: list[dt.date | None] = [
            parse_date(m.ts) or parse_date(dates.get(m.session)) for m in self.messages
        ]
        self._said: dict[int, tuple] = {}
        self.speakers = [normalize(m.name) if m.name else "" for m in self.messages]
        self.names = sorted({m.name for m in self.messages if m.name})

    def _said_at(self, pos: int) -> tuple:
        if pos not in self._said:
            self._said[pos] = text_intervals(self.messages[pos].content, self.when[pos])
        return self._said[pos]

    def rank(
        self, queries: Sequence[tuple[str, int | None]], top: int = 5
    ) -> list[Ranking]:
        """Rank evidence for each (fact, before): messages with index < before (None: all)."""
        p = self.params
        dense = None
        if self.embedder is not None and queries:
            from memdiag.ranking.dense import dense_scores

            dense, dstats = dense_scores(
                [f for f, _ in queries], [m.content for m in self.messages], self.embedder,
                self.cache, names=self.names if p.strip_names else (), whole=p.whole_messages,
            )
            self.stats.sentences = dstats.sentences
            self.stats.embedded = dstats.embedded
        out = []
        for qi, (fact, before) in enumerate(queries):
            limit = len(self.messages) if before is None else _count_before(self.messages, before)
            row = dense[qi, :limit] if dense is not None else None
            out.append(self._rank_one(fact, limit, row, top, p))
        return out

    def _rank_one(self, fact: str, limit: int, row: object, top: int, p: Params) -> Ranking:
        import numpy as np

        scores: dict[int, dict[str, float]] = {}
        fused: dict[int, float] = {}
        lex = self.lexical.score(terms(fact), limit)
        for r, pos in enumerate(sorted(lex.bm25, key=lambda k: (-lex.bm25[k], -k))):
            fused[pos] = fused.get(pos, 0.0) + p.lexical_weight / (p.rrf_k + r + 1)
            scores.setdefault(pos, {})["lexical"] = round(lex.coverage[pos], 3)
        if row is not None:
            sims = np.asarray(row)
            if sims.size and float(sims.max()) > -1.0:
                depth = min(p.dense_depth, sims.size)
                best = np.argpartition(-sims, depth - 1)[:depth]
                best = best[np.lexsort((-best, -sims[best]))]
                for r, pos in enumerate(int(b) for b in best):
                    fused[pos] = fused.get(pos, 0.0) + p.semantic_weight / (p.rrf_k + r + 1)
                    scores.setdefault(pos, {})["semantic"] = round(float(sims[pos]), 3)
                for pos in scores:
                    scores[pos].setdefault("semantic", round(float(sims[pos]), 3))
        wanted = fact_intervals(fact)
        if wanted and p.temporal_weight:
            bonus = p.temporal_weight / (p.rrf_k + 1)
            for pos in list(fused):
                t = temporal_score(wanted, self._said_at(pos), self.when[pos])
                if t:
                    fused[pos] += bonus * t
                    scores[pos]["temporal"] = t
        if p.speaker_weight:
            nf = normalize(fact)
            for pos in fused:
                sp = self.speakers[pos]
                if sp and sp in nf:
                    fused[pos] += p.speaker_weight / (p.rrf_k + 1)
        nf = normalize(fact)
        exact = {pos for pos in fused if nf and nf in self.norm[pos]}
        if nf and not exact:
            exact = {pos for pos in range(limit) if nf in self.norm[pos]}
        for pos in exact:
            scores.setdefault(pos, {})["exact"] = 1.0
            fused[pos] = fused.get(pos, 0.0) + 10.0
        order = sorted(fused, key=lambda k: (-fused[k], -k))[:top]
        cands = tuple(self._candidate(pos, fused[pos], scores[pos]) for pos in order)
        support = max((c.support for c in cands), default=0.0)
        stated = any(self._passes(c.scores, p) for c in cands)
        return Ranking(fact, cands, stated, support, limit)

    @staticmethod
    def _passes(s: Mapping[str, float], p: Params) -> bool:
        if "exact" in s:
            return True
        lexical = s.get("lexical", 0.0)
        if lexical >= p.lexical_threshold:
            return True
        return s.get("semantic", -1.0) >= p.semantic_threshold and lexical >= p.semantic_only_lexical

    def _candidate(self, pos: int, fused: float, s: dict[str, float]) -> Candidate:
        m = self.messages[pos]
        if "exact" in s:
            method = "exact"
        else:
            method = max(
                ("lexical", "semantic"), key=lambda k: s.get(k, -1.0)
            )
        support = max(s.get("exact", 0.0), s.get("lexical", 0.0), s.get("semantic", 0.0))
        return Candidate(
            m.index, m.id, m.turn, m.session, m.content, round(fused, 5), method,
            round(support, 3), dict(s),
        )


def _count_before(messages: Sequence[Message], before: int) -> int:
    """How many of the indexed messages have a transcript index below ``before``."""
    lo, hi = 0, len(messages)
    while lo < hi:
        mid = (lo + hi) // 2
        if messages[mid].index < before:
            lo = mid + 1
        else:
            hi = mid
    return lo
