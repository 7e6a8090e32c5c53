"""LongMemEval: a JSON list of instances; each haystack session is a session (ids from
`haystack_session_ids`, message ids `<session>:<n>`), then the question as the last user
message in a session named after `question_id`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from memdiag.transcript.model import Probe, RawItem, RawMessage, RawSession, ReadProblem
from memdiag.transcript.source import Elements, Source, require_str
from memdiag.transcript.toolkit import reject

name = "longmemeval"
# recognised by its own key (`haystack_sessions`): a dataset, asked late
detect_priority = 62
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = ("formats/longmemeval_sample.json",)


@dataclass
class _Instance:
    """One LongMemEval instance read into raw items, with what its probe needs."""

    raw: dict[str, Any]
    index: int
    question_id: str
    prefix: str
    items: list[RawItem]
    evidence: list[str]  # ids of has_answer messages


def _sessions(inst: dict[str, Any]) -> tuple[list[Any], list[str], list[str | None]]:
    sessions = inst.get("haystack_sessions")
    if not isinstance(sessions, list):
        raise ValueError("missing field 'haystack_sessions' (a list of sessions)")
    ids = inst.get("haystack_session_ids")
    if ids is None:
        ids = [f"h{k + 1}" for k in range(len(sessions))]
    if not isinstance(ids, list) or len(ids) != len(sessions):
        raise ValueError(
            f"field 'haystack_session_ids' must be a list of {len(sessions)} ids, "
            "one per haystack session"
        )
    dates = inst.get("haystack_dates")
    if dates is None:
        dates = [None] * len(sessions)
    if not isinstance(dates, list) or len(dates) != len(sessions):
        raise ValueError(
            f"field 'haystack_dates' must be a list of {len(sessions)} dates, "
            "one per haystack session"
        )
    return sessions, [str(i) for i in ids], [d if isinstance(d, str) else None for d in dates]


def _instances(els: Elements, skip_invalid: bool) -> Iterator[_Instance]:
    many = len(els.items) > 1
    for n, (line, inst) in enumerate(els.items):
        if not isinstance(inst, dict):
            reject(els.source, skip_invalid, f"instance {n + 1}: expected an object", els.line(n))
            continue
        try:
            qid = require_str(inst, "question_id")
            question = require_str(inst, "question")
            sessions, sids, dates = _sessions(inst)
        except ValueError as exc:
            reject(els.source, skip_invalid, f"instance {n + 1}: {exc}", els.line(n))
            continue
        label = f"question {qid!r}: "
        prefix = f"{qid}/" if many else ""
        found = _Instance(inst, n, qid, prefix, [], [])
        seen: dict[str, int] = {}
        for k, (turns, sid, date) in enumerate(zip(sessions, sids, dates, strict=True)):
            where = f"{label}haystack_sessions[{k}]"
            if not isinstance(turns, list):
                reject(els.source, skip_invalid, f"{where}: must be a list of turns", els.line(n))
                continue
            if not turns:
                continue
            seen[sid] = seen.get(sid, 0) + 1
            if seen[sid] > 1:  # the same session twice in one haystack: keep ids unique
                sid = f"{sid}#{seen[sid]}"
            found.items.append(RawSession(prefix + sid, line, date))
            for t, turn in enumerate(turns):
                try:
                    msg = _message(turn, line, f"{prefix}{sid}:{t + 1}")
                except ValueError as exc:
                    reject(els.source, skip_invalid, f"{where}[{t}]: {exc}", els.line(n))
                    continue
                if msg.metadata.get("has_answer"):
                    found.evidence.append(str(msg.id))
                found.items.append(msg)
        # the question is the turn where memory is tested, in a session of its own
        date = inst.get("question_date")
        found.items.append(RawSession(qid, line, date if isinstance(date, str) else None))
        meta = {"question_type": inst["question_type"]} if "question_type" in inst else {}
        found.items.append(RawMessage("user", question, line, id=qid, metadata=meta))
        yield found


def _message(turn: Any, line: int, mid: str) -> RawMessage:
    if not isinstance(turn, dict):
        raise ValueError(f"expected an object, got {type(turn).__name__}")
    role = turn.get("role")
    if role not in ("user", "assistant", "system"):
        raise ValueError(f"field 'role': {role!r}; expected user or assistant")
    content = turn.get("content")
    if not isinstance(content, str):
        raise ValueError("missing field 'content' (a string)")
    meta = {k: v for k, v in turn.items() if k not in ("role", "content")}
    if meta.get("has_answer") is False:
        del meta["has_answer"]  # only the evidence turns are worth marking
    return RawMessage(role, content, line, id=mid, metadata=meta)


def detect(source: Source) -> bool:
    first = Elements(source).first()
    return isinstance(first, dict) and "haystack_sessions" in first


def read(source: Source, skip_invalid: bool) -> Iterator[RawItem]:
    """Each instance's messages, then its question as a probe (or why it is not one)."""
    # the probes are complete only if a strict read would get through: records skipped with
    # --skip-invalid come along as problems, in the order a strict read meets them
    yield from source.problems
    if not detect(source):
        yield ReadProblem("not a LongMemEval file (expected a list of instances)")
    els = Elements(source)
    seen = len(source.problems)
    turn = 0
    for inst in _instances(els, skip_invalid):
        yield from inst.items
        turn += sum(isinstance(i, RawMessage) and i.role == "user" for i in inst.items)
        yield from source.problems[seen:]
        seen = len(source.problems)
        raw = inst.raw
        if raw.get("answer") is None:
            message = f"question {inst.question_id!r}: missing field 'answer'"
            yield ReadProblem(message, els.line(inst.index))
            continue
        sessions = raw.get("answer_session_ids") or []
        # the question is asked at its own turn (``at``, message ``at_id``); the evidence is
        # the messages marked has_answer
        yield Probe(
            id=inst.question_id,
            question=str(raw["question"]),
            answer=str(raw["answer"]),
            evidence_ids=tuple(inst.evidence),
            category=raw.get("question_type"),
            at=turn,
            at_id=inst.question_id,
            evidence_sessions=tuple(inst.prefix + str(s) for s in sessions)
            if isinstance(sessions, list)
            else (),
            question_date=raw.get("question_date"),
        )
    yield from source.problems[seen:]
