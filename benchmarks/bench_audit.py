"""Benchmark: memdiag's store audit vs chromadb's own paged `get` of the same records
(docs/reference.md#performance).

    python benchmarks/bench_audit.py --records 100000
    python benchmarks/bench_audit.py --sizes 100000,200000   # growth table in one run
    python benchmarks/bench_audit.py --records 200000 --users 100   # a multi-user (mem0) store
    python benchmarks/bench_audit.py --records 200000 --like real.npy   # shaped like real vectors

Builds (once, cached under --store-dir) a Chroma collection of N records with random 384-d
embeddings and planted near-duplicates, then measures in one run, each phase in its own child
process so that peak memory (maxrss) belongs to that phase alone:

  (a) baseline: chromadb's paged `get` of all records with embeddings, documents and metadatas;
  (b) memdiag: open_chroma (validate + temporary copy) + full audit of the same collection.

Prints both times (wall and CPU: the machine may be shared), the ratio (target <= 3x), peak
memory against the raw vectors (n x 384 x 4 B; target <= 2x), and how many planted
near-duplicate pairs the audit found. With --sizes, one line per size and the growth factors.
With --users N, records carry mem0's user_id (N users, a planted near-duplicate in its source's
user): duplicates are searched within each user, as mem0 retrieves. Random vectors spread their
energy over all 384 axes, the worst case for the search's bound; with --like REAL.npy (real
embeddings, e.g. a collection's `get(include=["embeddings"])` saved with numpy) they are drawn
with the real vectors' spectrum (MiniLM puts most of it on a few dozen axes).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import shutil
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

COLLECTION = "bench"
DIM = 384
PAGE = 5000
BATCH = 5000  # <= client.get_max_batch_size() (5461)
TOPICS = [
    "flight options to Tokyo",
    "a birthday gift for a colleague",
    "the quarterly budget",
    "a pasta recipe",
    "hotel near the station",
    "python packaging",
    "a running plan",
    "museum opening hours",
    "train tickets",
    "the team offsite agenda",
    "a book list",
    "insurance paperwork",
    "a gym schedule",
    "restaurant bookings",
    "a moving checklist",
]


def _store_path(store_dir: Path, n: int, users: int = 0, like: Path | None = None) -> Path:
    name = f"n{n}" + (f"-u{users}" if users else "") + (f"-like-{like.stem}" if like else "")
    return store_dir / name


def _shaped(rng: Any, n: int, like: Path) -> Any:
    """n vectors drawn from a Gaussian with the second moment of the unit rows in ``like``
    (real embeddings): their energy sits on the same few axes as the real ones'."""
    import numpy as np

    real = np.load(like).astype(np.float64)
    real /= np.linalg.norm(real, axis=1, keepdims=True)
    w, v = np.linalg.eigh(real.T @ real / len(real))
    root = (v * np.sqrt(np.clip(w, 0, None))).astype(np.float32)
    out = np.empty((n, real.shape[1]), dtype=np.float32)
    for s in range(0, n, 100_000):
        z = rng.standard_normal((min(n, s + 100_000) - s, real.shape[1]), dtype=np.float32)
        out[s : s + len(z)] = z @ root.T
    return out


def build_store(
    store_dir: Path,
    n: int,
    planted_pairs: int,
    seed: int = 7,
    users: int = 0,
    like: Path | None = None,
) -> Path:
    """Build the benchmark store once; reuse it when its manifest says it is complete."""
    import numpy as np

    root = _store_path(store_dir, n, users, like)
    manifest = root / "planted.json"
    if manifest.is_file():
        return root
    if root.exists():
        shutil.rmtree(root)  # a half-built store from an interrupted run
    (root / "chroma").mkdir(parents=True)

    import chromadb
    from chromadb.config import Settings

    rng = np.random.default_rng(seed)
    base_n = n - planted_pairs
    x = _shaped(rng, n, like) if like else rng.standard_normal((n, DIM), dtype=np.float32)
    # Planted near-duplicates: copy k of a random earlier record, plus noise (cosine ~0.96-0.995).
    sources = rng.choice(base_n, size=planted_pairs, replace=False)
    planted: list[tuple[str, str, float]] = []
    for j, src in enumerate(sources):
        k = base_n + j
        eps = rng.uniform(0.1, 0.28)
        noise = rng.standard_normal(DIM).astype(np.float32)
        x[k] = x[src] + noise * (eps * np.linalg.norm(x[src]) / np.linalg.norm(noise))
    for j, src in enumerate(sources):
        a, b = x[src].astype(np.float64), x[base_n + j].astype(np.float64)
        cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
        planted.append((f"r{src}", f"r{base_n + j}", cos))

    t0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
    layers = ["episodic", "semantic", "session_summary", "procedural"]
    ids = [f"r{i}" for i in range(n)]
    docs = []
    metas: list[dict[str, Any]] = []
    for i in range(n):
        topic = TOPICS[int(rng.integers(len(TOPICS)))]
        docs.append(f"Note {i}: the user asked about {topic}; reference {rng.integers(1e9)}.")
        ts = t0 + timedelta(minutes=int(rng.integers(0, 600_000)))
        metas.append({"updated_at": ts.isoformat(), "layer": layers[i % len(layers)]})
        if users:
            metas[-1]["user_id"] = f"user{i % users}"
    if users:  # a planted near-duplicate belongs to its source's user
        for j, src in enumerate(sources):
            metas[base_n + j]["user_id"] = f"user{int(src) % users}"

    client = chromadb.PersistentClient(
        path=str(root / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    col = client.create_collection(
        COLLECTION, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    )
    started = time.perf_counter()
    for s in range(0, n, BATCH):
        e = min(n, s + BATCH)
        col.add(ids=ids[s:e], embeddings=x[s:e], documents=docs[s:e], metadatas=metas[s:e])
        print(f"  built {e}/{n} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    del client
    manifest.write_text(json.dumps({"n": n, "planted": planted}))
    return root


def _maxrss_mib() -> float:
    """This process's peak RSS. VmHWM where Linux has it: ru_maxrss survives exec, so a spawned
    child would report the parent's peak at fork (the parent may just have built the store)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _baseline(path: str, out: Any) -> None:
    import chromadb
    from chromadb.config import Settings

    # The baseline reads a throwaway copy too, so neither phase mutates the cached store.
    started, cpu = time.perf_counter(), time.process_time()
    client = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False))
    col = client.get_collection(COLLECTION, embedding_function=None)
    total = col.count()
    got = 0
    for offset in range(0, total, PAGE):
        page = col.get(limit=PAGE, offset=offset, include=["embeddings", "documents", "metadatas"])
        got += len(page["ids"])
    out.put(
        {
            "seconds": time.perf_counter() - started,
            "cpu": time.process_time() - cpu,
            "records": got,
            "rss": _maxrss_mib(),
        }
    )


def _memdiag(path: str, threshold: float, out: Any) -> None:
    from memdiag.config import AuditSettings
    from memdiag.stores.audit import audit
    from memdiag.stores.chroma import open_chroma

    started, cpu = time.perf_counter(), time.process_time()
    with open_chroma(path) as store:
        report = audit(None, store, COLLECTION, AuditSettings(near_duplicate_threshold=threshold))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    pairs: set[frozenset[str]] = set()
    counts: dict[str, int] = {}
    for f in report.findings:
        counts[f.kind] = counts.get(f.kind, 0) + 1
        if f.kind == "near_duplicate":
            ids = list(f.ids)
            pairs.update(frozenset((a, b)) for a in ids for b in ids if a != b)
    out.put(
        {
            "seconds": seconds,
            "cpu": cpu,
            "rss": _maxrss_mib(),
            "pairs": [sorted(p) for p in pairs],
            "counts": counts,
        }
    )


def _run(target: Any, *args: Any) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=target, args=(*args, q))
    p.start()
    result = q.get()
    p.join()
    return result


def run_size(args: argparse.Namespace, n: int) -> dict[str, Any]:
    """Build or reuse the store of ``n`` records, run both phases, print the comparison."""
    started = time.perf_counter()
    root = build_store(args.store_dir, n, args.planted, users=args.users, like=args.like)
    print(f"store: {root} ({time.perf_counter() - started:.1f} s to build/reuse)")
    if args.build_only:
        return {}
    planted = json.loads((root / "planted.json").read_text())["planted"]
    expected = {frozenset((a, b)) for a, b, cos in planted if cos >= args.threshold}

    # The baseline gets its own copy (opening a PersistentClient writes to the directory).
    scratch = args.store_dir / "baseline-copy"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(root / "chroma", scratch)
    try:
        base = _run(_baseline, str(scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    mine = _run(_memdiag, str(root / "chroma"), args.threshold)

    found = {frozenset(p) for p in mine["pairs"]}
    hit = len(expected & found)
    ratio = mine["seconds"] / base["seconds"]
    raw = n * DIM * 4 / 2**20
    print(f"records:                 {base['records']}")
    print(
        f"chromadb paged get:      {base['seconds']:.2f} s (CPU {base['cpu']:.1f} s)   "
        f"peak RSS {base['rss']:.0f} MiB"
    )
    print(
        f"memdiag open + audit:    {mine['seconds']:.2f} s (CPU {mine['cpu']:.1f} s)   "
        f"peak RSS {mine['rss']:.0f} MiB = {mine['rss'] / raw:.1f}x raw vectors "
        f"({raw:.0f} MiB; target <= 2x)"
    )
    print(f"ratio:                   {ratio:.2f}x (target <= 3x)")
    print(
        f"planted near-duplicates: {hit}/{len(expected)} found "
        f"(pairs at cosine >= {args.threshold}; {len(found)} pairs reported)"
    )
    print(f"findings by kind:        {mine['counts']}", flush=True)
    return {
        "n": n,
        "base": base,
        "mine": mine,
        "ratio": ratio,
        "raw": raw,
        "hit": hit,
        "expected": len(expected),
    }


def main() -> None:
    """Run one size (--records) or several (--sizes) and print the growth table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--sizes", default="", help="comma-separated record counts, e.g. 1e5,2e5")
    ap.add_argument("--store-dir", type=Path, default=Path("/tmp/memdiag-bench-store"))
    ap.add_argument("--planted", type=int, default=100, help="planted near-duplicate pairs")
    ap.add_argument("--threshold", type=float, default=0.95)
    ap.add_argument("--users", type=int, default=0, help="spread records over N mem0 users")
    ap.add_argument(
        "--like",
        type=Path,
        help="a .npy of real embeddings (any store's): draw vectors with their spectrum",
    )
    ap.add_argument("--build-only", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    sizes = [int(float(s)) for s in args.sizes.split(",") if s.strip()] or [args.records]
    rows = []
    for n in sizes:
        row = run_size(args, n)
        if row:
            rows.append(row)
    if len(rows) < 2:
        return
    print()
    print(
        f"{'records':>9} {'get s':>8} {'audit s':>8} {'audit CPU':>9} {'ratio':>6} "
        f"{'get MiB':>8} {'audit MiB':>9} {'x raw':>6} {'near-dups':>9} {'time x':>7} {'mem x':>6}"
    )
    prev = None
    for r in rows:
        grow_t = f"{r['mine']['seconds'] / prev['mine']['seconds']:.1f}" if prev else "-"
        grow_m = f"{r['mine']['rss'] / prev['mine']['rss']:.1f}" if prev else "-"
        print(
            f"{r['n']:>9} {r['base']['seconds']:>8.1f} {r['mine']['seconds']:>8.1f} "
            f"{r['mine']['cpu']:>9.1f} {r['ratio']:>6.2f} {r['base']['rss']:>8.0f} "
            f"{r['mine']['rss']:>9.0f} {r['mine']['rss'] / r['raw']:>6.1f} "
            f"{r['hit']:>4}/{r['expected']:<4} {grow_t:>7} {grow_m:>6}"
        )
        prev = r
    print("(time x, mem x: growth of memdiag's audit time and peak RSS from the row above)")


if __name__ == "__main__":
    main()
