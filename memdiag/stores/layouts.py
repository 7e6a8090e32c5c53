"""Reading each memory library's Chroma layout as the library writes it (docs/reference.md#stores).

The user never converts a store. memdiag recognizes:

- **mem0** (``Memory.add``, Chroma backend): documents empty, the text in metadata ``data``,
  plus ``hash``, ``user_id``/``agent_id``/``run_id``, ``role``, ``created_at``/``updated_at``,
  ``text_lemmatized``. Its ``mem0migrations`` collection is bookkeeping, not memories.
- **LlamaIndex** ``ChromaVectorStore``: metadata ``_node_content`` (the whole node as JSON),
  ``_node_type``, ``document_id``/``doc_id``/``ref_doc_id``; the text is in the documents, or,
  when a version left them empty, in ``_node_content``'s ``text``.
- **langchain-chroma**: collection ``langchain`` (its default name), text in documents.
- **AutoGen** ``ChromaDBVectorMemory``: text in documents, metadata ``mime_type``
  (``MemoryMimeType.TEXT``) beside the user's; its collection metadata ``distance_metric`` is
  not a Chroma setting (the audit says so).
- **plain Chroma**: text in documents, metadata as written.

``read_layout`` returns the collection with its text in ``documents`` and the library's own
bookkeeping keys removed from the metadata, scoped to one user/agent/run when asked. Records
whose text cannot be read are listed with one line saying why; the rest are still read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memdiag.fileio import json_loads

if TYPE_CHECKING:
    from memdiag.stores.records import CollectionData

LAYOUTS = ("mem0", "llamaindex", "langchain", "autogen", "chroma")
TENANT_KEYS = ("user_id", "agent_id", "run_id")
# Collections a library keeps for itself: never memories.
BOOKKEEPING_COLLECTIONS = {"mem0migrations": "mem0"}
# Where mem0 versions keep the text (``data`` in every open-source version so far).
MEM0_TEXT_KEYS = ("data", "memory", "text")
MEM0_OWN_KEYS = frozenset({"data", "hash", "text_lemmatized", "memory"})
LLAMA_OWN_KEYS = frozenset({"_node_content", "_node_type", "document_id", "doc_id", "ref_doc_id"})
LANGCHAIN_DEFAULT_COLLECTION = "langchain"
AUTOGEN_OWN_KEYS = frozenset({"mime_type"})


@dataclass(frozen=True)
class Layout:
    """Which library wrote a collection, and where its text lives."""

    name: str  # one of LAYOUTS
    text_from: str  # "documents" | "metadata.data" | "_node_content" | ...
    reason: str  # the evidence, for the user
    tenant_keys: tuple[str, ...] = ()  # which of user_id/agent_id/run_id the records carry
    bookkeeping: bool = False  # a library's own collection (mem0migrations): not memories

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "text_from": self.text_from,
            "reason": self.reason,
            "tenant_keys": list(self.tenant_keys),
            "bookkeeping": self.bookkeeping,
        }


@dataclass(frozen=True)
class Scope:
    """One tenant of a multi-user store (``--user-id``/``--agent-id``/``--run-id``)."""

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None

    def items(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in zip(TENANT_KEYS, self.values(), strict=True) if v is not None]

    def values(self) -> tuple[str | None, str | None, str | None]:
        return (self.user_id, self.agent_id, self.run_id)

    def __bool__(self) -> bool:
        return any(v is not None for v in self.values())

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        """Whether a record belongs to this tenant (every given id must match, as mem0 does)."""
        return all(str(metadata.get(k)) == v for k, v in self.items())

    def where(self) -> dict[str, Any] | None:
        """The same condition as a Chroma ``where`` filter, for scoped queries."""
        conds = [{k: {"$eq": v}} for k, v in self.items()]
        if not conds:
            return None
        return conds[0] if len(conds) == 1 else {"$and": conds}

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.items()) or "all tenants"


@dataclass(frozen=True)
class ReadOptions:
    """How memdiag reads a store: one tenant (``--user-id`` ...) and ``--embedding-function``."""

    scope: Scope = field(default_factory=Scope)
    embedding_function: str | None = None


@dataclass(frozen=True)
class LayoutRead:
    """A collection as its library meant it: text in ``data.documents``, own keys removed."""

    layout: Layout
    data: CollectionData
    unreadable: tuple[str, ...] = ()  # ids whose text could not be read (left out)
    problems: tuple[str, ...] = ()  # one line each, naming the collection
    out_of_scope: int = 0  # records of other tenants, left out
    tenants: dict[str, int] = field(default_factory=dict)  # "user_id=mia" -> records
    scoped: bool = False  # the scope narrowed this collection (it carries those ids)


def tenant_of(metadata: Mapping[str, Any]) -> tuple[str, ...]:
    """The tenant a record belongs to: its user/agent/run ids ("" when absent)."""
    return tuple(_scalar(metadata.get(k)) for k in TENANT_KEYS)


def _scalar(v: Any) -> str:
    return "" if v is None or isinstance(v, (dict, list, tuple)) else str(v)


def _share(metadatas: Sequence[Mapping[str, Any]], test: Any) -> float:
    if not metadatas:
        return 0.0
    return sum(1 for m in metadatas if test(m)) / len(metadatas)


def detect_layout(
    name: str, documents: Sequence[str | None], metadatas: Sequence[Mapping[str, Any]]
) -> Layout:
    """Which library wrote collection ``name``, from its name and its records' shape."""
    present = tuple(k for k in TENANT_KEYS if any(k in m for m in metadatas))
    if name in BOOKKEEPING_COLLECTIONS:
        lib = BOOKKEEPING_COLLECTIONS[name]
        return Layout(lib, "none", f"{name!r} is {lib}'s own bookkeeping collection", present, True)
    empty_docs = _share(metadatas, lambda m: True) and all(not (d or "").strip() for d in documents)
    mem0_text = next(
        (k for k in MEM0_TEXT_KEYS if _share(metadatas, lambda m, k=k: k in m) >= 0.5), None
    )
    has_hash = _share(metadatas, lambda m: "hash" in m) >= 0.5
    if mem0_text is not None and (has_hash or (present and empty_docs)):
        why = (
            f"metadata {mem0_text!r}"
            + (" and 'hash'" if has_hash else "")
            + (f" with {'/'.join(present)}" if present else "")
        )
        return Layout("mem0", f"metadata.{mem0_text}", why, present)
    if _share(metadatas, lambda m: "_node_content" in m) >= 0.5:
        text_from = "_node_content" if empty_docs else "documents"
        return Layout(
            "llamaindex", text_from, "metadata '_node_content' (LlamaIndex nodes)", present
        )
    if (
        _share(
            metadatas,
            lambda m: (
                isinstance(m.get("mime_type"), str) and m["mime_type"].startswith("MemoryMimeType.")
            ),
        )
        >= 0.5
    ):
        return Layout(
            "autogen",
            "documents",
            "metadata 'mime_type' MemoryMimeType.* (AutoGen ChromaDBVectorMemory)",
            present,
        )
    if name == LANGCHAIN_DEFAULT_COLLECTION:
        return Layout(
            "langchain", "documents", "collection 'langchain' (langchain-chroma's default)", present
        )
    return Layout("chroma", "documents", "plain Chroma: text in documents", present)


def _node_text(raw: Any) -> tuple[str | None, str | None]:
    """The text of a LlamaIndex node JSON, or (None, why)."""
    if not isinstance(raw, str):
        return None, f"_node_content is a {type(raw).__name__}, not JSON text"
    try:
        node = json_loads(raw)  # bounded: depth, digits, surrogates
    except ValueError:
        return None, "_node_content is not valid JSON"
    text = node.get("text") if isinstance(node, dict) else None
    if isinstance(text, str) and text.strip():
        return text, None
    return None, "_node_content holds no text"


def read_layout(
    data: CollectionData, scope: Scope | None = None, layout: Layout | None = None
) -> LayoutRead:
    """``data`` with each record's text in ``documents``, scoped to ``scope``.

    Never raises on odd records: a record whose text cannot be read is left out and counted in
    one problem line; everything readable is returned.
    """
    from memdiag.stores.records import CollectionData

    layout = layout or detect_layout(data.name, data.documents, data.metadatas)
    if layout.bookkeeping:
        empty = CollectionData(data.name, [], [], [], _rows(data.embeddings, []))
        return LayoutRead(layout, empty, problems=(), tenants={})
    keep: list[int] = []
    docs: list[str | None] = []
    metas: list[dict[str, Any]] = []
    unreadable: list[str] = []
    reasons: Counter[str] = Counter()
    out_of_scope = 0
    tenants: Counter[str] = Counter()
    scoped = bool(scope) and any(k in m for m in data.metadatas for k, _ in scope.items())  # type: ignore[union-attr]
    for i, (doc, meta) in enumerate(zip(data.documents, data.metadatas, strict=True)):
        meta = meta if isinstance(meta, dict) else {}
        if scoped and scope is not None and not scope.matches(meta):
            out_of_scope += 1
            continue
        text, why = _text(layout, doc, meta)
        if text is None:
            unreadable.append(data.ids[i])
            reasons[why or "no text"] += 1
            continue
        keep.append(i)
        docs.append(text)
        metas.append(own_metadata(layout, meta))
        t = ", ".join(f"{k}={v}" for k, v in zip(TENANT_KEYS, tenant_of(meta), strict=True) if v)
        if t:
            tenants[t] += 1
    problems: list[str] = []
    if unreadable:
        shown = ", ".join(unreadable[:5]) + (" …" if len(unreadable) > 5 else "")
        why = "; ".join(f"{n} {r}" for r, n in reasons.most_common())
        problems.append(
            f"collection {data.name!r} ({layout.name} layout): {len(unreadable)} of "
            f"{len(data.ids)} records have no readable text ({why}): {shown}; read the other "
            f"{len(data.ids) - len(unreadable) - out_of_scope}"
        )
    if layout.name == "mem0":
        stale_hash = _stale_hashes(data, keep, docs)
        if stale_hash:
            shown = ", ".join(stale_hash[:5]) + (" …" if len(stale_hash) > 5 else "")
            problems.append(
                f"collection {data.name!r} (mem0 layout): {len(stale_hash)} records carry a "
                f"'hash' that is not the md5 of their text (edited outside mem0? its duplicate "
                f"check will miss them): {shown}"
            )
    if scope and not scoped:
        problems.append(
            f"collection {data.name!r} has no {'/'.join(k for k, _ in scope.items())} "
            f"metadata: {scope.describe()} does not narrow it, all records are read"
        )
    read = CollectionData(
        data.name,
        [data.ids[i] for i in keep],
        docs,
        metas,
        _rows(data.embeddings, keep) if len(keep) != len(data.ids) else data.embeddings,
    )
    return LayoutRead(
        layout, read, tuple(unreadable), tuple(problems), out_of_scope, dict(tenants), scoped
    )


def _stale_hashes(data: CollectionData, keep: list[int], texts: list[str | None]) -> list[str]:
    """Ids whose mem0 ``hash`` (md5 of ``data``, mem0's duplicate check) no longer matches."""
    import hashlib

    out = []
    for i, text in zip(keep, texts, strict=True):
        h = data.metadatas[i].get("hash")
        if isinstance(h, str) and text and hashlib.md5(text.encode()).hexdigest() != h:
            out.append(data.ids[i])
    return out


def _rows(matrix: Any, keep: list[int]) -> Any:
    if matrix is None:
        return None
    import numpy as np

    if not len(keep):
        return np.zeros((0, matrix.shape[1] if matrix.ndim == 2 else 0), dtype=np.float32)
    return matrix[np.asarray(keep, dtype=np.int64)]


def record_text(layout: Layout, document: Any, metadata: Mapping[str, Any]) -> str | None:
    """One record's text where its library keeps it (None when it has none)."""
    return _text(layout, document, metadata)[0]


def _text(layout: Layout, doc: Any, meta: Mapping[str, Any]) -> tuple[str | None, str | None]:
    if isinstance(doc, str) and doc.strip():
        return doc, None
    if layout.name == "mem0":
        key = layout.text_from.removeprefix("metadata.")
        for k in (key, *MEM0_TEXT_KEYS):
            v = meta.get(k)
            if isinstance(v, str) and v.strip():
                return v, None
        v = meta.get(key)
        if v is None:
            return None, f"no {key!r} in the metadata"
        return None, f"{key!r} is a {type(v).__name__}, not text"
    if layout.name == "llamaindex":
        if "_node_content" not in meta:
            return None, "no document and no _node_content"
        return _node_text(meta["_node_content"])
    return None, "empty document"


def own_metadata(layout: Layout, meta: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata the user (or the user's agent) wrote, without the library's own keys."""
    if layout.name == "mem0":
        return {k: v for k, v in meta.items() if k not in MEM0_OWN_KEYS}
    if layout.name == "llamaindex":
        return {k: v for k, v in meta.items() if k not in LLAMA_OWN_KEYS}
    if layout.name == "autogen":
        return {k: v for k, v in meta.items() if k not in AUTOGEN_OWN_KEYS}
    return dict(meta)
