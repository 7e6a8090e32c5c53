"""Facts and evidence: does a text state fact F? (docs/reference.md#verdicts step 1)

Matching goes from strict to loose: normalized exact containment (score 1.0), then fuzzy
lexical — the share of the fact's content words (light stemming) found in the text, or, for
Chinese/Japanese/Korean text with no spaces, the share of its character unigrams and
bigrams. Each match reports its method and score so a user can judge it.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from memdiag.text import CJK, cjk_runs, fold, has_cjk, normalize

FUZZY_THRESHOLD = 0.75

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

STOPWORDS = frozenset(
    """a an the of to in on at for from by with and or but is are was were be been being am
    i me my mine we our us you your he she it its they them their this that these those do does
    did have has had will would shall should can could may might must not no so as if then than
    about into over under up down out very just also too really please user user's""".split()
)
# function characters that carry no fact in Chinese/Japanese statements
CJK_STOP = frozenset("我你他她它们的了是在对和与就也都很吗呢吧啊呀着过把被给让这那有个一不")
_SUFFIXES = ("ies", "ied", "ing", "ed", "ic", "es", "s", "y")


@dataclass(frozen=True, slots=True)
class Match:
    score: float  # 0..1
    method: str  # exact | fuzzy | cjk_ngram | semantic


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stripper: allergic/allergies/allergy → allerg."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=4096)
def fact_terms(fact: str) -> tuple[frozenset[str], frozenset[str]]:
    """(content word stems, CJK unigrams+bigrams) of a fact."""
    norm = normalize(fact)
    words = frozenset(stem(w) for w in _WORD.findall(norm) if w not in STOPWORDS and not has_cjk(w))
    grams: set[str] = set()
    for run in cjk_runs(norm):
        chars = [c for c in run if c not in CJK_STOP]
        grams.update(chars)
        grams.update(
            run[i : i + 2] for i in range(len(run) - 1) if not set(run[i : i + 2]) <= CJK_STOP
        )
    return words, frozenset(grams)


_fact_norm = lru_cache(maxsize=4096)(normalize)  # a fact is matched against many texts


@lru_cache(maxsize=16)  # the same summary/pinned text is matched against every tracked fact
def text_terms(text: str) -> tuple[frozenset[str], str]:
    """(content word stems, normalized text) of a text: what :func:`match` compares."""
    norm = normalize(text)
    return text_words(norm), norm


def text_words(norm: str) -> frozenset[str]:
    """Stems of the words of a normalized text that hold no CJK (those match by n-grams)."""
    words = _WORD.findall(norm)
    if norm.isascii():  # no word of it can hold CJK: no test per word
        return frozenset(stem(w) for w in words)
    search = CJK.search
    return frozenset(stem(w) for w in words if w.isascii() or search(w) is None)


class LineTerms:
    """``text_terms`` of texts made of lines that recur (a running summary, pinned facts).

    A word never spans a newline, so a text's words are the union of its lines' words, and
    its normalized text is its lines' normalized texts joined by a space (normalizing keeps a
    newline a whitespace boundary, and folding never joins characters across one): each
    distinct line is normalized and stemmed once per run, the whole text only joined. A
    property test holds the answers equal to ``text_terms``.
    """

    def __init__(self) -> None:
        self._lines: dict[str, tuple[frozenset[str], str]] = {}
        self._last: tuple[str, tuple[frozenset[str], str]] | None = None  # every fact asks

    def __call__(self, text: str) -> tuple[frozenset[str], str]:
        if self._last is not None and self._last[0] == text:
            return self._last[1]
        words: set[str] = set()
        norms: list[str] = []
        known = self._lines
        for line in text.split("\n"):
            found = known.get(line)
            if found is None:
                norm = normalize(line)
                found = known[line] = (text_words(norm), norm)
            words |= found[0]
            if found[1]:
                norms.append(found[1])
        out = (frozenset(words), " ".join(norms))
        self._last = (text, out)
        return out


def match(
    fact: str,
    text: str,
    threshold: float = FUZZY_THRESHOLD,
    folded: str | None = None,
    terms: Callable[[str], tuple[frozenset[str], str]] = text_terms,
    bounded: bool = False,
) -> Match | None:
    """How well ``text`` states ``fact``; None below ``threshold``.

    ``folded`` is ``fold(text)`` when the caller already has it (one text, many facts);
    ``terms`` gives :func:`text_terms` of the text (a run keeps them for all its messages);
    ``bounded``: the text is known to pass the cheap bound below (a ``TermIndex`` candidate).
    """
    words, grams = fact_terms(fact)
    total = len(words) + len(grams)
    nf = _fact_norm(fact)
    if not nf:
        return None
    # Cheap upper bound first: a term that matches is a substring of the folded text. Most
    # messages fail here, which keeps evidence search over long transcripts fast.
    if folded is None:
        folded = fold(text)
    if total and bounded:
        pass
    elif total:
        needed = math.ceil(threshold * total - 1e-9)
        present = sum(1 for w in words if w in folded) + sum(1 for g in grams if g in folded)
        if present < needed:
            return None
    elif nf not in folded:
        return None
    tw, nt = terms(text)
    if nf in nt:
        return Match(1.0, "exact")
    if total == 0:
        return None
    hit = len(words & tw)
    if grams:  # a fact without CJK terms does not scan for them per text
        hit += sum(1 for g in grams if g in nt)
    score = hit / total
    if score >= threshold:
        return Match(round(score, 3), "cjk_ngram" if grams else "fuzzy")
    return None


class FactSet:
    """Many facts asked of one text at a time: which of them does it state?

    The answer is ``[k for k, f in enumerate(facts) if match(f, text) is not None]``, found
    the way :class:`TermIndex` finds texts: each distinct term of the facts is looked for in
    the text once, however many facts share it, which gives every fact's count for
    :func:`match`'s cheap bound; only the facts that pass it are matched (most fail: with a
    hundred facts, a line of a summary states a few of them).
    """

    def __init__(self, facts: Sequence[str], threshold: float = FUZZY_THRESHOLD) -> None:
        self.facts = list(facts)
        self.threshold = threshold
        self._needed: list[int] = []
        self._always: list[int] = []  # facts the bound cannot rule out (no terms, or needs 0)
        self._by_term: dict[str, list[int]] = {}
        self._line_terms: dict[str, tuple[str, ...]] = {}  # line -> the terms it holds
        self._line_stated: dict[str, list[int]] = {}  # line -> the facts it states
        self._parts: list[tuple[frozenset[str], frozenset[str], str]] = []  # what match() reads
        for k, fact in enumerate(self.facts):
            words, grams = fact_terms(fact)
            self._parts.append((words, grams, _fact_norm(fact)))
            terms = (*words, *grams)
            needed = math.ceil(threshold * len(terms) - 1e-9)
            self._needed.append(needed)
            if not terms or needed <= 0:
                self._always.append(k)
            for term in terms:
                self._by_term.setdefault(term, []).append(k)

    def stated_in(
        self,
        text: str,
        folded: str | None = None,
        terms: Callable[[str], tuple[frozenset[str], str]] = text_terms,
    ) -> list[int]:
        """Indices (ascending) of the facts that ``text`` states (``folded``, ``terms``: as
        :func:`match` takes them)."""
        if folded is None:
            folded = fold(text)
        counts: dict[int, int] = {}
        for term, holders in self._by_term.items():
            if term in folded:
                for k in holders:
                    counts[k] = counts.get(k, 0) + 1
        return self._matching(text, counts, folded, terms)

    @staticmethod
    @lru_cache(maxsize=4)
    def of(facts: tuple[str, ...], threshold: float = FUZZY_THRESHOLD) -> FactSet:
        """One set per list of facts for the process (the last few): every replay of a run
        tracks the same facts, and the report asks them of the same lines again."""
        return FactSet(facts, threshold)

    def stated_in_lines(
        self, text: str, terms: Callable[[str], tuple[frozenset[str], str]] = text_terms
    ) -> list[int]:
        """``stated_in(text)`` for a text whose lines recur (a running summary, pinned facts).

        A term of a fact is made of word characters, never a newline, and folding never joins
        characters across one (see :class:`LineTerms`): the terms in the text are those in its
        lines, each distinct line searched once per set. A fact that one line states, the whole
        text states (its words and normalized text hold the line's), so only the others that
        pass the bound are matched against the text. A property test holds it equal.
        """
        present: set[str] = set()
        sure: set[int] = set()
        for line in text.split("\n"):
            present.update(self._terms_in(line))
            sure.update(self.stated_by_line(line))
        counts: dict[int, int] = {}
        by_term = self._by_term
        for term in present:
            for k in by_term[term]:
                counts[k] = counts.get(k, 0) + 1
        return self._matching(text, counts, None, terms, sure)

    def stated_by_line(self, line: str) -> list[int]:
        """``stated_in(line)``, found once per distinct line (``line`` holds no newline)."""
        found = self._line_stated.get(line)
        if found is None:
            counts: dict[int, int] = {}
            by_term = self._by_term
            for term in self._terms_in(line):
                for k in by_term[term]:
                    counts[k] = counts.get(k, 0) + 1
            found = self._line_stated[line] = self._matching(line, counts, None, text_terms)
        return found

    def _terms_in(self, line: str) -> tuple[str, ...]:
        """The facts' terms that occur in ``line``, searched once per distinct line."""
        found = self._line_terms.get(line)
        if found is None:
            folded = fold(line)
            found = self._line_terms[line] = tuple(t for t in self._by_term if t in folded)
        return found

    def _matching(
        self,
        text: str,
        counts: dict[int, int],
        folded: str | None,
        terms: Callable[[str], tuple[frozenset[str], str]],
        sure: set[int] | frozenset[int] = frozenset(),
    ) -> list[int]:
        """The facts that pass the bound (``counts``: their terms in the text) and match
        (those in ``sure`` are known to)."""
        needed = self._needed
        passing = {k for k, n in counts.items() if n >= needed[k]}
        out = []
        always = self._always
        if folded is None and always:
            folded = fold(text)
        found: tuple[frozenset[str], str] | None = None  # terms(text), asked once
        for k in sorted(passing.union(always)):
            if k in sure:
                out.append(k)
            elif k in always:
                if match(self.facts[k], text, self.threshold, folded, terms) is not None:
                    out.append(k)
            else:
                # the bound held, so what match() decides next, without its calls per fact:
                # the fact's normalized text in the text's, or enough of its terms there
                words, grams, nf = self._parts[k]
                if not nf:
                    continue
                if found is None:
                    found = terms(text)
                tw, nt = found
                hit = len(words & tw) + sum(1 for g in grams if g in nt)
                if nf in nt or hit / (len(words) + len(grams)) >= self.threshold:
                    out.append(k)
        return out


class TermIndex:
    """Which texts hold each term: the texts a fact can match, without reading every text.

    Built once per run over the folded texts (docs/engine.md): they are joined by NUL, and a
    term's postings (the texts it occurs in) come from one scan of the joined text, the first
    time the term is asked for, then stay for the run. Every term of a fact (a word stem, a
    CJK character or bigram) is made of word characters, never NUL, so an occurrence lies
    inside exactly one text. ``candidates`` gives the texts that pass :func:`match`'s cheap
    bound (enough of the fact's terms present); :func:`match` itself still decides, so the
    answers are those of matching every text (a property test holds them equal). A scan
    costs less than splitting every text into words to build a word index up front: a run
    asks for a few dozen terms, and most messages hold none of them.
    """

    def __init__(self, texts: Iterable[tuple[int, str]]) -> None:
        keys: list[int] = []
        parts: list[str] = []
        for key, folded in texts:
            keys.append(key)
            parts.append(folded)
        self._keys = keys
        # ASCII texts are joined apart: an ASCII string is scanned fastest, and a term with
        # another character (a CJK one) can only be in the other texts, a smaller string
        self._groups: list[tuple[list[int], list[int], str]] = []  # (ordinals, starts, joined)
        plain: list[int] = []
        other: list[int] = []
        for n, p in enumerate(parts):
            (plain if p.isascii() else other).append(n)
        for ordinals in (plain, other):
            group = [parts[n] for n in ordinals]
            starts = list(itertools.accumulate((len(p) + 1 for p in group[:-1]), initial=0))
            self._groups.append((ordinals, starts, "\0".join(group)))
        self._holding: dict[str, tuple[int, ...]] = {}

    def holding(self, term: str) -> tuple[int, ...]:
        """Keys of the texts in which ``term`` occurs, in the order the texts were given."""
        found = self._holding.get(term)
        if found is None:
            hits: list[int] = []  # ordinals of the texts
            if term and "\0" not in term:
                for ordinals, starts, joined in self._groups[0 if term.isascii() else 1 :]:
                    if not ordinals:
                        continue
                    find, last = joined.find, len(ordinals) - 1
                    pos = find(term)
                    while pos >= 0:
                        n = bisect.bisect_right(starts, pos) - 1
                        hits.append(ordinals[n])
                        if n == last:
                            break
                        pos = find(term, starts[n + 1])
            keys = self._keys
            found = self._holding[term] = tuple(keys[n] for n in sorted(hits))
        return found

    def candidates(self, fact: str, threshold: float = FUZZY_THRESHOLD) -> list[int] | None:
        """Keys (ascending) of the texts that may state ``fact``; None when the index cannot
        tell (a fact of stopwords only, or a threshold that every text passes)."""
        words, grams = fact_terms(fact)
        terms = [*words, *grams]
        needed = math.ceil(threshold * len(terms) - 1e-9)
        if not terms or needed <= 0:
            return None
        # counted in C (Counter's update of an iterable): the postings of a common term run
        # to thousands of texts, and a run asks for a hundred facts' terms
        counts = Counter(itertools.chain.from_iterable(map(self.holding, terms)))
        return sorted(key for key, n in counts.items() if n >= needed)


@dataclass(frozen=True, slots=True)
class Evidence:
    index: int  # message index
    id: str
    turn: int
    session: str
    text: str
    score: float
    method: str
    scores: Mapping[str, float] = field(default_factory=dict)  # every ranker's score (ranked)
    passes: bool = True  # reaches the threshold on its own (ranked candidates may not)
