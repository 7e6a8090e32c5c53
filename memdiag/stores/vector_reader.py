"""What the vector-store readers share (Chroma, Qdrant local mode, LanceDB): memories read once
per collection, their problems, a query by text, and, for the stores that keep no model, the
model found from the stored vectors. The readers themselves stay in their own modules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memdiag.errors import UnavailableError
from memdiag.stores.embedding_names import for_vectors, stored_sample

if TYPE_CHECKING:
    from memdiag.stores.layouts import LayoutRead, ReadOptions
    from memdiag.stores.records import CollectionData, Hit


@dataclass(frozen=True)
class VectorCollectionInfo:
    """CollectionInfo's fields for a collection of a Qdrant or LanceDB store, and the store it
    belongs to (whose settings the audit's advice names)."""

    name: str
    count: int
    dimension: int | None
    space: str
    embedding_function: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    configured_space: str | None = None
    legacy_space: str | None = None
    space_disagreement: bool = False
    store: str = field(kw_only=True)  # "qdrant", "lancedb"


class VectorStoreReader:
    """What the Chroma, Qdrant and LanceDB readers share: the memories read once per collection
    (``_memories``, filled by each reader's ``memories``), their problems, and ``query(name,
    text, k)``: the text embedded with the collection's own model, then searched as a stored
    vector is."""

    _memories: dict[str, LayoutRead]

    def memories(self, name: str, page_size: int = 0, progress: Any = None) -> LayoutRead:
        raise NotImplementedError

    def embedding_function(self, name: str) -> tuple[Any | None, str]:
        raise NotImplementedError

    def query_embedding(self, name: str, vector: Any, k: int) -> list[Hit]:
        raise NotImplementedError

    def cached_read(self, name: str) -> CollectionData:
        """The memories of ``name`` (see ``memories``): diagnose looks up many facts per store."""
        return self.memories(name).data

    def problems(self) -> list[str]:
        """One line per collection read so far whose records could not all be read."""
        return [p for m in self._memories.values() for p in m.problems]

    def query(self, name: str, text: str, k: int) -> list[Hit]:
        """The ``k`` nearest records to ``text``. Raises ``UnavailableError`` (with the fix)
        when the collection's model cannot be run offline."""
        from memdiag.stores.embeddings import embed

        ef, reason = self.embedding_function(name)
        if ef is None:
            raise UnavailableError(f"cannot query {name!r}: {reason}")
        return self.query_embedding(name, embed(ef, [text])[0], k)


class ModelFromVectors(VectorStoreReader):
    """A vector store that keeps vectors, never the model that made them (Qdrant, LanceDB):
    ``--embedding-function`` names it (checked against the dimension), else the model at hand
    that reproduces the stored vectors (``embedding_names.for_vectors``). Memoized."""

    library: str  # named in the messages ("Qdrant", "LanceDB")
    options: ReadOptions
    _functions: dict[str, tuple[Any | None, str]]

    def collection_info(self, name: str) -> Any:
        raise NotImplementedError

    def embedding_function(self, name: str) -> tuple[Any | None, str]:
        """The model that embeds queries for ``name``, or (None, why and what would fit)."""
        if name not in self._functions:
            self._functions[name] = for_vectors(
                self.library,
                name,
                self.collection_info(name).dimension,
                self.options,
                lambda: stored_sample(self.memories(name).data),
            )
        return self._functions[name]
