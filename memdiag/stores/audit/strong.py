"""strong_fact_in_vector_store and store_disagreement: the vector store against the profile.

A zero-tolerance fact (allergy, name, ...) kept only in the vector store may not be retrieved;
one the facts file states differently is a disagreement between the two stores.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memdiag.stores.audit.claims import Claim, ProfileIndex, SubjectValues
from memdiag.stores.audit.common import fact_id, unique_ids
from memdiag.stores.audit.report import SEVERITY, Finding
from memdiag.text import same_value, value_norm

if TYPE_CHECKING:
    from memdiag.stores.chroma import CollectionData


def strong_fact_findings(
    data: CollectionData, claims: Sequence[Claim], profile: ProfileIndex
) -> list[Finding]:
    """strong_fact_in_vector_store: strong facts the facts file does not hold (or no file)."""
    facts = profile.facts
    # a tenant whose user is known: another person's facts are not the user's profile; where
    # every memory names its person (an MCP memory graph of entities), each is reported
    users = {c.tenant for c in claims if not c.who}
    groups: dict[tuple[tuple[str, ...], str, str, str], list[Claim]] = {}
    for c in claims:
        if not c.strong or (c.who and c.tenant in users):
            continue
        if facts is not None and profile.holds(c):
            continue
        if facts is not None and not c.multi and profile.entries(c.subject):
            continue  # the facts file has another value: a store disagreement
        groups.setdefault((c.tenant, c.who, c.subject, value_norm(c.value)), []).append(c)
    where = "no facts file was given" if facts is None else "the facts file lacks it"
    kept = "vector store" if data.embeddings is not None else "memory store"
    return [
        Finding(
            "strong_fact_in_vector_store",
            SEVERITY["strong_fact_in_vector_store"],
            unique_ids(data.ids[c.record] for c in group),
            f"strong fact {subject} = {group[0].value!r}"
            + (f" about {who}" if who else "")
            + (f" ({group[0].tenant_label()})" if group[0].tenant_label() else "")
            + f" lives only in the {kept} "
            f"({where}); retrieval may miss it, store it under an exact key",
            data.name,
        )
        for (_tenant, who, subject, _v), group in groups.items()
    ]


def disagreement_findings(
    data: CollectionData, subjects: Sequence[SubjectValues], profile: ProfileIndex
) -> list[Finding]:
    """store_disagreement: the facts file's value differs from the store's current value."""
    if profile.facts is None:
        return []
    findings: list[Finding] = []
    for s in subjects:
        if s.who:  # the facts file is the user's profile, not Tom's
            continue
        entries = profile.entries(s.subject)
        current = s.current_values
        if not entries or not current:
            continue
        if any(same_value(e.value, c.value) for e in entries for c in current):
            continue
        fact = entries[-1]
        findings.append(
            Finding(
                "store_disagreement",
                SEVERITY["store_disagreement"],
                unique_ids([fact_id(fact)] + [data.ids[c.record] for c in current]),
                f"{s.shown}: facts file says {fact.key} = {fact.value!r} but the vector store "
                f"says {current[0].value!r}",
                data.name,
            )
        )
    return findings
