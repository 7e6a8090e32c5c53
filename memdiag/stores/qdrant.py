"""Qdrant's local mode, read as mem0 (its default vector store) writes it (docs/stores.md).

``QdrantClient(path=DIR)`` keeps ``DIR/meta.json`` (the collections and their vector params) and
``DIR/collection/<name>/storage.sqlite`` (the points, pickled). Reading needs qdrant-client
(``pip install 'memdiag[qdrant]'``: an optional extra, the base install does not grow). The
client locks and may write the folder it opens, so, as for Chroma, the folder is checked first and
a temporary copy is opened: the user's bytes never change.

Each collection's points become records (payload as metadata, the text where the library put it:
mem0's ``data``, LangChain's ``page_content``, ``text``, ``document``), read by
``memdiag.stores.layouts`` like a Chroma collection; the vectors are there, so near-duplicates
are searched and the model is identified from them. ``diagnose`` queries a collection as mem0
does (``QdrantClient.query_points`` with the query's vector, filtered to the tenant, ``limit``
top_k): ranks and scores are qdrant-client's own, the score turned into a distance as Chroma
reports it (cosine and dot: 1 - score; Euclid, Manhattan: the score is the distance).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from memdiag.errors import StoreError, UnavailableError
from memdiag.stores.layouts import BOOKKEEPING_COLLECTIONS, LayoutRead, ReadOptions, read_layout
from memdiag.stores.records import CollectionData, Hit
from memdiag.stores.vector_reader import ModelFromVectors, VectorCollectionInfo

TEXT_KEYS = ("data", "memory", "text", "page_content", "document", "content")
SPACES = {"Cosine": "cosine", "Euclid": "l2", "Dot": "ip", "Manhattan": "manhattan"}
PAGE = 1000
# Qdrant's score is a similarity for these, a distance for the others
SIMILARITY_SPACES = frozenset({"cosine", "ip"})


def is_qdrant_dir(path: Path) -> bool:
    """A folder ``QdrantClient(path=...)`` wrote: meta.json naming collections."""
    return (path / "meta.json").is_file() and (path / "collection").is_dir()


class QdrantStore(ModelFromVectors):
    """A read-only view of a Qdrant local-mode folder (the audit's store interface)."""

    kind = "directory"
    library = "Qdrant"
    summary_type = "qdrant"  # one collection of a vector store, summarized as Chroma's are

    def __init__(self, path: Path, options: ReadOptions) -> None:
        self.spec = str(path)
        self.label = "qdrant store"
        self.options = options
        self._tmp = Path(tempfile.mkdtemp(prefix="memdiag-qdrant-"))
        self._memories: dict[str, LayoutRead] = {}
        self._infos: dict[str, VectorCollectionInfo] = {}
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
            sparse = 0
            while True:
                points, offset = self._client.scroll(
                    name, limit=PAGE, offset=offset, with_payload=True, with_vectors=True
                )
                for p in points:
                    vec: Any = p.vector
                    if isinstance(vec, dict):  # named: the dense one (mem0 adds sparse "bm25")
                        sparse += any(not isinstance(v, list) for v in vec.values())
                        vec = next((v for v in vec.values() if isinstance(v, list)), None)
                    ids.append(str(p.id))
                    doc, meta = _row(p.payload)
                    docs.append(doc)
                    metas.append(meta)
                    rows.append(list(vec or []) if isinstance(vec, list) else [])
                if offset is None:
                    break
            emb = np.asarray(rows, dtype=np.float32) if rows and all(rows) else None
            data = CollectionData(name, ids, docs, metas, emb)
            read = read_layout(data, self.options.scope)
            if sparse:  # mem0's hybrid search adds BM25 scores memdiag does not compute
                read = replace(
                    read,
                    problems=(
                        *read.problems,
                        f"collection {name!r}: {sparse} points carry sparse vectors (mem0's "
                        "BM25 keyword search adds their scores to its ranking); diagnose ranks "
                        "by the dense vectors only",
                    ),
                )
            self._memories[name] = read
            self._infos[name] = VectorCollectionInfo(
                name, len(ids), size, SPACES.get(str(distance), str(distance)), store="qdrant"
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

    def collection_info(self, name: str) -> VectorCollectionInfo:
        if name not in self._infos:
            names = ", ".join(self._names) or "none"
            raise StoreError(f"no collection {name!r} in {self.spec} (collections: {names})")
        return self._infos[name]

    def memories(self, name: str, page_size: int = 0, progress: Any = None) -> LayoutRead:
        self.collection_info(name)
        return self._memories[name]

    def query_embedding(self, name: str, vector: Any, k: int) -> list[Hit]:
        """qdrant-client's own nearest-neighbour query (``query_points``), ranks from 1.

        A multi-tenant collection is queried one tenant at a time, as mem0 filters its search
        (every given ``user_id``/``agent_id``/``run_id`` must match), when the scope
        (``--user-id``, ``--agent-id``, ``--run-id``) narrows it.
        """
        from qdrant_client import models

        from memdiag.stores.layouts import own_metadata, record_text

        info = self.collection_info(name)
        if info.count == 0 or k <= 0:
            return []
        memories = self.memories(name)
        conds: list[Any] = [
            models.FieldCondition(key=key, match=models.MatchValue(value=value))
            for key, value in self.options.scope.items()
        ]
        params = self._client.get_collection(name).config.params.vectors
        using = next(iter(params)) if isinstance(params, dict) and params else None
        try:
            points = self._client.query_points(
                name,
                query=[float(x) for x in vector],
                using=using,
                query_filter=models.Filter(must=conds) if conds and memories.scoped else None,
                limit=k,
                with_payload=True,
            ).points
        except Exception as e:  # a vector of another size: one line
            why = " ".join(str(e).split())[:200]
            raise StoreError(f"cannot query Qdrant collection {name!r}: {why}") from None
        layout = memories.layout
        similarity = info.space in SIMILARITY_SPACES
        hits = []
        for rank, p in enumerate(points, 1):
            doc, meta = _row(p.payload)
            score = float(p.score)
            hits.append(
                Hit(
                    str(p.id),
                    rank,
                    1.0 - score if similarity else score,
                    record_text(layout, doc, meta),
                    own_metadata(layout, meta),
                    name,
                )
            )
        return hits


def _row(payload: Any) -> tuple[str | None, dict[str, Any]]:
    """A point's text (where the library put it) and its scalar payload, as records hold them.

    mem0 keeps the text in payload ``data``: the document is left empty and the mem0 layout
    reads it from the metadata, as from mem0's Chroma records.
    """
    payload = dict(payload or {})
    text = next((payload[k] for k in TEXT_KEYS if isinstance(payload.get(k), str)), None)
    meta = {k: v for k, v in payload.items() if v is None or isinstance(v, (str, int, float, bool))}
    return (None if "data" in payload else text), meta


def open_qdrant(path: Path, options: ReadOptions | None = None) -> QdrantStore:
    """Open a Qdrant local-mode folder read-only (through a temporary copy)."""
    try:
        json.loads((path / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise StoreError(f"{path / 'meta.json'}: not a Qdrant store's meta.json ({e})") from None
    return QdrantStore(path, options or ReadOptions())
