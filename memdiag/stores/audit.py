"""Auditing long-term stores: the facts file and Chroma collections (SPEC §5, §6).

Finding kinds and their severities:

=============================  ========  =====================================================
kind                           severity  why
=============================  ========  =====================================================
conflict                       error     two different values for one subject are both
                                         retrievable (or both keys of a facts file are read)
store_disagreement             error     the profile (facts file) says one thing, the vector
                                         store's current value another
stale                          warning   an older value of an updated subject (or a record
                                         marked superseded / older than ``stale_after_days``)
                                         can still be retrieved; *info* for superseded values
                                         kept as history in a facts file, which readers skip
strong_fact_in_vector_store    warning   a zero-tolerance fact lives only in the vector store
duplicate                      warning   identical records waste top-k slots
distance_metric                warning   L2 space over unnormalized vectors, or configuration
                                         and legacy metadata disagree; *info* for L2 over
                                         unit vectors (ranking equals cosine, scores do not)
near_duplicate                 info      near-identical records may be legitimate paraphrases
missing_metadata               info      no timestamp or layer metadata: staleness and layers
                                         cannot be judged
=============================  ========  =====================================================

A subject is an extraction field (``memdiag.extract``: name, location, timezone, ...) or an
explicit metadata key (``key``/``subject``/``field``). Only single-valued fields can conflict;
multi-valued ones (allergies, preferences, prohibitions) accumulate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from memdiag.extract import field_for_key
from memdiag.stores.facts_file import FactEntry, FactsFile, parse_timestamp
from memdiag.stores.layers import LAYERS, layer_from_content, layer_from_metadata
from memdiag.text import as_first_person, normalize_document, same_value, value_norm

if TYPE_CHECKING:
    from memdiag.extract import Extraction, Extractor
    from memdiag.stores.chroma import ChromaStore, CollectionData, CollectionInfo

Progress = Callable[[int, int], None]

KINDS = (
    "duplicate",
    "near_duplicate",
    "conflict",
    "stale",
    "strong_fact_in_vector_store",
    "distance_metric",
    "missing_metadata",
    "store_disagreement",
)
SEVERITY = {
    "conflict": "error",
    "store_disagreement": "error",
    "stale": "warning",
    "strong_fact_in_vector_store": "warning",
    "duplicate": "warning",
    "distance_metric": "warning",
    "near_duplicate": "info",
    "missing_metadata": "info",
}
SEVERITIES = ("error", "warning", "info")

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
# Metadata keys that name the subject a record is about (a key-value memory written as text).
SUBJECT_KEYS = ("key", "fact_key", "subject", "field", "attribute", "slot")
VALUE_KEYS = ("value", "fact_value", "object")
SUPERSEDED_STATUS = frozenset(
    {"superseded", "outdated", "obsolete", "deprecated", "archived", "deleted", "invalid"}
)



@dataclass(frozen=True)
class AuditSettings:
    """Knobs of the audit; defaults follow SPEC §6."""

    near_duplicate_threshold: float = 0.95
    stale_after_days: float | None = None  # None: age alone never makes a record stale
    now: datetime | None = None  # reference time for ages (default: the current time)
    page_size: int = 5000
    block_size: int = 4096  # tile edge of the exact near-duplicate search
    near_duplicates: bool = True


@dataclass(frozen=True)
class Finding:
    """One problem in a store. ``ids`` are record ids, or ``facts:KEY`` / ``facts:KEY@LINE``."""

    kind: str
    severity: str
    ids: tuple[str, ...]
    message: str
    collection: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of SPEC §5 (``kind``, ``severity``, ``ids``, ``message``, ...)."""
        return {
            "kind": self.kind,
            "severity": self.severity,
            "ids": list(self.ids),
            "message": self.message,
            "collection": self.collection,
        }


@dataclass(frozen=True)
class AuditReport:
    """Everything ``inspect-store`` reports: stores, layer counts, findings."""

    stores: list[dict[str, Any]]
    layers: dict[str, int]
    findings: list[Finding]

    def to_dict(self) -> dict[str, Any]:
        """The ``inspect-store --format json`` payload."""
        return {
            "stores": self.stores,
            "layers": self.layers,
            "findings": [f.to_dict() for f in self.findings],
        }

    def count(self, kind: str) -> int:
        """How many findings of ``kind``."""
        return sum(1 for f in self.findings if f.kind == kind)

    def by_kind(self) -> dict[str, int]:
        """Finding counts for every kind (zeros included)."""
        return {k: self.count(k) for k in KINDS}


# -- small helpers ------------------------------------------------------------------------------


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


def _ids(ids: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(ids))


def _fmt_time(ts: datetime | None) -> str:
    return ts.date().isoformat() if ts is not None else "undated"


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        ri, rj = self.find(i), self.find(j)
        if ri != rj:
            self.parent[max(ri, rj)] = min(ri, rj)

    def groups(self, members: Iterable[int]) -> list[list[int]]:
        out: dict[int, list[int]] = {}
        for i in members:
            out.setdefault(self.find(i), []).append(i)
        return [sorted(g) for g in out.values() if len(g) > 1]


# -- subjects: what each record says about which field --------------------------------------


@dataclass(frozen=True)
class _Claim:
    record: int  # index in the collection
    subject: str  # field or normalized metadata key
    value: str
    strong: bool
    multi: bool
    ts: datetime | None


def _claims(
    data: CollectionData, extractor: Extractor, stamps: Sequence[datetime | None]
) -> list[_Claim]:
    out: list[_Claim] = []
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
            out.append(_Claim(i, subject, value, strong, extractor.is_multi(subject), stamps[i]))
            continue
        for e in extractions:
            out.append(
                _Claim(i, e.field, e.value, e.strong, extractor.is_multi(e.field), stamps[i])
            )
    return out


def _cluster_values(claims: Sequence[_Claim]) -> list[list[_Claim]]:
    clusters: list[list[_Claim]] = []
    for c in claims:
        for cl in clusters:
            if same_value(cl[0].value, c.value):
                cl.append(c)
                break
        else:
            clusters.append([c])
    return clusters


# -- facts file ---------------------------------------------------------------------------------


def _fact_id(e: FactEntry, current: bool = True) -> str:
    return f"facts:{e.key}" if current or e.line is None else f"facts:{e.key}@{e.line}"


def _audit_facts(facts: FactsFile, settings: AuditSettings, now: datetime) -> list[Finding]:
    findings: list[Finding] = []
    for col in facts.normalization_collisions:
        entries = [e for e in facts.entries if e.normalized_key == col.normalized_key]
        if (
            len(
                _cluster_values(
                    [_Claim(0, col.normalized_key, e.value, False, False, None) for e in entries]
                )
            )
            > 1
        ):
            shown = "; ".join(f"{e.key!r} = {e.value!r}" for e in entries)
            findings.append(
                Finding(
                    "conflict",
                    "error",
                    _ids(_fact_id(e) for e in entries),
                    f"facts file keys normalize to {col.normalized_key!r} but disagree: {shown}; "
                    "an exact-key reader gets whichever spelling it asks for",
                )
            )
    for key, history in facts.history.items():
        current = facts.lookup(key)
        older = [e for e in history if e is not current]
        differing = [e for e in older if current is None or not same_value(e.value, current.value)]
        if not differing or current is None:
            continue
        if facts.shape != "records":
            # A JSON object with a repeated key: parsers disagree on which one wins.
            findings.append(
                Finding(
                    "conflict",
                    "error",
                    _ids([_fact_id(current)] + [_fact_id(e, False) for e in differing]),
                    f"facts file repeats key {key!r} with different values "
                    f"({', '.join(repr(e.value) for e in [*differing, current])}); JSON readers "
                    "keep the last one, others may not",
                )
            )
            continue
        for e in differing:
            findings.append(
                Finding(
                    "stale",
                    "info",
                    (_fact_id(e, False), _fact_id(current)),
                    f"facts file: {key} = {e.value!r} ({_fmt_time(e.timestamp)}, "
                    f"line {e.line}) was "
                    f"superseded by {current.value!r} ({_fmt_time(current.timestamp)}); kept as "
                    "history, readers use the current value",
                )
            )
    if settings.stale_after_days is not None:
        limit = now - timedelta(days=settings.stale_after_days)
        old = [e for e in facts.entries if e.timestamp is not None and e.timestamp < limit]
        if old:
            findings.append(
                Finding(
                    "stale",
                    "warning",
                    _ids(_fact_id(e) for e in old),
                    f"{len(old)} facts file value(s) not updated for more than "
                    f"{settings.stale_after_days:g} days: "
                    + ", ".join(f"{e.key} ({_fmt_time(e.timestamp)})" for e in old[:10]),
                )
            )
    return findings


def _facts_by_field(facts: FactsFile | None) -> dict[str, list[FactEntry]]:
    out: dict[str, list[FactEntry]] = {}
    if facts is not None:
        for e in facts.entries:
            out.setdefault(field_for_key(e.key), []).append(e)
    return out


def _facts_hold(facts: FactsFile, by_field: Mapping[str, list[FactEntry]], c: _Claim) -> bool:
    from memdiag.facts import match

    for e in by_field.get(c.subject, []):
        parts = [e.value, *re.split(r"\s*[,;，；、]\s*", e.value)]
        if any(same_value(p, c.value) for p in parts if p):
            return True
    # The value may sit under a key memdiag cannot map ("notes": "no peanuts, ever").
    return any(match(c.value, e.value) is not None for e in facts.entries)


# -- one collection -----------------------------------------------------------------------------


def _space_findings(info: CollectionInfo, unit_vectors: bool | None) -> list[Finding]:
    out: list[Finding] = []
    name = info.name
    if info.space_disagreement:
        out.append(
            Finding(
                "distance_metric",
                "warning",
                (),
                f"collection {name!r}: configuration says space {info.configured_space!r} but "
                f"legacy metadata hnsw:space says {info.legacy_space!r}; clients that read one "
                "and not the other interpret distances wrongly",
                name,
            )
        )
    if info.space == "l2":
        if unit_vectors:
            out.append(
                Finding(
                    "distance_metric",
                    "info",
                    (),
                    f"collection {name!r} uses L2 distance; its vectors are normalized, so "
                    "ranking equals cosine, but a consumer computing 1 - distance as cosine "
                    "similarity gets "
                    "wrong scores (L2² = 2 - 2·cos) and wrong thresholds",
                    name,
                )
            )
        else:
            out.append(
                Finding(
                    "distance_metric",
                    "warning",
                    (),
                    f"collection {name!r} uses L2 distance over unnormalized vectors: ranking "
                    "differs "
                    "from cosine, and 1 - distance is not a similarity; recreate it with "
                    "configuration={'hnsw': {'space': 'cosine'}}",
                    name,
                )
            )
    return out


def _audit_collection(
    data: CollectionData,
    info: CollectionInfo,
    facts: FactsFile | None,
    settings: AuditSettings,
    now: datetime,
    progress: Progress | None,
) -> tuple[list[Finding], dict[str, int]]:
    import numpy as np

    from memdiag.extract import default_extractor
    from memdiag.stores.neardup import near_duplicate_pairs

    name = data.name
    n = len(data.ids)
    ids = data.ids
    findings: list[Finding] = []
    layers = dict.fromkeys(LAYERS, 0)
    meta_layers = [layer_from_metadata(m) for m in data.metadatas]
    for doc, layer in zip(data.documents, meta_layers, strict=True):
        layers[layer or layer_from_content(doc)] += 1

    emb = data.embeddings
    unit: bool | None = None
    if emb is not None and len(emb):
        norms = np.sqrt(np.einsum("ij,ij->i", emb, emb, dtype=np.float64))
        unit = bool(np.all(np.abs(norms - 1.0) < 1e-3))
    findings.extend(_space_findings(info, unit))

    # Exact duplicates: same normalized text, or bit-identical vectors (hashing, not pairs).
    uf = _UnionFind(n)
    by_text: dict[str, int] = {}
    by_vec: dict[bytes, int] = {}
    for i, doc in enumerate(data.documents):
        if doc and doc.strip():
            first = by_text.setdefault(normalize_document(doc), i)
            if first != i:
                uf.union(first, i)
        if emb is not None and len(emb):
            first = by_vec.setdefault(emb[i].tobytes(), i)
            if first != i:
                uf.union(first, i)
    dup_groups = uf.groups(range(n))
    for g in dup_groups:
        texts = {normalize_document(data.documents[i] or "") for i in g}
        how = "the same text" if len(texts) == 1 else "the same embedding"
        findings.append(
            Finding(
                "duplicate",
                SEVERITY["duplicate"],
                _ids(ids[i] for i in g),
                f"{len(g)} records hold {how}: {(data.documents[g[0]] or '')[:80]!r}; keep one",
                name,
            )
        )

    # Near duplicates: exact cosine over one representative per duplicate group.
    pending: Future[list[tuple[int, int, float]]] | None = None
    reps = np.zeros(0, dtype=np.int64)
    if settings.near_duplicates and emb is not None and len(emb) > 1:
        reps = np.array([i for i in range(n) if uf.find(i) == i], dtype=np.int64)
        # Fancy indexing copies the matrix; skip it when no record is an exact duplicate.
        reps_matrix = emb if len(reps) == n else emb[reps]
        done_base = n

        def _tick(done: int, total: int) -> None:
            if progress is not None:
                progress(done_base + done * n // max(total, 1), 2 * n)

        # numpy's matrix products release the GIL: the exact pair search runs in a worker
        # thread while this thread does the per-record text work (extraction, timestamps).
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memdiag-neardup")
        pending = pool.submit(
            near_duplicate_pairs,
            reps_matrix,
            settings.near_duplicate_threshold,
            settings.block_size,
            _tick,
        )
        pool.shutdown(wait=False)

    stamps = [record_timestamp(m) for m in data.metadatas]
    extractor = default_extractor()
    claims = _claims(data, extractor, stamps)
    by_field = _facts_by_field(facts)

    if pending is not None:
        pairs = pending.result()
        nuf = _UnionFind(len(reps))
        best: dict[int, list[float]] = {}
        for a, b, _cos in pairs:
            nuf.union(a, b)
        for a, _b, cos in pairs:
            best.setdefault(nuf.find(a), []).append(cos)
        for g in nuf.groups(range(len(reps))):
            cosines = best[nuf.find(g[0])]
            span = (
                f"{min(cosines):.3f}"
                if len(set(cosines)) == 1
                else f"{min(cosines):.3f}–{max(cosines):.3f}"
            )
            members = [int(reps[i]) for i in g]
            findings.append(
                Finding(
                    "near_duplicate",
                    SEVERITY["near_duplicate"],
                    _ids(ids[i] for i in members),
                    f"{len(members)} near-identical records (cosine {span} ≥ "
                    f"{settings.near_duplicate_threshold:g}): "
                    f"{(data.documents[members[0]] or '')[:60]!r}; merge them",
                    name,
                )
            )

    # Conflicts and superseded values, per single-valued subject.
    subjects: dict[str, list[_Claim]] = {}
    for c in claims:
        if not c.multi:
            subjects.setdefault(c.subject, []).append(c)
    current_values: dict[str, list[_Claim]] = {}
    for subject, group in subjects.items():
        clusters = _cluster_values(group)
        dated = all(c.ts is not None for c in group)
        latest = max(group, key=lambda c: (c.ts, c.record)) if dated else None
        current = next(cl for cl in clusters if latest in cl) if latest else None
        current_values[subject] = current if current else [c for cl in clusters for c in cl]
        if len(clusters) < 2:
            continue
        shown = "; ".join(
            f"{cl[0].value!r} ({', '.join(_fmt_time(c.ts) for c in cl)})" for cl in clusters
        )
        tail = (
            f"the newest says {latest.value!r}"
            if latest is not None
            else "without timestamps nothing tells which is current"
        )
        findings.append(
            Finding(
                "conflict",
                SEVERITY["conflict"],
                _ids(ids[c.record] for cl in clusters for c in cl),
                f"{subject}: the store holds different values: {shown}; {tail}",
                name,
            )
        )
        if latest is not None and current is not None:
            older = [
                c
                for cl in clusters
                if cl is not current
                for c in cl
                if c.ts is not None and latest.ts is not None and c.ts < latest.ts
            ]
            if older:
                findings.append(
                    Finding(
                        "stale",
                        SEVERITY["stale"],
                        _ids(ids[c.record] for c in older),
                        f"{subject}: {', '.join(repr(c.value) for c in older)} superseded by "
                        f"{latest.value!r} ({_fmt_time(latest.ts)}) but still retrievable; "
                        "delete or mark superseded",
                        name,
                    )
                )

    # Records marked superseded, and (optionally) records too old.
    marked = [
        i
        for i, m in enumerate(data.metadatas)
        if m.get("superseded_by") or str(m.get("status", "")).lower() in SUPERSEDED_STATUS
    ]
    if marked:
        findings.append(
            Finding(
                "stale",
                SEVERITY["stale"],
                _ids(ids[i] for i in marked),
                f"{len(marked)} record(s) marked superseded are still in the collection and "
                "retrievable",
                name,
            )
        )
    if settings.stale_after_days is not None:
        limit = now - timedelta(days=settings.stale_after_days)
        already = set(marked)  # built once: `in set(marked)` per record was O(records × marked)
        aged = [
            i for i, ts in enumerate(stamps) if ts is not None and ts < limit and i not in already
        ]
        if aged:
            findings.append(
                Finding(
                    "stale",
                    SEVERITY["stale"],
                    _ids(ids[i] for i in aged),
                    f"{len(aged)} record(s) older than {settings.stale_after_days:g} days "
                    f"(oldest {_fmt_time(min(stamps[i] for i in aged))})",  # type: ignore[type-var]
                    name,
                )
            )

    # Strong facts only in the vector store, and disagreements with the facts file.
    strong_groups: dict[tuple[str, str], list[_Claim]] = {}
    for c in claims:
        if not c.strong:
            continue
        if facts is not None and _facts_hold(facts, by_field, c):
            continue
        if facts is not None and not c.multi and by_field.get(c.subject):
            continue  # the facts file has another value: a store disagreement, below
        strong_groups.setdefault((c.subject, value_norm(c.value)), []).append(c)
    for (subject, _v), group in strong_groups.items():
        where = "no facts file was given" if facts is None else "the facts file lacks it"
        findings.append(
            Finding(
                "strong_fact_in_vector_store",
                SEVERITY["strong_fact_in_vector_store"],
                _ids(ids[c.record] for c in group),
                f"strong fact {subject} = {group[0].value!r} lives only in the vector store "
                f"({where}); retrieval may miss it, store it under an exact key",
                name,
            )
        )
    if facts is not None:
        for subject, current in current_values.items():
            entries = by_field.get(subject, [])
            if not entries or not current:
                continue
            if any(same_value(e.value, c.value) for e in entries for c in current):
                continue
            fact = entries[-1]
            findings.append(
                Finding(
                    "store_disagreement",
                    SEVERITY["store_disagreement"],
                    _ids([_fact_id(fact)] + [ids[c.record] for c in current]),
                    f"{subject}: facts file says {fact.key} = {fact.value!r} but the vector store "
                    f"says {current[0].value!r}",
                    name,
                )
            )

    # Missing metadata: one finding per collection, not one per record.
    no_ts = [i for i in range(n) if stamps[i] is None]
    no_layer = [i for i in range(n) if meta_layers[i] is None]
    if no_ts or no_layer:
        parts = []
        if no_ts:
            parts.append(f"{len(no_ts)} without a timestamp ({'/'.join(TIMESTAMP_KEYS[:4])}…)")
        if no_layer:
            parts.append(f"{len(no_layer)} without layer metadata (layer/type/kind…)")
        findings.append(
            Finding(
                "missing_metadata",
                SEVERITY["missing_metadata"],
                _ids(ids[i] for i in sorted(set(no_ts) | set(no_layer))),
                f"collection {name!r}: "
                + " and ".join(parts)
                + "; staleness and layers are guessed for them",
                name,
            )
        )
    return findings, layers


def _store_entry(store: ChromaStore, info: CollectionInfo) -> dict[str, Any]:
    ef, reason = store.embedding_function(info.name)
    return {
        "type": "chroma",
        "location": store.spec,
        "mode": store.kind,
        "collection": info.name,
        "count": info.count,
        "dimension": info.dimension,
        "space": info.space,
        "configured_space": info.configured_space,
        "legacy_space": info.legacy_space,
        "embedding_function": info.embedding_function,
        "retrieval_checks": "available" if ef is not None else "skipped",
        "retrieval_reason": reason,
    }


def audit(
    facts: FactsFile | None,
    store: ChromaStore | None,
    collection: str | None,
    settings: AuditSettings | None = None,
    progress: Progress | None = None,
) -> AuditReport:
    """Audit a facts file and/or a Chroma store (one collection, or all when None).

    ``progress(done, total)`` is called while reading and comparing large collections.
    """
    settings = settings or AuditSettings()
    now = settings.now or datetime.now(timezone.utc)
    stores: list[dict[str, Any]] = []
    layers = dict.fromkeys(LAYERS, 0)
    findings: list[Finding] = []

    if facts is not None:
        stores.append(
            {
                "type": "facts_file",
                "location": facts.path,
                "shape": facts.shape,
                "keys": len(facts.entries),
                "superseded_values": len(facts.superseded()),
                "normalization_collisions": [
                    {"normalized_key": c.normalized_key, "keys": list(c.keys)}
                    for c in facts.normalization_collisions
                ],
            }
        )
        # The facts file is the profile layer (SPEC §7): read by key, injected whole.
        layers["profile"] += len(facts.entries)
        findings.extend(_audit_facts(facts, settings, now))

    if store is not None:
        names = [collection] if collection else store.collection_names()
        for name in names:
            info = store.collection_info(name)
            stores.append(_store_entry(store, info))

            def _read_tick(done: int, total: int) -> None:
                if progress is not None:
                    progress(done, 2 * total)

            data = store.read(name, True, settings.page_size, _read_tick)
            found, counts = _audit_collection(data, info, facts, settings, now, progress)
            findings.extend(found)
            for layer, k in counts.items():
                layers[layer] += k
            if progress is not None:
                progress(2 * len(data.ids), 2 * len(data.ids))

    order = {s: i for i, s in enumerate(SEVERITIES)}
    kinds = {k: i for i, k in enumerate(KINDS)}
    findings.sort(key=lambda f: (order[f.severity], kinds[f.kind]))
    return AuditReport(stores, layers, findings)
