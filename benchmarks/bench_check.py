"""`memdiag check --jobs N` benchmark (docs/reference.md#performance): many small cases should
scale with workers.

    python benchmarks/bench_check.py [--cases 100] [--repeat 3]

Writes a spec of N small cases, then runs `memdiag check` on it with --jobs 1 and --jobs 2,
interleaved round by round in the same run. Case mixes:
  fixtures   the cases of fixtures/checks.yaml that need no store (replays and diagnoses of
             the demo, allergy and Chinese fixtures, 20-90 messages), repeated to N
  tiny       one replay of fixtures/demo.jsonl checking four facts, N times
  generated  N transcripts of --messages messages each (one per case, as in a CI suite of
             recorded conversations), a fact kept at turn 1 and lost by the last turn

Prints wall and CPU time (best and median), the ratio --jobs 2 / --jobs 1 (goal <= 0.6 on
two cores) and each run's peak RSS. memdiag's bytecode is compiled first, as pip does. A run of
the first case alone measures the serial part (start-up, spec, encoding) that no worker count
shares out; with it, the best ratio two workers could reach (Amdahl) is printed too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASE = """  - name: case {n} - a 400-token window evicts the allergy at turn 6
    transcript: demo.jsonl
    expect:
      - kept: "allergic to peanuts"
        at_turn: 5
      - lost: "allergic to peanuts"
        at_turn: 6
      - lost: "allergic to peanuts"
        at_turn: 8
      - kept: "prefers window seats"
        at_turn: 5
"""


GENERATED = """  - name: case {n} - {name}
    transcript: {name}
    expect:
      - kept: "allergic to peanuts"
        at_turn: 1
      - lost: "allergic to peanuts"
        at_turn: {last}
"""


def _conversation(path: Path, messages: int, seed: int) -> None:
    import json
    import random

    rng = random.Random(seed)
    words = "flight hotel Lisbon Porto train museum dinner budget morning tram beach".split()
    rows = [{"role": "system", "content": "You are a travel-planning assistant."}]
    for k in range(messages // 2):
        said = " ".join(rng.choice(words) for _ in range(rng.randint(8, 30)))
        if k == 0:
            said = "I'm allergic to peanuts, please remember that. " + said
        rows.append({"role": "user", "content": said.capitalize() + "?"})
        rows.append({"role": "assistant", "content": " ".join(rng.choices(words, k=40)) + "."})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def write_spec(folder: Path, cases: int, mix: str, messages: int = 200) -> Path:
    import yaml

    for f in (ROOT / "fixtures").glob("*.jsonl"):
        shutil.copy(f, folder / f.name)
    spec = folder / "checks.yaml"
    if mix == "generated":
        lines = []
        for n in range(1, cases + 1):
            name = f"t{n}.jsonl"
            _conversation(folder / name, messages, seed=n)
            lines.append(GENERATED.format(n=n, name=name, last=messages // 2))
        spec.write_text(
            "version: 1\ndefaults:\n  model: gpt-4o\n"
            "  strategy: {name: sliding_window, budget: 400}\ncases:\n" + "".join(lines),
            encoding="utf-8",
        )
        return spec
    if mix == "tiny":
        body = "".join(CASE.format(n=n) for n in range(1, cases + 1))
        spec.write_text(
            "version: 1\ndefaults:\n  model: gpt-4o\n"
            "  strategy: {name: sliding_window, budget: 400}\ncases:\n" + body,
            encoding="utf-8",
        )
        return spec
    source = yaml.safe_load((ROOT / "fixtures" / "checks.yaml").read_text(encoding="utf-8"))
    pool = [c for c in source["cases"] if "store" not in c and (folder / c["transcript"]).exists()]
    picked = [
        dict(pool[n % len(pool)], name=f"{n + 1}: {pool[n % len(pool)]['name']}")
        for n in range(cases)
    ]
    spec.write_text(
        yaml.safe_dump({**source, "cases": picked}, allow_unicode=True), encoding="utf-8"
    )
    return spec


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (with workers) and peak RSS (MiB) of one `memdiag check`."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {err[-600:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3, help="rounds (best and median of N)")
    ap.add_argument("--mix", choices=("fixtures", "tiny", "generated"), default="fixtures")
    ap.add_argument("--messages", type=int, default=200, help="per transcript (--mix generated)")
    args = ap.parse_args()
    py = sys.executable
    tmp = Path(tempfile.mkdtemp(prefix="bench-check-"))
    try:
        spec = write_spec(tmp, args.cases, args.mix, args.messages)
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        env["MEMDIAG_CACHE_DIR"] = str(tmp / "cache")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([py, "-m", "compileall", "-q", str(ROOT / "memdiag")], check=True)
        jobs = {1: [py, "-m", "memdiag", "check", str(spec), "--jobs", "1"]}
        jobs[2] = [*jobs[1][:-1], "2"]
        one_dir = tmp / "one"
        one_dir.mkdir()
        one = write_spec(one_dir, 1, args.mix, args.messages)
        run(jobs[1], env)  # builds the rank cache, warms the OS file cache
        serial = min(run([py, "-m", "memdiag", "check", str(one)], env)[0] for _ in range(3))
        walls: dict[int, list[float]] = {1: [], 2: []}
        cpus: dict[int, list[float]] = {1: [], 2: []}
        rss: dict[int, float] = {1: 0.0, 2: 0.0}
        for _ in range(args.repeat):
            for j, cmd in jobs.items():
                wall, cpu, peak = run(cmd, env)
                walls[j].append(wall)
                cpus[j].append(cpu)
                rss[j] = max(rss[j], peak)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"{args.cases} cases ({args.mix}), {os.cpu_count()} CPUs, {args.repeat} interleaved rounds"
    )
    print(f"{'run':<22}{'wall best':>10}{'median':>9}{'CPU best':>10}{'peak RSS':>11}")
    for j in jobs:
        print(
            f"{f'check --jobs {j}':<22}{min(walls[j]):>9.2f}s{statistics.median(walls[j]):>8.2f}s"
            f"{min(cpus[j]):>9.2f}s{rss[j]:>7.0f} MiB"
        )
    best = min(walls[2]) / min(walls[1])
    med = statistics.median(walls[2]) / statistics.median(walls[1])
    print(f"--jobs 2 / --jobs 1: {best:.2f}x best, {med:.2f}x median  (goal <= 0.60x)")
    one_case = min(walls[1])
    bound = (serial + (one_case - serial) / 2) / one_case
    print(
        f"serial part (one case alone): {serial:.2f}s of {one_case:.2f}s; "
        f"the best two workers could do: {bound:.2f}x"
    )


if __name__ == "__main__":
    main()
