"""Evidence as a ranking (docs/reference.md#verdicts step 1): where was fact F stated, best
candidates first.

Rankers, strict to loose:
- ``exact``: the normalized fact is contained in the message: always ranked first;
- ``lexical``: BM25 over every message (user, assistant, tool), light stems, CJK n-grams;
- ``semantic``: best sentence cosine (all-MiniLM-L6-v2), when the model is at hand;
- ``temporal``: the fact's dates against each message's session date and relative words.
They are fused by a weighted sum of normalized scores (measured better than reciprocal-rank
fusion, which ``Params(fusion="rrf")`` still gives), with bonuses for a temporal match, for
a message by the speaker the fact names, and for the turns around a strong candidate (a fact
is often stated across a question and its answer: method ``context``). Each candidate keeps
every ranker's score and names the method that contributed most.

Whether F was stated at all is a separate question: no candidate among the top three reaches a
threshold calibrated on the LoCoMo dev conversation (benchmarks/bench_evidence.py) → not stated.
The thresholds apply to absolute scores: the IDF-weighted share of the fact's terms in one
message, and the best cosine of the fact with one sentence.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from memdiag.ranking.lexical import BM25Index, terms
from memdiag.ranking.temporal import (
    Interval,
    fact_intervals,
    parse_date,
    temporal_score,
    text_intervals,
)
from memdiag.text import mask_non_statements, normalize, normalize_folded

if TYPE_CHECKING:
    import datetime as dt

    import numpy as np

    from memdiag.ranking.cache import EmbeddingCache
    from memdiag.ranking.dense import Embedder
    from memdiag.transcript.model import Message


@dataclass(frozen=True)
class Params:
    """Fusion and threshold settings; the defaults are the best measured on the dev set."""

    fusion: str = "linear"  # linear: weighted sum of normalized scores | rrf: reciprocal rank
    rrf_k: float = 60.0
    lexical_weight: float = 1.0  # × BM25 / best BM25 of the fact
    semantic_weight: float = 0.7  # × (cosine − median) / (best − median)
    temporal_weight: float = 1.0  # × temporal score (1: its words point at the fact's date)
    speaker_weight: float = 0.1  # when the fact names the message's speaker
    neighbor_weight: float = 0.3  # share of a message's score given to the turns around it
    # facts with fewer content terms weigh the dense ranker less (0: off). 8 helps answer-only
    # facts ("Adoption agencies") on the dev set, but lets a name outrank the statement in short
    # memories ("Dana moved from Chicago" → "Hi, I'm Dana"): measured, left off
    semantic_full_terms: int = 0
    dense_depth: int = 100  # messages per fact taken from the dense ranking
    dense_max_messages: int = 20_000  # the most recent messages that are embedded
    # and of their distinct sentences at most this many, newest messages first, each message
    # whole or not at all: the model work 20,000 chat messages give (2-3 sentences each),
    # minutes of CPU cold, not hours for tool outputs of thousands of lines each
    dense_max_sentences: int = 50_000
    strip_names: bool = True  # participants' names left out of what is embedded
    # never_stated: no candidate in the top ``judged`` reaches a threshold
    judged: int = 3
    lexical_threshold: float = 0.40  # IDF-weighted share of the fact's terms, with the model
    semantic_threshold: float = 0.47  # best sentence cosine
    lexical_only_threshold: float = 0.22  # the share of terms when no model (or CJK text)


DEFAULT = Params()
METHODS = ("exact", "lexical", "semantic", "temporal", "context")
# the rankers in the order they run, which is the order their shares are summed in
RANKERS = ("lexical", "semantic", "temporal", "speaker", "context", "exact")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A message that may state the fact, with its fused score and each ranker's score."""

    index: int
    id: str
    turn: int
    session: str
    text: str
    score: float  # fused score: only the order means something
    method: str  # one of METHODS: the ranker that contributed most
    scores: Mapping[str, float] = field(default_factory=dict)  # lexical, semantic, temporal
    passes: bool = False  # this message alone reaches a calibrated threshold


@dataclass(frozen=True, slots=True)
class Ranking:
    fact: str
    candidates: tuple[Candidate, ...]  # best first
    stated: bool  # a top candidate passes the calibrated threshold
    reason: str  # which score decided, against which threshold
    searched: int  # messages searched
    semantic: bool  # whether the dense ranker took part for this fact


@dataclass
class IndexStats:
    messages: int = 0
    sentences: int = 0  # distinct sentences compared by the dense ranker
    embedded: int = 0  # of which embedded in this run (the rest came from the cache)
    dense_from: int = 0  # messages before this position were not embedded (too many)
    dense_left_out: int = 0  # messages after it not embedded: past dense_max_sentences


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
        folded: Mapping[int, str] | None = None,
    ) -> None:
        """``folded``: ``fold`` of messages' texts by index, already computed by the run (a
        replay's word search); the index normalizes from them instead of folding again."""
        # a reply marked `forgot` is the failure itself, never the statement of the fact
        self.messages = [
            m for m in messages if m.role in roles and m.content.strip() and not m.forgot
        ]
        self.params = params
        self.embedder = embedder
        self.cache = cache
        self.stats = IndexStats(messages=len(self.messages))
        dates = session_dates or {}
        known = folded or {}
        self.norm = [
            normalize(m.content) if (f := known.get(m.index)) is None else normalize_folded(f)
            for m in self.messages
        ]
        self.lexical = BM25Index.of_normalized(self.norm)  # terms counted as facts ask
        self.when: list[dt.date | None] = [
            parse_date(m.ts) or parse_date(dates.get(m.session)) for m in self.messages
        ]
        self._said: dict[int, tuple[Interval, ...]] = {}
        self.speakers = [normalize(m.name) if m.name else "" for m in self.messages]
        self.sessions = [m.session for m in self.messages]
        self.names = sorted({m.name for m in self.messages if m.name})

    def _said_at(self, pos: int) -> tuple[Interval, ...]:
        if pos not in self._said:
            self._said[pos] = text_intervals(self.messages[pos].content, self.when[pos])
        return self._said[pos]

    def rank(
        self,
        queries: Sequence[tuple[str, int | None]],
        top: int = 5,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[Ranking]:
        """Rank evidence for each (fact, before): messages with index < before (None: all).

        The dense ranker, when there is an embedder, embeds every message once for all facts;
        ``progress(done, total)`` counts the distinct texts it embeds (or finds in the cache).
        """
        p = self.params
        dense: np.ndarray | None = None
        said: np.ndarray | None = None  # the same cosines over sentences that state something
        limits = [
            len(self.messages) if before is None else _count_before(self.messages, before)
            for _, before in queries
        ]
        if self.embedder is not None and queries:
            import numpy as np

            from memdiag.ranking.dense import dense_scores

            # only the most recent messages are embedded (dense_max_messages, and of those as
            # many as dense_max_sentences take): a cold run over a huge transcript would
            # otherwise take hours; the others are found by their words alone
            end = max(limits)
            start = max(0, end - p.dense_max_messages)
            said_part = np.full((len(queries), end - start), -1.0, dtype=np.float32)
            part, dstats = dense_scores(
                [f for f, _ in queries],
                [m.content for m in self.messages[start:end]],
                self.embedder,
                self.cache,
                names=self.names if p.strip_names else (),
                stated=said_part,
                max_sentences=p.dense_max_sentences,
                progress=progress,
            )
            dense = np.full((len(queries), len(self.messages)), -1.0, dtype=np.float32)
            dense[:, start:end] = part
            said = np.full((len(queries), len(self.messages)), -1.0, dtype=np.float32)
            said[:, start:end] = said_part
            self.stats.sentences = dstats.sentences
            self.stats.embedded = dstats.embedded
            self.stats.dense_from = start
            self.stats.dense_left_out = dstats.left_out
        out = []
        for qi, (fact, limit) in enumerate(zip((f for f, _ in queries), limits, strict=True)):
            row = dense[qi, :limit] if dense is not None else None
            said_row = said[qi, :limit] if said is not None else None
            out.append(self._rank_one(fact, limit, row, max(top, p.judged), said_row))
        return [replace(r, candidates=r.candidates[:top]) for r in out]

    def _rank_one(
        self,
        fact: str,
        limit: int,
        row: np.ndarray | None,
        top: int,
        said: np.ndarray | None = None,
    ) -> Ranking:
        """The fused ranking of one fact: each ranker's share of each message, summed.

        Every share is kept in one dict per ranker (position → share), not one dict per
        message: a fact that shares a common word with most messages has thousands of
        candidates, of which only ``top`` are reported. A message's fused score is the sum of
        its shares in the order the rankers run (lexical, semantic, temporal, speaker,
        context, exact), as one dict of shares per message summed would give (a property test
        holds them equal, ties and candidates' scores included).
        """
        p = self.params
        lex = self.lexical.score(terms(fact), limit)
        bm25 = lex.bm25
        w = p.lexical_weight
        # each ranker's share of the fused score, by position
        lexical: dict[int, float]
        if p.fusion == "rrf":
            # best BM25 first, then the later message: two stable sorts, no key tuple each
            ranked = sorted(bm25, reverse=True)
            ranked.sort(key=bm25.__getitem__, reverse=True)
            k = p.rrf_k
            lexical = {pos: 0.0 + w / (k + r + 1) for r, pos in enumerate(ranked)}
        else:
            best = max(bm25.values()) if bm25 else 1.0
            lexical = {pos: 0.0 + w * v / best for pos, v in bm25.items()}
        dense: dict[int, float] = {}
        temporal: dict[int, float] = {}
        speaker: dict[int, float] = {}
        context: dict[int, float] = {}
        exact: dict[int, float] = {}
        later: dict[int, None] = {}  # candidates that no lexical share brought, in order
        told: dict[int, float] = {}  # the temporal ranker's own score, where it is not 0

        def add(shares: dict[int, float], pos: int, value: float) -> None:
            if pos not in lexical:
                later[pos] = None
            shares[pos] = shares.get(pos, 0.0) + float(value)

        unit = 1.0 / (p.rrf_k + 1) if p.fusion == "rrf" else 1.0
        semantic = row is not None and row.size > 0 and float(row.max()) > -1.0
        if semantic:
            assert row is not None
            # a sentence embedding of a two-word fact ("Adoption agencies") is mostly noise:
            # the dense ranker counts fully from ``semantic_full_terms`` content terms on
            weight = p.semantic_weight
            if p.semantic_full_terms:
                weight *= min(1.0, lex.query_terms / p.semantic_full_terms)
            self._add_dense(row, lambda pos, v: add(dense, pos, v), list(lexical), p, weight)
        wanted = fact_intervals(fact)
        if wanted and p.temporal_weight:
            # the temporal ranker: messages whose own words point at the fact's dates, and the
            # bonus of being said during them for the candidates of the other rankers
            pointing = [pos for pos in range(limit) if self._said_at(pos)]
            for pos in sorted(set(lexical) | set(later) | set(pointing)):
                t = temporal_score(wanted, self._said_at(pos), self.when[pos])
                # a message no other ranker found counts only when its words point at the date
                if t and (t >= 1.0 or pos in lexical or pos in later):
                    add(temporal, pos, p.temporal_weight * unit * t)
                    told[pos] = t
        nf = normalize(fact)
        if p.speaker_weight:
            for pos in [*lexical, *later]:
                sp = self.speakers[pos]
                if sp and sp in nf:
                    add(speaker, pos, p.speaker_weight * unit)
        # what each candidate has so far, which the turns around it get a share of
        before = (lexical, dense, temporal, speaker)
        base: dict[int, float] = lexical
        if later or dense or temporal or speaker:
            base = {pos: sum([s[pos] for s in before if pos in s]) for pos in [*lexical, *later]}
        if p.neighbor_weight:  # a fact is often stated across a question and its answer
            sessions, spread = self.sessions, p.neighbor_weight
            get = context.get
            for pos, v in base.items():
                if v <= 0.0:
                    continue
                share = spread * v
                session = sessions[pos]
                # at most two shares reach a message, and their sum does not depend on order
                if pos and sessions[pos - 1] == session:
                    context[pos - 1] = get(pos - 1, 0.0) + share
                if pos + 1 < limit and sessions[pos + 1] == session:
                    context[pos + 1] = get(pos + 1, 0.0) + share
        # the messages that hold the fact's words as they are: one scan of the index's texts
        for pos in self.lexical.containing(nf) if nf else ():
            if pos < limit:
                exact[pos] = 100.0  # exact statements come first, whatever the rest says
        fused = dict(lexical)
        for pos, v in context.items():
            f = fused.get(pos)
            fused[pos] = v if f is None else f + v  # what sum() gives for two shares
        rankers = (lexical, dense, temporal, speaker, context, exact)
        for pos in set().union(dense, temporal, speaker, exact):  # more than two shares: sum()
            fused[pos] = sum([s[pos] for s in rankers if pos in s])
        # best fused score first, then the later message
        order = [pos for _, pos in heapq.nlargest(top, zip(fused.values(), fused, strict=True))]

        def shares(pos: int) -> dict[str, float]:
            return {name: s[pos] for name, s in zip(RANKERS, rankers, strict=True) if pos in s}

        def reported(pos: int) -> dict[str, float]:
            """Each ranker's own score of a candidate, rounded as every other score is."""
            s: dict[str, float] = {}
            if pos in bm25:
                s["lexical"] = round(lex.coverage(pos), 3)
            if pos in told:
                s["temporal"] = told[pos]
            if pos in context:  # the larger share of its neighbours'
                s["context"] = round(
                    max(
                        p.neighbor_weight * base[nb]
                        for nb in (pos - 1, pos + 1)
                        if base.get(nb, 0.0) > 0.0 and self.sessions[nb] == self.sessions[pos]
                    ),
                    3,
                )
            if pos in exact:
                s["exact"] = 1.0
            if row is not None and semantic and row[pos] > -1.0:  # -1: CJK only, or too old
                s["semantic"] = round(float(row[pos]), 3)
            return s

        scores = {pos: reported(pos) for pos in order}
        judged = {
            pos: self._statement_scores(pos, fact, scores[pos], said if semantic else None)
            for pos in order
        }
        cands = tuple(
            self._candidate(pos, fused[pos], shares(pos), scores[pos], judged[pos], semantic)
            for pos in order
        )
        stated, reason = self._judge([judged[pos] for pos in order[: p.judged]], semantic)
        return Ranking(fact, cands, stated, reason, limit, semantic)

    def _statement_scores(
        self, pos: int, fact: str, s: Mapping[str, float], said: np.ndarray | None
    ) -> Mapping[str, float]:
        """The scores that decide whether a message states the fact: those of what it states.

        A question, a hypothetical or a quote of someone else states nothing
        (``memdiag.text.mask_non_statements``): "Which seat should I pick?" shares the fact's
        words and meaning but says nothing about the user's seats. So the exact and lexical
        scores are recounted on the message with those parts blanked, and the semantic score is
        the best cosine of its sentences that state something.
        """
        content = self.messages[pos].content
        masked = mask_non_statements(content)
        out = dict(s)
        if said is not None and "semantic" in out:
            out["semantic"] = round(float(said[pos]), 3)
        if masked == content:
            return out
        if "exact" in out and normalize(fact) not in normalize(masked):
            del out["exact"]
        if "lexical" in out:
            wanted = list(dict.fromkeys(terms(fact)))
            total = sum(self.lexical.idf(t) for t in wanted)
            have = set(terms(masked))
            covered = sum(self.lexical.idf(t) for t in wanted if t in have)
            out["lexical"] = round(covered / total, 3) if total else 0.0
        return out

    def _add_dense(
        self,
        row: np.ndarray,
        add: Callable[[int, float], None],
        lexical: Sequence[int],
        p: Params,
        weight: float,
    ) -> None:
        """The dense ranker's share (``weight`` at most) of its best ``dense_depth`` messages;
        with linear fusion, also of the lexical candidates beyond them."""
        import numpy as np

        depth = min(p.dense_depth, row.size)
        best = np.argpartition(-row, depth - 1)[:depth]
        best = best[np.lexsort((-best, -row[best]))]
        hi = float(row[best[0]])
        lo = float(np.median(row[row > -1.0]))
        for r, pos in enumerate(int(b) for b in best):
            if p.fusion == "rrf":
                add(pos, weight / (p.rrf_k + r + 1))
            else:
                add(pos, weight * max(0.0, row[pos] - lo) / max(hi - lo, 1e-6))
        if p.fusion != "rrf":  # lexical candidates beyond the dense depth keep their share
            taken = {int(b) for b in best}
            for pos in lexical:
                if pos not in taken:
                    share = max(0.0, float(row[pos]) - lo) / max(hi - lo, 1e-6)
                    add(pos, weight * share)

    def _passes(self, s: Mapping[str, float], semantic: bool) -> str | None:
        """Why this one candidate states the fact (a calibrated threshold reached), or None."""
        p = self.params
        if "exact" in s:
            return "exact match"
        lexical = s.get("lexical", 0.0)
        if semantic:
            cosine = s.get("semantic", -1.0)
            if cosine >= p.semantic_threshold:
                return f"semantic {cosine:.2f} ≥ {p.semantic_threshold}"
            if lexical >= p.lexical_threshold:
                return f"lexical {lexical:.2f} ≥ {p.lexical_threshold}"
        elif lexical >= p.lexical_only_threshold:
            return f"lexical {lexical:.2f} ≥ {p.lexical_only_threshold} (no semantic ranker)"
        return None

    def _judge(self, cands: Sequence[Mapping[str, float]], semantic: bool) -> tuple[bool, str]:
        """Stated or not, from the top candidates' statement scores (``_statement_scores``) and
        the calibrated thresholds."""
        p = self.params
        for c in cands:
            why = self._passes(c, semantic)
            if why:
                return True, why
        lexical = max((c.get("lexical", 0.0) for c in cands), default=0.0)
        if semantic:
            cosine = max((c.get("semantic", 0.0) for c in cands), default=0.0)
            return False, (
                f"best lexical {lexical:.2f} < {p.lexical_threshold} and best semantic "
                f"{max(cosine, 0.0):.2f} < {p.semantic_threshold}"
            )
        return (
            False,
            f"best lexical {lexical:.2f} < {p.lexical_only_threshold} (no semantic ranker)",
        )

    def _candidate(
        self,
        pos: int,
        fused: float,
        contrib: Mapping[str, float],
        s: dict[str, float],
        judged: Mapping[str, float],
        semantic: bool,
    ) -> Candidate:
        m = self.messages[pos]
        shown = {k: v for k, v in contrib.items() if k in METHODS}
        method = max(shown, key=lambda k: shown[k]) if shown else "lexical"
        passes = self._passes(judged, semantic) is not None
        return Candidate(
            m.index, m.id, m.turn, m.session, m.content, round(fused, 4), method, dict(s), passes
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
