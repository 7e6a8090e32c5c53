"""Replay benchmark (docs/reference.md#performance): all strategies over a generated transcript vs
encoding it once,
and against a peer: LangChain's `trim_messages` called at every turn.

    python benchmarks/bench_replay.py --messages 100000
    pip install -e '.[bench]'   # the peer (langchain-core) and the plot (matplotlib)
    python benchmarks/bench_replay.py --messages 20000 --peers 1000,10000,100000 \
        --plot docs/bench_replay_peers.png

Prints the baseline (tiktoken-encoding every message once, measured in the same run), the time
of a full replay of every strategy (counting included), their ratio (target ≤ 2×), time per
message at several sizes (flat = O(n)), and the peak resident memory of the process.
--cli N runs the commands a user runs, as processes, on N messages: the floor (parse the JSONL
with memdiag's reader and tiktoken-encode every message once; batched and a plain loop; and
the issue's own, stricter floor: json.loads of each line and a plain loop, no reader),
`replay --strategy all` (target ≤ 3× the loop floor's CPU, goal 2×; peak RSS ≤ 2×) and each
strategy alone (≤ 1.5×), memdiag's bytecode compiled first, as pip does on install; every other
round in reverse order, with the median of each round's ratio (paired) beside the ratio of bests.

Peers: at every user turn, `trim_messages(history, strategy="last", include_system=True,
start_on="human")` with a token counter giving memdiag's own counts (the same tiktoken
encoding and chat overhead), as an agent would call it, against memdiag's `sliding_window`
over the same budget (its single counting pass included). A peer size stops being run once
the previous size predicts more than --peer-limit seconds; the table then says so.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memdiag.config import Settings
from memdiag.replay import prepare, replay
from memdiag.strategies import STRATEGIES
from memdiag.tokens import TokenCounter
from memdiag.transcript.model import RawMessage, RawSession, Transcript, build

# Ordinary conversation, with a strong fact stated in about one user message in twenty: the
# density of the fixtures (and of the LoCoMo sample). Numbers vary so no two messages are equal.
NEUTRAL = [
    "Can you find a flight from Berlin to Lisbon on December {n}?",
    "What is the weather like in Porto next week?",
    "The hotel should be under {n} euros a night, ideally in Chiado.",
    "Let's plan a day trip to Sintra with Pena Palace and Quinta da Regaleira.",
    "Here are three options: TP537 at 07:05 for {n} EUR, FR8542 at 06:20 for 168 EUR.",
    "How long does the train from Lisbon to Porto take?",
    "Which museums are open on Mondays?",
    "Could you compare the two hotels for me, option {n} and the one near the river?",
    "I think the second itinerary works better for the family.",
    "That sounds good, let's go with it.",
    "请帮我查一下从上海到成都的高铁，大概{n}元以内。",
    "What time should we leave to catch the {n} bus to Cascais?",
    "Is it easy to get around by tram in the old town?",
    "Let me check with my partner and get back to you about day {n}.",
]
FACTS = [
    "I'm allergic to peanuts, please remember that.",
    "My name is Mia and I live in Berlin.",
    "I prefer window seats and morning flights.",
    "Never book me on a red-eye flight.",
    "我对花生过敏，请记住。",
]


def _say(rng: random.Random, k: int) -> str:
    return " ".join(s.format(n=rng.randint(1, 999)) for s in rng.sample(NEUTRAL, k))


def generate(n_messages: int, seed: int = 7) -> Transcript:
    rng = random.Random(seed)
    items: list[object] = [RawMessage("system", "You are a travel-planning assistant.")]
    count = 0
    call = 0
    session = 0
    while count < n_messages:
        if count % 400 == 0:
            session += 1
            items.append(RawSession(f"s{session}"))
        text = _say(rng, rng.randint(1, 2))
        if rng.random() < 0.05:
            text = rng.choice(FACTS) + " " + text
        items.append(RawMessage("user", text))
        count += 1
        if rng.random() < 0.2:
            call += 1
            cid = f"c{call}"
            items.append(
                RawMessage(
                    "assistant",
                    "",
                    tool_calls=(
                        {
                            "id": cid,
                            "function": {"name": "search", "arguments": '{"q": "flights"}'},
                        },
                    ),
                )
            )
            items.append(RawMessage("tool", _say(rng, 4), tool_call_id=cid))
            count += 2
        items.append(RawMessage("assistant", _say(rng, 3)))
        count += 1
    return build(items, path="<generated>", format="canonical")  # type: ignore[arg-type]


def baseline(t: Transcript) -> tuple[float, float, float]:
    """(single-thread loop, batched, loop CPU) seconds to encode every message once."""
    enc = TokenCounter().encoding
    texts = [m.content for m in t.messages]
    start, cpu = time.perf_counter(), time.process_time()
    for text in texts:
        enc.encode_ordinary(text)
    loop, loop_cpu = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    enc.encode_ordinary_batch(texts, num_threads=2)
    batch = time.perf_counter() - start
    return loop, batch, loop_cpu


def full_replay(t: Transcript, facts: list[str]) -> tuple[float, dict[str, float]]:
    """Total time of counting + every strategy, and the share of each part (and its CPU)."""
    parts: dict[str, float] = {}
    cpu = time.process_time()
    start = time.perf_counter()
    rctx = prepare(t, Settings(budget=4000))
    parts["count+units"] = time.perf_counter() - start
    mark = time.perf_counter()
    for fact in facts:
        rctx.evidence_of(fact)
    parts["evidence"] = time.perf_counter() - mark
    for name in STRATEGIES:
        mark = time.perf_counter()
        replay(rctx, name, facts)
        parts[name] = time.perf_counter() - mark
    parts["CPU"] = time.process_time() - cpu
    return time.perf_counter() - start, parts


def lc_messages(t: Transcript) -> list[Any]:
    """The transcript as LangChain messages; each carries the text memdiag counts for it."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from memdiag.tokens import _message_text

    out: list[Any] = []
    for m in t.messages:
        extra = {"memdiag_text": _message_text(m)}
        if m.role == "system":
            out.append(SystemMessage(m.content, additional_kwargs=extra))
        elif m.role == "user":
            out.append(HumanMessage(m.content, additional_kwargs=extra))
        elif m.role == "assistant":
            calls = [
                {"name": c["function"]["name"], "args": {"q": "flights"}, "id": c["id"]}
                for c in m.tool_calls
            ]
            out.append(AIMessage(m.content, tool_calls=calls, additional_kwargs=extra))
        else:
            out.append(
                ToolMessage(m.content, tool_call_id=m.tool_call_id or "", additional_kwargs=extra)
            )
    return out


def peer_trim(t: Transcript, budget: int, cached: bool = False) -> float:
    """Seconds for `trim_messages` at every user turn of ``t``.

    ``cached``: the counter remembers each message's count (a user who thought of it);
    otherwise every call recounts the history, as the documented token counters do.
    """
    from langchain_core.messages import trim_messages

    counter = TokenCounter()
    encode = counter.encoding.encode_ordinary
    per = counter.overhead.per_message
    roles = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}
    role_tokens = {k: counter.role_tokens[v] for k, v in roles.items()}
    memo: dict[int, int] = {}

    def one(m: Any) -> int:  # memdiag's cost of one message
        text = m.additional_kwargs["memdiag_text"]
        return per + role_tokens[m.type] + (len(encode(text)) if text else 0)

    def count(messages: list[Any]) -> int:
        if not cached:
            return sum(one(m) for m in messages)
        total = 0
        for m in messages:
            n = memo.get(id(m))
            if n is None:
                n = memo[id(m)] = one(m)
            total += n
        return total

    history = lc_messages(t)
    users = [i for i, m in enumerate(t.messages) if m.role == "user"]
    start = time.perf_counter()
    for i in users:
        trim_messages(
            history[: i + 1],
            max_tokens=budget - counter.overhead.reply_priming,
            token_counter=count,
            strategy="last",
            include_system=True,
            start_on="human",
        )
    return time.perf_counter() - start


def memdiag_sliding(t: Transcript, budget: int) -> float:
    start = time.perf_counter()
    replay(prepare(t, Settings(budget=budget)), "sliding_window")
    return time.perf_counter() - start


PEERS = {"trim_messages": False, "trim_messages+memo": True}
Row = dict[str, Any]


def peers(sizes: list[int], budget: int, limit: float) -> list[Row]:
    """Per size: messages, memdiag seconds and each peer's seconds (None when skipped)."""
    rows: list[Row] = []
    print(f"\npeers at every user turn, budget {budget} tokens (memdiag: best of 2)")
    head = f"{'messages':>9} {'memdiag sliding_window':>23}"
    for name in PEERS:
        head += f" {name:>21} {'advantage':>10}"
    print(head)
    for n in sizes:
        t = generate(n)
        ours = min(memdiag_sliding(t, budget) for _ in range(2))
        row: Row = {"n": len(t.messages), "memdiag": ours}
        line = f"{row['n']:>9} {ours:22.2f}s"
        for name, cached in PEERS.items():
            guess = _predict(rows, name, row["n"])
            if guess is not None and guess > limit:
                row[name] = None
                line += f" {f'~{guess:,.0f}s predicted':>21} {'skipped':>10}"
                continue
            row[name] = theirs = peer_trim(t, budget, cached)
            line += f" {theirs:20.2f}s {theirs / ours:9.0f}x"
        rows.append(row)
        print(line, flush=True)
    for name in ("memdiag", *PEERS):
        pts = [(r["n"], r[name]) for r in rows if r.get(name)]
        parts = [
            f"{n1:,}→{n2:,}: n^{math.log(t2 / t1) / math.log(n2 / n1):.2f}"
            for (n1, t1), (n2, t2) in itertools.pairwise(pts)
        ]
        print(f"growth of {name}: {', '.join(parts) or 'one size only'}")
    return rows


def _predict(rows: list[Row], name: str, n: int) -> float | None:
    """Time at ``n`` from the growth seen so far (at least quadratic: the history is recounted)."""
    done = [(r["n"], r[name]) for r in rows if r.get(name)]
    if not done:
        return None
    k = 2.0
    if len(done) >= 2:
        (n1, t1), (n2, t2) = done[-2], done[-1]
        k = max(k, math.log(t2 / t1) / math.log(n2 / n1))
    m, last = done[-1]
    return float(last * (n / m) ** k)


def plot(rows: list[Row], all_rows: list[tuple[int, float]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    xs = [r["n"] for r in rows]
    ax.loglog(xs, [r["memdiag"] for r in rows], "o-", label="memdiag sliding_window")
    if all_rows:
        ax.loglog(
            [r[0] for r in all_rows],
            [r[1] for r in all_rows],
            "s-",
            label="memdiag, all 3 strategies",
        )
    for name, marker in zip(PEERS, "^v", strict=False):
        pts = [(r["n"], r[name]) for r in rows if r.get(name)]
        if not pts:
            continue
        (line,) = ax.loglog(
            [p[0] for p in pts], [p[1] for p in pts], marker + "-", label=f"LangChain {name}"
        )
        if pts[-1][0] < max(xs):  # too slow to run further: the trend, dashed
            guess = _predict([{"n": n, name: v} for n, v in pts], name, max(xs))
            ax.loglog([pts[-1][0], max(xs)], [pts[-1][1], guess], "--", color=line.get_color())
    ax.set_xlabel("messages in the transcript")
    ax.set_ylabel("seconds for one replay (every turn)")
    ax.set_title("Replay time against transcript length (dashed: extrapolated)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    print(f"plot written to {path}")


FLOOR = """
import sys
from memdiag.tokens import TokenCounter
from memdiag.transcript import load
t = load(sys.argv[1])
TokenCounter().encoding.encode_ordinary_batch([m.content for m in t.messages])
"""
# the same with a plain loop: on two cores encode_ordinary_batch's thread pool is slower than
# this for chat-sized texts, so this floor is the stricter one
FLOOR_LOOP = FLOOR.replace(
    "TokenCounter().encoding.encode_ordinary_batch([m.content for m in t.messages])",
    "e = TokenCounter().encoding\n[e.encode_ordinary(m.content) for m in t.messages]",
)

# the floor: parse each JSONL line with json.loads and encode its content, nothing of
# memdiag's reading (no validation, no model of sessions and turns); stricter than the two above
FLOOR_JSON = """
import json, sys
from memdiag.tokens import TokenCounter
e = TokenCounter().encoding
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        content = json.loads(line).get("content") if line.strip() else None
        if isinstance(content, str) and content:
            e.encode_ordinary(content)
"""


def paired_ratio(runs: list[float], floors: list[float]) -> float:
    """The median of each round's ratio: a command and its floor ran minutes apart at most, so
    a machine whose speed drifts (a shared VM) moves both sides of each pair alike."""
    return statistics.median(r / f for r, f in zip(runs, floors, strict=True))


def cli_runs(n: int, repeat: int) -> None:
    """The commands a user runs, as processes: wall, CPU and peak RSS against the floor."""
    import os
    import subprocess
    import tempfile

    from memdiag.transcript.writer import write_canonical

    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # an installed package has its bytecode compiled (pip does it); so does this run, for the
    # floor's imports of memdiag and for the commands alike
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "memdiag")], check=True)
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        path = Path(tmp) / "chat.jsonl"
        with path.open("w", encoding="utf-8") as fp:
            write_canonical(generate(n), fp)
        py = sys.executable
        replay_all = [py, "-m", "memdiag", "replay", str(path), "--strategy", "all"]
        replay_all += ["--budget", "4000"]
        cmds = {
            "floor: parse + encode_ordinary_batch": [py, "-c", FLOOR, str(path)],
            "floor: parse + encode loop": [py, "-c", FLOOR_LOOP, str(path)],
            "floor: json.loads + encode loop": [py, "-c", FLOOR_JSON, str(path)],
            "replay --strategy all (table)": [*replay_all, "--show", "none"],
            "replay --strategy all --format json": [*replay_all, "--format", "json"],
        }
        for name in ("sliding_window", "summary", "scratchpad"):  # each alone: target <= 1.5x
            one = [py, "-m", "memdiag", "replay", str(path), "--strategy", name]
            cmds[f"replay --strategy {name} --format json"] = [
                *one,
                "--budget",
                "4000",
                "--format",
                "json",
            ]
        got: dict[str, list[tuple[float, float, float]]] = {k: [] for k in cmds}
        for r in range(repeat):
            # every other round in reverse order, so that a drift in the machine's speed
            # weighs on the floors and the commands alike
            for label in list(cmds) if r % 2 == 0 else reversed(cmds):
                cmd = cmds[label]
                start = time.perf_counter()
                proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
                _, status, use = os.wait4(proc.pid, 0)
                if os.waitstatus_to_exitcode(status) != 0:
                    raise SystemExit(f"{label} failed")
                wall = time.perf_counter() - start
                got[label].append((wall, use.ru_utime + use.ru_stime, use.ru_maxrss / 1024))
    print(f"\nas processes, {n:,} messages (best of {repeat}; CPU counts every thread)")
    print("  paired: the median of each round's CPU ratio to the floor of that round")
    floor = min(got[next(iter(cmds))])
    loop = min(got["floor: parse + encode loop"])
    plain = min(got["floor: json.loads + encode loop"])
    plain_cpu = [r[1] for r in got["floor: json.loads + encode loop"]]
    loop_cpu = [r[1] for r in got["floor: parse + encode loop"]]
    for label, runs in got.items():
        wall, cpu = min(r[0] for r in runs), min(r[1] for r in runs)
        rss = max(r[2] for r in runs)
        print(
            f"  {label:<45} wall {wall:6.2f}s ({wall / floor[0]:4.2f}x)  CPU {cpu:6.2f}s "
            f"({cpu / floor[1]:4.2f}x)  peak RSS {rss:5.0f} MiB ({rss / floor[2]:4.2f}x)"
            f"  | vs the loop floor: wall {wall / loop[0]:4.2f}x CPU {cpu / loop[1]:4.2f}x"
            f" (paired {paired_ratio([r[1] for r in runs], loop_cpu):4.2f}x)"
            f"  | vs json.loads + loop: CPU {cpu / plain[1]:4.2f}x"
            f" (paired {paired_ratio([r[1] for r in runs], plain_cpu):4.2f}x)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs")
    ap.add_argument("--peers", default="", help="sizes for the peer run, e.g. 1000,10000,100000")
    ap.add_argument("--peer-budget", type=int, default=4000)
    ap.add_argument("--peer-limit", type=float, default=300.0, help="seconds a peer run may take")
    ap.add_argument("--plot", default="", help="write a PNG of time against n (matplotlib)")
    ap.add_argument("--cli", type=int, default=0, help="also run the commands on N messages")
    args = ap.parse_args()
    facts = ["allergic to peanuts", "prefers window seats"]
    TokenCounter()  # load the encoding outside the timings
    print(f"strategies: {', '.join(STRATEGIES)}; facts tracked: {len(facts)}")
    sizes = sorted({max(1000, args.messages // 4), max(1000, args.messages // 2), args.messages})
    all_rows: list[tuple[int, float]] = []
    for n in sizes:
        t = generate(n)
        loop, batch, loop_cpu = min(baseline(t) for _ in range(args.repeat))
        rep, parts = min(full_replay(t, facts) for _ in range(args.repeat))
        all_rows.append((len(t.messages), rep))
        print(
            f"{len(t.messages):>8} messages  encode once: loop {loop:6.2f}s batch {batch:6.2f}s"
            f"  | replay all: {rep:6.2f}s  ratio vs loop {rep / loop:4.2f}x"
            f" vs batch {rep / batch:4.2f}x (CPU vs loop CPU {parts['CPU'] / loop_cpu:4.2f}x)"
            f"  | {rep / len(t.messages) * 1e6:5.1f} µs/message"
        )
        print("          " + "  ".join(f"{k} {v:.2f}s" for k, v in parts.items()))
    if args.cli:
        cli_runs(args.cli, args.repeat)
    if args.peers:
        rows = peers([int(x) for x in args.peers.split(",")], args.peer_budget, args.peer_limit)
        if args.plot:
            plot(rows, all_rows, args.plot)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory of this process: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
