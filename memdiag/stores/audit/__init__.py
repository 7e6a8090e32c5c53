"""Auditing long-term stores: the facts file and Chroma collections (docs/reference.md#commands,
§6).

Finding kinds and their severities:

=============================  ========  =====================================================
kind                           severity  why
=============================  ========  =====================================================
conflict                       error     two different values for one subject are both
                                         retrievable (or both keys of a facts file are read)
store_disagreement             error     the profile (facts file) says one thing, the vector
                                         store's current value another
stale                          warning   an older value of an updated subject (or a record
                                         marked superseded / older than ``stale_after_days``)
                                         can still be retrieved; *info* for superseded values
                                         kept as history in a facts file, which readers skip
strong_fact_in_vector_store    warning   a zero-tolerance fact lives only in the vector store
duplicate                      warning   identical records waste top-k slots
distance_metric                warning   L2 space over unnormalized vectors, or configuration
                                         and legacy metadata disagree; *info* for L2 over
                                         unit vectors (ranking equals cosine, scores do not)
near_duplicate                 info      near-identical records may be legitimate paraphrases
missing_metadata               info      no timestamp or layer metadata: staleness and layers
                                         cannot be judged
=============================  ========  =====================================================

One module per family: ``facts_file`` (the facts file alone), ``duplicates``, ``conflicts``
(conflict, stale), ``strong`` (strong facts, store disagreement), ``metric``, ``metadata``;
``collection`` runs them over one collection, ``report`` holds the result types.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from memdiag.config import AuditSettings
from memdiag.stores.audit.collection import RunOptions, audit_collection
from memdiag.stores.audit.facts_file import facts_file_findings
from memdiag.stores.audit.report import (
    KINDS,
    SEVERITIES,
    SEVERITY,
    AuditReport,
    ChromaCollectionSummary,
    FactsFileSummary,
    Finding,
    StoreSummary,
)
from memdiag.stores.tiers import TIERS

if TYPE_CHECKING:
    from memdiag.stores.chroma import ChromaStore, CollectionInfo
    from memdiag.stores.facts_file import FactsFile
    from memdiag.stores.layouts import LayoutRead

__all__ = [
    "KINDS",
    "SEVERITIES",
    "SEVERITY",
    "AuditReport",
    "ChromaCollectionSummary",
    "FactsFileSummary",
    "Finding",
    "StoreSummary",
    "audit",
]

Progress = Callable[[int, int], None]


def _facts_summary(facts: FactsFile) -> FactsFileSummary:
    return FactsFileSummary(
        location=facts.path,
        shape=facts.shape,
        keys=len(facts.entries),
        superseded_values=len(facts.superseded()),
        normalization_collisions=facts.normalization_collisions,
    )


def _collection_fields(store: ChromaStore, info: CollectionInfo) -> dict[str, Any]:
    """What every collection summary says of the store and the collection itself."""
    return {
        "type": getattr(store, "summary_type", "chroma"),
        "location": store.spec,
        "mode": store.kind,
        "collection": info.name,
        "count": info.count,
        "dimension": info.dimension,
        "space": info.space,
        "configured_space": info.configured_space,
        "legacy_space": info.legacy_space,
        "embedding_function": info.embedding_function,
    }


def _collection_summary(
    store: ChromaStore, info: CollectionInfo, memories: LayoutRead
) -> ChromaCollectionSummary:
    ef, reason = store.embedding_function(info.name)
    return ChromaCollectionSummary(
        **_collection_fields(store, info),
        retrieval_checks="available" if ef is not None else "skipped",
        retrieval_reason=reason,
        layout=memories.layout,
        records_read=len(memories.data.ids),
        out_of_scope=memories.out_of_scope,
        scope=store.options.scope.describe() if memories.scoped else None,
        problems=memories.problems,
    )


def _skipped_summary(store: ChromaStore, info: CollectionInfo) -> ChromaCollectionSummary:
    from memdiag.stores.layouts import detect_layout

    layout = detect_layout(info.name, [], [])
    return ChromaCollectionSummary(
        **_collection_fields(store, info),
        retrieval_checks="skipped",
        retrieval_reason=f"not audited: {layout.reason}, not memories",
        layout=layout,
        records_read=0,
    )


def audit(
    facts: FactsFile | None,
    store: ChromaStore | None,
    collection: str | None,
    settings: AuditSettings | None = None,
    progress: Progress | None = None,
    *,
    now: datetime | None = None,
    page_size: int = 5000,
    block_size: int = 2048,
    near_duplicates: bool = True,
    others: Sequence[Any] = (),
) -> AuditReport:
    """Audit a facts file and/or a Chroma store (one collection, or all when None).

    ``others`` are more stores read the same way (memory-store files: one collection each, no
    vectors; ``memdiag.stores.documents``). ``settings`` are the user's (``audit:`` in the
    config); ``now`` dates ages (default: the current time), ``page_size`` is the Chroma read
    page, ``block_size`` the tile edge of the
    near-duplicate search, which ``near_duplicates=False`` skips. ``progress(done, total)`` is
    called while reading and comparing large collections.
    """
    settings = settings or AuditSettings()
    options = RunOptions(now or datetime.now(timezone.utc), page_size, block_size, near_duplicates)
    stores: list[StoreSummary] = []
    tiers: dict[str, int] = dict.fromkeys(TIERS, 0)
    findings: list[Finding] = []

    if facts is not None:
        stores.append(_facts_summary(facts))
        # The facts file is the profile tier (docs/reference.md#verdicts): read by key, injected
        # whole.
        tiers["profile"] += len(facts.entries)
        findings.extend(facts_file_findings(facts, settings.stale_after_days, options.now))

    for one in [store, *others]:
        if one is None:
            continue
        store = one
        # every collection but the libraries' own bookkeeping (mem0's mem0migrations), which
        # is listed as skipped
        names = [collection] if collection and store.kind != "file" else store.memory_collections()
        if not collection:
            for name in sorted(set(store.collection_names()) - set(names)):
                stores.append(_skipped_summary(store, store.collection_info(name)))
        for name in names:
            info = store.collection_info(name)

            def _read_tick(done: int, total: int) -> None:
                if progress is not None:
                    progress(done, 2 * total)

            # read as its library wrote it (text where the library keeps it), one tenant
            memories = store.memories(name, options.page_size, _read_tick)
            stores.append(_collection_summary(store, info, memories))
            data = memories.data
            found, counts = audit_collection(data, info, facts, settings, options, progress)
            findings.extend(found)
            for tier, k in counts.items():
                tiers[tier] += k
            if progress is not None:
                progress(2 * len(data.ids), 2 * len(data.ids))

    order = {s: i for i, s in enumerate(SEVERITIES)}
    kinds = {k: i for i, k in enumerate(KINDS)}
    findings.sort(key=lambda f: (order[f.severity], kinds[f.kind]))
    return AuditReport(tuple(stores), tiers, tuple(findings))
