"""Report documents for each command: replay, diagnose (verdict cards over the replay of every
strategy) and check (one run per case that replays a transcript).

A diagnose report replays the transcript again with every strategy, tracking the facts it
judged, so the page can show the window of each strategy side by side at the failure turn; the
replay is O(messages) per strategy, small next to the diagnosis itself, and reuses the
diagnosis's replay context: the transcript is not counted or indexed again. A check report
shows the strategy each case judged, with the case's own replay where it covers the whole
transcript (the check ran it; nothing is replayed again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memdiag.config import Settings
from memdiag.recorder import RecordedReplay, TextRecorder
from memdiag.render.report.data import document, run_data
from memdiag.replay import (
    ReplayContext,
    ReplayReport,
    prepare,
    recorded_compactions,
    replay,
    strategy_names,
)
from memdiag.transcript.model import Transcript


def replay_document(
    report: ReplayReport,
    recorder: TextRecorder | None,
    settings: Settings,
    memory_text: str = "",
) -> dict[str, Any]:
    """The report of `memdiag replay`: the run the user just made."""
    run = run_data(report, recorder, memory_text=memory_text, keep_system=settings.keep_system)
    return document("replay", "memdiag replay", [run])


def replay_for_report(
    transcript: Transcript,
    settings: Settings,
    facts: Sequence[str],
    evidence: Mapping[str, Sequence[int]] | None = None,
    memory: tuple[str, int] = ("", 0),
    context: ReplayContext | None = None,
    replays: Sequence[RecordedReplay] = (),
    strategies: Sequence[str] | None = None,
) -> tuple[ReplayReport, TextRecorder]:
    """Replay ``strategies`` (default: every strategy, ``observed`` too when recorded) tracking
    ``facts``.

    ``evidence`` gives the messages that state a fact when its words do not match them (the
    diagnosis found them semantically, or a benchmark named them). ``context``: the replay
    context the command already prepared for the same transcript, settings and memory; its
    counts, term index and extractions are reused (docs/engine.md), with evidence of its own.
    ``replays``: replays the command already ran on that context (a check's, of the whole
    transcript with its texts recorded); one that tracked exactly ``facts`` is shown as it is.
    """
    same = (
        context is not None
        and context.transcript is transcript
        and context.settings == settings
        and (context.memory_text, context.memory_tokens) == memory
    )
    if context is not None and same:
        rctx = context.lexical()  # evidence a diagnosis remembered is given again below
    else:
        rctx = prepare(transcript, settings, memory_tokens=memory[1], memory_text=memory[0])
    for fact, indices in (evidence or {}).items():
        if indices and not rctx.evidence_of(fact):
            rctx.remember_evidence(fact, indices)
    recorder = TextRecorder(transcript)
    names = strategy_names("all") if strategies is None else list(strategies)
    if strategies is None and getattr(transcript, "windows", None) and "observed" not in names:
        names.append("observed")  # the recorded requests of a trace: one more column
    reusable = same and not evidence  # evidence given here would change what a replay finds
    done = {r.result.name: r for r in replays if reusable and _covers(r, facts, rctx)}
    results = []
    for name in names:
        if name in done:  # the same replay, run by the command with the same observer
            recorder.adopt(name, done[name].texts)
            results.append(done[name].result)
        else:
            results.append(replay(rctx, name, facts, observe=recorder(name)))
    recorded = any(ev.meta for ev in transcript.summaries)
    report = ReplayReport(
        transcript,
        rctx.counter.encoding_name,
        rctx.budget,
        results,
        list(facts),
        False,
        rctx.costs,
        compactions=recorded_compactions(rctx) if recorded else (),
    )
    return report, recorder


def _covers(recorded: RecordedReplay, facts: Sequence[str], rctx: ReplayContext) -> bool:
    """Whether ``recorded`` is the replay the report would run: every turn, the same facts,
    the same budget. (A check's replay finds its evidence by the facts' words, as the report's
    ``lexical()`` context does; nothing it replays remembers semantic evidence.)"""
    res = recorded.result
    return (
        [f.fact for f in res.facts] == list(facts)
        and res.budget == rctx.budget
        and len(res.turns) == len(rctx.transcript.turns)
        and (not res.turns or res.turns[0].turn == 1)
    )


def cause_of(report: ReplayReport, strategy: str, fact_index: int, turn: int) -> tuple[Any, Any]:
    """When the fact is out of ``strategy``'s window at ``turn``: the turn it left, and why."""
    for res in report.results:
        if res.name != strategy:
            continue
        last = None
        for event in res.facts[fact_index].history:
            if int(str(event["turn"])) <= turn:
                last = event
        if last is not None and last["event"] == "lost":
            return last["turn"], last.get("mechanism")
    return None, None


def diagnosis_cards(
    report: ReplayReport,
    diagnoses: Sequence[Mapping[str, Any]],
    default_strategy: str,
    lines: Sequence[Sequence[Mapping[str, str]]] | None = None,
) -> list[dict[str, Any]]:
    """One card per diagnosis (its JSON as `diagnose --format json` writes it), with its rows
    of words (``memdiag.render.words``) when given."""
    cards = []
    for n, d in enumerate(diagnoses):
        details = d.get("details") or {}
        strategy = details.get("strategy") or default_strategy
        k = report.facts.index(d["fact"]) if d["fact"] in report.facts else None
        cause_turn, cause = details.get("lost_at_turn"), details.get("mechanism")
        # a short-term loss has a cause in this window; a long-term one lies in the store
        if cause_turn is None and k is not None and d.get("layer") == "short_term":
            cause_turn, cause = cause_of(report, strategy, k, int(d["at_turn"]))
        cards.append(
            {
                "type": "diagnosis",
                "diagnosis": dict(d),
                "turn": d["at_turn"],
                "fact_index": k,
                "strategy": strategy,
                "cause_turn": cause_turn,
                "cause": cause,
                **({"lines": [dict(x) for x in lines[n]]} if lines is not None else {}),
            }
        )
    return cards


def diagnose_run(
    transcript: Transcript,
    settings: Settings,
    diagnoses: Sequence[Mapping[str, Any]],
    memory: tuple[str, int] = ("", 0),
    name: str | None = None,
    lines: Sequence[Sequence[Mapping[str, str]]] | None = None,
    context: ReplayContext | None = None,
) -> dict[str, Any]:
    """One run of a diagnose (or check) report: the replay of every strategy and the cards."""
    facts = list(dict.fromkeys(str(d["fact"]) for d in diagnoses))
    pos = {m.id: m.index for m in transcript.messages}
    evidence = {
        str(d["fact"]): [pos[e["id"]] for e in d.get("evidence", ()) if e["id"] in pos]
        for d in diagnoses
    }
    report, recorder = replay_for_report(transcript, settings, facts, evidence, memory, context)
    strategy = settings.strategy if settings.strategy != "all" else "sliding_window"
    cards = diagnosis_cards(report, diagnoses, strategy, lines)
    return run_data(
        report,
        recorder,
        name=name,
        memory_text=memory[0],
        keep_system=settings.keep_system,
        cards=cards,
    )


def diagnose_document(
    transcript: Transcript,
    settings: Settings,
    diagnoses: Sequence[Mapping[str, Any]],
    memory: tuple[str, int] = ("", 0),
    lines: Sequence[Sequence[Mapping[str, str]]] | None = None,
    context: ReplayContext | None = None,
) -> dict[str, Any]:
    """The report of `memdiag diagnose`: verdict cards linked to the replay timeline, each with
    the rows of words the console shows (``lines``, one list per diagnosis).

    ``context``: the diagnosis's own replay context (its counts are not made again)."""
    run = diagnose_run(transcript, settings, diagnoses, memory, lines=lines, context=context)
    return document("diagnose", "memdiag diagnose", [run])
