"""JSON documents of every command: a stable contract that CI and scripts consume.

Each document starts with ``schema_version`` and follows its JSON Schema in
``memdiag/schemas/`` (docs/reference.md#json-output): the same run gives the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from json.encoder import encode_basestring as _encode_str
from typing import TYPE_CHECKING, Any

from memdiag.replay import StrategyReplay
from memdiag.strategies.observed import CallTokens
from memdiag.survival import FactSurvival
from memdiag.turn_records import SECTIONS, TurnRecord, TurnRecords

if TYPE_CHECKING:
    # types only (the diagnosis and ranking modules cost a replay's JSON ~0.08 s to import)
    from memdiag.checks import CaseResult, CheckReport
    from memdiag.diagnosis.verdicts import Diagnosis
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
    shared: dict[object, Any] = {}  # quoted ids and turn heads, written once for the document
    for n, r in enumerate(results):
        yield f"    {_encode_str(r.name)}: {{\n"
        if r.turns:
            yield '      "turns": [\n'
            yield from turn_texts(r.turns, " " * 8, shared)
            yield "\n      ],\n"
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


def _quoted_ids(msgs: Sequence[Any], cache: dict[object, Any]) -> Callable[[int], str]:
    """Message index -> its id as a JSON string, quoted once per document (``cache``)."""
    ids = cache.get(("ids", id(msgs)))
    if ids is None:
        ids = cache[("ids", id(msgs))] = [_encode_str(m.id) for m in msgs]
    return ids.__getitem__


def turn_texts(
    records: TurnRecords, pad: str, shared: dict[object, Any] | None = None
) -> Iterator[str]:
    """``turn_json`` of every record as ``dumps`` indents it at ``pad``, joined by ",\\n",
    written straight from the records' columns (docs/engine.md), a few hundred turns a
    piece. Each message id is quoted once and each turn's head (number, session) written once
    for the document (``shared`` keeps them for its other strategies)."""
    msgs, turns = records.messages, records.turns
    cache: dict[object, Any] = {} if shared is None else shared
    quote = _quoted_ids(msgs, cache)
    heads: dict[int, str] = cache.setdefault(("heads", id(turns), pad), {})
    p = pad + "  "
    sep, opening, closing = f",\n{p}  ", f"[\n{p}  ", f"\n{p}]"
    head = f'{pad}{{\n{p}"turn": %d,\n{p}"session": %s,\n{p}"session_turn": %d,\n'
    body = (
        f'{p}"tokens": {{\n'
        + ",\n".join(f"{p}  {_encode_str(s)}: %d" for s in SECTIONS)
        + f'\n{p}}},\n{p}"entered": %s,\n{p}"evicted": %s,\n{p}"summarized": %s'
    )
    dropped_key, pinned_key = f',\n{p}"dropped_by_session": ', f',\n{p}"pinned": '
    overflow, end = f',\n{p}"overflow": true', f"\n{pad}}}"
    first, tokens, indices, ends = records.first, records.tokens, records.indices, records.ends
    pins, over = records.pins, records.overflow
    width = len(SECTIONS)
    piece: list[str] = []
    start = 0
    for k in range(len(records)):
        n = first + k
        text = heads.get(n)
        if text is None:
            t = turns[n]
            text = heads[n] = head % (t.number, _encode_str(t.session), t.session_turn)
        at = 4 * k
        e0, e1, e2, e3 = ends[at], ends[at + 1], ends[at + 2], ends[at + 3]
        text += body % (
            *tokens[k * width : (k + 1) * width],
            opening + sep.join(map(quote, indices[start:e0])) + closing if e0 > start else "[]",
            opening + sep.join(map(quote, indices[e0:e1])) + closing if e1 > e0 else "[]",
            opening + sep.join(map(quote, indices[e1:e2])) + closing if e2 > e1 else "[]",
        )
        if e3 > e2:
            text += dropped_key + opening + sep.join(map(quote, indices[e2:e3])) + closing
        if k in pins:
            text += pinned_key + dumps([asdict(x) for x in pins[k]]).replace("\n", "\n" + p)
        if k in over:
            text += overflow
        piece.append(text + end)
        start = e3
        if len(piece) == 512:
            yield (",\n" if k >= 512 else "") + ",\n".join(piece)
            piece = []
    if piece:
        yield (",\n" if len(records) > len(piece) else "") + ",\n".join(piece)


def turn_lines(res: StrategyReplay, shared: dict[object, Any] | None = None) -> Iterator[str]:
    """``json.dumps({"strategy": ..., **turn_json(r)}, ensure_ascii=False)`` of every record
    of ``res``, one line each, written straight from the columns as ``turn_texts`` writes
    the indented document (a test holds them equal): each message id quoted once."""
    records = res.turns
    turns = records.turns
    quote = _quoted_ids(records.messages, {} if shared is None else shared)
    head = f'{{"strategy": {_encode_str(res.name)}, "turn": %d, "session": %s, "session_turn": %d, '
    body = (
        '"tokens": {'
        + ", ".join(f"{_encode_str(s)}: %d" for s in SECTIONS)
        + '}, "entered": [%s], "evicted": [%s], "summarized": [%s]'
    )
    first, tokens, indices, ends = records.first, records.tokens, records.indices, records.ends
    pins, over = records.pins, records.overflow
    width = len(SECTIONS)
    sessions: dict[str, str] = {}
    start = 0
    for k in range(len(records)):
        t = turns[first + k]
        session = sessions.get(t.session)
        if session is None:
            session = sessions[t.session] = _encode_str(t.session)
        at = 4 * k
        e0, e1, e2, e3 = ends[at], ends[at + 1], ends[at + 2], ends[at + 3]
        text = head % (t.number, session, t.session_turn) + body % (
            *tokens[k * width : (k + 1) * width],
            ", ".join(map(quote, indices[start:e0])),
            ", ".join(map(quote, indices[e0:e1])),
            ", ".join(map(quote, indices[e1:e2])),
        )
        if e3 > e2:
            text += ', "dropped_by_session": [' + ", ".join(map(quote, indices[e2:e3])) + "]"
        if k in pins:
            pinned = json.dumps([asdict(x) for x in pins[k]], ensure_ascii=False)
            text += ', "pinned": ' + pinned
        if k in over:
            text += ', "overflow": true'
        yield text + "}"
        start = e3


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
    shared: dict[object, Any] = {}  # quoted ids, written once for the stream
    for r in results:
        yield from turn_lines(r, shared)
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
