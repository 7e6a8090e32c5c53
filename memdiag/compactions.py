"""A coding agent's compactions, as the session recorded them (docs/coding-agents.md).

Claude Code and Codex replace the conversation with a summary when the window fills up (or on
`/compact`): the readers record each as a `summary` event whose ``meta`` says where it is
(line, time, trigger, tokens before and after). This module answers, for each compaction:

- :func:`compactions`: the compactions of a transcript, with what they replaced and the size
  of the first request after them;
- :func:`kept_and_dropped`: which of the user's instructions and strong facts stated before it
  the summary kept, and which it dropped (a proactive list: what this compaction forgot);
- :func:`best_sentence`: the sentence of a message that states a fact, to quote.

Core: no typer/rich; typed results, nothing mutated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from memdiag.facts import FUZZY_THRESHOLD, match
from memdiag.transcript.model import Message, SummaryEvent, Transcript

# an instruction of the user: a prohibition, an "always", a must, or a command to run
_INSTRUCTION = re.compile(
    r"\b(?:never|always|don'?t|do not|must(?: not)?|mustn'?t|avoid|stop|make sure|"
    r"remember to|please (?:use|run|keep|add|remove)|use only|only use|run)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
# a negation: a prohibition and its opposite share their words ("never add X" / "add X")
_NEGATION = re.compile(
    r"\b(?:never|not|no|none|nor|without|avoid|stop|forbid(?:den)?|prohibit(?:ed)?)\b|n'?t\b",
    re.IGNORECASE,
)


def negated(text: str) -> bool:
    return _NEGATION.search(text) is not None


def states(fact: str, text: str) -> bool:
    """Does ``text`` state ``fact``: a sentence of it matches (as diagnose matches facts) with
    the same polarity, so that a summary saying "add Co-Authored-By trailers" does not carry
    "never add Co-Authored-By"."""
    if match(fact, text, FUZZY_THRESHOLD) is None:
        return False
    polarity = negated(fact)
    for sentence in _SENTENCE.split(text):
        if match(fact, sentence, FUZZY_THRESHOLD) is not None and negated(sentence) == polarity:
            return True
    return False


@dataclass(frozen=True)
class Statement:
    """One instruction or strong fact the user stated before a compaction."""

    text: str  # the sentence
    message_id: str
    turn: int
    kind: str  # instruction | strong_fact (field name of the extractor)
    # dropped by the summary, but the injected memories state it (an instruction file, the
    # profile): it is still in the window
    in_memories: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text,
            "message": self.message_id,
            "turn": self.turn,
            "kind": self.kind,
        }
        if self.in_memories:
            out["in_memories"] = True
        return out


@dataclass(frozen=True)
class Compaction:
    """One recorded compaction: where it is, what it replaced, what its summary says."""

    index: int  # 1.. in the transcript
    summary: str
    line: int | None  # of the compact_boundary (Claude Code) or `compacted` line (Codex)
    ts: str | None
    trigger: str | None  # auto | manual (Claude Code), compacted (Codex)
    tokens_before: int | None  # what the agent reported (preTokens)
    tokens_after: int | None  # reported (postTokens), else memdiag's count of the next request
    tokens_after_source: str | None  # reported | recounted
    replaced: tuple[str, ...]  # ids of the messages it replaced
    after_turn: int  # the last turn before it
    session: str
    kept: tuple[Statement, ...] = ()
    dropped: tuple[Statement, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    # what-if: for each dropped statement, which simulated strategy keeps it at what_if_turn
    what_if: dict[str, dict[str, bool]] = field(default_factory=dict)
    what_if_budget: int | None = None
    what_if_turn: int | None = None

    def label(self) -> str:
        """`the compaction at line 9 (2025-07-01T10:30:00Z, auto, 150000 tokens before, 38
        after (recounted))`."""
        where = f"line {self.line}" if self.line is not None else f"#{self.index}"
        parts = [p for p in (self.ts, self.trigger) if p]
        if self.tokens_before is not None:
            parts.append(f"{self.tokens_before} tokens before")
        if self.tokens_after is not None:
            how = " (recounted)" if self.tokens_after_source == "recounted" else ""
            parts.append(f"{self.tokens_after} after{how}")
        return f"the compaction at {where}" + (f" ({', '.join(parts)})" if parts else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "line": self.line,
            "ts": self.ts,
            "trigger": self.trigger,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tokens_after_source": self.tokens_after_source,
            "after_turn": self.after_turn,
            "session": self.session,
            "replaced": len(self.replaced),
            **{k: self.meta[k] for k in ("instructions", "summarizer") if k in self.meta},
            "summary": self.summary,
            "kept": [s.to_dict() for s in self.kept],
            "dropped": [
                {
                    **s.to_dict(),
                    **({"kept_by": self.what_if[s.text]} if s.text in self.what_if else {}),
                }
                for s in self.dropped
            ],
            **(
                {"what_if": {"budget": self.what_if_budget, "turn": self.what_if_turn}}
                if self.what_if
                else {}
            ),
        }


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def best_sentence(fact: str, text: str) -> str:
    """The sentence of ``text`` that states ``fact`` best (the whole text, clipped, else)."""
    best, score = "", 0.0
    for sentence in _SENTENCE.split(text):
        s = sentence.strip()
        if not s:
            continue
        m = match(fact, s, 0.0)
        if m is not None and m.score > score:
            best, score = s, m.score
    out = best or " ".join(text.split())
    return out if len(out) <= 300 else out[:299] + "…"


def statements(messages: Sequence[Message]) -> list[Statement]:
    """The user's instructions and strong facts in ``messages``, one per sentence."""
    from memdiag.extract import default_extractor

    extractor = default_extractor()
    out: list[Statement] = []
    for m in messages:
        if m.role != "user" or m.metadata.get("injected"):  # a line the agent wrote in
            continue
        for sentence in _SENTENCE.split(m.content):
            s = sentence.strip()
            if not s or s.endswith("?") or len(s) > 400:
                continue
            strong = [e for e in extractor.extract(s) if e.strong]
            if _INSTRUCTION.search(s):
                out.append(Statement(s, m.id, m.turn, "instruction"))
            elif strong:
                out.append(Statement(s, m.id, m.turn, strong[0].field))
    return out


def kept_and_dropped(
    summary: str, stated: Sequence[Statement]
) -> tuple[tuple[Statement, ...], tuple[Statement, ...]]:
    """Which statements the summary states (fuzzy, as diagnose matches facts) and which not."""
    kept: list[Statement] = []
    dropped: list[Statement] = []
    for s in stated:
        (kept if states(s.text, summary) else dropped).append(s)
    return tuple(kept), tuple(dropped)


def _first_request_after(t: Transcript, ev: SummaryEvent) -> Any:
    for w in t.windows:
        if w.before > ev.after_index and any(e.section == "summary" for e in w.extra):
            return w
    return None


def compactions(
    t: Transcript, costs: Sequence[int] | None = None, counter: Any = None, memories: str = ""
) -> list[Compaction]:
    """The transcript's recorded compactions (summary events a coding-agent reader wrote).

    With ``costs`` and ``counter`` (the run's token counts), a compaction that did not
    report its size after is given memdiag's count of the first request after it. A dropped
    statement that ``memories`` (the injected instruction files and profile) states is marked.
    """
    from memdiag.strategies.observed import request_tokens

    out: list[Compaction] = []
    for ev in t.summaries:
        meta = ev.meta
        if not meta:
            continue
        replaced = tuple(m.id for m in t.messages[: ev.replaces_through + 1])
        stated = statements(t.messages[: ev.replaces_through + 1])
        kept, dropped = kept_and_dropped(ev.content, stated)
        if memories:
            dropped = tuple(
                replace(s, in_memories=match(s.text, memories, FUZZY_THRESHOLD) is not None)
                for s in dropped
            )
        after = _int(meta.get("post_tokens"))
        source = "reported" if after is not None else None
        if after is None and costs is not None and counter is not None:
            w = _first_request_after(t, ev)
            if w is not None:
                after, source = request_tokens(w, costs, counter), "recounted"
        last = t.messages[ev.after_index].turn if ev.after_index >= 0 else 0
        out.append(
            Compaction(
                len(out) + 1,
                ev.content,
                _int(meta.get("line")),
                meta.get("ts") if isinstance(meta.get("ts"), str) else None,
                meta.get("trigger") if isinstance(meta.get("trigger"), str) else None,
                _int(meta.get("pre_tokens")),
                after,
                source,
                replaced,
                last,
                ev.session,
                kept,
                dropped,
                dict(meta),
            )
        )
    return out


def compaction_before(t: Transcript, request_before: int, covering: Sequence[str] = ()) -> int:
    """The number (1..) of the latest compaction before message ``request_before`` (that
    replaced one of ``covering``, when given); 0 when none."""
    found = 0
    k = 0
    for ev in t.summaries:
        if not ev.meta:
            continue
        k += 1
        if ev.after_index < request_before:
            replaced = {m.id for m in t.messages[: ev.replaces_through + 1]}
            if not covering or replaced.intersection(covering):
                found = k
    return found


WHAT_IF_STATEMENTS = 10  # dropped statements checked per compaction (each: a replay per strategy)


def with_what_if(
    comps: Sequence[Compaction],
    t: Transcript,
    budget: int,
    kept: Callable[[str, int, int], dict[str, bool]],
) -> list[Compaction]:
    """Each compaction with, for what it dropped, which simulated strategy would have kept it
    at the first turn after it: ``kept(statement, turn, budget)`` replays them (the caller's
    engine, so this module never imports it)."""
    out = []
    for c in comps:
        turn = c.after_turn + 1
        if turn > len(t.turns) or not c.dropped:
            out.append(c)
            continue
        checks = {s.text: kept(s.text, turn, budget) for s in c.dropped[:WHAT_IF_STATEMENTS]}
        out.append(replace(c, what_if=checks, what_if_budget=budget, what_if_turn=turn))
    return out


def agent_budget(t: Transcript, session: str, costs: Sequence[int], counter: Any) -> int | None:
    """The agent's own size in a session: its largest recorded request that can be counted."""
    from memdiag.strategies.observed import request_tokens, size_known

    sizes = [
        request_tokens(w, costs, counter)
        for w in t.windows
        if t.messages[w.before].session == session and size_known(w)
    ]
    return max(sizes) if sizes else None


def recorded(rctx: Any, replay: Callable[..., Any]) -> list[Compaction]:
    """The compactions of ``rctx``'s transcript, and which simulated strategy would have kept
    what each dropped, at the agent's own size (--budget, else its largest recorded request).
    ``replay`` is the engine's (memdiag.replay.replay, which imports this module)."""
    from memdiag.strategies import SIMULATED

    t = rctx.transcript
    out: list[Compaction] = []
    for c in compactions(t, rctx.costs, rctx.counter, rctx.memory_text):
        own = agent_budget(t, c.session, rctx.costs, rctx.counter)
        budget = rctx.settings.budget or own or rctx.budget
        sized = rctx.with_budget(budget)

        def kept(fact: str, turn: int, _: int, sized: Any = sized) -> dict[str, bool]:
            found = {}
            for name in SIMULATED:
                s = replay(sized, name, [fact], until_turn=turn, from_session_of=turn).facts[0]
                found[name] = s.kept_by is not None and s.lost_at_turn is None
            return found

        out.extend(with_what_if([c], t, budget, kept))
    return out
