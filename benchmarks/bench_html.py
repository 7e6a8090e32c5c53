"""What `--html` adds to `diagnose` and `check` (target: at most 10% over the run without it).

    python benchmarks/bench_html.py [--messages 4000] [--facts 101] [--repeat 3]

Writes a generated transcript (bench_replay.generate) and --facts facts: the strong facts the
transcript states plus sentences of it, so that some are kept and some lost. Then runs, as
processes, in the same run and interleaved: `check` of one case with one `kept` expectation
per fact, with and without `--html`, and `diagnose --strategy sliding_window` of every fact at
the last turn (`--no-cache`, no store), with and without `--html`. Prints CPU (user+sys, best
of --repeat), the ratio with/without (of the bests, and the median of each round's pair:
the steadier figure on a shared machine whose speed drifts), and whether the diagnosis found
the embedding model (MEMDIAG_ONNX_MODEL_DIR or Chroma's cache): without it, evidence is
lexical and the report's replays weigh most; with it, every run embeds the transcript and the
ratio is the model's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_replay import NEUTRAL, generate, paired_ratio


def facts_for(n: int) -> list[str]:
    out = ["allergic to peanuts", "Mia", "花生过敏", "never book me on a red-eye flight"]
    k = 0
    while len(out) < n:
        base = NEUTRAL[k % len(NEUTRAL)].format(n=k % 997 + 1).rstrip("?.!。")
        out.append(base if k < len(NEUTRAL) else f"{base} {k}")
        k += 1
    return out[:n]


def cpu(cmd: list[str], env: dict[str, str]) -> float:
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    _, status, use = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: a check or verdict failed
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return use.ru_utime + use.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--messages", type=int, default=4000)
    ap.add_argument("--facts", type=int, default=101)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import yaml

    from memdiag.transcript.writer import write_canonical

    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled first, as pip does on install
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "memdiag")], check=True)
    py = [sys.executable, "-m", "memdiag"]
    with tempfile.TemporaryDirectory(prefix="bench-html-") as tmp:
        folder = Path(tmp)
        chat = folder / "chat.jsonl"
        t = generate(args.messages)
        with chat.open("w", encoding="utf-8") as fp:
            write_canonical(t, fp)
        facts = facts_for(args.facts)
        spec = folder / "checks.yaml"
        case = {
            "name": "generated",
            "transcript": "chat.jsonl",
            "expect": [{"kept": f, "at_turn": len(t.turns)} for f in facts],
        }
        spec.write_text(
            yaml.safe_dump(
                {
                    "version": 1,
                    "defaults": {"strategy": {"name": "sliding_window", "budget": 4000}},
                    "cases": [case],
                },
                allow_unicode=True,
            ),
            encoding="utf-8",
        )
        fact_args = [x for f in facts for x in ("--fact", f)]
        diag = [*py, "diagnose", str(chat), *fact_args, "--at", str(len(t.turns))]
        diag += ["--strategy", "sliding_window", "--budget", "4000", "--no-cache"]
        diag += ["--format", "json"]
        cmds = {
            "check": [*py, "check", str(spec), "--format", "json"],
            "check --html": [*py, "check", str(spec), "--format", "json"],
            "diagnose": diag,
            "diagnose --html": [*diag],
        }
        cmds["check --html"] += ["--html", str(folder / "check.html")]
        cmds["diagnose --html"] += ["--html", str(folder / "diagnose.html")]
        got: dict[str, list[float]] = {k: [] for k in cmds}
        for r in range(args.repeat):
            # every other round in reverse order: a machine speeding up or slowing down
            # during the run weighs on both sides of each ratio alike
            for label in list(cmds) if r % 2 == 0 else reversed(cmds):
                got[label].append(cpu(cmds[label], env))
    from memdiag.ranking.minilm import local_minilm

    model, where = local_minilm()  # what the diagnose processes found, in the same environment
    print(f"{len(t.messages):,} messages, {len(facts)} facts (CPU user+sys, best of {args.repeat})")
    print("  ratio: of the bests; paired: the median of each round's with/without")
    ranker = f"semantic too, {where} (each run embeds: --no-cache)" if model else "lexical only"
    print(f"  diagnose evidence: {ranker}")
    for name in ("check", "diagnose"):
        plain, html = min(got[name]), min(got[f"{name} --html"])
        paired = paired_ratio(got[f"{name} --html"], got[name])
        print(
            f"  {name:<9} {plain:6.2f}s   --html {html:6.2f}s   ratio {html / plain:4.2f}x"
            f"   paired {paired:4.2f}x"
        )


if __name__ == "__main__":
    main()
