"""The dense ranker of evidence search: cosine of a fact with each message's best sentence.

Every sentence of every message is embedded once per run, whatever the number of facts, in
batches; the vectors are never all held at once: each batch is compared with all the facts and
only the best cosine per (fact, message) is kept, so memory grows with facts × messages, not
with the embedding size. A content-addressed cache (``cache.EmbeddingCache``) makes the next
run over the same texts nearly free.

Text with CJK characters is left out: all-MiniLM-L6-v2 was trained on English and scores
Chinese sentences as near-identical, so the lexical ranker's character n-grams handle them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from memdiag.ranking.cache import EmbeddingCache
from memdiag.text import has_cjk, split_sentences, states_something

if TYPE_CHECKING:
    import numpy as np


class Embedder(Protocol):
    """Texts → unit vectors; ``progress(n)``: n more texts embedded (``minilm.MiniLM``)."""

    def __call__(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray: ...


# sentences per model call: the model pads each of its batches to their longest text, so the
# more sentences it sorts at once, the less padding (256 cost about 15% more CPU on the LoCoMo dev
# conversation); 2,048 × facts cosines are a few MB
BATCH = 2048
MAX_CHARS = 2000  # MiniLM reads 256 word pieces; longer sentences are cut to about that


@dataclass
class DenseStats:
    sentences: int = 0  # distinct sentences compared
    embedded: int = 0  # of which embedded in this run (the rest came from the cache)
    left_out: int = 0  # messages not compared: their sentences did not fit ``max_sentences``


def name_stripper(names: Iterable[str]) -> Callable[[str], str]:
    """Remove the participants' names (and their possessive 's) from a text.

    MiniLM weighs a proper name heavily: "Caroline made a painting" came closest to "Wow,
    Caroline, that painting is awesome!" instead of "I made this painting to show my path".
    Who said what is the speaker's business, not the sentence's meaning.
    """
    words = sorted({n for n in names if n and n.strip()}, key=len, reverse=True)
    if not words:
        return lambda text: text
    pattern = re.compile(
        r"\b(?:" + "|".join(re.escape(w) for w in words) + r")(?:'s|’s)?\b,?\s*", re.IGNORECASE
    )

    def strip(text: str) -> str:
        out = pattern.sub("", text).strip()
        return out or text

    return strip


# words that open a sentence without naming anyone
_NOT_NAMES = frozenset(
    """a an the i it he she they we you my our your his her their this that these those there
    here in on at when what where who why how user users assistant""".split()
)
_SUBJECT = re.compile(r"^\s*([A-Z][\w-]+)(?:'s|’s)?\b,?\s*")


def strip_subject(fact: str) -> str:
    """A third-person memory without its leading name: "Dana moved from Chicago" → "moved from
    Chicago" (the name would otherwise pull every greeting that mentions it)."""
    m = _SUBJECT.match(fact)
    if m is None or m.group(1).casefold() in _NOT_NAMES or m.end() >= len(fact):
        return fact
    return fact[m.end() :]


def _judged_units(
    contents: Sequence[str], strip: Callable[[str], str], judge: bool, max_sentences: int | None
) -> tuple[list[tuple[int, str, bool]], int]:
    """(message position, sentence, whether it states something: always True unless
    ``judge``) of each message's sentences, CJK text left out; and how many messages were
    left out for ``max_sentences`` (None: no bound). Newest first, a message is taken whole
    while its new distinct sentences still fit; one that does not fit is left out, and an
    older, shorter one may still be taken."""
    split: list[tuple[int, list[str], list[str]]] = []  # newest first
    distinct: set[str] = set()
    left_out = 0
    for pos in range(len(contents) - 1, -1, -1):
        raw = [s for s in split_sentences(contents[pos]) if not has_cjk(s)]
        stripped = [strip(s[:MAX_CHARS]) for s in raw]
        if max_sentences is not None:
            new = {t for t in stripped if t not in distinct}
            if len(distinct) + len(new) > max_sentences:
                left_out += 1
                continue
            distinct |= new
        split.append((pos, raw, stripped))
    units = [
        (pos, text, (not judge) or states_something(s))
        for pos, raw, stripped in reversed(split)
        for s, text in zip(raw, stripped, strict=True)
    ]
    return units, left_out


def _counter(progress: Callable[[int, int], None], total: int) -> Callable[[int], None]:
    """``progress(done, total)`` from counts of texts done, one call at a time."""
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        progress(done, total)

    return advance


def _unit_vectors(m: np.ndarray) -> np.ndarray:
    import numpy as np

    m = np.asarray(m, dtype=np.float32)
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


def embed_cached(
    texts: Sequence[str],
    embedder: Embedder,
    cache: EmbeddingCache | None,
    stats: DenseStats,
    uncounted: int = 0,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Unit vectors of ``texts``: from the cache where it has them, embedded (and stored) else.

    ``stats.embedded`` counts the texts embedded but the first ``uncounted`` (the facts);
    ``progress(n)``: n more texts done (those from the cache at once, the others as the model
    embeds them)."""
    import numpy as np

    cached = cache.get(texts) if cache is not None else [None] * len(texts)
    missing = [i for i, v in enumerate(cached) if v is None]
    if progress is not None and len(missing) < len(texts):
        progress(len(texts) - len(missing))
    fresh = _unit_vectors(embedder([texts[i] for i in missing], progress)) if missing else None
    if fresh is not None and cache is not None:
        cache.put([texts[i] for i in missing], fresh)
    stats.embedded += sum(1 for i in missing if i >= uncounted)
    dim = fresh.shape[1] if fresh is not None else next(v for v in cached if v is not None).shape[0]
    out = np.empty((len(texts), dim), dtype=np.float32)
    for i, v in enumerate(cached):
        if v is not None:
            out[i] = v
    if fresh is not None:
        out[missing] = fresh
    return out


def dense_scores(
    facts: Sequence[str],
    contents: Sequence[str],
    embedder: Embedder,
    cache: EmbeddingCache | None = None,
    batch: int = BATCH,
    names: Iterable[str] = (),
    stated: np.ndarray | None = None,
    max_sentences: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, DenseStats]:
    """Best sentence cosine of each fact with each message: a facts × messages matrix.

    Each distinct sentence is embedded once, batch by batch; a sentence said more than once
    ("Thanks!") keeps its column of cosines, not its vector. Facts with CJK text get a row of
    -1 (no dense evidence), as do messages with no non-CJK sentence.

    ``stated``, a facts × messages matrix of -1 when given, receives the best cosine over the
    sentences that state something: a question ("Can I pick seats when I check in?") may rank
    a message, but it states no fact (``memdiag.text.states_something``).

    ``max_sentences`` bounds the model's work: the distinct sentences compared, newest
    messages first, each message whole or not at all (``DenseStats.left_out``: how many were
    not); each message is split once. ``progress(done, total)``: the distinct texts (facts and
    sentences) embedded or found in the cache so far, of all of them.
    """
    import numpy as np

    stats = DenseStats()
    out = np.full((len(facts), len(contents)), -1.0, dtype=np.float32)
    english = [i for i, f in enumerate(facts) if f.strip() and not has_cjk(f)]
    if not english or not contents:
        return out, stats
    strip = name_stripper(names)
    fact_texts = [strip_subject(strip(facts[i])) for i in english]
    fact_vecs: np.ndarray | None = None  # embedded with the first batch: one model call fewer
    judged, stats.left_out = _judged_units(contents, strip, stated is not None, max_sentences)
    counts = Counter(s for _, s, _ in judged)
    stats.sentences = len(counts)
    kept: dict[str, np.ndarray] = {}  # cosines of sentences said more than once
    rows = out[english] if len(english) < len(facts) else out
    said = stated if stated is None or len(english) == len(facts) else stated[english]
    pending: list[tuple[int, str, bool]] = []
    advance = _counter(progress, len(fact_texts) + len(counts)) if progress is not None else None

    def take(pos: int, col: np.ndarray, states: bool) -> None:
        np.maximum(rows[:, pos], col, out=rows[:, pos])
        if said is not None and states:
            np.maximum(said[:, pos], col, out=said[:, pos])

    def flush() -> None:
        nonlocal fact_vecs
        texts = list(dict.fromkeys(s for _, s, _ in pending if s not in kept))
        sims = None
        if fact_vecs is None:  # the first batch: the facts are embedded with it
            both = embed_cached(
                [*fact_texts, *texts], embedder, cache, stats, len(fact_texts), advance
            )
            fact_vecs = both[: len(fact_texts)]
            sims = fact_vecs @ both[len(fact_texts) :].T
        elif texts:
            sims = fact_vecs @ embed_cached(texts, embedder, cache, stats, 0, advance).T
        col_of = {t: k for k, t in enumerate(texts)}
        for pos, s, states in pending:
            if s in kept:
                take(pos, kept[s], states)
                continue
            assert sims is not None
            col = sims[:, col_of[s]]
            if counts[s] > 1:
                kept[s] = col.copy()
            take(pos, col, states)
        pending.clear()

    for unit in judged:
        pending.append(unit)
        if len(pending) >= batch:
            flush()
    if pending:
        flush()
    if rows is not out:
        out[english] = rows
    if said is not None and said is not stated:
        assert stated is not None
        stated[english] = said
    return out, stats
