"""Start-up benchmark (docs/reference.md#performance): small runs start as fast as tiktoken alone,
--help stays light.

    python benchmarks/bench_startup.py [--repeat 15]

Two ratios, each against a baseline measured in the same run (the processes are interleaved
round by round, so a busy machine slows both sides alike; best and median of N are shown):

- `memdiag replay fixtures/allergy.jsonl` (90 messages, warm memdiag cache) against
  `python -c "import tiktoken; tiktoken.get_encoding('o200k_base')"` loading from tiktoken's
  own cache (TIKTOKEN_CACHE_DIR laid out as tiktoken documents it). Goal: ratio <= 1.
- `memdiag --help` against `python -c "import typer, rich"`. Goal: ratio <= 2. Two more
  rows show where its time goes: typer's Rich help module (typer.rich_utils) imported alone,
  and the same help printed plain (TYPER_USE_RICH=0, typer's own switch).

Also prints each process's peak RSS, the cold replay (cache being built), and which heavy
modules `--help` imports. memdiag's bytecode is compiled first, as pip does on install.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RANKS = ROOT / "memdiag" / "data" / "tiktoken"
URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MiB) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else b""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {err.decode()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeat", type=int, default=15, help="rounds (best and median of N)")
    args = ap.parse_args()
    py = sys.executable
    tmp = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    try:
        tk_cache = tmp / "tiktoken"
        tk_cache.mkdir()
        for name in ("o200k_base", "cl100k_base"):
            key = hashlib.sha1(URL.format(name).encode()).hexdigest()
            shutil.copy(RANKS / f"{name}.tiktoken", tk_cache / key)
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        env["TIKTOKEN_CACHE_DIR"] = str(tk_cache)
        env["MEMDIAG_CACHE_DIR"] = str(tmp / "memdiag")
        # an installed package has its bytecode compiled (pip does it); so does this run
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([py, "-m", "compileall", "-q", str(ROOT / "memdiag")], check=True)
        cases = {
            "tiktoken get_encoding": [
                py,
                "-c",
                "import tiktoken; tiktoken.get_encoding('o200k_base')",
            ],
            "memdiag replay (90 msgs)": [
                py,
                "-m",
                "memdiag",
                "replay",
                str(ROOT / "fixtures" / "allergy.jsonl"),
            ],
            "import typer, rich": [py, "-c", "import typer, rich"],
            "memdiag --help": [py, "-m", "memdiag", "--help"],
            # where --help's time goes: typer's Rich help module alone, and plain help
            "import typer.rich_utils": [py, "-c", "import typer.rich_utils"],
            "--help, TYPER_USE_RICH=0": [
                "env",
                "TYPER_USE_RICH=0",
                py,
                "-m",
                "memdiag",
                "--help",
            ],
        }
        cold, _, _ = run(cases["memdiag replay (90 msgs)"], env)  # builds the compact rank cache
        for cmd in cases.values():  # warm the OS file cache
            run(cmd, env)
        walls: dict[str, list[float]] = {k: [] for k in cases}
        cpus: dict[str, list[float]] = {k: [] for k in cases}
        rss: dict[str, float] = {}
        for _ in range(args.repeat):
            for label, cmd in cases.items():
                wall, cpu, peak = run(cmd, env)
                walls[label].append(wall)
                cpus[label].append(cpu)
                rss[label] = max(rss.get(label, 0.0), peak)
        probe = (
            "import sys; from memdiag.cli import app\n"
            "try:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = ('chromadb', 'numpy', 'tiktoken', 'onnxruntime', 'pydantic', 'yaml')\n"
            "print(sorted(m for m in heavy if m in sys.modules))"
        )
        heavy = (
            subprocess.run([py, "-c", probe], env=env, check=True, capture_output=True, text=True)
            .stdout.strip()
            .splitlines()[-1]
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"{'process':<28}{'wall best':>10}{'median':>9}{'CPU best':>10}{'peak RSS':>11}"
        f"   ({args.repeat} interleaved rounds)"
    )
    for label in cases:
        w = walls[label]
        print(
            f"{label:<28}{min(w):>9.3f}s{statistics.median(w):>8.3f}s{min(cpus[label]):>9.3f}s"
            f"{rss[label]:>7.0f} MiB"
        )
    print(f"{'memdiag replay, cold cache':<28}{cold:>9.3f}s   (first run: builds the rank cache)")

    def ratio(a: str, b: str) -> str:
        best = min(walls[a]) / min(walls[b])
        med = statistics.median(walls[a]) / statistics.median(walls[b])
        cpu = min(cpus[a]) / min(cpus[b])
        return f"wall {best:.2f}x best, {med:.2f}x median; CPU {cpu:.2f}x"

    print(
        f"replay / tiktoken alone:   {ratio('memdiag replay (90 msgs)', 'tiktoken get_encoding')}"
        "  (goal <= 1.0x)"
    )
    print(
        f"--help / import typer,rich: {ratio('memdiag --help', 'import typer, rich')}"
        "  (goal <= 2.0x)"
    )
    print(
        f"plain help / import typer,rich: {ratio('--help, TYPER_USE_RICH=0', 'import typer, rich')}"
    )
    print(
        f"rich_utils / import typer,rich: {ratio('import typer.rich_utils', 'import typer, rich')}"
    )
    print(f"heavy modules imported by --help: {heavy}")


if __name__ == "__main__":
    main()
