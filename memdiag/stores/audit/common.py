"""Small helpers every finding family uses: record dates, id lists, facts-file ids."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from memdiag.stores.facts_file import FactEntry, parse_timestamp

# Metadata keys that date a record, most specific first.
TIMESTAMP_KEYS = (
    "updated_at",
    "updatedAt",
    "modified_at",
    "created_at",
    "createdAt",
    "timestamp",
    "ts",
    "time",
    "date",
    "datetime",
)


def record_timestamp(metadata: Mapping[str, Any] | None) -> datetime | None:
    """The first parseable timestamp among ``TIMESTAMP_KEYS`` (ISO strings or epoch numbers)."""
    if not metadata:
        return None
    for key in TIMESTAMP_KEYS:
        if key in metadata:
            ts = parse_timestamp(metadata[key])
            if ts is not None:
                return ts
    return None


def unique_ids(ids: Iterable[str]) -> tuple[str, ...]:
    """``ids`` in first-seen order, each once."""
    return tuple(dict.fromkeys(ids))


def fmt_time(ts: datetime | None) -> str:
    """A date for messages (``2026-01-10``), or ``undated``."""
    return ts.date().isoformat() if ts is not None else "undated"


def fact_id(e: FactEntry, current: bool = True) -> str:
    """``facts:KEY`` for a current value, ``facts:KEY@LINE`` for an older one."""
    return f"facts:{e.key}" if current or e.line is None else f"facts:{e.key}@{e.line}"
