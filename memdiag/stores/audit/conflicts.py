"""conflict and stale in a collection: different values of one subject, superseded records,
and (optionally) records older than ``stale_after_days``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from memdiag.stores.audit.claims import SubjectValues
from memdiag.stores.audit.common import fmt_time, stale_cutoff, unique_ids
from memdiag.stores.audit.report import SEVERITY, Finding

if TYPE_CHECKING:
    from memdiag.stores.chroma import CollectionData

SUPERSEDED_STATUS = frozenset(
    {"superseded", "outdated", "obsolete", "deprecated", "archived", "deleted", "invalid"}
)


def conflict_findings(data: CollectionData, subjects: Sequence[SubjectValues]) -> list[Finding]:
    """conflict: a single-valued subject with more than one value in the collection."""
    findings: list[Finding] = []
    for s in subjects:
        if len(s.clusters) < 2:
            continue
        shown = "; ".join(
            f"{cl[0].value!r} ({', '.join(fmt_time(c.ts) for c in cl)})" for cl in s.clusters
        )
        tail = (
            f"the newest says {s.latest.value!r}"
            if s.latest is not None
            else "without timestamps nothing tells which is current"
        )
        findings.append(
            Finding(
                "conflict",
                SEVERITY["conflict"],
                unique_ids(data.ids[c.record] for cl in s.clusters for c in cl),
                f"{s.shown}: the store holds different values: {shown}; {tail}",
                data.name,
            )
        )
    return findings


def superseded_findings(data: CollectionData, subjects: Sequence[SubjectValues]) -> list[Finding]:
    """stale: older values of a conflicting subject, still retrievable beside the newest."""
    findings: list[Finding] = []
    for s in subjects:
        latest, current = s.latest, s.current
        if len(s.clusters) < 2 or latest is None or current is None:
            continue
        older = [
            c
            for cl in s.clusters
            if cl is not current
            for c in cl
            if c.ts is not None and latest.ts is not None and c.ts < latest.ts
        ]
        if older:
            findings.append(
                Finding(
                    "stale",
                    SEVERITY["stale"],
                    unique_ids(data.ids[c.record] for c in older),
                    f"{s.shown}: {', '.join(repr(c.value) for c in older)} superseded by "
                    f"{latest.value!r} ({fmt_time(latest.ts)}), still retrievable; "
                    "delete or mark superseded",
                    data.name,
                )
            )
    return findings


def marked_superseded(data: CollectionData) -> list[int]:
    """Records whose metadata marks them superseded (``superseded_by``, ``status``)."""
    return [
        i
        for i, m in enumerate(data.metadatas)
        if m.get("superseded_by") or str(m.get("status", "")).lower() in SUPERSEDED_STATUS
    ]


def marked_findings(data: CollectionData, marked: Sequence[int]) -> list[Finding]:
    """stale: records marked superseded that are still in the collection."""
    if not marked:
        return []
    return [
        Finding(
            "stale",
            SEVERITY["stale"],
            unique_ids(data.ids[i] for i in marked),
            f"{len(marked)} record(s) marked superseded are still in the collection and "
            "retrievable",
            data.name,
        )
    ]


def aged_findings(
    data: CollectionData,
    stamps: Sequence[datetime | None],
    marked: Sequence[int],
    stale_after_days: float | None,
    now: datetime,
) -> list[Finding]:
    """stale: records older than ``stale_after_days`` (None: age alone is never stale)."""
    if stale_after_days is None:
        return []
    limit = stale_cutoff(now, stale_after_days)
    if limit is None:
        return []
    already = set(marked)  # built once: `in set(marked)` per record was O(records × marked)
    aged = [i for i, ts in enumerate(stamps) if ts is not None and ts < limit and i not in already]
    if not aged:
        return []
    oldest = min(ts for i in aged if (ts := stamps[i]) is not None)
    return [
        Finding(
            "stale",
            SEVERITY["stale"],
            unique_ids(data.ids[i] for i in aged),
            f"{len(aged)} record(s) older than {stale_after_days:g} days "
            f"(oldest {fmt_time(oldest)})",
            data.name,
        )
    ]
