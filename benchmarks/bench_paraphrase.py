"""Benchmark: which cosine makes two stored memories near-duplicates (docs/stores.md).

    MEMDIAG_ONNX_MODEL_DIR=/path/to/all-MiniLM-L6-v2 python benchmarks/bench_paraphrase.py
        [--locomo PATH] [--pairs]

Labelled pairs of memories, each "paraphrase" (one memory stored twice: merging them loses
nothing) or "different" (two memories, however alike):

- benchmarks/data/paraphrase_pairs.jsonl: memory-style sentences written for memdiag in the
  phrasings mem0, langchain and LlamaIndex stores hold ("Likes a window seat" / "Prefers window
  seats"); the "different" ones are the hard case, the same template with another value
  ("Lives in Berlin" / "Lives in Lisbon");
- benchmarks/data/locomo_observation_pairs.jsonl: the 42 most similar pairs of LoCoMo conv-26's
  ``observation`` memories (CC BY-NC, never committed: only their places are, the text is read
  from --locomo), labelled by hand; most are different events of one person ("attended a pride
  parade last week" in two sessions).

Every text is embedded with Chroma's ONNX all-MiniLM-L6-v2 (the model the fixtures and mem0's
default Chroma setup use). For each threshold the table gives precision and recall of "cosine >=
threshold" as a paraphrase detector, per source and overall; a last row gives the same for the
claim rule the audit applies first (both records state the same subject, field and value,
``Extractor.read_memory``), which needs no embedding at all.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

THRESHOLDS = (0.80, 0.85, 0.90, 0.95)
ROOT = HERE.parent
# $MEMDIAG_SHARED, beside the checkout (../shared), or two levels up from a worktree of it
_SHARED = [Path(os.environ["MEMDIAG_SHARED"])] if os.environ.get("MEMDIAG_SHARED") else []
_SHARED += [ROOT.parent / "shared", ROOT.parent.parent / "shared"]
_DEV_FILES = [d / "datasets" / "locomo" / "locomo-conv-26.json" for d in _SHARED]
DEFAULT_LOCOMO = next((f for f in _DEV_FILES if f.is_file()), _DEV_FILES[0])


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def locomo_pairs(path: Path) -> list[dict[str, Any]]:
    """The labelled LoCoMo places resolved to their observation texts."""
    conv = json.loads(path.read_text(encoding="utf-8"))[0]["observation"]

    def text(ref: str) -> str:
        session, speaker, k = ref.split("/")
        return str(conv[session][speaker][int(k)][0])

    return [
        {**p, "a": text(p["a"]), "b": text(p["b"])}
        for p in _jsonl(HERE / "data" / "locomo_observation_pairs.jsonl")
    ]


def same_claim(a: str, b: str) -> bool:
    """Whether the two memories state one (field, value), as the audit's claim rule reads them."""
    from memdiag.extract import default_extractor
    from memdiag.text import same_value

    ex = default_extractor()
    fa = ex.read_memory(a)
    fb = ex.read_memory(b)
    return any(x.field == y.field and same_value(x.value, y.value) for x in fa for y in fb)


def other_values(a: str, b: str) -> bool:
    """Whether the two memories give different values for a single-valued field both state
    (the audit never calls such records near-duplicates: "Lives in Berlin" / "Lives in Lisbon"
    is a conflict)."""
    from memdiag.extract import default_extractor
    from memdiag.stores.audit.duplicates import claim_value_key

    ex = default_extractor()
    va: dict[str, set[str]] = {}
    vb: dict[str, set[str]] = {}
    for x in ex.read_memory(a):
        if not ex.is_multi(x.field):
            va.setdefault(x.field, set()).add(claim_value_key(x.value))
    for y in ex.read_memory(b):
        if not ex.is_multi(y.field):
            vb.setdefault(y.field, set()).add(claim_value_key(y.value))
    return any(not (va[f] & vb[f]) for f in va.keys() & vb.keys())


def scores(pred: list[bool], gold: list[bool]) -> tuple[float, float, int, int, int]:
    tp = sum(p and g for p, g in zip(pred, gold, strict=True))
    fp = sum(p and not g for p, g in zip(pred, gold, strict=True))
    fn = sum(g and not p for p, g in zip(pred, gold, strict=True))
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall, tp, fp, fn


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    ap.add_argument("--pairs", action="store_true", help="print every pair with its cosine")
    args = ap.parse_args(argv)

    import numpy as np

    from memdiag.stores.embeddings import default_embedder

    embedder, reason = default_embedder()
    if embedder is None:
        print(f"skipped: {reason}", file=sys.stderr)
        return 2
    pairs = _jsonl(HERE / "data" / "paraphrase_pairs.jsonl")
    if args.locomo.is_file():
        pairs += locomo_pairs(args.locomo)
    else:
        print(f"LoCoMo not found at {args.locomo}: its pairs are left out", file=sys.stderr)
    texts = sorted({t for p in pairs for t in (p["a"], p["b"])})
    emb = embedder(texts)
    emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    row = {t: emb[i] for i, t in enumerate(texts)}
    for p in pairs:
        p["cosine"] = float(row[p["a"]] @ row[p["b"]])
        p["claim"] = same_claim(p["a"], p["b"])
        p["other"] = other_values(p["a"], p["b"])
    if args.pairs:
        for p in sorted(pairs, key=lambda p: -p["cosine"]):
            print(
                f"{p['cosine']:.3f} {p['label']:<10} claim={int(p['claim'])} "
                f"{p['a'][:60]!r} | {p['b'][:60]!r}"
            )
        print()

    sources = {"memdiag": "memory sentences", "locomo conv-26 observation": "LoCoMo observations"}
    groups = [(label, [p for p in pairs if p["source"] == s]) for s, label in sources.items()]
    groups = [(label, g) for label, g in groups if g] + [("all", pairs)]
    print(
        "pairs: "
        + ", ".join(
            f"{label} {sum(p['label'] == 'paraphrase' for p in g)} paraphrase / "
            f"{sum(p['label'] != 'paraphrase' for p in g)} different"
            for label, g in groups
        )
    )
    head = "| rule | " + " | ".join(f"{label} P / R" for label, _ in groups) + " |"
    print(head)
    print("|" + "---|" * (len(groups) + 1))
    rules: list[tuple[str, Any]] = [
        (f"cosine >= {t:.2f}", lambda p, t=t: p["cosine"] >= t) for t in THRESHOLDS
    ]
    rules += [
        (f"cosine >= {t:.2f}, no other value", lambda p, t=t: p["cosine"] >= t and not p["other"])
        for t in THRESHOLDS
    ]
    rules.append(("same claim", lambda p: p["claim"]))
    rules.append(
        (
            "same claim, or cosine >= 0.85 and no other value",
            lambda p: p["claim"] or (p["cosine"] >= 0.85 and not p["other"]),
        )
    )
    for name, rule in rules:
        cells = []
        for _label, g in groups:
            gold = [p["label"] == "paraphrase" for p in g]
            pr, rc, tp, fp, fn = scores([bool(rule(p)) for p in g], gold)
            cells.append(f"{pr:.2f} / {rc:.2f} ({tp} tp, {fp} fp, {fn} fn)")
        print(f"| {name} | " + " | ".join(cells) + " |")
    model = os.environ.get("MEMDIAG_ONNX_MODEL_DIR", "Chroma's cache")
    print(f"model: all-MiniLM-L6-v2 from {model}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
