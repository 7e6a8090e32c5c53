"""Replay benchmark (SPEC §9): all strategies over a generated transcript vs encoding it once.

    python benchmarks/bench_replay.py --messages 100000

Prints the baseline (tiktoken-encoding every message once, measured in the same run), the time
of a full replay of every strategy (counting included), their ratio (target ≤ 2×), time per
message at several sizes (flat = O(n)), and the peak resident memory of the process.
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from pathlib import Path

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


def baseline(t: Transcript) -> tuple[float, float]:
    """(single-thread loop, batched) time to encode every message once with tiktoken."""
    enc = TokenCounter().encoding
    texts = [m.content for m in t.messages]
    start = time.perf_counter()
    for text in texts:
        enc.encode_ordinary(text)
    loop = time.perf_counter() - start
    start = time.perf_counter()
    enc.encode_ordinary_batch(texts, num_threads=2)
    batch = time.perf_counter() - start
    return loop, batch


def full_replay(t: Transcript, facts: list[str]) -> tuple[float, dict[str, float]]:
    """Total time of counting + every strategy, and the share of each part."""
    parts: dict[str, float] = {}
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
    return time.perf_counter() - start, parts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs")
    args = ap.parse_args()
    facts = ["allergic to peanuts", "prefers window seats"]
    TokenCounter()  # load the encoding outside the timings
    print(f"strategies: {', '.join(STRATEGIES)}; facts tracked: {len(facts)}")
    sizes = sorted({max(1000, args.messages // 4), max(1000, args.messages // 2), args.messages})
    for n in sizes:
        t = generate(n)
        loop, batch = min(baseline(t) for _ in range(args.repeat))
        rep, parts = min(full_replay(t, facts) for _ in range(args.repeat))
        print(
            f"{len(t.messages):>8} messages  encode once: loop {loop:6.2f}s batch {batch:6.2f}s"
            f"  | replay all: {rep:6.2f}s  ratio vs loop {rep / loop:4.2f}x"
            f" vs batch {rep / batch:4.2f}x"
            f"  | {rep / len(t.messages) * 1e6:5.1f} µs/message"
        )
        print("          " + "  ".join(f"{k} {v:.2f}s" for k, v in parts.items()))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory of this process: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
