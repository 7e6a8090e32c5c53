"""The report of `memdiag check --html`: every case, and a timeline for each case that replays
a transcript (the strategy the case judged), with one card per expectation pointing at its turn.

The spec is read again (cheap) to know each case's transcript and settings; the cases' results
say which expectations failed (by spec line).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memdiag.render.report.build import cause_of, replay_for_report
from memdiag.render.report.data import document, run_data

if TYPE_CHECKING:
    from memdiag.checks import CheckReport
    from memdiag.checks.spec import Case, Expectation
    from memdiag.config import Settings
    from memdiag.recorder import RecordedReplay
    from memdiag.replay import ReplayContext
    from memdiag.transcript.model import Transcript


def _expectation_text(e: Expectation) -> str:
    if e.kind in ("kept", "lost"):
        by = f" ({e.kept_by})" if e.kept_by else ""
        at = f" at turn {e.at_turn}" if e.at_turn is not None else ""
        return f"{e.kind}{by}: “{e.subject}”{at}"
    what = f"“{e.fact}”" if e.fact else "every `forgot` marker"
    return f"{e.kind} {e.subject}: {what}"


def _targets(e: Expectation, t: Transcript) -> list[tuple[str, int]]:
    """(fact, turn) that an expectation judges: one, or one per marked failure."""
    last = len(t.turns)
    if e.kind in ("kept", "lost"):
        return [(e.subject, e.at_turn or last)]
    markers = [(m.forgot, m.turn) for m in t.messages if m.forgot and m.turn > 0]
    if e.fact is None:
        return markers
    same = [x for x in markers if x[0].casefold().strip() == e.fact.casefold().strip()]
    return same if e.at_turn is None and same else [(e.fact, e.at_turn or last)]


def _case_run(
    case: Case,
    failures: dict[int, list[str]],
    name: str,
    context: ReplayContext | None = None,
    recorded: Sequence[RecordedReplay] = (),
) -> dict[str, Any] | None:
    """``context``: the replay context the case ran with (its transcript and counts reused);
    ``recorded``: the case's replays of the whole transcript (shown, not run again)."""
    from memdiag.checks.spec import TRANSCRIPT_KINDS
    from memdiag.stores.open import profile_memory
    from memdiag.transcript import load

    exps = [e for e in case.expectations if e.kind in TRANSCRIPT_KINDS]
    if case.transcript is None or not exps:
        return None
    if case.conversation is not None:
        context = None  # the page reads the file as a whole (as it did before contexts)
    t = context.transcript if context is not None else load(case.transcript)
    if not t.turns:
        return None
    plan = [(e, _targets(e, t)) for e in exps]
    facts = list(dict.fromkeys(fact for _, targets in plan for fact, _ in targets))
    settings: Settings = case.settings
    memory = profile_memory(settings)
    # the strategy the case judged: its replay is the check's own (other strategies would be
    # replays the check never ran; `replay --strategy all --html` compares them)
    report, recorder = replay_for_report(
        t,
        settings,
        facts,
        memory=memory,
        context=context,
        replays=recorded,
        strategies=[settings.strategy],
    )
    cards = []
    for e, targets in plan:
        for fact, turn in targets:
            k = facts.index(fact)
            cause_turn, cause = cause_of(report, settings.strategy, k, turn)
            cards.append(
                {
                    "type": "check",
                    "name": _expectation_text(e),
                    "passed": e.line not in failures,
                    "failures": failures.get(e.line, []),
                    "line": e.line,
                    "turn": min(max(1, turn), len(t.turns)),
                    "fact_index": k,
                    "strategy": settings.strategy,
                    "cause_turn": cause_turn,
                    "cause": cause,
                }
            )
    return run_data(
        report,
        recorder,
        name=name,
        memory_text=memory[0],
        keep_system=settings.keep_system,
        cards=cards,
    )


def check_document(spec_path: str | Path, base: Settings, result: CheckReport) -> dict[str, Any]:
    """Every case (passed or not) and the runs of those that replay a transcript."""
    from memdiag.checks.spec import load_spec

    spec = load_spec(spec_path, base)
    runs: list[dict[str, Any]] = []
    cases = []
    for case, res in zip(spec.cases, result.cases, strict=True):
        failures: dict[int, list[str]] = {}
        for line, text in zip(res.failure_lines, res.failures, strict=True):
            failures.setdefault(line, []).append(text)
        run = _case_run(case, failures, case.name, res.context, res.replays)
        cases.append(
            {
                "name": res.name,
                "passed": res.passed,
                "failures": list(res.failures),
                "line": res.line,
                "run": len(runs) if run is not None else None,
            }
        )
        if run is not None:
            runs.append(run)
    doc = document("check", f"memdiag check {Path(str(spec_path)).name}", runs)
    doc["cases"] = cases
    return doc
