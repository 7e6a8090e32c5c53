"""duplicate and near_duplicate: records that waste top-k slots.

Exact duplicates (same normalized text, or bit-identical vectors) are found by hashing. Near
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
from memdiag.text import normalize_document

if TYPE_CHECKING:
    import numpy as np

    from memdiag.stores.chroma import CollectionData

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

    def findings(self) -> list[Finding]:
        """One near_duplicate finding per group of near-identical records."""
        try:
            pairs = self.pending.result()
        except BaseException:
            self.cancel()
            raise
        reps = self.reps
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
