"""Benchmark: memdiag's store audit vs chromadb's own paged `get` of the same records (SPEC §9).

    python benchmarks/bench_audit.py --records 100000

Builds (once, cached under --store-dir) a Chroma collection of N records with random 384-d
embeddings and planted near-duplicates, then measures in one run, each phase in its own child
process so that peak memory (maxrss) belongs to that phase alone:

  (a) baseline: chromadb's paged `get` of all records with embeddings, documents and metadatas;
  (b) memdiag: open_chroma (validate + temporary copy) + full audit of the same collection.

Prints both times, the ratio (target <= 3x), peak memory, and how many planted near-duplicate
pairs the audit found.
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


def _store_path(store_dir: Path, n: int) -> Path:
    return store_dir / f"n{n}"


def build_store(store_dir: Path, n: int, planted_pairs: int, seed: int = 7) -> Path:
    """Build the benchmark store once; reuse it when its manifest says it is complete."""
    import numpy as np

    root = _store_path(store_dir, n)
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
    x = rng.standard_normal((n, DIM), dtype=np.float32)
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
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _baseline(path: str, out: Any) -> None:
    import chromadb
    from chromadb.config import Settings

    # The baseline reads a throwaway copy too, so neither phase mutates the cached store.
    started = time.perf_counter()
    client = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False))
    col = client.get_collection(COLLECTION, embedding_function=None)
    total = col.count()
    got = 0
    for offset in range(0, total, PAGE):
        page = col.get(limit=PAGE, offset=offset, include=["embeddings", "documents", "metadatas"])
        got += len(page["ids"])
    out.put({"seconds": time.perf_counter() - started, "records": got, "rss": _maxrss_mib()})


def _memdiag(path: str, threshold: float, out: Any) -> None:
    from memdiag.config import AuditSettings
    from memdiag.stores.audit import audit
    from memdiag.stores.chroma import open_chroma

    started = time.perf_counter()
    with open_chroma(path) as store:
        report = audit(None, store, COLLECTION, AuditSettings(near_duplicate_threshold=threshold))
    seconds = time.perf_counter() - started
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


def main() -> None:
    """Build or reuse the store, run both phases, print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--store-dir", type=Path, default=Path("/tmp/memdiag-bench-store"))
    ap.add_argument("--planted", type=int, default=100, help="planted near-duplicate pairs")
    ap.add_argument("--threshold", type=float, default=0.95)
    ap.add_argument("--build-only", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

    started = time.perf_counter()
    root = build_store(args.store_dir, args.records, args.planted)
    print(f"store: {root} ({time.perf_counter() - started:.1f} s to build/reuse)")
    if args.build_only:
        return
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
    print(f"records:                 {base['records']}")
    print(f"chromadb paged get:      {base['seconds']:.2f} s   peak RSS {base['rss']:.0f} MiB")
    print(f"memdiag open + audit:    {mine['seconds']:.2f} s   peak RSS {mine['rss']:.0f} MiB")
    print(f"ratio:                   {ratio:.2f}x (target <= 3x)")
    print(
        f"planted near-duplicates: {hit}/{len(expected)} found "
        f"(pairs at cosine >= {args.threshold}; {len(found)} pairs reported)"
    )
    print(f"findings by kind:        {mine['counts']}")


if __name__ == "__main__":
    main()
