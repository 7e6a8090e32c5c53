"""duplicate and near_duplicate: records that waste top-k slots.

Exact duplicates (same normalized text, or bit-identical vectors) are found by hashing. Records
that state the same claim (subject, field and value, as ``Extractor.read_memory`` reads them) in
other words are one memory stored twice whatever their cosine ("Likes a window seat" beside
"Prefers window seats", MiniLM cosine 0.82): a ``duplicate`` whose ``detail`` says
``{"match": "claim", ...}`` (docs/stores.md). Near
duplicates are an exact cosine search over one representative per duplicate group
(``memdiag.stores.neardup``), run in a worker thread: numpy's matrix products release the GIL, so
the per-record text work of the other families proceeds meanwhile.

Both stay within one tenant (user/agent/run ids, as conflicts do): two users who both said
"I'm vegetarian" hold one memory each, and each one's search only ever sees their own. Searching
tenant by tenant also costs the sum of their squared sizes instead of the square of the total.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memdiag.stores.audit.common import unique_ids
from memdiag.stores.audit.report import SEVERITY, Finding
from memdiag.text import normalize_document, value_norm

if TYPE_CHECKING:
    import numpy as np

    from memdiag.stores.chroma import CollectionData
    from memdiag.stores.memories import Claim

Progress = Callable[[int, int], None]


class UnionFind:
    """Disjoint sets over ``range(n)``; each set's root is its smallest member."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        """The root of ``i``'s set."""
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        """Merge the sets of ``i`` and ``j``."""
        ri, rj = self.find(i), self.find(j)
        if ri != rj:
            self.parent[max(ri, rj)] = min(ri, rj)

    def groups(self, members: Iterable[int]) -> list[list[int]]:
        """The sets of more than one member, each sorted."""
        out: dict[int, list[int]] = {}
        for i in members:
            out.setdefault(self.find(i), []).append(i)
        return [sorted(g) for g in out.values() if len(g) > 1]


def tenants(data: CollectionData) -> list[tuple[str, ...]]:
    """Each record's tenant: its (user_id, agent_id, run_id), "" where absent."""
    from memdiag.stores.layouts import tenant_of

    return [tenant_of(m if isinstance(m, dict) else {}) for m in data.metadatas]


def exact_duplicates(data: CollectionData, tenant: list[tuple[str, ...]]) -> UnionFind:
    """Records of one tenant joined when they hold the same normalized text or the same
    embedding bytes."""
    import hashlib

    emb = data.embeddings
    uf = UnionFind(len(data.ids))
    by_text: dict[tuple[tuple[str, ...], str], int] = {}
    # Keyed by a 16-byte digest, not the vector's bytes: those would copy the whole matrix.
    by_vec: dict[tuple[tuple[str, ...], bytes], int] = {}
    for i, doc in enumerate(data.documents):
        if doc and doc.strip():
            first = by_text.setdefault((tenant[i], normalize_document(doc)), i)
            if first != i:
                uf.union(first, i)
        if emb is not None and len(emb):
            row = emb[i]
            key = hashlib.blake2b(row.tobytes(), digest_size=16).digest()
            first = by_vec.setdefault((tenant[i], key), i)
            if first != i and row.tobytes() == emb[first].tobytes():
                uf.union(first, i)
    return uf


def duplicate_findings(data: CollectionData, uf: UnionFind) -> list[Finding]:
    """One duplicate finding per group of exact duplicates."""
    findings: list[Finding] = []
    for g in uf.groups(range(len(data.ids))):
        texts = {normalize_document(data.documents[i] or "") for i in g}
        how = "the same text" if len(texts) == 1 else "the same embedding"
        findings.append(
            Finding(
                "duplicate",
                SEVERITY["duplicate"],
                unique_ids(data.ids[i] for i in g),
                f"{len(g)} records hold {how}: {(data.documents[g[0]] or '')[:80]!r}; keep one",
                data.name,
            )
        )
    return findings


def claim_value_key(value: str) -> str:
    """A value as claims compare it: normalized, each word singular ("window seat" and "window
    seats", "peanut" and "peanuts" are one value; word order still counts: "tea over coffee" is
    not "coffee over tea")."""
    words = []
    for w in value_norm(value).split():
        if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
            w = w[:-1]
        words.append(w)
    return " ".join(words)


ClaimKey = tuple[tuple[str, ...], str, str, str]  # tenant, who, field, value key
# Above this many records stating one claim, only records with the same claims are joined
# (the subset test is quadratic in the group).
SUBSET_GROUP_LIMIT = 200


@dataclass(frozen=True)
class ClaimGroups:
    """Records joined as one memory (exact copies and the same claims), and each record's
    values per (tenant, who, field), to tell near-duplicates from conflicting values."""

    merged: UnionFind
    values: dict[int, dict[tuple[tuple[str, ...], str, str], set[str]]]

    def joined(self, i: int, j: int) -> bool:
        return self.merged.find(i) == self.merged.find(j)

    def other_values(self, i: int, j: int) -> bool:
        """Whether records ``i`` and ``j`` give different values for a single-valued field
        both state ("Lives in Berlin" / "Lives in Lisbon", cosine 0.89: a conflict, not one
        memory)."""
        vi, vj = self.values.get(i, {}), self.values.get(j, {})
        return any(not (vi[f] & vj[f]) for f in vi.keys() & vj.keys())


def claim_duplicates(
    data: CollectionData, found: list[Claim], exact: UnionFind
) -> tuple[list[Finding], ClaimGroups]:
    """duplicate: records that state the same claims in other words (the exact duplicates in
    ``exact`` are already reported), and the union of both kinds of groups.

    Two records are one memory when every claim of one is a claim of the other (same tenant,
    subject, field and value): "Prefers metric units" (units, preference) beside "Wants
    measurements in metric units" (units). A record that states nothing is never joined.
    """
    keys: dict[int, set[ClaimKey]] = {}
    values: dict[int, dict[tuple[tuple[str, ...], str, str], set[str]]] = {}
    for c in found:
        v = claim_value_key(c.value)
        keys.setdefault(c.record, set()).add((c.tenant, c.who, c.subject, v))
        if not c.multi:  # values of a multi-valued field accumulate: never a conflict
            values.setdefault(c.record, {}).setdefault((c.tenant, c.who, c.subject), set()).add(v)
    by_key: dict[ClaimKey, list[int]] = {}
    for i, ks in keys.items():
        for k in ks:
            by_key.setdefault(k, []).append(i)
    merged = UnionFind(len(data.ids))
    for i in range(len(data.ids)):
        merged.union(i, exact.find(i))
    joined: list[tuple[int, int, ClaimKey]] = []
    for k, members in by_key.items():
        roots: dict[int, int] = {}
        for i in members:
            roots.setdefault(exact.find(i), i)
        if len(roots) < 2:
            continue
        reps = sorted(roots.values())
        if len(reps) > SUBSET_GROUP_LIMIT:
            same: dict[frozenset[ClaimKey], int] = {}
            for i in reps:
                first = same.setdefault(frozenset(keys[i]), i)
                if first != i and merged.find(first) != merged.find(i):
                    merged.union(first, i)
                    joined.append((first, i, k))
            continue
        for a_pos, a in enumerate(reps):
            for b in reps[a_pos + 1 :]:
                if merged.find(a) == merged.find(b):
                    continue
                if keys[a] <= keys[b] or keys[b] <= keys[a]:
                    merged.union(a, b)
                    joined.append((a, b, k))
    groups = ClaimGroups(merged, values)
    if not joined:
        return [], groups
    first_key: dict[int, ClaimKey] = {}
    for a, _b, k in joined:
        first_key.setdefault(merged.find(a), k)
    findings: list[Finding] = []
    for g in merged.groups(i for a, b, _ in joined for i in (a, b)):
        root = merged.find(g[0])
        members = g  # one record per exact-duplicate group (those have their own finding)
        _tenant, who, field, _v = first_key[root]
        value = next(
            c.value for c in found if c.record in members and c.subject == field and c.who == who
        )
        texts = list(dict.fromkeys((data.documents[i] or "")[:60] for i in members))
        about = f" about {who}" if who else ""
        findings.append(
            Finding(
                "duplicate",
                SEVERITY["duplicate"],
                unique_ids(data.ids[i] for i in members),
                f"{len(members)} records state the same fact{about} ({field} = {value!r}) in "
                f"other words: {'; '.join(repr(t) for t in texts[:3])}; merge them into one",
                data.name,
                {"match": "claim", "field": field, "value": value, "subject": who or None},
            )
        )
    return findings, groups


class Cancelled(Exception):
    """The search was stopped (the audit was interrupted)."""


def _search(
    emb: np.ndarray,
    reps: np.ndarray,
    parts: list[np.ndarray],
    threshold: float,
    block_size: int,
    progress: Progress,
    stop: threading.Event,
) -> list[tuple[int, int, float]]:
    """Near-duplicate pairs (rows of ``reps``) within each part (one tenant's rows); raises
    ``Cancelled`` soon after ``stop`` is set."""
    from memdiag.stores.neardup import near_duplicate_pairs

    total = sum(len(p) ** 2 for p in parts)
    done = 0
    pairs: list[tuple[int, int, float]] = []
    for rows in parts:
        size = len(rows) ** 2
        # Fancy indexing copies the matrix; skip it for the whole collection as one tenant.
        whole = len(rows) == len(emb) and len(reps) == len(emb)
        matrix = emb if whole else emb[reps[rows]]

        def tick(d: int, t: int, base: int = done, size: int = size) -> None:
            if stop.is_set():
                raise Cancelled
            progress(base + d * size // max(t, 1), total)

        found = near_duplicate_pairs(matrix, threshold, block_size, tick)
        pairs += [(int(rows[a]), int(rows[b]), cos) for a, b, cos in found]
        done += size
    progress(total, total)
    return pairs


@dataclass(frozen=True, eq=False)
class NearDuplicateSearch:
    """A running near-duplicate search; ``findings()`` waits for it."""

    data: CollectionData
    reps: np.ndarray  # record index of each row searched
    threshold: float
    pending: Future[list[tuple[int, int, float]]]
    stop: threading.Event

    @classmethod
    def start(
        cls,
        data: CollectionData,
        uf: UnionFind,
        tenant: list[tuple[str, ...]],
        threshold: float,
        block_size: int,
        progress: Progress | None,
    ) -> NearDuplicateSearch | None:
        """Start the search in a worker thread (None when there is nothing to compare)."""
        import numpy as np

        emb = data.embeddings
        if emb is None or len(emb) <= 1:
            return None
        n = len(data.ids)
        reps = np.array([i for i in range(n) if uf.find(i) == i], dtype=np.int64)
        groups: dict[tuple[str, ...], list[int]] = {}
        for row, i in enumerate(reps.tolist()):
            groups.setdefault(tenant[i], []).append(row)
        parts = [np.asarray(g, dtype=np.int64) for g in groups.values() if len(g) > 1]

        def _tick(done: int, total: int) -> None:
            # Reading took the first half of the progress bar; this search takes the second.
            if progress is not None:
                progress(n + done * n // max(total, 1), 2 * n)

        stop = threading.Event()
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memdiag-neardup")
        pending = pool.submit(_search, emb, reps, parts, threshold, block_size, _tick, stop)
        pool.shutdown(wait=False)
        return cls(data, reps, threshold, pending, stop)

    def cancel(self) -> None:
        """Stop the search within one block of rows (an interrupted audit exits promptly:
        the interpreter would otherwise wait for the worker thread to finish)."""
        self.stop.set()

    def findings(self, claims: ClaimGroups | None = None) -> list[Finding]:
        """One near_duplicate finding per group of near-identical records. With ``claims``,
        pairs already joined as duplicates by claim are not reported again, and pairs that
        give different values for one field are not near-duplicates (they are conflicts)."""
        try:
            pairs = self.pending.result()
        except BaseException:
            self.cancel()
            raise
        reps = self.reps
        if claims is not None:
            pairs = [
                (a, b, cos)
                for a, b, cos in pairs
                if not claims.joined(int(reps[a]), int(reps[b]))
                and not claims.other_values(int(reps[a]), int(reps[b]))
            ]
        nuf = UnionFind(len(reps))
        best: dict[int, list[float]] = {}
        for a, b, _cos in pairs:
            nuf.union(a, b)
        for a, _b, cos in pairs:
            best.setdefault(nuf.find(a), []).append(cos)
        findings: list[Finding] = []
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
                    unique_ids(self.data.ids[i] for i in members),
                    f"{len(members)} near-identical records (cosine {span} ≥ "
                    f"{self.threshold:g}): "
                    f"{(self.data.documents[members[0]] or '')[:60]!r}; merge them",
                    self.data.name,
                )
            )
        return findings
