"""Was a fact written to a store? (docs/reference.md#verdicts step 3, first half.)

``find_in_store`` matches the fact lexically against every stored document (normalized
containment, fuzzy word overlap, CJK n-grams: ``memdiag.facts.match``), plus embedding similarity
when the collection's own embedding function runs offline, and keeps the records about the
fact's subject (``memdiag.stores.memories.subjects``: Tom Becker's "lives in Paris" is not the
user's). Whether the query would have retrieved it is the store's own answer:
``VectorStore.query`` (Chroma's, Qdrant's or LanceDB's ranks and distances, unchanged).

Any reader with the methods of :class:`MemoryStore` can be searched: a Chroma store, a Qdrant or
LanceDB folder, a memory-store file (``memdiag.stores.documents``); one that also has ``query``
is a :class:`VectorStore`, and diagnose checks its retrieval as Chroma's (docs/stores.md).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memdiag.stores.records import CollectionData, MemoryRecord

if TYPE_CHECKING:
    from memdiag.stores.layouts import LayoutRead
    from memdiag.stores.memories import Subjects
    from memdiag.stores.records import Hit

UserNames = Callable[[], Sequence[str]]  # the names the user gave in the transcript, on demand

# all-MiniLM-L6-v2 puts paraphrases of one statement above ~0.7 and unrelated memories below
# ~0.4; 0.7 keeps "stored" meaning "stored", not "something similar was stored".
SEMANTIC_THRESHOLD = 0.7


class MemoryStore(Protocol):
    """What diagnose and the audit read of any store: its collections and their records."""

    spec: str
    label: str

    def memory_collections(self) -> list[str]: ...

    def memories(self, name: str, page_size: int = ..., progress: Any = ...) -> LayoutRead: ...

    def cached_read(self, name: str) -> CollectionData: ...

    def embedding_function(self, name: str) -> tuple[Any | None, str]: ...

    def collection_info(self, name: str) -> Any: ...

    def problems(self) -> list[str]: ...

    def close(self) -> None: ...


@runtime_checkable
class VectorStore(Protocol):
    """A store diagnose queries by vector: Chroma, Qdrant, LanceDB (and any reader that ranks as
    they do: ``query`` returns :class:`~memdiag.stores.chroma.Hit` rows, rank 1 first)."""

    def query(self, name: str, text: str, k: int) -> list[Hit]: ...


@dataclass(frozen=True)
class StoreMatch:
    """A stored record that states the fact, with how it was matched."""

    record: MemoryRecord
    score: float  # 0..1: lexical score or cosine similarity
    method: str  # exact | fuzzy | cjk_ngram | semantic


def _collections(store: MemoryStore, collection: str | None) -> list[str]:
    # a library's own bookkeeping (mem0migrations) holds no memories and may have another
    # dimension (older mem0 wrote a 1536-d placeholder): never searched
    return [collection] if collection else store.memory_collections()


# whom each record is about, once per collection read (diagnose looks up many facts)
_SUBJECTS: weakref.WeakKeyDictionary[CollectionData, Subjects] = weakref.WeakKeyDictionary()


def _subjects(data: CollectionData) -> Subjects:
    from memdiag.stores.memories import subjects

    if data not in _SUBJECTS:
        _SUBJECTS[data] = subjects(data.documents, data.metadatas)
    return _SUBJECTS[data]


def _names_someone(text: str | None, metadata: dict[str, Any]) -> bool:
    from memdiag.subjects import memory_subject

    return bool(memory_subject(text)) or isinstance(metadata.get("entity"), str)


def locate(
    store: MemoryStore,
    collection: str | None,
    fact_text: str,
    semantic_threshold: float = SEMANTIC_THRESHOLD,
    user_names: UserNames | None = None,
) -> list[StoreMatch]:
    """Records that state ``fact_text`` about its subject, best first (lexical, then semantic
    when possible). ``user_names`` says who the user is where the store does not (an MCP graph
    of entities "Mia Lopez" and "Tom Becker")."""
    import numpy as np

    from memdiag.facts import match
    from memdiag.stores.embeddings import embed
    from memdiag.stores.layouts import tenant_of

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
        # whose memory it is matters only where a sentence names someone: the subjects of a
        # collection are read once, and only then
        if any(_names_someone(m.record.document, m.record.metadata) for m in matched.values()) or (
            matched and _names_someone(fact_text, {})
        ):
            subj = _subjects(data)
            user = user_names() if user_names is not None else ()
            matched = {
                i: m
                for i, m in matched.items()
                if subj.about(i, tenant_of(m.record.metadata), fact_text, user)
            }
        found.extend(matched.values())
    found.sort(key=lambda m: -m.score)
    return found


def find_in_store(
    store: MemoryStore,
    collection: str | None,
    fact_text: str,
    semantic_threshold: float = SEMANTIC_THRESHOLD,
    user_names: UserNames | None = None,
) -> list[MemoryRecord]:
    """Where ``fact_text`` is stored: the matching records, best match first."""
    found = locate(store, collection, fact_text, semantic_threshold, user_names)
    return [m.record for m in found]
