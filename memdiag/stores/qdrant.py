"""Qdrant's local mode, read as mem0 (its default vector store) writes it (docs/stores.md).

``QdrantClient(path=DIR)`` keeps ``DIR/meta.json`` (the collections and their vector params) and
``DIR/collection/<name>/storage.sqlite`` (the points, pickled). Reading needs qdrant-client
(``pip install 'memdiag[qdrant]'``: an optional extra, the base install does not grow). The
client locks and may write the folder it opens, so, as for Chroma, the folder is checked first and
a temporary copy is opened: the user's bytes never change.

Each collection's points become records (payload as metadata, the text where the library put it:
mem0's ``data``, LangChain's ``page_content``, ``text``, ``document``), read by
``memdiag.stores.layouts`` like a Chroma collection; the vectors are there, so near-duplicates
are searched and the model is identified from them. ``diagnose`` does not query Qdrant: the
audit is read-only and says so.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from memdiag.errors import StoreError, UnavailableError
from memdiag.stores.layouts import BOOKKEEPING_COLLECTIONS, LayoutRead, ReadOptions, read_layout
from memdiag.stores.records import CollectionData

TEXT_KEYS = ("data", "memory", "text", "page_content", "document", "content")
SPACES = {"Cosine": "cosine", "Euclid": "l2", "Dot": "ip", "Manhattan": "manhattan"}
PAGE = 1000


def is_qdrant_dir(path: Path) -> bool:
    """A folder ``QdrantClient(path=...)`` wrote: meta.json naming collections."""
    return (path / "meta.json").is_file() and (path / "collection").is_dir()


@dataclass(frozen=True)
class QdrantInfo:
    """CollectionInfo's fields for one Qdrant collection."""

    name: str
    count: int
    dimension: int | None
    space: str
    embedding_function: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    configured_space: str | None = None
    legacy_space: str | None = None
    space_disagreement: bool = False
    store: ClassVar[str] = "qdrant"  # whose settings the audit's advice names


class QdrantStore:
    """A read-only view of a Qdrant local-mode folder (the audit's store interface)."""

    kind = "directory"
    summary_type = "qdrant"  # one collection of a vector store, summarized as Chroma's are

    def __init__(self, path: Path, options: ReadOptions) -> None:
        self.spec = str(path)
        self.label = "qdrant store"
        self.options = options
        self._tmp = Path(tempfile.mkdtemp(prefix="memdiag-qdrant-"))
        self._memories: dict[str, LayoutRead] = {}
        self._infos: dict[str, QdrantInfo] = {}
        self._functions: dict[str, tuple[Any | None, str]] = {}
        try:
            from qdrant_client import QdrantClient
        except ImportError:
            self.close()
            raise UnavailableError(
                f"{path} is a Qdrant local-mode store: reading it needs qdrant-client "
                "(pip install 'memdiag[qdrant]')"
            ) from None
        try:
            shutil.copytree(path, self._tmp / "q", ignore=shutil.ignore_patterns(".lock"))
            self._client: Any = QdrantClient(path=str(self._tmp / "q"))
            self._names = sorted(c.name for c in self._client.get_collections().collections)
        except StoreError:
            raise
        except Exception as e:  # a corrupt meta.json or storage.sqlite: one line
            self.close()
            why = " ".join(str(e).split())[:200]
            raise StoreError(f"cannot read Qdrant store {path}: {why}") from None
        self._read_all()

    def _read_all(self) -> None:
        import numpy as np

        for name in self._names:
            params = self._client.get_collection(name).config.params.vectors
            if isinstance(params, dict):  # named vectors: the first one
                params = next(iter(params.values()), None)
            size = getattr(params, "size", None)
            distance = getattr(getattr(params, "distance", None), "value", None)
            ids: list[str] = []
            docs: list[str | None] = []
            metas: list[dict[str, Any]] = []
            rows: list[list[float]] = []
            offset = None
            while True:
                points, offset = self._client.scroll(
                    name, limit=PAGE, offset=offset, with_payload=True, with_vectors=True
                )
                for p in points:
                    payload = dict(p.payload or {})
                    vec = (
                        p.vector
                        if not isinstance(p.vector, dict)
                        else next(iter(p.vector.values()))
                    )
                    ids.append(str(p.id))
                    text = next(
                        (payload[k] for k in TEXT_KEYS if isinstance(payload.get(k), str)), None
                    )
                    # mem0 keeps the text in payload "data" (the layout reads it from there)
                    docs.append(None if "data" in payload else text)
                    metas.append(
                        {
                            k: v
                            for k, v in payload.items()
                            if v is None or isinstance(v, (str, int, float, bool))
                        }
                    )
                    rows.append(list(vec or []) if isinstance(vec, list) else [])
                if offset is None:
                    break
            emb = np.asarray(rows, dtype=np.float32) if rows and all(rows) else None
            data = CollectionData(name, ids, docs, metas, emb)
            self._memories[name] = read_layout(data, self.options.scope)
            self._infos[name] = QdrantInfo(
                name, len(ids), size, SPACES.get(str(distance), str(distance))
            )

    def close(self) -> None:
        client = getattr(self, "_client", None)
        if client is not None:
            with contextlib.suppress(Exception):  # a copy, deleted next
                client.close()
            self._client = None
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> QdrantStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def collection_names(self) -> list[str]:
        return list(self._names)

    def memory_collections(self) -> list[str]:
        return [n for n in self._names if n not in BOOKKEEPING_COLLECTIONS]

    def collection_info(self, name: str) -> QdrantInfo:
        if name not in self._infos:
            names = ", ".join(self._names) or "none"
            raise StoreError(f"no collection {name!r} in {self.spec} (collections: {names})")
        return self._infos[name]

    def memories(self, name: str, page_size: int = 0, progress: Any = None) -> LayoutRead:
        self.collection_info(name)
        return self._memories[name]

    def cached_read(self, name: str) -> CollectionData:
        return self.memories(name).data

    def problems(self) -> list[str]:
        return [p for m in self._memories.values() for p in m.problems]

    def embedding_function(self, name: str) -> tuple[Any | None, str]:
        """Which model made the vectors (identified offline), and that diagnose does not query
        Qdrant: the audit's retrieval checks stay skipped, saying both."""
        from memdiag.stores.embedding_names import identify_model, stored_sample

        if name not in self._functions:
            info = self.collection_info(name)
            _ef, how = identify_model(
                lambda: stored_sample(self.memories(name).data), info.dimension
            )
            self._functions[name] = (
                None,
                f"{how}; memdiag audits Qdrant, diagnose queries Chroma only",
            )
        return self._functions[name]


def open_qdrant(path: Path, options: ReadOptions | None = None) -> QdrantStore:
    """Open a Qdrant local-mode folder read-only (through a temporary copy)."""
    try:
        json.loads((path / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise StoreError(f"{path / 'meta.json'}: not a Qdrant store's meta.json ({e})") from None
    return QdrantStore(path, options or ReadOptions())
