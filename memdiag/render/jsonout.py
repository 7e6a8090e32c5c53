"""JSON documents of SPEC §5: a stable contract that CI and scripts consume."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from memdiag.diagnosis.verdicts import Diagnosis
from memdiag.replay import FactSurvival, StrategyReplay, TurnRecord

if TYPE_CHECKING:
    from memdiag.checks import CaseResult, CheckReport


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2)


def turn_json(r: TurnRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "turn": r.turn,
        "session": r.session,
        "session_turn": r.session_turn,
        "tokens": dict(r.tokens),
        "entered": list(r.entered),
        "evicted": list(r.evicted),
        "summarized": list(r.summarized),
    }
    if r.dropped_by_session:
        out["dropped_by_session"] = list(r.dropped_by_session)
    if r.pinned:
        out["pinned"] = [asdict(p) for p in r.pinned]
    if r.overflow:
        out["overflow"] = True
    return out


def fact_json(f: FactSurvival) -> dict[str, Any]:
    return {
        "fact": f.fact,
        "evidence_id": f.evidence_id,
        "evidence_ids": f.evidence_ids,
        "stated_at_turn": f.stated_at_turn,
        "lost_at_turn": f.lost_at_turn,
        "mechanism": f.mechanism,
        "kept_by": f.kept_by,
        "history": f.history,
    }


def replay_json(
    transcript: str, encoding: str, budget: int, results: Sequence[StrategyReplay]
) -> dict[str, Any]:
    return {
        "transcript": transcript,
        "encoding": encoding,
        "budget": budget,
        "strategies": {
            r.name: {
                "turns": [turn_json(t) for t in r.turns],
                "facts": [fact_json(f) for f in r.facts],
            }
            for r in results
        },
    }


def replay_jsonl(results: Sequence[StrategyReplay]) -> Iterator[str]:
    """One line per strategy and turn, then one per fact: a stream for long transcripts."""
    for r in results:
        for t in r.turns:
            yield json.dumps({"strategy": r.name, **turn_json(t)}, ensure_ascii=False)
        for f in r.facts:
            yield json.dumps(
                {"strategy": r.name, "type": "fact", **fact_json(f)}, ensure_ascii=False
            )


def diagnosis_json(d: Diagnosis) -> dict[str, Any]:
    return d.to_dict()


def diagnose_json(transcript: str, diagnoses: Sequence[Diagnosis]) -> dict[str, Any]:
    return {"transcript": transcript, "diagnoses": [diagnosis_json(d) for d in diagnoses]}


def check_case_json(case: CaseResult) -> dict[str, Any]:
    """One case of `check --format json` (also one line of `--format jsonl`).

    Durations are left out on purpose: the document is then byte-identical between runs and
    between `--jobs` values, so CI can diff it; JUnit carries the timings.
    """
    return {
        "name": case.name,
        "passed": case.passed,
        "failures": list(case.failures),
        "line": case.line,
        "failure_lines": list(case.failure_lines),
        "expectations": case.expectations,
    }


def check_json(report: CheckReport) -> dict[str, Any]:
    """`check --format json` (SPEC §5): ``{"cases": [...], "passed", "failed"}``."""
    return {
        "spec": report.spec,
        "cases": [check_case_json(c) for c in report.cases],
        "passed": report.passed,
        "failed": report.failed,
    }
