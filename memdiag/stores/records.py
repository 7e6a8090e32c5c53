"""A collection's records in columns: what every store reader returns (no chromadb here).

``memdiag.stores.chroma`` fills them from Chroma; ``memdiag.stores.layouts`` rewrites them as
their memory library meant them (text where the library keeps it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported lazily: `memdiag --help` must stay instant
    import numpy as np


@dataclass(frozen=True, eq=False)
class MemoryRecord:
    """One stored memory. ``embedding`` is a float32 row (a view into the collection matrix)."""

    id: str
    document: str | None
    metadata: dict[str, Any]
    embedding: np.ndarray | None
    collection: str


@dataclass(frozen=True, eq=False)
class CollectionData:
    """A whole collection in columns; ``embeddings`` is an (n, dim) float32 matrix or None."""

    name: str
    ids: list[str]
    documents: list[str | None]
    metadatas: list[dict[str, Any]]
    embeddings: np.ndarray | None

    def records(self) -> list[MemoryRecord]:
        """The same data as one ``MemoryRecord`` per row."""
        emb = self.embeddings
        rows = zip(self.ids, self.documents, self.metadatas, strict=True)
        return [
            MemoryRecord(i, d, m, None if emb is None else emb[n], self.name)
            for n, (i, d, m) in enumerate(rows)
        ]


@dataclass(frozen=True)
class Hit:
    """One query result exactly as the store ranked it (rank is 1-based): Chroma's, Qdrant's,
    LanceDB's, or a memory-store file's place in what its library returns."""

    id: str
    rank: int
    distance: float
    document: str | None
    metadata: dict[str, Any]
    collection: str | None = None
