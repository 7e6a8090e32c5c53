"""Snapshot every command's JSON output on every fixture, to prove a refactor changes nothing.

    python scripts/snapshot_outputs.py OUT_DIR            # write one file per command
    python scripts/snapshot_outputs.py OUT_DIR --compare BASELINE_DIR

Run it before a change (baseline) and after it (compare): the files must be byte-identical.
Chroma stores are built from fixtures/memories/*.jsonl with the real MiniLM model
(MEMDIAG_ONNX_MODEL_DIR or ../shared); without the model the store commands are left out and
the script says so. Each command runs in-process through Typer's CliRunner.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
COSINE = {"hnsw": {"space": "cosine"}}


def model_dir() -> Path | None:
    env = os.environ.get("MEMDIAG_ONNX_MODEL_DIR")
    for c in [Path(env)] if env else [ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2"]:
        if (c / "onnx" / "model.onnx").is_file():
            return c
    return None


def build_store(
    path: Path, collections: dict[str, tuple[str, dict[str, Any]]], model: Path
) -> None:
    import chromadb
    from chromadb.config import Settings
    from chromadb.utils.embedding_functions import DefaultEmbeddingFunction, ONNXMiniLM_L6_V2

    ONNXMiniLM_L6_V2.DOWNLOAD_PATH = model  # type: ignore[assignment]
    client = chromadb.PersistentClient(
        path=str(path), settings=Settings(anonymized_telemetry=False)
    )
    for name, (fixture, config) in collections.items():
        col = client.create_collection(
            name,
            embedding_function=DefaultEmbeddingFunction(),
            configuration=config,  # type: ignore[arg-type]
        )
        rows = [json.loads(x) for x in (FIX / "memories" / fixture).read_text().splitlines() if x]
        col.add(
            ids=[r["id"] for r in rows],
            documents=[r["document"] for r in rows],
            metadatas=[r["metadata"] for r in rows],
        )
    client.close()


def transcripts() -> list[tuple[str, list[str]]]:
    """(path, flags): the canonical fixtures and every registered format's example files, with
    the choices a format needs to read them whole (``--session all``), as the JSON contract
    test reads them."""
    from memdiag.transcript.formats import formats

    out: list[tuple[str, list[str]]] = [
        (str(p.relative_to(ROOT)), []) for p in sorted(FIX.glob("*.jsonl"))
    ]
    for f in formats().values():
        flags = [a for flag in getattr(f, "selects", {}).values() for a in (flag, "all")]
        out += [(f"fixtures/{e}", flags) for e in f.examples]
    unique: dict[str, list[str]] = {}
    for path, fl in out:
        unique.setdefault(path, fl)  # a file that is two formats' example is run once
    return list(unique.items())


def commands(stores: dict[str, Path] | None) -> dict[str, list[str]]:
    """name → argv. Transcript fixtures × replay/diagnose/convert, facts files, stores, checks."""
    cmds: dict[str, list[str]] = {}
    for rel, flags in transcripts():
        key = rel.replace("/", "_")
        cmds[f"convert_{key}"] = ["convert", rel]
        for budget in ("300", "400", "2000"):
            cmds[f"replay_{key}_{budget}"] = [
                "replay",
                rel,
                "--strategy",
                "all",
                "--budget",
                budget,
                "--format",
                "json",
            ]
        cmds[f"replay_{key}_jsonl"] = ["replay", rel, "--budget", "400", "--format", "jsonl"]
        cmds[f"replay_{key}_turns"] = ["replay", rel, "--max-turns", "3", "--format", "json"]
        for strategy in ("sliding_window", "summary", "scratchpad"):
            cmds[f"diagnose_{key}_{strategy}"] = [
                "diagnose",
                rel,
                "--budget",
                "400",
                "--strategy",
                strategy,
                "--format",
                "json",
            ]
        cmds[f"diagnose_{key}_fact"] = [
            "diagnose",
            rel,
            "--fact",
            "allergic to peanuts",
            "--budget",
            "300",
            "--format",
            "json",
        ]
        for k, argv in cmds.items():
            if flags and argv[1] == rel:
                cmds[k] = [*argv, *flags]
    for name in ("locomo_sample.json", "longmemeval_sample.json"):
        rel = f"fixtures/formats/{name}"
        cmds[f"diagnose_probes_{name}"] = ["diagnose", rel, "--probes", "--format", "json"]
    for facts in (
        "facts.json",
        "facts_records.json",
        "longterm_facts.json",
        "longterm_facts_zh.json",
    ):
        rel = f"fixtures/{facts}"
        cmds[f"inspect_{facts}"] = ["inspect-store", "--facts-file", rel, "--format", "json"]
        cmds[f"replay_demo_{facts}"] = [
            "replay",
            "fixtures/demo.jsonl",
            "--facts-file",
            rel,
            "--format",
            "json",
        ]
    cmds["diagnose_longterm_facts"] = [
        "diagnose",
        "fixtures/longterm.jsonl",
        "--facts-file",
        "fixtures/longterm_facts.json",
        "--budget",
        "4000",
        "--format",
        "json",
    ]
    cmds["diagnose_longterm_zh_facts"] = [
        "diagnose",
        "fixtures/longterm_zh.jsonl",
        "--facts-file",
        "fixtures/longterm_facts_zh.json",
        "--budget",
        "4000",
        "--format",
        "json",
    ]
    cmds["check_fixtures"] = ["check", "fixtures/checks.yaml", "--format", "json"]
    if stores:
        audit, agent = str(stores["audit"]), str(stores["agent"])
        cmds["inspect_chroma"] = ["inspect-store", "--chroma", audit, "--format", "json"]
        cmds["inspect_chroma_facts"] = [
            "inspect-store",
            "--chroma",
            audit,
            "--facts-file",
            "fixtures/facts.json",
            "--format",
            "json",
        ]
        cmds["inspect_chroma_dirty"] = [
            "inspect-store",
            "--chroma",
            audit,
            "--collection",
            "dirty",
            "--format",
            "json",
        ]
        for k in ("3", "1"):
            cmds[f"diagnose_longterm_chroma_{k}"] = [
                "diagnose",
                "fixtures/longterm.jsonl",
                "--chroma",
                agent,
                "--collection",
                "agent",
                "--top-k",
                k,
                "--budget",
                "4000",
                "--format",
                "json",
            ]
        cmds["diagnose_longterm_chroma_facts"] = [
            "diagnose",
            "fixtures/longterm.jsonl",
            "--chroma",
            agent,
            "--facts-file",
            "fixtures/longterm_facts.json",
            "--budget",
            "4000",
            "--format",
            "json",
        ]
    return cmds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--compare", type=Path, help="baseline directory to compare against")
    args = ap.parse_args()
    os.chdir(ROOT)
    os.environ["ANONYMIZED_TELEMETRY"] = "False"
    from typer.testing import CliRunner

    from memdiag.cli import app

    model = model_dir()
    with tempfile.TemporaryDirectory() as tmp:
        stores = None
        if model is not None:
            os.environ.setdefault("MEMDIAG_ONNX_MODEL_DIR", str(model))
            stores = {"audit": Path(tmp) / "audit", "agent": Path(tmp) / "agent"}
            build_store(
                stores["audit"],
                {
                    "clean": ("clean.jsonl", COSINE),
                    "dirty": ("dirty.jsonl", COSINE),
                    "l2_space": ("clean.jsonl", {"hnsw": {"space": "l2"}}),
                },
                model,
            )
            build_store(stores["agent"], {"agent": ("agent.jsonl", COSINE)}, model)
        else:
            print("no embedding model: Chroma commands left out", file=sys.stderr)
        args.out.mkdir(parents=True, exist_ok=True)
        runner = CliRunner()
        for name, argv in commands(stores).items():
            res = runner.invoke(app, argv)
            text = res.stdout.replace(tmp, "<TMP>")
            (args.out / f"{name}.out").write_text(f"exit {res.exit_code}\n{text}")
    if args.compare is None:
        print(f"wrote {len(list(args.out.iterdir()))} outputs to {args.out}")
        return 0
    names = sorted(p.name for p in args.compare.iterdir())
    differ = [
        n
        for n in names
        if not filecmp.cmp(args.compare / n, args.out / n, shallow=False)
        if (args.out / n).exists()
    ]
    missing = [n for n in names if not (args.out / n).exists()]
    for n in differ + missing:
        print(f"DIFFERS: {n}")
    print(f"{len(names) - len(differ) - len(missing)}/{len(names)} identical")
    return 1 if differ or missing else 0


if __name__ == "__main__":
    sys.exit(main())
