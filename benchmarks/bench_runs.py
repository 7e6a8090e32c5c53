"""Long runs of one character (docs/reference.md#performance): a tool output of blank lines,
spaces, digits or letters costs time in proportion to its length.

    python benchmarks/bench_runs.py [--size 100000] [--repeat 3]

Each kind of run (blank lines, blank lines with spaces, spaces, tabs, digits, letters, CJK,
bullets) is written into a small transcript: a user message that states a rule and a fact, a
tool output holding the run (also once more with a prohibition and a memory-style line after
it, so extraction rules and question masking read the run), and a question. Each transcript is
written at --size and at 4x --size characters of run, and `memdiag replay --strategy all
--format json` runs on it as a process, beside the floor on the same file (parse each line
with json.loads and tiktoken-encode its content). Prints CPU seconds (best of --repeat), the
ratio to the floor, and the growth from 1x to 4x: about 4 is linear; 16 would be quadratic
(several patterns were, before 3 December 2026: 1,000 blank lines took two minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_replay import FLOOR_JSON  # noqa: E402

RUNS = {
    "blank lines": "\n",
    "blank lines with spaces": " \n",
    "spaces": " ",
    "tabs": "\t",
    "digits": "7",
    "letters": "a",
    "CJK": "我",
    "bullets": "\n- ",
}


def transcript(path: Path, unit: str, size: int) -> None:
    run = unit * max(1, size // len(unit))
    lines = [
        {"role": "user", "content": "I'm Mia and I'm allergic to peanuts. Don't book red-eyes."},
        {"role": "assistant", "content": "Noted. Let me read the log."},
        {"role": "tool", "content": f"log start.{run}end"},
        {"role": "tool", "content": f"x.{run}Don't book red-eye flights.\n- Moved to Lisbon"},
        {"role": "user", "content": "What am I allergic to"},
    ]
    with path.open("w", encoding="utf-8") as fp:
        for line in lines:
            fp.write(json.dumps(line, ensure_ascii=False) + "\n")


def cpu(cmd: list[str], env: dict[str, str]) -> float:
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    _, status, use = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return use.ru_utime + use.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size", type=int, default=100_000, help="characters of run (and 4x)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled first, as pip does on install
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "memdiag")], check=True)
    py = sys.executable
    print(f"replay --strategy all of a run of N characters, N = {args.size:,} and 4N")
    print(f"  CPU seconds, best of {args.repeat}; x floor: json.loads + encode of the same file\n")
    print(f"  {'run':<24} {'N':>7} {'x floor':>8} {'4N':>7} {'x floor':>8} {'4N / N':>7}")
    with tempfile.TemporaryDirectory(prefix="bench-runs-") as tmp:
        for name, unit in RUNS.items():
            got = []
            for size in (args.size, 4 * args.size):
                path = Path(tmp) / f"run-{size}.jsonl"
                transcript(path, unit, size)
                replay = [py, "-m", "memdiag", "replay", str(path), "--strategy", "all"]
                replay += ["--format", "json"]
                floor = [py, "-c", FLOOR_JSON, str(path)]
                best, base = float("inf"), float("inf")
                for _ in range(args.repeat):
                    base = min(base, cpu(floor, env))
                    best = min(best, cpu(replay, env))
                got.append((best, base))
            (one, f1), (four, f4) = got
            print(
                f"  {name:<24} {one:6.2f}s {one / f1:7.2f}x {four:6.2f}s {four / f4:7.2f}x"
                f" {four / one:6.2f}x"
            )


if __name__ == "__main__":
    main()
