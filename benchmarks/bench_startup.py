"""Start-up benchmark (SPEC §9): `memdiag --help` stays light (target ≤ 0.3 s, no chromadb).

    python benchmarks/bench_startup.py

Prints the wall time of `python -m memdiag --help` against a bare `python -c pass` measured in
the same run (best of N), their difference, and whether chromadb/numpy were imported.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time


def best(cmd: list[str], n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    bare = best([sys.executable, "-c", "pass"], args.repeat)
    helped = best([sys.executable, "-m", "memdiag", "--help"], args.repeat)
    probe = (
        "import sys; from memdiag.cli import app\n"
        "try:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = ('chromadb', 'numpy', 'tiktoken', 'onnxruntime')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    heavy = (
        subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    print(f"python -c pass:        {bare:.3f} s")
    print(f"memdiag --help:        {helped:.3f} s  (target <= 0.3 s)")
    print(
        f"memdiag's own share:   {helped - bare:.3f} s  ({helped / bare:.1f}x a bare interpreter)"
    )
    print(f"heavy modules imported by --help: {heavy}")


if __name__ == "__main__":
    main()
