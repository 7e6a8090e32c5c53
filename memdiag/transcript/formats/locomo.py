"""LoCoMo (snap-research): a JSON list of samples, one session per `session_N` in numeric
order; speaker_a → user, speaker_b → assistant, `dia_id` kept as the message id."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from memdiag.transcript.model import Probe, RawItem, RawMessage, RawSession, ReadProblem
from memdiag.transcript.source import Elements, Source, require_str
from memdiag.transcript.toolkit import reject

name = "locomo"
# recognised by its own keys (`conversation` with speakers): a dataset, asked late
detect_priority = 61
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = ("formats/locomo_sample.json",)

_SESSION = re.compile(r"session_(\d+)\Z")
_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")
_TURN_FIELDS = ("speaker", "dia_id", "text")


def _dia_key(dia_id: str) -> str:
    """A dialogue id in one spelling (`D:3:05` → `D3:5`), to match evidence with messages."""
    m = _EVIDENCE.search(dia_id)
    return f"D{int(m.group(1))}:{int(m.group(2))}" if m else dia_id


@dataclass
class _Sample:
    """One LoCoMo sample read into raw items, with what its QA needs."""

    index: int
    label: str  # "sample 'conv-26': "
    sample_id: str
    prefix: str  # prepended to session and message ids when a file holds several samples
    items: list[RawItem]
    ids: dict[str, str]  # normalized dia_id → message id


def _samples(els: Elements, skip_invalid: bool) -> Iterator[tuple[_Sample, Any]]:
    many = len(els.items) > 1
    for n, (line, sample) in enumerate(els.items):
        if not isinstance(sample, dict):
            reject(els.source, skip_invalid, f"sample {n + 1}: expected an object", els.line(n))
            continue
        sample_id = str(sample.get("sample_id") or f"sample{n + 1}")
        label = f"sample {sample_id!r}: "
        conv = sample.get("conversation")
        if not isinstance(conv, dict):
            reject(
                els.source,
                skip_invalid,
                f"{label}missing field 'conversation' (an object)",
                els.line(n),
            )
            continue
        speakers: dict[str, str] = {}
        problem = None
        for key, role in (("speaker_a", "user"), ("speaker_b", "assistant")):
            name = conv.get(key)
            if not isinstance(name, str) or not name:
                problem = f"{label}missing field 'conversation.{key}' (the speaker's name)"
            else:
                speakers.setdefault(name, role)
        if problem:
            reject(els.source, skip_invalid, problem, els.line(n))
            continue
        prefix = f"{sample_id}/" if many else ""
        found = _Sample(n, label, sample_id, prefix, [], {})
        numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION.match(k)))
        for number in numbers:
            key = f"session_{number}"
            turns = conv[key]
            if not isinstance(turns, list):
                reject(
                    els.source,
                    skip_invalid,
                    f"{label}field 'conversation.{key}' must be a list",
                    els.line(n),
                )
                continue
            if not turns:
                continue  # a date without turns (conv-26 has such sessions): nothing was said
            date = conv.get(f"{key}_date_time")
            ts = date if isinstance(date, str) else None
            found.items.append(RawSession(prefix + key, line, ts))
            for k, turn in enumerate(turns):
                try:
                    msg = _message(turn, line, speakers, prefix)
                except ValueError as exc:
                    reject(
                        els.source,
                        skip_invalid,
                        f"{label}conversation.{key}[{k}]: {exc}",
                        els.line(n),
                    )
                    continue
                found.ids[_dia_key(str(msg.metadata.get("dia_id", msg.id)))] = str(msg.id)
                found.items.append(msg)
        yield found, sample


def _message(turn: Any, line: int, speakers: dict[str, str], prefix: str) -> RawMessage:
    if not isinstance(turn, dict):
        raise ValueError(f"expected an object, got {type(turn).__name__}")
    for key in _TURN_FIELDS:
        if not isinstance(turn.get(key), str):
            raise ValueError(f"missing field {key!r} (a string)")
    speaker = turn["speaker"]
    if speaker not in speakers:
        raise ValueError(
            f"field 'speaker': {speaker!r} is neither speaker_a nor speaker_b "
            f"({', '.join(map(repr, speakers))})"
        )
    meta = {k: v for k, v in turn.items() if k not in _TURN_FIELDS}
    if prefix:
        meta["dia_id"] = turn["dia_id"]
    content = turn["text"]
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption:
        # the speaker shared a picture; its caption is the only trace of it that a text model
        # (and LoCoMo's own baselines) can see, and QA items ask about it
        content = f"{content} [image: {caption}]"
    return RawMessage(
        role=speakers[speaker],
        content=content,
        line=line,
        id=prefix + turn["dia_id"],
        name=speaker,
        metadata=meta,
    )


def detect(source: Source) -> bool:
    first = Elements(source).first()
    return (
        isinstance(first, dict)
        and isinstance(first.get("conversation"), dict)
        and ("sample_id" in first or "speaker_a" in first["conversation"])
    )


def read(source: Source, skip_invalid: bool) -> Iterator[RawItem]:
    """Each sample's messages, then its QA items as probes (or why they are not)."""
    # the probes are complete only if a strict read would get through: records skipped with
    # --skip-invalid come along as problems, in the order a strict read meets them
    yield from source.problems
    if not detect(source):
        yield ReadProblem("not a LoCoMo file (expected a list of samples)")
    els = Elements(source)
    seen = len(source.problems)
    turn = 0
    for sample, raw in _samples(els, skip_invalid):
        yield from sample.items
        turn += sum(isinstance(i, RawMessage) and i.role == "user" for i in sample.items)
        yield from source.problems[seen:]
        seen = len(source.problems)
        yield from _probes(raw, sample, els, turn)
    yield from source.problems[seen:]


def _probes(raw: dict[str, Any], sample: _Sample, els: Elements, turn: int) -> Iterator[RawItem]:
    """The QA items of a sample as probes over the ids that this reader gives.

    LoCoMo asks after the conversation: ``at`` is None and ``after_turn`` the sample's last
    turn. Evidence strings are parsed tolerantly: "D8:6; D9:17" holds two ids, "D:11:26" and
    "D30:05" are read as D11:26 and D30:5.
    """
    qa = raw.get("qa", [])
    if not isinstance(qa, list):
        yield ReadProblem(f"{sample.label}field 'qa' must be a list", els.line(sample.index))
        return
    for j, item in enumerate(qa):
        try:
            probe = _probe(item, sample, f"{sample.sample_id}/q{j + 1}", turn)
        except ValueError as exc:
            yield ReadProblem(f"{sample.label}qa[{j}]: {exc}", els.line(sample.index))
            continue
        yield probe


def _probe(item: Any, sample: _Sample, probe_id: str, turn: int) -> Probe:
    if not isinstance(item, dict):
        raise ValueError(f"expected an object, got {type(item).__name__}")
    question = require_str(item, "question")
    if item.get("answer") is None and item.get("adversarial_answer") is None:
        raise ValueError("missing field 'answer' (or 'adversarial_answer')")
    evidence = item.get("evidence", [])
    if isinstance(evidence, str):
        evidence = [evidence]
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        raise ValueError("field 'evidence' must be a list of dialogue ids like 'D1:3'")
    ids: list[str] = []
    unresolved: list[str] = []
    for text in evidence:
        matches = _EVIDENCE.findall(text)
        if not matches:
            unresolved.append(text)
        for session, number in matches:
            key = f"D{int(session)}:{int(number)}"
            if key not in sample.ids:
                unresolved.append(key)
            elif sample.ids[key] not in ids:
                ids.append(sample.ids[key])
    answer = item.get("answer")
    adversarial = item.get("adversarial_answer")
    return Probe(
        id=probe_id,
        question=question,
        answer=None if answer is None else str(answer),
        evidence_ids=tuple(ids),
        category=item.get("category"),
        at=None,
        after_turn=turn,
        sample_id=sample.sample_id,
        adversarial_answer=None if adversarial is None else str(adversarial),
        unresolved_evidence=tuple(unresolved),
    )
