"""Subjects: which record says what about which field, and what the facts file says.

A subject is an extraction field (``memdiag.extract``: name, location, timezone, ...) or an
explicit metadata key (``key``/``subject``/``field``). Only single-valued fields can conflict;
multi-valued ones (allergies, preferences, prohibitions) accumulate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from memdiag.extract import field_for_key
from memdiag.stores.facts_file import FactEntry, FactsFile
from memdiag.text import as_first_person, same_value

if TYPE_CHECKING:
    from memdiag.extract import Extraction, Extractor
    from memdiag.stores.chroma import CollectionData

# Metadata keys that name the subject a record is about (a key-value memory written as text).
SUBJECT_KEYS = ("key", "fact_key", "subject", "field", "attribute", "slot")
VALUE_KEYS = ("value", "fact_value", "object")


@dataclass(frozen=True)
class Claim:
    """One value one record states about one subject."""

    record: int  # index in the collection
    subject: str  # field or normalized metadata key
    value: str
    strong: bool
    multi: bool
    ts: datetime | None


def claims_of(
    data: CollectionData, extractor: Extractor, stamps: Sequence[datetime | None]
) -> list[Claim]:
    """Every claim of every record, in record order."""
    out: list[Claim] = []
    for i, (doc, meta) in enumerate(zip(data.documents, data.metadatas, strict=True)):
        subject_key = next(
            (meta[k] for k in SUBJECT_KEYS if isinstance(meta.get(k), str) and meta[k].strip()),
            None,
        )
        extractions: list[Extraction] = extractor.extract(as_first_person(doc)) if doc else []
        if subject_key is not None:
            # An explicit key outranks what the text seems to say about other fields.
            subject = field_for_key(subject_key)
            value = next(
                (str(meta[k]) for k in VALUE_KEYS if isinstance(meta.get(k), (str, int, float))),
                None,
            )
            if value is None:
                same = [e for e in extractions if e.field == subject]
                value = same[0].value if same else (doc or "")
            strong = extractor.is_strong(subject) or any(
                e.strong for e in extractions if e.field == subject
            )
            out.append(Claim(i, subject, value, strong, extractor.is_multi(subject), stamps[i]))
            continue
        for e in extractions:
            out.append(Claim(i, e.field, e.value, e.strong, extractor.is_multi(e.field), stamps[i]))
    return out


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

    @property
    def current_values(self) -> list[Claim]:
        """The current value's claims, or every claim when nothing dates them."""
        return self.current if self.current else [c for cl in self.clusters for c in cl]


def single_valued_subjects(claims: Sequence[Claim]) -> list[SubjectValues]:
    """One ``SubjectValues`` per single-valued subject, in order of first claim."""
    subjects: dict[str, list[Claim]] = {}
    for c in claims:
        if not c.multi:
            subjects.setdefault(c.subject, []).append(c)
    out: list[SubjectValues] = []
    for subject, group in subjects.items():
        clusters = cluster_values(group)
        dated = all(c.ts is not None for c in group)
        latest = max(group, key=lambda c: (c.ts, c.record)) if dated else None
        current = next(cl for cl in clusters if latest in cl) if latest else None
        out.append(SubjectValues(subject, clusters, latest, current))
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
