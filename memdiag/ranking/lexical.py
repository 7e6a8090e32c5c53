"""The lexical ranker of evidence search: BM25 over every message, CJK-aware
(docs/reference.md#verdicts step 1).

Terms are light stems of content words (``memdiag.facts.stem``: allergic/allergies → allerg)
and, for Chinese/Japanese/Korean runs that have no spaces, character unigrams and bigrams.
The index is built once per run and answers any number of facts; each answer is a score per
message (Okapi BM25) and the IDF-weighted share of the fact's terms that the message holds
(``coverage``, 0..1), which is comparable across facts and serves the never-stated threshold.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memdiag.facts import CJK_STOP, STOPWORDS, TermIndex, stem
from memdiag.text import cjk_runs, has_cjk, normalize

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

# Okapi BM25 parameters (Robertson's usual values); messages are short, so b matters little.
K1 = 1.2
B = 0.75


def terms(text: str) -> list[str]:
    """Index terms of ``text``: stems of content words, then CJK unigrams and bigrams."""
    return normalized_terms(normalize(text))


def _words(norm: str) -> list[str]:
    """``_WORD.findall`` of a ``normalize``d text, whose word-character runs are separated by
    single spaces: they are its words, unless one holds "_" (a word character that ``_WORD``
    splits at). Splitting at spaces costs a fraction of the regex (a property test holds them
    equal)."""
    return norm.split() if "_" not in norm else _WORD.findall(norm)


def normalized_terms(norm: str) -> list[str]:
    """``terms`` of a text from its ``normalize``d form (the index has it already)."""
    words = _words(norm)
    if norm.isascii():  # no CJK word, no CJK run: no test per word
        return [stem(w) for w in words if w not in STOPWORDS]
    out = [stem(w) for w in words if w not in STOPWORDS and not has_cjk(w)]
    for run in cjk_runs(norm):
        out.extend(c for c in run if c not in CJK_STOP)
        out.extend(
            run[i : i + 2] for i in range(len(run) - 1) if not set(run[i : i + 2]) <= CJK_STOP
        )
    return out


def _length(norm: str) -> int:
    """``len(normalized_terms(norm))`` without stemming or slicing: a stem stands for one
    word, and a CJK run of n characters, s of them stopwords, gives n - s unigrams and a
    bigram for each adjacent pair that is not two stopwords: n - 1 pairs, of which a run of k
    stopwords holds k - 1 (a property test holds it equal)."""
    words = _words(norm)
    if norm.isascii():
        return len(words) - sum(map(STOPWORDS.__contains__, words))
    n = sum(1 for w in words if w not in STOPWORDS and not has_cjk(w))
    runs = cjk_runs(norm)
    if runs:
        # NUL is no stopword: a run of stopwords found in the joined runs lies in one of them
        stops = _CJK_STOP_RUN.findall("\0".join(runs))
        chars, stopped = sum(map(len, runs)), sum(map(len, stops))
        n += (chars - stopped) + (chars - len(runs)) - (stopped - len(stops))
    return n


_CJK_STOP_RUN = re.compile("[" + "".join(map(re.escape, sorted(CJK_STOP))) + "]+")


@dataclass(frozen=True, slots=True)
class LexicalScores:
    """One fact against the index: the scores of the messages that share a term with it."""

    bm25: dict[int, float]  # document position → BM25 score
    query_terms: int  # distinct terms of the fact (0: nothing to match on)
    # (IDF, BM25 shares by position in document order) of each distinct term, and their sum
    terms: tuple[tuple[float, list[tuple[int, float]]], ...] = ()
    total: float = 0.0

    def coverage(self, pos: int) -> float:
        """The IDF-weighted share of the fact's terms that document ``pos`` holds (0..1).

        Asked of the few candidates reported, not of every document scored: each term's
        shares are in document order, so whether it holds ``pos`` is one bisection. The sum
        runs in the fact's term order, as one accumulated over all documents would.
        """
        covered = 0.0
        for w, shares in self.terms:
            k = bisect.bisect_left(shares, (pos,))
            if k < len(shares) and shares[k][0] == pos:
                covered = covered + w
        return covered / self.total if self.total else 0.0


class BM25Index:
    """An inverted index over documents (one per message).

    ``BM25Index(docs)`` takes each document's terms and builds every posting in one pass.
    ``BM25Index.of_normalized(texts)`` takes the documents' ``normalize``d texts and finds a
    term's postings the first time a query asks for it: the documents that hold the term as a
    substring (every term is a substring of its text: a stem is a prefix of its word), then
    their terms, counted once per document. Only the documents' lengths are counted up front,
    which needs no stemming. The scores are those of the eager index (a property test holds
    them equal); a run that asks about a few facts does not tokenize every message.
    """

    def __init__(self, docs: Iterable[Sequence[str]]) -> None:
        self.postings: dict[str, list[tuple[int, int]]] = {}
        lengths: list[int] = []
        for pos, doc in enumerate(docs):
            lengths.append(len(doc))
            for term, tf in Counter(doc).items():
                self.postings.setdefault(term, []).append((pos, tf))
        self._set_lengths(lengths)
        # the lazy index: the normalized texts, and where each term occurs in them
        self._lazy: tuple[Sequence[str], TermIndex] | None = None
        self._counts: dict[int, Counter[str]] = {}
        # a term's BM25 share of each document holding it: its IDF and the documents' lengths
        # are fixed, so it is the same for every query that asks for the term
        self._shares: dict[str, list[tuple[int, float]]] = {}

    @classmethod
    def of_normalized(cls, texts: Sequence[str]) -> BM25Index:
        index = cls(())
        index._set_lengths([_length(t) for t in texts])
        index._lazy = (texts, TermIndex(enumerate(texts)))
        return index

    def containing(self, text: str) -> tuple[int, ...]:
        """Positions (ascending) of the documents whose normalized text holds ``text``, from the
        term index's scan of them (an index made by ``of_normalized``; NUL-free ``text``)."""
        assert self._lazy is not None, "an index of normalized texts"
        return self._lazy[1].holding(text)

    def _set_lengths(self, lengths: list[int]) -> None:
        self.size = len(lengths)
        self.avg_length = (sum(lengths) / self.size) if self.size else 0.0
        # BM25's length normalization of each document, the same for every query
        avg = self.avg_length or 1.0
        self._norms = [K1 * (1.0 - B + B * n / avg) for n in lengths]

    def _postings(self, term: str) -> list[tuple[int, int]]:
        """(document, term frequency) of the documents holding ``term``, in document order."""
        found = self.postings.get(term)
        if found is not None:
            return found
        found = []
        if self._lazy is not None:
            (texts, where), counts = self._lazy, self._counts
            for pos in where.holding(term):
                c = counts.get(pos)
                if c is None:
                    c = counts[pos] = Counter(normalized_terms(texts[pos]))
                tf = c[term]
                if tf:
                    found.append((pos, tf))
            self.postings[term] = found
        return found

    def idf(self, term: str) -> float:
        """BM25's IDF, floored at a small positive value so common terms still count a little."""
        df = len(self._postings(term))
        return max(math.log((self.size - df + 0.5) / (df + 0.5) + 1.0), 1e-3)

    def score(self, query: Sequence[str], limit: int | None = None) -> LexicalScores:
        """BM25 of every document among the first ``limit`` sharing a query term (and what
        ``LexicalScores.coverage`` reads)."""
        distinct = list(dict.fromkeys(query))
        weights = {t: self.idf(t) for t in distinct}
        total = sum(weights.values())
        bm25: dict[int, float] = {}
        norms = self._norms
        found = []
        for term in distinct:
            w = weights[term]
            shares = self._shares.get(term)
            if shares is None:
                shares = self._shares[term] = [
                    (pos, w * tf * (K1 + 1.0) / (tf + norms[pos]))
                    for pos, tf in self._postings(term)
                ]
            if limit is not None and shares and shares[-1][0] >= limit:
                shares = shares[: bisect.bisect_left(shares, (limit,))]  # in document order
            found.append((w, shares))
            if not bm25:  # the first term's shares as they are: 0.0 + share is share
                bm25.update(shares)
                continue
            get = bm25.get
            for pos, share in shares:
                bm25[pos] = get(pos, 0.0) + share
        return LexicalScores(bm25, len(distinct), tuple(found), total)
