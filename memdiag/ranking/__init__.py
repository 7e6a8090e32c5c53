"""Evidence as a ranking (docs/reference.md#verdicts step 1): exact, lexical, semantic and temporal
rankers, fused.

``rank_evidence`` is the one entry point: a transcript and facts in, one :class:`Ranking` per
fact out, every message embedded at most once per run (and cached across runs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from memdiag.ranking.rank import DEFAULT, Candidate, EvidenceIndex, IndexStats, Params, Ranking

if TYPE_CHECKING:
    from memdiag.transcript.model import Transcript

__all__ = [
    "Candidate",
    "EvidenceIndex",
    "IndexStats",
    "Params",
    "Ranking",
    "evidence_index",
    "rank_evidence",
]


def evidence_index(
    transcript: Transcript,
    *,
    semantic: bool = True,
    cache: bool = True,
    params: Params = DEFAULT,
    roles: Sequence[str] = ("user", "assistant", "tool"),
    folded: Mapping[int, str] | None = None,
) -> tuple[EvidenceIndex, str]:
    """An index over every message of ``transcript``, and a note on the semantic ranker.

    ``semantic``: use the local MiniLM model when it is found (else lexical only, and the note
    says why); ``cache``: keep embeddings in the user cache dir (``--no-cache`` turns it off).
    ``folded``: the run's folded texts by message index, where it has them (see EvidenceIndex).
    """
    from memdiag.ranking.cache import EmbeddingCache
    from memdiag.ranking.minilm import local_minilm

    embedder = None
    store = None
    note = "skipped: turned off"
    if semantic:
        embedder, note = local_minilm()
        if embedder is not None and cache:
            store = EmbeddingCache(embedder.name)
            if store.error:
                note += f"; {store.error}"
                store = None
        elif embedder is None:
            from memdiag.stores.embeddings import MISSING

            # a missing model is named once per run (the CLI's note), not in every diagnosis
            note = "skipped: the embedding model is not installed" if note == MISSING else note
            note = note if note.startswith("skipped: ") else f"skipped: {note}"
    index = EvidenceIndex(
        transcript.messages,
        transcript.session_ts,
        embedder=embedder,
        cache=store,
        params=params,
        roles=roles,
        folded=folded,
    )
    return index, note


def rank_evidence(
    transcript: Transcript,
    facts: Sequence[tuple[str, int | None]],
    *,
    top: int = 5,
    semantic: bool = True,
    cache: bool = True,
) -> list[Ranking]:
    """One ranking per (fact, before): candidates among messages with index < before."""
    index, _ = evidence_index(transcript, semantic=semantic, cache=cache)
    try:
        return index.rank(facts, top=top)
    finally:
        if index.cache is not None:
            index.cache.close()
