"""What stored memories say, for the audit and for diagnose alike (docs/reference.md#stores, §7).

One reading of a record: its facts in any phrasing (``Extractor.read_memory``: text and
key/category metadata), its tenant (mem0's user/agent/run ids) and its date. Conflicts and stale
values come from the text *and* from metadata: two records of one tenant with the same key (or
the same single-valued field) and different values contradict each other, and the older one
(``updated_at``/``created_at``) is superseded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memdiag.stores.layouts import tenant_of
from memdiag.subjects import memory_subject
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
        # the sentence's named subject, or the entity the library filed it under (MCP memory)
        entity = meta.get("entity")
        who = memory_subject(doc) or (entity if isinstance(entity, str) else "")
        for e in facts:
            out.append(
                Claim(i, e.field, e.value, e.strong, ex.is_multi(e.field), ts, tenant, e.rule, who)
            )
    return resolve_subjects(out)


def resolve_subjects(found: Sequence[Claim]) -> list[Claim]:
    """The claims with each named subject that is the user rewritten as the user ("").

    Within one tenant, a name the store gives the user ("Name is Mia Lopez", "The traveler's
    name is Mia Lopez") makes "Mia lives in Berlin" the user's; a tenant that names no user but
    only one person ("Mia lives in Berlin", "Mia moved to Lisbon") is about that person, the
    user. Anyone else ("Tom Becker lives in Paris") stays a subject of their own: their facts
    never conflict with the user's.
    """
    user_names: dict[tuple[str, ...], list[str]] = {}
    people: dict[tuple[str, ...], set[str]] = {}
    for c in found:
        if c.who:
            people.setdefault(c.tenant, set()).add(c.who)
        elif c.subject == "name":
            user_names.setdefault(c.tenant, []).append(c.value)
    if not people:
        return list(found)
    # a person's own entity line ("Mia Lopez(Person): ...") names the person, not the user
    user: dict[tuple[str, ...], set[str]] = {}
    for tenant, names in people.items():
        known = user_names.get(tenant, [])
        if known:
            user[tenant] = {p for p in names if any(same_value(p, n) for n in known)}
        elif len({n.split()[0] for n in names}) == 1:  # "Mia" and "Mia Lopez": one person
            user[tenant] = set(names)
    return [replace(c, who="") if c.who and c.who in user.get(c.tenant, ()) else c for c in found]


# entity names that are the user: the MCP memory server's README prompt files the user as
# "default_user"
USER_ENTITIES = frozenset({"user", "default_user", "the user", "me"})


@dataclass(frozen=True)
class Subjects:
    """Whom each record of a collection is about ("" the user), and the user's names."""

    who: tuple[str, ...]
    user_names: Mapping[tuple[str, ...], tuple[str, ...]]  # per tenant: "Name is Mia Lopez"

    def about(
        self, record: int, tenant: tuple[str, ...], fact: str, user: Sequence[str] = ()
    ) -> bool:
        """Whether ``record`` is about the person ``fact`` is about: the user, unless the fact's
        sentence names someone neither the store nor ``user`` (the names the user gave in the
        transcript: "I'm Mia") call the user."""
        names = (*self.user_names.get(tenant, ()), *user)

        def resolved(who: str) -> str:
            if who.casefold() in USER_ENTITIES:
                return ""
            return "" if who and any(same_person(who, n) for n in names) else who

        return same_person(resolved(memory_subject(fact) or ""), resolved(self.who[record]))


def subjects(
    documents: Sequence[str | None],
    metadatas: Sequence[Mapping[str, Any]],
    extractor: Extractor | None = None,
) -> Subjects:
    """Whom each record is about (``claims`` and ``resolve_subjects``).

    A record that states no fact memdiag reads is still somebody's: the person its sentence
    or its entity (MCP memory) names, resolved against the names the store gives the user.
    """
    from memdiag.extract import default_extractor

    ex = extractor or default_extractor()
    found = claims(documents, metadatas, ex)
    stated = {c.record for c in found}
    for i, (doc, meta) in enumerate(zip(documents, metadatas, strict=True)):
        if i in stated:
            continue
        meta = meta if isinstance(meta, Mapping) else {}
        entity = meta.get("entity")
        who = memory_subject(doc) or (entity if isinstance(entity, str) else "")
        if who.casefold() in USER_ENTITIES:
            continue
        if who:  # a claim of nothing, so that resolve_subjects says who this person is
            found.append(Claim(i, "", "", False, True, None, tenant_of(meta), "", who))
    out = [""] * len(documents)
    names: dict[tuple[str, ...], list[str]] = {}
    for c in resolve_subjects(found):
        if c.who:
            out[c.record] = c.who
        elif c.subject == "name":
            names.setdefault(c.tenant, []).append(c.value)
    return Subjects(tuple(out), {t: tuple(v) for t, v in names.items()})


def same_person(a: str, b: str) -> bool:
    """Two resolved subjects are one: "" (the user) only with itself; "Tom" and "Tom Becker"
    are one person (one name starts the other), "Tom Becker" and "Tom Smith" are two."""
    if not a or not b:
        return a == b
    x, y = a.casefold().split(), b.casefold().split()
    n = min(len(x), len(y))
    return x[:n] == y[:n] or same_value(a, b)


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
    ``key``); only records of the same tenant and the same named subject can contradict each
    other ("Tom Becker lives in Paris" is not the user's city; ``resolve_subjects`` over the
    record and the hits says who the user is).
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
    readable = [h for h in hits if h.document]
    found = claims(
        [own_text, *(h.document for h in readable)],
        [own_metadata, *(h.metadata for h in readable)],
        ex,
    )
    who = {c.record: c.who for c in found}  # 0: the fact's own record, n: readable[n - 1]
    own_who = who.get(0, "")
    hit_who = {readable[r - 1].id: w for r, w in who.items() if r}
    out: list[Contradiction] = []
    for h in hits:
        if h.id in own_ids or not h.document:
            continue
        if tenant_of(h.metadata) != own_tenant or hit_who.get(h.id, "") != own_who:
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
