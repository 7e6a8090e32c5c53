"""missing_metadata: records without a date or a tier, so staleness and tiers are guessed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from memdiag.stores.audit.common import TIMESTAMP_KEYS, unique_ids
from memdiag.stores.audit.report import SEVERITY, Finding
from memdiag.stores.tiers import MemoryTier

if TYPE_CHECKING:
    from memdiag.stores.chroma import CollectionData


def missing_metadata_findings(
    data: CollectionData,
    stamps: Sequence[datetime | None],
    meta_tiers: Sequence[MemoryTier | None],
) -> list[Finding]:
    """One finding per collection (not one per record) naming what is missing."""
    n = len(data.ids)
    no_ts = [i for i in range(n) if stamps[i] is None]
    no_tier = [i for i in range(n) if meta_tiers[i] is None]
    if not (no_ts or no_tier):
        return []
    parts = []
    if no_ts:
        parts.append(f"{len(no_ts)} without a timestamp ({'/'.join(TIMESTAMP_KEYS[:4])}…)")
    if no_tier:
        # The user-facing word is the docs' "layer" (the metadata key is `layer` too).
        parts.append(f"{len(no_tier)} without layer metadata (layer/type/kind…)")
    return [
        Finding(
            "missing_metadata",
            SEVERITY["missing_metadata"],
            unique_ids(data.ids[i] for i in sorted(set(no_ts) | set(no_tier))),
            f"collection {data.name!r}: "
            + " and ".join(parts)
            + "; staleness and layers are guessed for them",
            data.name,
        )
    ]
