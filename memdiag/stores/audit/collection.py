"""Auditing one Chroma collection: every finding family over the same columns, in report order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from memdiag.config import AuditSettings
from memdiag.stores.audit.claims import ProfileIndex, claims_of, single_valued_subjects
from memdiag.stores.audit.common import record_timestamp
from memdiag.stores.audit.conflicts import (
    aged_findings,
    conflict_findings,
    marked_findings,
    marked_superseded,
    superseded_findings,
)
from memdiag.stores.audit.duplicates import (
    NearDuplicateSearch,
    claim_duplicates,
    duplicate_findings,
    exact_duplicates,
    tenants,
)
from memdiag.stores.audit.metadata import missing_metadata_findings
from memdiag.stores.audit.metric import space_findings, unit_vectors
from memdiag.stores.audit.report import Finding
from memdiag.stores.audit.strong import disagreement_findings, strong_fact_findings
from memdiag.stores.tiers import TIERS, tier_from_content, tier_from_metadata

if TYPE_CHECKING:
    from memdiag.stores.chroma import CollectionData, CollectionInfo
    from memdiag.stores.facts_file import FactsFile

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class RunOptions:
    """How an audit runs (not user configuration): the clock and the sizes of its work."""

    now: datetime
    page_size: int = 5000  # records per Chroma read
    block_size: int = 2048  # tile edge of the exact near-duplicate search
    near_duplicates: bool = True


def audit_collection(
    data: CollectionData,
    info: CollectionInfo,
    facts: FactsFile | None,
    settings: AuditSettings,
    options: RunOptions,
    progress: Progress | None,
) -> tuple[list[Finding], dict[str, int]]:
    """The findings of one collection and its records per memory tier."""
    from memdiag.extract import default_extractor

    meta_tiers = [tier_from_metadata(m) for m in data.metadatas]
    tiers: dict[str, int] = dict.fromkeys(TIERS, 0)
    for doc, tier in zip(data.documents, meta_tiers, strict=True):
        tiers[tier or tier_from_content(doc)] += 1

    findings = space_findings(info, unit_vectors(data.embeddings))
    tenant = tenants(data)
    groups = exact_duplicates(data, tenant)
    findings += duplicate_findings(data, groups)
    search = (
        NearDuplicateSearch.start(
            data, groups, tenant, settings.near_duplicate_threshold, options.block_size, progress
        )
        if options.near_duplicates
        else None
    )
    # Text work while the near-duplicate search runs in its thread.
    try:
        stamps = [record_timestamp(m) for m in data.metadatas]
        claims = claims_of(data, default_extractor())
        profile = ProfileIndex.of(facts)
    except BaseException:  # Ctrl-C, SIGTERM (memdiag.cli), an error: stop the search too
        if search is not None:
            search.cancel()
        raise
    # the same claim in other words: one memory stored twice, whatever the cosine
    by_claim, claim_groups = claim_duplicates(data, claims, groups)
    findings += by_claim
    if search is not None:
        findings += search.findings(claim_groups)

    subjects = single_valued_subjects(claims)
    marked = marked_superseded(data)
    findings += conflict_findings(data, subjects)
    findings += superseded_findings(data, subjects)
    findings += marked_findings(data, marked)
    findings += aged_findings(data, stamps, marked, settings.stale_after_days, options.now)
    findings += strong_fact_findings(data, claims, profile)
    findings += disagreement_findings(data, subjects, profile)
    findings += missing_metadata_findings(data, stamps, meta_tiers)
    return findings, tiers
