"""The data of the interactive HTML report: one JSON document, embedded in the page.

The page rebuilds every window from per-turn deltas, so the document grows with the number of
messages, not with messages × turns:

- messages are stored once, column by column (id, role, session, turn, tokens, text);
- each strategy stores, per turn, the message indices that entered and that left (evicted,
  summarized, dropped at a session end), its tokens by section (a constant section is one
  number), and the summary and pinned text only at the turns where they changed, as lists of
  line numbers into one table of distinct lines (a running summary repeats most of its lines);
- tracked facts store their evidence messages and, per strategy, their kept/lost history.

Any strategy the replay ran becomes one more column (``observed`` included); diagnose and
check results become cards that point at turns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memdiag import __version__
from memdiag.facts import FactSet
from memdiag.recorder import TextRecorder, WindowTexts
from memdiag.replay import ReplayReport, StrategyReplay
from memdiag.transcript.model import Message, Transcript
from memdiag.turn_records import LISTS

SECTIONS = ("system", "scratchpad", "summary", "memories", "messages")
__all__ = ["TextRecorder", "document", "report_costs", "run_data"]
FORMAT_VERSION = 1


class _Lines:
    """A table of distinct lines: texts are stored as lists of line numbers."""

    def __init__(self, facts: Sequence[str]) -> None:
        self.facts = facts
        self.stated = FactSet.of(tuple(facts))  # the replays' set: their lines are known
        self.lines: list[str] = []
        self.index: dict[str, int] = {}
        self.holds: list[list[int]] = []  # per line: the tracked facts it states

    def encode(self, text: str) -> list[int]:
        out = []
        for line in text.split("\n"):
            k = self.index.get(line)
            if k is None:
                k = self.index[line] = len(self.lines)
                self.lines.append(line)
                self.holds.append(self._holding(line))
            out.append(k)
        return out

    def _holding(self, line: str) -> list[int]:
        """The tracked facts that ``line`` states."""
        if not line.strip():
            return []
        return self.stated.stated_by_line(line)


def _compact(values: Sequence[int]) -> int | list[int]:
    """A section whose size never changes is one number."""
    if values and all(v == values[0] for v in values):
        return values[0]
    return list(values)


def _message_text(m: Message) -> str:
    if m.content or not m.tool_calls:
        return m.content
    calls = []
    for c in m.tool_calls:
        fn = c.get("function") or {}
        calls.append(f"{fn.get('name', c.get('name', '?'))}({fn.get('arguments', '')})")
    return "\n".join(calls)


def _strategy(
    res: StrategyReplay,
    pos: Mapping[str, int],
    texts: WindowTexts,
    lines: _Lines,
) -> dict[str, Any]:
    """One strategy's column, read from its compact turn records (no record object made):
    the message indices of each turn's lists as they are, each section's tokens a column."""
    turns = res.turns
    n = len(turns)
    indices, ends = turns.indices, turns.ends
    lists: list[list[list[int]]] = [[], [], [], []]  # entered, evicted, summarized, dropped
    start = 0
    for at, end in enumerate(ends):
        lists[at % LISTS].append(indices[start:end].tolist())
        start = end
    number = [turns.turn(k).number for k in range(n)]

    def sparse(changes: list[tuple[int, str]]) -> list[list[Any]]:
        return [[turn, lines.encode(text) if text else []] for turn, text in changes]

    return {
        "name": res.name,
        "budget": res.budget,
        "first_turn": number[0] if n else 1,
        "tokens": {s: _compact(turns.column(s).tolist()) for s in SECTIONS},
        "entered": lists[0],
        "evicted": lists[1],
        "summarized": lists[2],
        "dropped": lists[3],
        "pins": [
            [number[k], p.field, p.value, p.previous, pos.get(p.message_id)]
            for k in sorted(turns.pins)
            for p in turns.pins[k]
        ],
        "overflow": [number[k] for k in sorted(turns.overflow)],
        "summary": sparse(texts.summary),
        "pinned": sparse(texts.pinned),
        "facts": [
            {
                "history": [
                    [int(str(e["turn"])), str(e["event"]), e.get("mechanism")] for e in f.history
                ],
                "stated_at_turn": f.stated_at_turn,
                "lost_at_turn": f.lost_at_turn,
                "mechanism": f.mechanism,
                "kept_by": f.kept_by,
            }
            for f in res.facts
        ],
    }


def run_data(
    report: ReplayReport,
    recorder: TextRecorder | None = None,
    *,
    name: str | None = None,
    memory_text: str = "",
    keep_system: bool = True,
    cards: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """One run of the report: the transcript, every strategy's deltas, tracked facts, cards."""
    t: Transcript = report.transcript
    pos = {m.id: m.index for m in t.messages}
    sessions = {s: k for k, s in enumerate(t.sessions)}
    lines = _Lines(report.facts)
    recorder = recorder or TextRecorder(t)
    strategies = [_strategy(r, pos, recorder.texts(r.name), lines) for r in report.results]
    evidence = report.results[0].facts if report.results else []
    msgs = t.messages
    return {
        "name": name or t.path,
        "transcript": t.path,
        "format": t.format,
        "encoding": report.encoding,
        "budget": report.budget,
        "keep_system": keep_system,
        "sessions": list(t.sessions),
        "messages": {
            "id": [m.id for m in msgs],
            "role": [m.role for m in msgs],
            "session": [sessions.get(m.session, 0) for m in msgs],
            "turn": [m.turn for m in msgs],
            "tokens": list(report_costs(report)),
            "text": [_message_text(m) for m in msgs],
            "forgot": {str(m.index): m.forgot for m in msgs if m.forgot},
        },
        "turns": {
            "user": [turn.user_index for turn in t.turns],
            "session_turn": [turn.session_turn for turn in t.turns],
        },
        "memories": memory_text,
        "facts": [
            {
                "fact": fact,
                "found": report.facts_found,
                "evidence": [pos[i] for i in (evidence[k].evidence_ids if evidence else [])],
            }
            for k, fact in enumerate(report.facts)
        ],
        "lines": lines.lines,
        "line_facts": lines.holds,
        "strategies": strategies,
        "cards": list(cards),
        # a coding agent's recorded compactions: marked on the timeline with their summary
        **(
            {"compactions": [c.to_dict() for c in report.compactions]} if report.compactions else {}
        ),
    }


def report_costs(report: ReplayReport) -> Sequence[int]:
    """Window tokens of each message (chat overhead included), as the replay counted them."""
    if len(report.costs) == len(report.transcript.messages):
        return report.costs
    from memdiag.tokens import TokenCounter

    return TokenCounter(report.encoding).message_costs(report.transcript.messages)


def document(kind: str, title: str, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The whole embedded document: what kind of report, and its runs (one per transcript)."""
    return {
        "format": FORMAT_VERSION,
        "memdiag": __version__,
        "kind": kind,
        "title": title,
        "sections": list(SECTIONS),
        "runs": list(runs),
    }
