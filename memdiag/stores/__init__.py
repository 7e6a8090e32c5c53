"""Long-term stores (SPEC §6): the JSON facts file, Chroma collections, and their audit.

Nothing here imports chromadb or numpy at import time; they load when a store is opened.
"""

from __future__ import annotations

from memdiag.stores.audit import AuditReport, AuditSettings, Finding, audit
from memdiag.stores.chroma import (
    ChromaStore,
    CollectionData,
    CollectionInfo,
    Hit,
    MemoryRecord,
    open_chroma,
)
from memdiag.stores.embeddings import default_embedder, resolve_embedding_function
from memdiag.stores.facts_file import FactEntry, FactsFile, load_facts_file
from memdiag.stores.layers import LAYERS, assign_layer
from memdiag.stores.retrieval import RetrievalResult, find_in_store, locate, retrieve

__all__ = [
    "LAYERS",
    "AuditReport",
    "AuditSettings",
    "ChromaStore",
    "CollectionData",
    "CollectionInfo",
    "FactEntry",
    "FactsFile",
    "Finding",
    "Hit",
    "MemoryRecord",
    "RetrievalResult",
    "assign_layer",
    "audit",
    "default_embedder",
    "find_in_store",
    "load_facts_file",
    "locate",
    "open_chroma",
    "resolve_embedding_function",
    "retrieve",
]
