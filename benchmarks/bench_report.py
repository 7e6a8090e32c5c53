"""Interactive report benchmark: file size and time to open, 10,000 vs 1,000 messages.

    python benchmarks/bench_report.py                 # 1,000 and 10,000 messages
    python benchmarks/bench_report.py --messages 1000 10000 40000

For each size: replay every strategy (tracking the strong facts memdiag finds), build the page
(`replay --strategy all --html`), then open it from disk in headless Chromium (Debian's
chromium-headless-shell, or MEMDIAG_CHROMIUM) and measure:
- the file size (it must grow with n, not n²: bytes per message stays flat);
- time to open: from navigation to the page being ready (script parsed the data and drew the
  last turn), wall clock, and the script's own share;
- scrubbing: the time to render one turn (style and layout included), for steps to the next
  turn (← → keys) and for random jumps (a click on the timeline), median and worst.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_replay import generate

from memdiag.config import Settings
from memdiag.render.report import TextRecorder, write_report
from memdiag.render.report.build import replay_document
from memdiag.replay import run
from tests.browser import FLAGS, chromium_binary


def chromium() -> str:
    found = chromium_binary()
    if found is None:
        sys.exit("no Chromium: apt-get install -y chromium-headless-shell (or MEMDIAG_CHROMIUM)")
    return found


def build(n: int, budget: int, out: Path) -> tuple[int, float, int]:
    """Write the report of n generated messages; (turns, seconds to build and write, bytes)."""
    t = generate(n)
    settings = Settings().with_overrides(strategy="all", budget=budget)
    start = time.perf_counter()
    recorder = TextRecorder(t)
    report = run(t, settings, observe=recorder)
    write_report(str(out), replay_document(report, recorder, settings))
    return len(t.turns), time.perf_counter() - start, out.stat().st_size


def measure(context, path: Path, steps: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    page = context.new_page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if not r.url.startswith("file:") else None)
    start = time.perf_counter()
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=120_000)
    wall = (time.perf_counter() - start) * 1000
    script = page.evaluate("memdiag.openedMs")
    turns = page.evaluate("memdiag.data.runs[0].turns.user.length")
    step = page.evaluate(
        f"""() => {{ const out = []; let n = Math.max(1, {turns} - {steps});
           for (let k = 0; k < {steps}; k++) out.push(memdiag.renderNow(n + k)); return out; }}"""
    )
    jump = page.evaluate(
        f"""() => {{ const out = []; let x = 12345;
           for (let k = 0; k < {steps}; k++) {{ x = (x * 1103515245 + 12345) % 2147483648;
             out.push(memdiag.renderNow(1 + x % {turns})); }} return out; }}"""
    )
    assert not requests, requests
    page.close()
    return {
        "open_wall_ms": wall,
        "open_script_ms": script,
        "step_median_ms": statistics.median(step),
        "step_max_ms": max(step),
        "jump_median_ms": statistics.median(jump),
        "jump_max_ms": max(jump),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--messages", type=int, nargs="+", default=[1000, 10_000])
    ap.add_argument("--budget", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=60, help="turn renders measured per kind")
    ap.add_argument("--repeat", type=int, default=3, help="opens per report (best is shown)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="memdiag-bench-report-") as tmp, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(Path(tmp) / "profile"), executable_path=chromium(), headless=True, args=FLAGS,
            viewport={"width": 1400, "height": 1000},
        )  # fmt: skip
        rows = []
        for n in args.messages:
            out = Path(tmp) / f"report-{n}.html"
            turns, built, size = build(n, args.budget, out)
            runs = [measure(context, out, args.steps) for _ in range(args.repeat)]
            best = min(runs, key=lambda r: r["open_wall_ms"])
            rows.append((n, turns, built, size, best))
        context.close()
    print(f"strategies: all; budget {args.budget}; Chromium headless; best of {args.repeat} opens")
    print(
        f"{'messages':>9} {'turns':>6} {'build':>7} {'size':>9} {'B/msg':>6} {'open':>8} "
        f"{'(script)':>9} {'step med/max':>14} {'jump med/max':>14}"
    )
    for n, turns, built, size, r in rows:
        print(
            f"{n:>9} {turns:>6} {built:>6.2f}s {size / 1e6:>7.2f}MB {size / n:>6.0f} "
            f"{r['open_wall_ms']:>6.0f}ms {r['open_script_ms']:>7.0f}ms "
            f"{r['step_median_ms']:>6.1f}/{r['step_max_ms']:<5.1f}ms "
            f"{r['jump_median_ms']:>6.1f}/{r['jump_max_ms']:<5.1f}ms"
        )
    if len(rows) > 1:
        (n0, *_, s0, r0), (n1, *_, s1, r1) = rows[0], rows[-1]
        print(
            f"{n1 // n0}× the messages: {s1 / s0:.1f}× the file, "
            f"{r1['open_wall_ms'] / r0['open_wall_ms']:.1f}× the time to open"
        )


if __name__ == "__main__":
    main()
