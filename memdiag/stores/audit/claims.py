"""Subjects: which record says what about which field, and what the facts file says.

A subject is an extraction field (``memdiag.extract``: name, location, timezone, ...) or an
explicit metadata key (``key``/``subject``/``field``). Only single-valued fields can conflict;
multi-valued ones (allergies, preferences, prohibitions) accumulate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memdiag.fields import field_for_key
from memdiag.stores.facts_file import FactEntry, FactsFile
from memdiag.stores.memories import Claim, claims
from memdiag.text import same_value

if TYPE_CHECKING:
    from memdiag.extract import Extractor
    from memdiag.stores.chroma import CollectionData

__all__ = ["Claim", "ProfileIndex", "SubjectValues", "claims_of", "single_valued_subjects"]


def claims_of(data: CollectionData, extractor: Extractor) -> list[Claim]:
    """Every claim of every record, in record order: text in any phrasing, key/category
    metadata (``Extractor.read_memory``), each with its tenant and date."""
    return claims(data.documents, data.metadatas, extractor)


def cluster_values(claims: Sequence[Claim]) -> list[list[Claim]]:
    """Claims grouped by value (``same_value``), in first-seen order."""
    clusters: list[list[Claim]] = []
    for c in claims:
        for cl in clusters:
            if same_value(cl[0].value, c.value):
                cl.append(c)
                break
        else:
            clusters.append([c])
    return clusters


@dataclass(frozen=True)
class SubjectValues:
    """The values a collection holds for one single-valued subject."""

    subject: str
    clusters: list[list[Claim]]  # one per distinct value
    latest: Claim | None  # the newest claim, when every claim is dated
    current: list[Claim] | None  # the cluster holding ``latest``
    tenant: str = ""  # "user_id=mia" in a multi-tenant store
    who: str = ""  # the person the records name, when not the user ("Tom Becker")

    @property
    def shown(self) -> str:
        """The subject as messages name it: ``location``, ``location (user_id=mia)``, or
        ``location of Tom Becker``."""
        name = f"{self.subject} of {self.who}" if self.who else self.subject
        return f"{name} ({self.tenant})" if self.tenant else name

    @property
    def current_values(self) -> list[Claim]:
        """The current value's claims, or every claim when nothing dates them."""
        return self.current if self.current else [c for cl in self.clusters for c in cl]


def single_valued_subjects(found: Sequence[Claim]) -> list[SubjectValues]:
    """One ``SubjectValues`` per single-valued subject of each tenant, in order of first claim.

    Tenants (mem0's user/agent/run ids) never contradict each other, and neither do the people
    sentences name: Tom living in Paris is no conflict with Mia living in Lisbon, whether Tom
    is another user_id or "Tom Becker lives in Paris" in Mia's store.
    """
    subjects: dict[tuple[tuple[str, ...], str, str], list[Claim]] = {}
    for c in found:
        if not c.multi:
            subjects.setdefault((c.tenant, c.who, c.subject), []).append(c)
    out: list[SubjectValues] = []
    for (_tenant, who, name), group in subjects.items():
        clusters = cluster_values(group)
        dated = all(c.ts is not None for c in group)
        latest = max(group, key=lambda c: (c.ts, c.record)) if dated else None
        current = next(cl for cl in clusters if latest in cl) if latest else None
        out.append(SubjectValues(name, clusters, latest, current, group[0].tenant_label(), who))
    return out


@dataclass(frozen=True)
class ProfileIndex:
    """The facts file (the profile) by extraction field, to compare the vector store with."""

    facts: FactsFile | None
    by_field: Mapping[str, list[FactEntry]] = field(default_factory=dict)

    @classmethod
    def of(cls, facts: FactsFile | None) -> ProfileIndex:
        """Index ``facts`` (or nothing, when no facts file was given)."""
        by_field: dict[str, list[FactEntry]] = {}
        if facts is not None:
            for e in facts.entries:
                by_field.setdefault(field_for_key(e.key), []).append(e)
        return cls(facts, by_field)

    def entries(self, subject: str) -> list[FactEntry]:
        """The facts-file entries whose key maps to ``subject``."""
        return self.by_field.get(subject, [])

    def holds(self, c: Claim) -> bool:
        """Whether the facts file states the claim's value (under its field, or anywhere)."""
        from memdiag.facts import match

        assert self.facts is not None
        for e in self.entries(c.subject):
            parts = [e.value, *re.split(r"\s*[,;，；、]\s*", e.value)]
            if any(same_value(p, c.value) for p in parts if p):
                return True
        # The value may sit under a key memdiag cannot map ("notes": "no peanuts, ever").
        return any(match(c.value, e.value) is not None for e in self.facts.entries)
