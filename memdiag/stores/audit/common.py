"""Small helpers every finding family uses: record dates, id lists, facts-file ids."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from memdiag.stores.facts_file import FactEntry
from memdiag.stores.memories import TIMESTAMP_KEYS, record_time

# One definition of a record's date, shared with diagnose.
record_timestamp = record_time

__all__ = ["TIMESTAMP_KEYS", "fact_id", "fmt_time", "record_timestamp", "unique_ids"]


def unique_ids(ids: Iterable[str]) -> tuple[str, ...]:
    """``ids`` in first-seen order, each once."""
    return tuple(dict.fromkeys(ids))


def fmt_time(ts: datetime | None) -> str:
    """A date for messages (``2026-01-10``), or ``undated``."""
    return ts.date().isoformat() if ts is not None else "undated"


def fact_id(e: FactEntry, current: bool = True) -> str:
    """``facts:KEY`` for a current value, ``facts:KEY@LINE`` for an older one."""
    return f"facts:{e.key}" if current or e.line is None else f"facts:{e.key}@{e.line}"
