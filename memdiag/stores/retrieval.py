"""Was a fact written to the vector store? (docs/reference.md#verdicts step 3, first half.)

``find_in_store`` matches the fact lexically against every stored document (normalized
containment, fuzzy word overlap, CJK n-grams: ``memdiag.facts.match``), plus embedding similarity
when the collection's own embedding function runs offline. Whether the query would have retrieved
it is Chroma's own answer: ``ChromaStore.query`` (its ranks and distances, unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass

from memdiag.stores.chroma import ChromaStore, MemoryRecord

# all-MiniLM-L6-v2 puts paraphrases of one statement above ~0.7 and unrelated memories below
# ~0.4; 0.7 keeps "stored" meaning "stored", not "something similar was stored".
SEMANTIC_THRESHOLD = 0.7


@dataclass(frozen=True)
class StoreMatch:
    """A stored record that states the fact, with how it was matched."""

    record: MemoryRecord
    score: float  # 0..1: lexical score or cosine similarity
    method: str  # exact | fuzzy | cjk_ngram | semantic


def _collections(store: ChromaStore, collection: str | None) -> list[str]:
    # a library's own bookkeeping (mem0migrations) holds no memories and may have another
    # dimension (older mem0 wrote a 1536-d placeholder): never searched
    return [collection] if collection else store.memory_collections()


def locate(
    store: ChromaStore,
    collection: str | None,
    fact_text: str,
    semantic_threshold: float = SEMANTIC_THRESHOLD,
) -> list[StoreMatch]:
    """Records that state ``fact_text``, best first (lexical, then semantic when possible)."""
    import numpy as np

    from memdiag.facts import match
    from memdiag.stores.embeddings import embed

    found: list[StoreMatch] = []
    for name in _collections(store, collection):
        data = store.cached_read(name)
        records = data.records()
        matched: dict[int, StoreMatch] = {}
        for i, rec in enumerate(records):
            if rec.document:
                m = match(fact_text, rec.document)
                if m is not None:
                    matched[i] = StoreMatch(rec, m.score, m.method)
        ef, _reason = store.embedding_function(name)
        emb = data.embeddings
        if ef is not None and emb is not None and len(emb):
            q = embed(ef, [fact_text])[0]
            if q.shape[0] == emb.shape[1]:
                norms = np.linalg.norm(emb, axis=1) * float(np.linalg.norm(q))
                sims = (emb @ q) / np.where(norms > 0, norms, 1.0)
                for hit in np.flatnonzero(sims >= semantic_threshold):
                    i = int(hit)
                    sim = round(float(sims[i]), 4)
                    if i not in matched or matched[i].score < sim:
                        matched[i] = StoreMatch(records[i], sim, "semantic")
        found.extend(matched.values())
    found.sort(key=lambda m: -m.score)
    return found


def find_in_store(
    store: ChromaStore,
    collection: str | None,
    fact_text: str,
    semantic_threshold: float = SEMANTIC_THRESHOLD,
) -> list[MemoryRecord]:
    """Where ``fact_text`` is stored: the matching records, best match first."""
    return [m.record for m in locate(store, collection, fact_text, semantic_threshold)]
