"""Exact near-duplicate search over embedding matrices (docs/reference.md#stores, §9).

Every pair with cosine >= threshold is found; nothing is sampled and no ANN index is trusted
(Chroma's HNSW misses neighbours). The full n x n comparison is done in vectorized tiles, made
cheap by an exact bound:

1. normalize rows and rotate them by the principal axes of the data (a rotation keeps every dot
   product), so that the first k coordinates carry most of each vector's energy;
2. by Cauchy-Schwarz, x.y <= x[:k].y[:k] + |x[k:]| |y[k:]|. Appending |x[k:]| (and a zero
   column, for an aligned width) turns that bound into one (k+2)-wide matrix product per tile,
   of a single n x (k+2) factor matrix with itself; the normalized and rotated rows are built
   chunk by chunk and never held whole, so the search adds about (k+2)/d of the raw vectors;
3. pairs whose bound clears the threshold are verified with the exact float64 cosine of the
   original vectors. Pairs below the bound cannot reach the threshold, so none is missed.

k is chosen per matrix from a sample: the smallest product width whose false-candidate rate stays
negligible, or the full dimension when no prefix pays off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# Float32 products of unit vectors are off by ~1e-6; this slack keeps the bound conservative.
BOUND_SLACK = 5e-4
# Relative cost of verifying one candidate pair versus one column of the tile product.
CANDIDATE_COST = 20_000.0
SAMPLE = 2000


def _choose_prefix(y: np.ndarray, threshold: float) -> int:
    """The bound width for rotated unit rows ``y`` (a sample of them when the store is large)."""
    import numpy as np

    n, d = y.shape
    if n < SAMPLE or d <= 64:
        return d
    ys = y[:SAMPLE]
    true_pairs = int(np.count_nonzero(np.triu(ys @ ys.T >= threshold, 1)))
    best_k, best_cost = d, float(d)
    for k in (30, 62, 94, 126, 254):
        if k + 2 >= d:
            break
        f = _bound_factors(ys, k)
        cand = int(np.count_nonzero(np.triu(f @ f.T >= threshold - BOUND_SLACK, 1)))
        rate = max(0, cand - true_pairs) / (SAMPLE * (SAMPLE - 1) / 2)
        cost = (k + 2) + rate * CANDIDATE_COST
        if cost < best_cost:
            best_k, best_cost = k, cost
    return best_k


def _bound_factors(y: np.ndarray, k: int) -> np.ndarray:
    """F with F_i . F_j = y_i[:k].y_j[:k] + |y_i[k:]| |y_j[k:]| (one zero column pads the
    width to k + 2, a multiple of 32 for the products)."""
    import numpy as np

    f = np.zeros((y.shape[0], k + 2), dtype=np.float32)
    f[:, :k] = y[:, :k]
    if k < y.shape[1]:
        f[:, k] = np.sqrt(np.einsum("ij,ij->i", y[:, k:], y[:, k:]))
    return f


def near_duplicate_pairs(
    matrix: np.ndarray,
    threshold: float,
    block_size: int = 2048,
    progress: Callable[[int, int], None] | None = None,
    prefix: int | None = None,
) -> list[tuple[int, int, float]]:
    """All pairs (i, j, cosine) with i < j and cosine(matrix[i], matrix[j]) >= threshold.

    Exact and complete (see the module docstring). Zero vectors have no direction and never
    pair. Cosines are float64 over the original float32 values. ``prefix`` forces the width of
    the bounded product (tests and benchmarks); by default it is chosen from a sample.

    Memory: besides ``matrix`` itself (not copied when it is float32 without zero rows), one
    n x (k+2) float32 factor matrix when a prefix k < d pays off (none when the whole width is
    searched: the raw rows are multiplied and each tile scaled), and per-chunk scratch; the
    normalized and rotated rows are never held whole.
    """
    import numpy as np

    x = np.asarray(matrix, dtype=np.float32)
    n = x.shape[0]
    if n < 2 or x.ndim != 2 or x.shape[1] == 0:
        return []
    norms = np.sqrt(np.einsum("ij,ij->i", x, x, dtype=np.float64))
    live = np.flatnonzero(norms > 0)
    if len(live) < 2:
        return []
    if len(live) < n:
        x, norms = x[live], norms[live]
    m, d = x.shape
    inv = (1.0 / norms).astype(np.float32)
    chunk = 8192  # rows per scratch chunk (12 MiB at 384-d)

    # Rotate onto the principal axes (uncentered: dot products, not variances, matter here).
    # The Gram matrix and the rotated rows are built chunk by chunk from the normalized rows.
    # A small matrix is searched whole (k = d), where no rotation is needed: one tenant's few
    # memories cost no eigendecomposition.
    rot: np.ndarray | None = None
    k = prefix if prefix is not None else d if (m < 2 * SAMPLE or d <= 64) else None
    if k is None or k < d:
        gram = np.zeros((d, d), dtype=np.float64)
        for c0 in range(0, m, chunk):
            xc = x[c0 : c0 + chunk] * inv[c0 : c0 + chunk, None]
            gram += xc.T @ xc
        _, vecs = np.linalg.eigh(gram)
        rot = np.ascontiguousarray(vecs[:, ::-1], dtype=np.float32)
    if k is None:
        s = np.sort(np.random.default_rng(0).choice(m, size=SAMPLE, replace=False))
        k = _choose_prefix((x[s] * inv[s, None]) @ rot, threshold)
    # k = d: the bound is the cosine itself, computed from the raw rows, each tile then scaled
    # by its rows' inverse norms: no normalized copy of the matrix (it would double the memory)
    scale: np.ndarray | None = inv
    a = x
    # raw products of float32 rows with norms far from 1 could overflow or lose precision
    if k < d or not 1e-9 < norms.min() <= norms.max() < 1e9:
        scale = None
        a = np.empty((m, k + 2), dtype=np.float32)
        for c0 in range(0, m, chunk):
            rows = x[c0 : c0 + chunk] * inv[c0 : c0 + chunk, None]
            a[c0 : c0 + chunk] = _bound_factors(rows if rot is None else rows @ rot, k)
    cut = np.float32(threshold - BOUND_SLACK)

    bs = max(256, block_size)
    buf = np.empty((bs, bs), dtype=np.float32)
    found_i: list[np.ndarray] = []
    found_j: list[np.ndarray] = []
    found_c: list[np.ndarray] = []
    for i0 in range(0, m, bs):
        i1 = min(m, i0 + bs)
        ai = a[i0:i1]
        for j0 in range(i0, m, bs):
            j1 = min(m, j0 + bs)
            g = np.matmul(ai, a[j0:j1].T, out=buf[: i1 - i0, : j1 - j0])
            if scale is not None:
                g *= scale[i0:i1, None]
                g *= scale[None, j0:j1]
            if i0 == j0:
                # Self pairs always clear the bound; mask them (and the lower triangle's
                # mirror pairs are dropped below) so that the max test stays meaningful.
                np.fill_diagonal(g, -np.inf)
            row_max = g.max(axis=1)
            rows = np.flatnonzero(row_max >= cut)
            if not len(rows):  # the common case: no pair in this tile can reach the threshold
                continue
            sub_i, jj = np.nonzero(g[rows] >= cut)
            ii = rows[sub_i] + i0
            jj = jj + j0
            keep = ii < jj
            ii, jj = ii[keep], jj[keep]
            if not len(ii):
                continue
            if len(ii) > (i1 - i0) * (j1 - j0) // 64:
                # The bound is loose here (clustered data): the exact tile is cheaper.
                exact = (x[i0:i1] * inv[i0:i1, None]) @ (x[j0:j1] * inv[j0:j1, None]).T
                ii, jj = np.nonzero(exact >= cut)
                ii += i0
                jj += j0
                keep = ii < jj
                ii, jj = ii[keep], jj[keep]
            cos = np.einsum("ij,ij->i", x[ii], x[jj], dtype=np.float64) / (norms[ii] * norms[jj])
            ok = cos >= threshold
            found_i.append(ii[ok])
            found_j.append(jj[ok])
            found_c.append(cos[ok])
        if progress is not None:
            progress(i1, m)
    if not found_i:
        return []
    fi = np.concatenate(found_i)
    fj = np.concatenate(found_j)
    fc = np.concatenate(found_c)
    if len(live) < n:
        fi, fj = live[fi], live[fj]
    order = np.lexsort((fj, fi))
    return [(int(fi[t]), int(fj[t]), float(fc[t])) for t in order]
