"""What an audit returns: findings, typed store summaries, tier counts (docs/reference.md#commands,
§6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from memdiag.stores.facts_file import KeyCollision
from memdiag.stores.layouts import Layout

KINDS = (
    "duplicate",
    "near_duplicate",
    "conflict",
    "stale",
    "strong_fact_in_vector_store",
    "distance_metric",
    "missing_metadata",
    "store_disagreement",
)
SEVERITY = {
    "conflict": "error",
    "store_disagreement": "error",
    "stale": "warning",
    "strong_fact_in_vector_store": "warning",
    "duplicate": "warning",
    "distance_metric": "warning",
    "near_duplicate": "info",
    "missing_metadata": "info",
}
SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    """One problem in a store. ``ids`` are record ids, or ``facts:KEY`` / ``facts:KEY@LINE``."""

    kind: str
    severity: str
    ids: tuple[str, ...]
    message: str
    collection: str | None = None
    # what else a program needs to act on it (a duplicate by claim: ``{"match": "claim",
    # "field": ..., "value": ...}``); only findings that carry one have the JSON key
    detail: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of docs/stores.md (``kind``, ``severity``, ``ids``, ``message``, ...)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "severity": self.severity,
            "ids": list(self.ids),
            "message": self.message,
            "collection": self.collection,
        }
        if self.detail is not None:
            out["detail"] = dict(self.detail)
        return out


@dataclass(frozen=True)
class FactsFileSummary:
    """The facts file an audit read (JSON ``"type": "facts_file"``)."""

    location: str
    shape: str  # flat | nested | records
    keys: int
    superseded_values: int
    normalization_collisions: tuple[KeyCollision, ...]
    type: Literal["facts_file"] = "facts_file"

    def to_dict(self) -> dict[str, Any]:
        """The ``stores[]`` entry of ``inspect-store --format json``."""
        return {
            "type": self.type,
            "location": self.location,
            "shape": self.shape,
            "keys": self.keys,
            "superseded_values": self.superseded_values,
            "normalization_collisions": [
                {"normalized_key": c.normalized_key, "keys": list(c.keys)}
                for c in self.normalization_collisions
            ],
        }


@dataclass(frozen=True)
class ChromaCollectionSummary:
    """One Chroma collection an audit read (JSON ``"type": "chroma"``), or the one collection
    of a memory-store file (``"type": "store"``, ``mode`` ``file``; docs/stores.md)."""

    location: str
    mode: str  # directory | server
    collection: str
    count: int
    dimension: int | None
    space: str
    configured_space: str | None
    legacy_space: str | None
    embedding_function: str | None
    retrieval_checks: Literal["available", "skipped"]
    retrieval_reason: str
    layout: Layout | None = None  # which library wrote it (mem0, llamaindex, langchain, chroma)
    records_read: int | None = None  # records audited (after the tenant scope)
    out_of_scope: int = 0  # records of other tenants, not audited
    scope: str | None = None  # "user_id=mia" when --user-id narrowed the collection
    problems: tuple[str, ...] = ()  # records that could not be read, one line each
    # "store": a memory-store file (--store: MCP memory graph, LangGraph, Agno, CrewAI);
    # "qdrant": a collection of a Qdrant local-mode folder (--store DIR, optional extra);
    # "lancedb": a table of a LanceDB folder (CrewAI ≥ 1.10's memory; --store DIR, optional extra)
    type: Literal["chroma", "store", "qdrant", "lancedb"] = "chroma"

    def to_dict(self) -> dict[str, Any]:
        """The ``stores[]`` entry of ``inspect-store --format json``."""
        return {
            "type": self.type,
            "location": self.location,
            "mode": self.mode,
            "collection": self.collection,
            "count": self.count,
            "dimension": self.dimension,
            "space": self.space,
            "configured_space": self.configured_space,
            "legacy_space": self.legacy_space,
            "embedding_function": self.embedding_function,
            "retrieval_checks": self.retrieval_checks,
            "retrieval_reason": self.retrieval_reason,
            "layout": self.layout.to_dict() if self.layout is not None else None,
            "records_read": self.records_read,
            "out_of_scope": self.out_of_scope,
            "scope": self.scope,
            "problems": list(self.problems),
        }


StoreSummary = FactsFileSummary | ChromaCollectionSummary


@dataclass(frozen=True)
class AuditReport:
    """Everything ``inspect-store`` reports: stores, records per memory tier, findings.

    ``tiers`` counts records per memory tier (``memdiag.stores.tiers``); the JSON key stays
    ``"layers"``, the word the docs use.
    """

    stores: tuple[StoreSummary, ...]
    tiers: dict[str, int]
    findings: tuple[Finding, ...]

    def to_dict(self) -> dict[str, Any]:
        """The ``inspect-store --format json`` payload."""
        return {
            "stores": [s.to_dict() for s in self.stores],
            "layers": self.tiers,
            "findings": [f.to_dict() for f in self.findings],
        }

    def count(self, kind: str) -> int:
        """How many findings of ``kind``."""
        return sum(1 for f in self.findings if f.kind == kind)

    def by_kind(self) -> dict[str, int]:
        """Finding counts for every kind (zeros included)."""
        return {k: self.count(k) for k in KINDS}
