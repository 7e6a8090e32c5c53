"""Benchmark: evidence ranking on a real LoCoMo conversation vs plain BM25
(docs/reference.md#verdicts step 1, §9).

    python benchmarks/bench_evidence.py [--dev PATH] [--facts 40]

The dev conversation (default ../shared/datasets/locomo/locomo-conv-26.json, CC BY-NC: never
committed) gives two kinds of probes, each with the dataset's gold turn(s):
  - QA items: fact = question + " " + answer (adversarial items: their adversarial answer),
    and again the answer alone ("answer N" lines: short facts, the hardest case);
  - observations: the per-session memories ("Caroline attended an LGBTQ support group
    recently ..."), third-person, as memory systems write them, with their evidence dia_id.
For each, recall@1 and recall@3 of a gold turn among the candidates, side by side for:
  memdiag    the default ranking (exact, BM25, MiniLM, temporal, fused);
  lexical    the same without the embedding model (what a user without it gets);
  rrf        reciprocal-rank fusion of the same rankers (the alternative we measured);
  bm25       plain Okapi BM25 over every turn (lowercased \\w+ tokens, no stemming).
never_stated precision/recall: positives are all the probes above (each was stated),
negatives are benchmarks/data/negative_facts.txt, facts of another conversation written for
memdiag, once with other names and once with the dev speakers' names. Precision: of the facts
called never_stated, the share that were never stated; recall: of the never-stated facts, the
share called so.
The memdiag column is what `diagnose` reports (evidence order; verdict never_stated or not),
facts at the last turn, default settings, no store. Time: `diagnose` of --facts observations
(what-if included, as the CLI runs it) with an empty embedding cache (cold), then again (warm),
plus all the facts above; peak memory of the process. Then the same `diagnose` as a process,
as a user runs it (the file read, imports and exit included), with an empty cache, then warm.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# $MEMDIAG_SHARED, beside the checkout (../shared), or two levels up from a worktree of it
_SHARED = [Path(os.environ["MEMDIAG_SHARED"])] if os.environ.get("MEMDIAG_SHARED") else []
_SHARED += [ROOT.parent / "shared", ROOT.parent.parent / "shared"]
_DEV_FILES = [d / "datasets" / "locomo" / "locomo-conv-26.json" for d in _SHARED]
DEV = next((f for f in _DEV_FILES if f.is_file()), _DEV_FILES[0])
NEGATIVES = Path(__file__).resolve().parent / "data" / "negative_facts.txt"
OTHER_NAMES = ("Priya", "Tomas")

Probe = tuple[str, str, frozenset[str]]  # (line label, fact, gold message ids)


def dev_probes(path: Path) -> tuple[Any, list[Probe]]:
    """The transcript of a LoCoMo file and its QA + observation probes with gold message ids."""
    from memdiag.transcript.formats import load

    transcript = load(path, "locomo")
    ids = {_dia_key(m.id): m.id for m in transcript.messages}
    probes: list[Probe] = []
    for p in transcript.probes:
        answer = p.answer if p.answer is not None else p.adversarial_answer
        if p.evidence_ids and answer is not None:
            gold = frozenset(p.evidence_ids)
            probes.append((f"qa {p.category}", f"{p.question} {answer}", gold))
            probes.append((f"answer {p.category}", str(answer), gold))
    raw = json.loads(path.read_text(encoding="utf-8"))
    for sample in raw:
        for per_speaker in (sample.get("observation") or {}).values():
            for items in per_speaker.values():
                for fact, dia in items:
                    dias = dia if isinstance(dia, list) else [dia]
                    gold = frozenset(ids[k] for k in map(_dia_key, dias) if k in ids)
                    if gold:
                        probes.append(("observation", fact, gold))
    return transcript, probes


def _dia_key(dia_id: str) -> str:
    m = re.search(r"D:?(\d+):0*(\d+)", dia_id)
    return f"D{int(m.group(1))}:{int(m.group(2))}" if m else dia_id


def negatives(speakers: Sequence[str]) -> tuple[list[str], list[str]]:
    """(facts with other names, the same facts with the dev conversation's speakers)."""
    lines = [
        s.strip()
        for s in NEGATIVES.read_text(encoding="utf-8").splitlines()
        if s.strip() and not s.startswith("#")
    ]
    a, b = [*speakers, "A", "B"][:2]
    other = [s.format(A=OTHER_NAMES[0], B=OTHER_NAMES[1]) for s in lines]
    same = [s.format(A=a, B=b) for s in lines]
    return other, same


class PlainBM25:
    """The baseline: Okapi BM25 over every message, lowercased \\w+ tokens, nothing else."""

    def __init__(self, messages: Sequence[Any]) -> None:
        from memdiag.ranking.lexical import BM25Index

        self.messages = [m for m in messages if m.content.strip()]
        self.index = BM25Index(re.findall(r"\w+", m.content.lower()) for m in self.messages)

    def top_ids(self, fact: str, k: int) -> list[str]:
        scores = self.index.score(re.findall(r"\w+", fact.lower())).bm25
        return [self.messages[i].id for i in sorted(scores, key=lambda i: -scores[i])[:k]]


def recall(
    rows: list[tuple[str, list[str], frozenset[str]]],
) -> dict[str, tuple[float, float, int]]:
    by: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for label, ids, gold in rows:
        by[label].append((bool(set(ids[:1]) & gold), bool(set(ids[:3]) & gold)))
    out = {}
    for label in sorted(by, key=lambda s: (s == "observation", s.startswith("answer"), s)):
        hits = by[label]
        out[label] = (
            sum(h[0] for h in hits) / len(hits),
            sum(h[1] for h in hits) / len(hits),
            len(hits),
        )
    return out


def never_stated(
    stated: Sequence[bool], is_negative: Sequence[bool | None]
) -> tuple[float, float, int, int]:
    """(precision, recall, called, truly never stated); None in ``is_negative``: not judged."""
    pairs = [(s, n) for s, n in zip(stated, is_negative, strict=True) if n is not None]
    stated = [s for s, _ in pairs]
    is_negative = [bool(n) for _, n in pairs]
    called = [not s for s in stated]
    tp = sum(c and n for c, n in zip(called, is_negative, strict=True))
    return (
        tp / max(sum(called), 1),
        tp / max(sum(is_negative), 1),
        sum(called),
        sum(is_negative),
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dev", type=Path, default=DEV, help="a LoCoMo file (default: %(default)s)")
    ap.add_argument("--facts", type=int, default=40, help="facts in the timed run")
    args = ap.parse_args(argv)
    if not args.dev.is_file():
        print(f"dev conversation not found: {args.dev} (LoCoMo, not shipped)", file=sys.stderr)
        return 2

    from memdiag.ranking import Params, evidence_index

    def run_diagnose(transcript: Any, facts: Sequence[str], what_if: bool = True) -> list[Any]:
        """`memdiag diagnose --fact F ...` at the last turn, no store, default settings."""
        from memdiag.config import Settings
        from memdiag.diagnosis import Failure, diagnose

        last = len(transcript.turns)
        return diagnose(transcript, Settings(), [Failure(f, last) for f in facts], None, what_if)

    transcript, probes = dev_probes(args.dev)
    speakers = sorted({m.name for m in transcript.messages if m.name})
    neg_other, neg_same = negatives(speakers)
    facts = [f for _, f, _ in probes]
    judged_facts = sum(not label.startswith("answer") for label, _, _ in probes)
    users = sum(m.role == "user" for m in transcript.messages)
    print(
        f"dev: {args.dev.name}: {len(transcript.messages)} messages in {len(transcript.sessions)} "
        f"sessions ({users} turns); {len(probes)} probes; "
        f"{len(neg_other)} + {len(neg_same)} negatives",
    )

    import os

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MEMDIAG_CACHE_DIR"] = tmp  # memdiag/usercache.py
        # timed: `diagnose` of --facts observations (CLI defaults), cold cache then warm
        obs = [f for label, f, _ in probes if label == "observation"][: args.facts]
        timings = []
        from memdiag.ranking import minilm

        embedded: list[str] = []  # what the cold run gave the model, to time the model alone
        model_call = minilm.MiniLM.__call__

        def recording(self: Any, texts: Sequence[str], progress: Any = None) -> Any:
            embedded.extend(texts)
            return model_call(self, texts, progress)

        minilm.MiniLM.__call__ = recording  # type: ignore[method-assign]
        for _ in ("cold", "warm"):
            t0, c0 = time.perf_counter(), time.process_time()
            diagnoses = run_diagnose(transcript, obs)
            note = diagnoses[0].details.semantic_search or ""
            timings.append((time.perf_counter() - t0, time.process_time() - c0, note))
        minilm.MiniLM.__call__ = model_call  # type: ignore[method-assign]
        # the floor of a cold run: loading the model and embedding the same texts, nothing else
        model_cpu = 0.0
        if embedded:
            minilm._SESSIONS.clear()
            c0 = time.process_time()
            minilm.local_minilm()[0](embedded)  # type: ignore[misc]
            model_cpu = time.process_time() - c0
        results: dict[str, dict[str, tuple[float, float, int]]] = {}
        judged: dict[str, tuple[float, float, int, int]] = {}
        everything = facts + neg_other + neg_same
        # an answer alone ("2022", "No") is not a fact that was stated or not: not judged
        positives: list[bool | None] = [
            None if label.startswith("answer") else False for label, _, _ in probes
        ]
        is_negative = positives + [True] * (len(neg_other) + len(neg_same))
        k = len(facts) + len(neg_other)
        # memdiag: what `diagnose` reports (evidence order, never_stated verdicts)
        t0 = time.perf_counter()
        diagnoses = run_diagnose(transcript, everything, what_if=False)
        t_all = time.perf_counter() - t0
        results["memdiag"] = recall(
            [
                (label, [e.id for e in d.evidence], gold)
                for (label, _, gold), d in zip(probes, diagnoses, strict=False)
            ]
        )
        stated = [d.verdict.value != "never_stated" for d in diagnoses]
        judged["memdiag"] = never_stated(stated, is_negative)
        judged["memdiag (other names only)"] = never_stated(stated[:k], is_negative[:k])
        # the ranking alone, without the model, and with reciprocal-rank fusion
        variants = {
            "lexical": (False, Params()),
            "rrf": (True, Params(fusion="rrf", neighbor_weight=0.0, speaker_weight=0.0)),
        }
        for name, (semantic, params) in variants.items():
            index, _ = evidence_index(transcript, semantic=semantic, params=params)
            ranked = index.rank([(f, None) for f in everything], top=3)
            rows = [
                (label, [c.id for c in r.candidates], gold)
                for (label, _, gold), r in zip(probes, ranked, strict=False)
            ]
            results[name] = recall(rows)
            judged[name] = never_stated([r.stated for r in ranked], is_negative)
            judged[name + " (other names only)"] = never_stated(
                [r.stated for r in ranked[:k]], is_negative[:k]
            )
            if index.cache is not None:
                index.cache.close()
        bm25 = PlainBM25(transcript.messages)
        results["bm25"] = recall([(label, bm25.top_ids(f, 3), gold) for label, f, gold in probes])

    cols = list(results)
    print(f"\nsemantic ranker: {timings[0][2]}")
    print(f"\n{'recall@1 / @3':16s} {'n':>4s}  " + "  ".join(f"{c:>11s}" for c in cols))
    for label in results["memdiag"]:
        n = results["memdiag"][label][2]
        cells = "  ".join(f"{results[c][label][0]:5.2f} {results[c][label][1]:5.2f}" for c in cols)
        print(f"{label:16s} {n:4d}  {cells}")
    print(
        "\nnever_stated                  precision recall  called/never  "
        "stated facts called never_stated"
    )
    for name, (p, r, called, neg) in judged.items():
        wrong = called - round(p * called)
        print(
            f"  {name:28s} {p:5.2f}   {r:5.2f}   {called:4d}/{neg:<4d}     "
            f"{wrong}/{judged_facts} ({wrong / judged_facts:.1%})"
        )
    (cold, cold_cpu, cold_note), (warm, warm_cpu, warm_note) = timings
    print(
        f"\ntime: diagnose of {len(obs)} facts over {len(transcript.messages)} messages: "
        f"cold cache {cold:.1f} s (CPU {cold_cpu:.1f} s; {cold_note}), "
        f"warm {warm:.1f} s (CPU {warm_cpu:.1f} s; {warm_note}); "
        f"the model alone (load + the {len(embedded)} texts of the cold run): CPU "
        f"{model_cpu:.1f} s, cold diagnose = {cold_cpu / max(model_cpu, 1e-9):.2f}x it; "
        f"all {len(everything)} facts (no what-if): {t_all:.1f} s; "
        f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    for label, (wall, cpu) in as_processes(args.dev, obs).items():
        print(
            f"  as a process, `memdiag diagnose` of the {len(obs)} facts, {label}: "
            f"{wall:.1f} s wall, CPU {cpu:.1f} s"
        )
    return 0


def as_processes(dev: Path, facts: Sequence[str]) -> dict[str, tuple[float, float]]:
    """`memdiag diagnose DEV --fact ... --format json` as a user runs it (load, imports and
    exit included; bytecode compiled first, as pip does): empty cache, then warm."""
    import subprocess

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "memdiag")], check=True)
    cmd = [sys.executable, "-m", "memdiag", "diagnose", str(dev), "--format", "json"]
    for fact in facts:
        cmd += ["--fact", fact]
    out: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        env["MEMDIAG_CACHE_DIR"] = tmp
        for label in ("empty cache", "warm cache"):
            start = time.perf_counter()
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
            _, status, use = os.wait4(proc.pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                raise SystemExit(f"memdiag diagnose failed ({label})")
            out[label] = (time.perf_counter() - start, use.ru_utime + use.ru_stime)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
