"""What stored memories say, for the audit and for diagnose alike (SPEC §6, §7).

One reading of a record: its facts in any phrasing (``Extractor.read_memory``: text and
key/category metadata), its tenant (mem0's user/agent/run ids) and its date. Conflicts and stale
values come from the text *and* from metadata: two records of one tenant with the same key (or
the same single-valued field) and different values contradict each other, and the older one
(``updated_at``/``created_at``) is superseded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memdiag.stores.layouts import tenant_of
from memdiag.text import same_value

if TYPE_CHECKING:
    from memdiag.extract import Extractor
    from memdiag.stores.chroma import Hit

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


def record_time(metadata: Mapping[str, Any] | None) -> datetime | None:
    """The first parseable timestamp among ``TIMESTAMP_KEYS`` (ISO strings or epoch numbers)."""
    from memdiag.stores.facts_file import parse_timestamp

    if not metadata:
        return None
    for key in TIMESTAMP_KEYS:
        if key in metadata:
            ts = parse_timestamp(metadata[key])
            if ts is not None:
                return ts
    return None


@dataclass(frozen=True)
class Claim:
    """One fact one record states."""

    record: int  # index in the collection (or in the list of hits)
    subject: str  # extraction field, or a normalized metadata key
    value: str
    strong: bool
    multi: bool  # values accumulate (allergies), so different values do not conflict
    ts: datetime | None
    tenant: tuple[str, ...] = ("", "", "")  # (user_id, agent_id, run_id), "" when absent
    source: str = "text"  # the rule id, or metadata.key / metadata.category
    who: str = ""  # the person the sentence names when it is not the user ("Tom Becker")

    def tenant_label(self) -> str:
        """``user_id=mia`` (empty for a store without tenants)."""
        from memdiag.stores.layouts import TENANT_KEYS

        return ", ".join(f"{k}={v}" for k, v in zip(TENANT_KEYS, self.tenant, strict=True) if v)


def claims(
    documents: Sequence[str | None],
    metadatas: Sequence[Mapping[str, Any]],
    extractor: Extractor | None = None,
) -> list[Claim]:
    """Every fact of every record, in record order."""
    from memdiag.extract import default_extractor

    ex = extractor or default_extractor()
    out: list[Claim] = []
    for i, (doc, meta) in enumerate(zip(documents, metadatas, strict=True)):
        meta = meta if isinstance(meta, Mapping) else {}
        facts = ex.read_memory(doc, meta)
        if not facts:
            continue
        ts = record_time(meta)
        tenant = tenant_of(meta)
        for e in facts:
            out.append(
                Claim(i, e.field, e.value, e.strong, ex.is_multi(e.field), ts, tenant, e.rule)
            )
    return out


@dataclass(frozen=True)
class Contradiction:
    """A retrieved record that gives another value for a field the fact states."""

    id: str
    rank: int
    field: str
    value: str
    document: str
    how: str  # "text" or "metadata.key": where the field came from
    older: bool | None  # older than the fact's own record (None: a date is missing)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "rank": self.rank,
            "field": self.field,
            "value": self.value.casefold(),
            "document": self.document,
            "how": self.how,
            "older": self.older,
        }


def contradictions(
    fact: str,
    own_text: str,
    own_metadata: Mapping[str, Any],
    hits: Sequence[Hit],
    own_ids: set[str],
    extractor: Extractor | None = None,
) -> list[Contradiction]:
    """Hits that give another value for a single-valued field the fact (or its record) states.

    The field may come from the text ("User lives in Berlin") or from metadata (the same
    ``key``); only records of the same tenant can contradict each other.
    """
    from memdiag.extract import default_extractor

    ex = extractor or default_extractor()
    wanted: dict[str, str] = {}
    for e in [*ex.read_memory(fact), *ex.read_memory(own_text, own_metadata)]:
        if not ex.is_multi(e.field):
            wanted.setdefault(e.field, e.value)
    if not wanted:
        return []
    own_tenant = tenant_of(own_metadata)
    own_ts = record_time(own_metadata)
    out: list[Contradiction] = []
    for h in hits:
        if h.id in own_ids or not h.document:
            continue
        if tenant_of(h.metadata) != own_tenant:
            continue
        for e in ex.read_memory(h.document, h.metadata):
            if e.field not in wanted or same_value(e.value, wanted[e.field]):
                continue
            ts = record_time(h.metadata)
            older = None if ts is None or own_ts is None else ts < own_ts
            how = "metadata.key" if e.rule == "metadata.key" else "text"
            out.append(Contradiction(h.id, h.rank, e.field, e.value, h.document, how, older))
            break
    return out
