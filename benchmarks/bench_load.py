"""Load benchmark: large runs complete with bounded memory, and profile injection
is no longer quadratic.

    python benchmarks/bench_load.py                      # all three, default sizes
    python benchmarks/bench_load.py --cases 100 --messages 100000 --profile-keys 1000,4000,20000

(a) ``memdiag check --jobs 2`` on a spec of N cases (each replays a 2,000-message transcript
    and checks two facts); (b) ``memdiag diagnose`` of one N-message transcript. Both run as
    the real CLI in a child process; the peak resident memory of the whole process tree
    (workers included) is sampled from /proc every 20 ms, and maxrss of the largest process is
    read from getrusage. (c) The profile injected from a facts file of N keys with a large
    ``store.inject_max_tokens`` (the case that took 4.1 s at 1,000 keys and 40 s at 4,000):
    time of memdiag's injection, and of the old prefix-by-prefix loop as the baseline where it
    stays affordable.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", encoding="utf-8") as fp:
                fields = fp.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(d), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def run_measured(argv: list[str], cwd: Path) -> dict[str, float]:
    """Run the memdiag CLI; wall time, exit code, peak tree RSS and the largest maxrss (MiB)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memdiag", *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    done.set()
    sampler.join()
    seconds = time.perf_counter() - start
    maxrss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB, largest child so far
    if proc.returncode not in (0, 1):
        raise SystemExit(f"memdiag {' '.join(argv)} exited {proc.returncode}: {err[-500:]}")
    return {
        "seconds": round(seconds, 2),
        "exit": proc.returncode,
        "peak_tree_rss_mib": round(peak / 2**20, 1),
        "largest_process_maxrss_mib": round(max(maxrss, before) / 1024, 1),
    }


def write_transcript(path: Path, n_messages: int, forgot: bool) -> None:
    from bench_replay import generate

    from memdiag.transcript.writer import write_canonical

    t = generate(n_messages)
    with path.open("w", encoding="utf-8") as fp:
        write_canonical(t, fp)
        if forgot:
            fp.write(json.dumps({"role": "user", "content": "Any snack for the flight?"}) + "\n")
            fp.write(
                json.dumps(
                    {
                        "role": "assistant",
                        "content": "Try the peanut bar.",
                        "forgot": "allergic to peanuts",
                    }
                )
                + "\n"
            )


def bench_check(folder: Path, cases: int, jobs: int) -> dict[str, float]:
    write_transcript(folder / "case.jsonl", 2000, forgot=False)
    spec = {
        "version": 1,
        "defaults": {"strategy": {"name": "sliding_window", "budget": 2000}},
        "cases": [
            {
                "name": f"case {k}",
                "transcript": "case.jsonl",
                "strategy": {"name": ("sliding_window", "scratchpad")[k % 2], "budget": 1500},
                "expect": [
                    {"kept": "allergic to peanuts", "at_turn": 10 + k},
                    {"lost": "prefer window seats", "at_turn": 20 + k},
                ],
            }
            for k in range(cases)
        ],
    }
    (folder / "spec.yaml").write_text(json.dumps(spec), encoding="utf-8")  # JSON is YAML
    return run_measured(["check", "spec.yaml", "--jobs", str(jobs), "--format", "json"], folder)


def bench_diagnose(folder: Path, messages: int) -> dict[str, float]:
    write_transcript(folder / "big.jsonl", messages, forgot=True)
    return run_measured(["diagnose", "big.jsonl", "--format", "json"], folder)


def _old_injection(stores: object, counter: object, max_tokens: int) -> int:
    """The old injection: re-render and re-count every prefix (quadratic)."""
    from memdiag.stores.open import render_profile

    kept: list[object] = []
    for entry in stores.facts.entries:  # type: ignore[attr-defined]
        cost = counter.section_cost(render_profile([*kept, entry]))  # type: ignore[attr-defined]
        if cost > max_tokens:
            break
        kept.append(entry)
    return len(kept)


def bench_profile(folder: Path, keys: int, baseline_up_to: int) -> dict[str, float]:
    from memdiag.config import Settings
    from memdiag.stores.open import LongTermStores

    facts = {f"preference_{k}": f"value number {k} for the user" for k in range(keys)}
    path = folder / f"facts_{keys}.json"
    path.write_text(json.dumps(facts), encoding="utf-8")
    settings = Settings()
    counter = settings.token_counter()
    out: dict[str, float] = {"keys": keys}
    for name, budget in (("all fit", 10**9), ("half fit", keys * 6)):
        with LongTermStores.open(str(path), None, None) as stores:
            start = time.perf_counter()
            kept, _ = stores.injected_profile(counter, budget)
            out[f"{name}: seconds"] = round(time.perf_counter() - start, 3)
            out[f"{name}: kept"] = len(kept)
            if keys <= baseline_up_to:
                start = time.perf_counter()
                old = _old_injection(stores, counter, budget)
                out[f"{name}: old seconds"] = round(time.perf_counter() - start, 3)
                assert old == len(kept), (old, len(kept))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--profile-keys", default="1000,4000,20000")
    ap.add_argument("--baseline-up-to", type=int, default=1000, help="old loop up to N keys")
    ap.add_argument("--only", choices=["check", "diagnose", "profile"], default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="memdiag-bench-load-") as tmp:
        folder = Path(tmp)
        if args.only in (None, "profile"):
            for n in (int(x) for x in args.profile_keys.split(",")):
                print("profile injection:", bench_profile(folder, n, args.baseline_up_to))
        if args.only in (None, "check"):
            print(
                f"check --jobs {args.jobs}, {args.cases} cases:",
                bench_check(folder, args.cases, args.jobs),
            )
        if args.only in (None, "diagnose"):
            print(f"diagnose, {args.messages} messages:", bench_diagnose(folder, args.messages))


if __name__ == "__main__":
    main()
