"""JSON documents of every command: a stable contract that CI and scripts consume.

Each document starts with ``schema_version`` and follows its JSON Schema in
``memdiag/schemas/`` (docs/reference.md#json-output): the same run gives the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from json.encoder import encode_basestring as _encode_str
from typing import TYPE_CHECKING, Any

from memdiag.diagnosis.verdicts import Diagnosis
from memdiag.replay import StrategyReplay, TurnRecord
from memdiag.strategies.observed import CallTokens
from memdiag.survival import FactSurvival

if TYPE_CHECKING:
    from memdiag.checks import CaseResult, CheckReport
    from memdiag.stores.audit.report import AuditReport


# the version of the JSON documents' shape: raised when a field is renamed, removed or changes
# type (a new field does not raise it); each document's first key
SCHEMA_VERSION = "1"


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
    transcript: str,
    encoding: str,
    budget: int,
    results: Sequence[StrategyReplay],
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``extra``: what a coding-agent session adds (``memory_files``, ``compactions``;
    docs/coding-agents.md), after the budget."""
    return {
        "schema_version": SCHEMA_VERSION,
        "transcript": transcript,
        "encoding": encoding,
        "budget": budget,
        **(extra or {}),
        "strategies": {
            r.name: {
                "turns": [turn_json(t) for t in r.turns],
                "facts": [fact_json(f) for f in r.facts],
                **({"calls": [call_json(c) for c in r.calls]} if r.name == "observed" else {}),
            }
            for r in results
        },
    }


def replay_json_chunks(
    transcript: str,
    encoding: str,
    budget: int,
    results: Sequence[StrategyReplay],
    extra: Mapping[str, Any] | None = None,
) -> Iterator[str]:
    """``dumps(replay_json(...))`` written piece by piece, byte for byte the same text.

    A long replay has hundreds of thousands of turn records: building them all as dicts and
    then one string (json's indented encoder is pure Python) costs more than the replay.
    Turns are formatted one at a time instead; a test holds the text equal to ``dumps``.
    """
    yield "{\n"
    yield f'  "schema_version": {_encode_str(SCHEMA_VERSION)},\n'
    yield f'  "transcript": {_encode_str(transcript)},\n'
    yield f'  "encoding": {_encode_str(encoding)},\n'
    yield f'  "budget": {json.dumps(budget)},\n'
    for key, value in (extra or {}).items():  # a coding-agent session's memory files, compactions
        yield f"  {_encode_str(key)}: {dumps(value).replace(chr(10), chr(10) + '  ')},\n"
    if not results:
        yield '  "strategies": {}\n}'
        return
    yield '  "strategies": {\n'
    for n, r in enumerate(results):
        yield f"    {_encode_str(r.name)}: {{\n"
        if r.turns:
            yield '      "turns": [\n'
            last = len(r.turns) - 1
            for k, t in enumerate(r.turns):
                yield _turn_text(t, " " * 8) + ("\n" if k == last else ",\n")
            yield "      ],\n"
        else:
            yield '      "turns": [],\n'
        facts = dumps([fact_json(f) for f in r.facts]).replace("\n", "\n      ")
        if r.name == "observed":
            calls = dumps([call_json(c) for c in r.calls]).replace("\n", "\n      ")
            yield f'      "facts": {facts},\n      "calls": {calls}\n'
        else:
            yield f'      "facts": {facts}\n'
        yield "    }" + ("\n" if n == len(results) - 1 else ",\n")
    yield "  }\n}"


def _ids(ids: Sequence[str], pad: str) -> str:
    if not ids:
        return "[]"
    inner = f",\n{pad}  ".join(_encode_str(i) for i in ids)
    return f"[\n{pad}  {inner}\n{pad}]"


def _turn_text(r: TurnRecord, pad: str) -> str:
    """``turn_json(r)`` as ``dumps`` indents it at ``pad``, formatted field by field (a long
    replay has hundreds of thousands of turns); unusual values go the general way."""
    if not (type(r.turn) is int and type(r.session) is str and type(r.session_turn) is int):
        return _turn_text_general(r, pad)
    tokens = r.tokens
    if not tokens or not all(type(k) is str and type(v) is int for k, v in tokens.items()):
        return _turn_text_general(r, pad)
    p = pad + "  "
    q = f",\n{p}  "
    parts = [
        f'{pad}{{\n{p}"turn": {r.turn},\n{p}"session": {_encode_str(r.session)},\n'
        f'{p}"session_turn": {r.session_turn},\n{p}"tokens": {{\n{p}  '
        + q.join(f"{_encode_str(k)}: {v}" for k, v in tokens.items())
        + f'\n{p}}},\n{p}"entered": {_ids(r.entered, p)},\n{p}"evicted": {_ids(r.evicted, p)}'
        f',\n{p}"summarized": {_ids(r.summarized, p)}'
    ]
    if r.dropped_by_session:
        parts.append(f'{p}"dropped_by_session": {_ids(r.dropped_by_session, p)}')
    if r.pinned:
        pins = dumps([asdict(x) for x in r.pinned]).replace("\n", "\n" + p)
        parts.append(f'{p}"pinned": {pins}')
    if r.overflow:
        parts.append(f'{p}"overflow": true')
    return ",\n".join(parts) + f"\n{pad}}}"


def _turn_text_general(r: TurnRecord, pad: str) -> str:
    """``turn_json(r)`` as ``dumps`` indents it at ``pad`` (the common value types by hand)."""
    p = pad + "  "
    parts = []
    for key, value in turn_json(r).items():
        kind = type(value)
        if kind is int:
            text = str(value)
        elif kind is str:
            text = _encode_str(value)
        elif kind is list and all(type(v) is str for v in value):
            text = _ids(value, p)
        elif kind is dict and value and all(type(v) is int for v in value.values()):
            inner = f",\n{p}  ".join(f"{_encode_str(k)}: {v}" for k, v in value.items())
            text = f"{{\n{p}  {inner}\n{p}}}"
        else:  # booleans, pins, anything nested: the general encoder
            text = dumps(value).replace("\n", "\n" + p)
        parts.append(f"{p}{_encode_str(key)}: {text}")
    return f"{pad}{{\n" + ",\n".join(parts) + f"\n{pad}}}"


def call_json(c: CallTokens) -> dict[str, Any]:
    """A recorded request: tokens recounted exactly beside the provider's reported count."""
    return {
        "turn": c.turn,
        "before": c.before,
        "tokens": c.recounted,
        "reported_prompt_tokens": c.reported,
        "difference": c.difference,
        "model": c.model,
        "exact": c.exact,
    }


def replay_jsonl(
    results: Sequence[StrategyReplay], extra: Mapping[str, Any] | None = None
) -> Iterator[str]:
    """One line per strategy and turn, then one per fact: a stream for long transcripts
    (after one line per memory file and recorded compaction of a coding-agent session)."""
    for key, kind in (("memory_files", "memory_file"), ("compactions", "compaction")):
        for item in (extra or {}).get(key, ()):
            yield json.dumps({"type": kind, **item}, ensure_ascii=False)
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
    return {
        "schema_version": SCHEMA_VERSION,
        "transcript": transcript,
        "diagnoses": [diagnosis_json(d) for d in diagnoses],
    }


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


def audit_json(report: AuditReport) -> dict[str, Any]:
    """`inspect-store --format json`: the audit report after ``schema_version``."""
    return {"schema_version": SCHEMA_VERSION, **report.to_dict()}


def check_json(report: CheckReport) -> dict[str, Any]:
    """`check --format json`: ``{"schema_version", "spec", "cases": [...], "passed", "failed"}``."""
    return {
        "schema_version": SCHEMA_VERSION,
        "spec": report.spec,
        "cases": [check_case_json(c) for c in report.cases],
        "passed": report.passed,
        "failed": report.failed,
    }
