"""The interpreter of calls (docs/traces.md): a sequence of LLM calls → transcript items.

Its rules do not depend on the framework that made the calls:

- **Agents.** Calls are grouped by the agent that made them (:attr:`Call.agent`). The main
  conversation is the one the human talks to: not a group whose answers come back to another
  group as tool results, not one nested inside another agent or under a tool. The others are
  left out and listed; ``--agent NAME`` reads one of them instead. A file that holds only
  sub-agent calls reads its first agent, never "no messages".
- **Turns are the human's.** A call whose output later appears inside another call's input as
  a non-assistant message, or inside one (a system prompt, a "summary so far" message), is
  auxiliary: a summarizer or a memory writer. It is not a turn, and its prompt is not evidence.
  A framework's marker (LangChain's ``lc_source: summarization``) confirms it. Where its output
  lands in a request, that content is the window's ``summary`` section when the request
  dropped messages the previous one held (``covers`` names them, and a ``summary`` event is
  emitted), else its ``memories`` section.
- **Injected content is a section.** What varies between the calls of a session inside the
  leading system messages is each call's ``memories`` section (or ``summary``, as above); the
  stable part is the system prompt, one message counted once per window. A leading user
  message that no call asked (every message of the human is some call's new question) is
  injected too: the ``memories`` section, not a turn.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace

from memdiag.transcript.calls import SUMMARIZATION, Call, CallItem, Search
from memdiag.transcript.events import Extra, RawRetrieval, RawWindow
from memdiag.transcript.model import RawItem, RawMessage, RawSession, RawSummary
from memdiag.transcript.source import Choice, ChoiceNeeded, Source
from memdiag.transcript.tracing import CallLedger

UNNAMED = "(unnamed)"  # the agent of calls whose source names none
ALL = "all"  # --agent all: every agent, the others each in sessions of their own
MIN_ECHO = 16  # an output shorter than this (normalized) is too common to be recognised again


def _norm(text: str) -> str:
    return " ".join(text.split())


def _label(key: str | None) -> str:
    return UNNAMED if key is None else key


# --- agents ----------------------------------------------------------------------------------


class AgentNeeded(ChoiceNeeded):
    """--agent names no agent of the file: exit 2 with the agents listed."""

    def __init__(self, path: str, head: str, choices: Sequence[Choice]) -> None:
        super().__init__(path, head, "--agent", choices)
        listing = "\n".join(c.line() for c in choices)
        self.message = f"{head}; choose one with --agent NAME (or --agent all):\n{listing}"
        self.args = (f"{path}: {self.message}",)


@dataclass
class _Group:
    key: str | None
    calls: list[int] = field(default_factory=list)
    nested: int = 0
    answers_tools: bool = False  # an output of it is a tool result in another group's request


def _groups(calls: Sequence[Call]) -> dict[str | None, _Group]:
    groups: dict[str | None, _Group] = {}
    for i, c in enumerate(calls):
        g = groups.setdefault(c.agent, _Group(c.agent))
        g.calls.append(i)
        g.nested += c.nested
    outputs: dict[str, str | None] = {}
    for c in calls:
        for m in c.outputs:
            text = _norm(m.content)
            if m.role == "assistant" and len(text) >= MIN_ECHO:
                outputs.setdefault(text, c.agent)
    for c in calls:
        for m in c.inputs:
            if m.role == "tool":
                owner = outputs.get(_norm(m.content), c.agent)
                if owner != c.agent:
                    groups[owner].answers_tools = True
    return groups


def _is_other(g: _Group, keys: Sequence[str | None]) -> bool:
    inside = g.key is not None and any(
        k is not None and g.key.startswith(k + "/") for k in keys if k != g.key
    )
    return inside or g.answers_tools or g.nested * 2 > len(g.calls)


def select_agent(
    calls: Sequence[Call], choice: str | None, path: str
) -> tuple[str | None, dict[str | None, _Group]]:
    """The agent whose conversation is read: ``choice`` (a name, or the last part of one),
    else the main one. Raises ChoiceNeeded listing the agents when ``choice`` names none."""
    groups = _groups(calls)
    keys = list(groups)
    if choice is not None:
        for key in keys:
            if choice in (_label(key), (key or "").rpartition("/")[2]):
                return key, groups
        listed = [Choice(_label(k), messages=len(groups[k].calls), unit="call") for k in keys]
        raise AgentNeeded(path, f"no agent is {choice!r} among {len(keys)}", listed)
    main = next((k for k in keys if not _is_other(groups[k], keys)), keys[0] if keys else None)
    return main, groups


# --- auxiliary calls ---------------------------------------------------------------------------


def auxiliary(calls: Sequence[Call]) -> dict[int, str]:
    """Calls whose output reappears inside a later call's input: index → normalized output.

    A reply comes back as itself (an assistant message of a later request) and is the human's;
    an output that comes back only as another message, or inside one (a system prompt, a
    "summary so far" message), was made for the agent. A message that quotes the human's own
    messages is a transcript handed to a summarizer, not an injection: it proves nothing.
    """
    replies: set[str] = set()
    users: set[str] = set()
    for c in calls:
        for m in c.inputs:
            text = _norm(m.content)
            if m.role == "assistant":
                replies.add(text)
            elif m.role == "user" and len(text) >= MIN_ECHO:
                users.add(text)
    found: dict[int, str] = {}
    seen: set[tuple[str, str]] = set()
    earlier: list[tuple[int, str]] = []
    for j, c in enumerate(calls):
        for m in c.inputs:
            if m.role in ("assistant", "tool"):  # tool results: another agent's answer
                continue
            text = _norm(m.content)
            if len(text) < MIN_ECHO or (m.role, text) in seen:
                continue
            seen.add((m.role, text))
            # `earlier` holds only outputs that never came back as replies: a few
            hits = [(i, out) for i, out in earlier if out in text]
            if not hits or any(u in text for u in users if u != text):
                continue  # none, or a transcript quoted for a summarizer or a memory writer
            found.update(hits)
        out = _norm(" ".join(m.content for m in c.outputs if m.role == "assistant"))
        if SUMMARIZATION in c.markers:
            found[j] = out
        elif (
            len(out) >= MIN_ECHO and out not in replies and not any(m.tool_calls for m in c.outputs)
        ):
            earlier.append((j, out))
    return found


# --- injected sections -------------------------------------------------------------------------


def _leading_system(inputs: Sequence[RawMessage]) -> int:
    n = 0
    while n < len(inputs) and inputs[n].role == "system":
        n += 1
    return n


def _stable_ends(texts: Sequence[str]) -> tuple[int, int]:
    """(prefix, suffix) lengths the variants share, cut at line ends so no word is split."""
    shortest = min(texts, key=len)
    p = 0
    while p < len(shortest) and all(t[p] == shortest[p] for t in texts):
        p += 1
    if p < len(shortest):
        p = shortest.rfind("\n", 0, p) + 1
    s = 0
    room = len(shortest) - p
    while s < room and all(t[len(t) - 1 - s] == shortest[len(shortest) - 1 - s] for t in texts):
        s += 1
    if s < room:
        cut = shortest.find("\n", len(shortest) - s)
        s = len(shortest) - cut if cut >= 0 else 0
    return p, s


def _section_ends(calls: Sequence[Call]) -> dict[int, tuple[int, int]]:
    """k → the stable ends of the k-th leading system message, where it varies between the
    agent's calls (of any session: a session of one request still injects)."""
    variants: dict[int, set[str]] = {}
    for c in calls:
        for k in range(_leading_system(c.inputs)):
            variants.setdefault(k, set()).add(c.inputs[k].content)
    return {k: _stable_ends(sorted(v)) for k, v in variants.items() if len(v) > 1}


def injected_leads(calls: Sequence[Call]) -> set[str]:
    """Leading user messages that no call asked: injected content (memories written as the
    first message), not the human's words.

    Every message of the human is the new question of some call (its last user message);
    a user message that comes first after the system prompt, before another user message, and
    is never one, was put there by the agent.
    """
    asked = set()
    leads: set[str] = set()
    for c in calls:
        users = [k for k, m in enumerate(c.inputs) if m.role == "user"]
        if users:
            asked.add(_norm(c.inputs[users[-1]].content))
        lead = _leading_system(c.inputs)
        if len(users) >= 2 and users[0] == lead:
            leads.add(_norm(c.inputs[lead].content))
    return leads - asked


# --- the interpreter ---------------------------------------------------------------------------


@dataclass
class _Session:
    last_window: RawWindow | None = None
    summary: str | None = None


def interpret(
    items: Sequence[CallItem],
    source: Source,
    *,
    agent: str | None = None,
    unit: str = "call",
) -> Iterator[RawItem]:
    """The transcript items of a sequence of calls and searches, in the source's order."""
    every = [x for x in items if isinstance(x, Call)]
    # auxiliary calls first: a memory writer may run as an agent of its own (a span named
    # "remember.after_agent" is an AGENT to OpenInference), its output lands in the main one
    aux = auxiliary(every)
    calls = [c for i, c in enumerate(every) if i not in aux]
    aux_texts = [t for t in aux.values() if t]
    everyone_at_once = agent == ALL
    chosen, groups = select_agent(calls, None if everyone_at_once else agent, source.path)
    read = set(groups) if everyone_at_once else {chosen}
    others = {k: g for k, g in groups.items() if k not in read}
    if others:
        names = ", ".join(f"{_label(k)} ({len(g.calls)})" for k, g in others.items())
        left = sum(len(g.calls) for g in others.values())
        source.warnings.append(
            f"{source.path}: {left} {unit}(s) of sub-agents or other agents left out: "
            f"{names}; their own context, their answers reach this agent as tool results "
            "(read one with --agent NAME)"
        )
        everyone = list(groups)
        if agent is None and all(_is_other(g, everyone) for g in groups.values()):
            source.warnings.append(
                f"{source.path}: every {unit} is a sub-agent's; read {_label(chosen)}"
            )
    if aux:
        source.warnings.append(
            f"{source.path}: {len(aux)} auxiliary {unit}(s) (a summarizer or a memory writer: "
            "their output reappears in later requests) read as window sections, not turns"
        )
    # each agent read: its own system prompt sections; with --agent all, the agents other than
    # the main one are sessions of their own ("research-agent", or "research-agent@<session>")
    ends = {k: _section_ends([calls[i] for i in groups[k].calls]) for k in read if k in groups}
    leads = {k: injected_leads([calls[i] for i in groups[k].calls]) for k in read if k in groups}
    keep = {id(calls[i]): k for k in read if k in groups for i in groups[k].calls}
    keys = set(groups)
    ledger = CallLedger()
    sessions: dict[str, _Session] = {}
    current: str | None = None

    def enter(sid: str | None) -> Iterator[RawItem]:
        nonlocal current
        if sid is not None and sid != current:
            current = sid
            ledger.session(sid)
            yield RawSession(sid)

    def session_of(sid: str | None, key: str | None) -> str | None:
        if key == chosen:
            return sid
        return _label(key) + (f"@{sid}" if sid is not None else "")

    if everyone_at_once:  # one agent after another: no session resumes after another
        order = {k: n for n, k in enumerate([chosen, *(k for k in groups if k != chosen)])}
        items = sorted(items, key=lambda x: order.get(x.agent, 0))
    for item in items:
        if isinstance(item, Search):
            if item.agent in read or (item.agent not in keys and not item.nested):
                owner = item.agent if item.agent in read else chosen
                yield from enter(session_of(item.session, owner))
                yield RawRetrieval(item.query, item.records, None, item.where)
            continue
        if id(item) not in keep:
            continue
        key = keep[id(item)]
        yield from enter(session_of(item.conversation, key))
        state = sessions.setdefault(str(current), _Session())
        yield from _one_call(item, ledger, state, ends[key], aux_texts, leads[key])


def _one_call(
    call: Call,
    ledger: CallLedger,
    state: _Session,
    ends: dict[int, tuple[int, int]],
    aux_texts: Sequence[str],
    leads: AbstractSet[str] = frozenset(),
) -> Iterator[RawItem]:
    inputs: list[RawMessage] = []
    # (content, holds an auxiliary output, stands as a message of its own: a summary so far)
    extra: list[tuple[str, bool, bool]] = []
    lead = _leading_system(call.inputs)
    for k, m in enumerate(call.inputs):
        m = replace(m)  # the ledger names the messages it adds
        text = m.content
        if k < lead and k in ends:
            p, s = ends[k]
            middle = text[p : len(text) - s] if s else text[p:]
            head, tail = text[:p], (text[len(text) - s :] if s else "")
            if head.endswith("\n") and tail.startswith("\n"):
                tail = tail[1:]  # the line the section held is gone, not its line ends twice
            stable = head + tail
            if middle.strip():
                extra.append((middle.strip(), _holds_aux(middle, aux_texts), False))
            if not stable.strip():
                continue
            m.content = stable
        elif m.role not in ("assistant", "tool") and _holds_aux(text, aux_texts):
            extra.append((text, True, True))
            continue
        elif k == lead and m.role == "user" and _norm(text) in leads:
            extra.append((text, False, False))  # memories the agent wrote as a message
            continue
        inputs.append(m)
    out = ledger.call(
        inputs,
        list(call.outputs),
        prompt_tokens=call.usage.input_tokens,
        model=call.model,
        source=call.where,
    )
    window = next((x for x in out if isinstance(x, RawWindow)), None)
    covers: tuple[str, ...] = ()
    if window is not None and any(aux for _, aux, _ in extra):
        covers = _covered(state.last_window, window)
    extras: list[Extra] = []
    summary: Extra | None = None
    for content, holds, alone in extra:
        # an output standing for the conversation (a message of its own, or one that replaced
        # messages) is a summary; inside the system prompt, with nothing dropped, memories
        summarized = alone or covers or SUMMARIZATION in call.markers or state.summary is not None
        if holds and summarized:
            summary = Extra("summary", content, covers=covers)
            extras.append(summary)
        else:
            extras.append(Extra("memories", content))
    if window is not None:
        window.extra = tuple(extras)
        state.last_window = window
    if summary is not None and summary.content != state.summary and covers:
        state.summary = summary.content
        yield RawSummary(summary.content, replaces_through=covers[-1])
    elif summary is not None:
        state.summary = summary.content
    yield from out


def _holds_aux(text: str, aux_texts: Sequence[str]) -> bool:
    norm = _norm(text)
    return any(t in norm for t in aux_texts)


def _covered(previous: RawWindow | None, window: RawWindow) -> tuple[str, ...]:
    """What a summary in ``window`` replaced: the messages the previous request held that this
    one does not, and what the previous request's summary already covered."""
    if previous is None:
        return ()
    now = set(window.ids)
    older = [i for e in previous.extra if e.section == "summary" for i in e.covers]
    dropped = [i for i in previous.ids if i not in now]
    out: list[str] = []
    for i in (*older, *dropped):
        if i not in out and i not in now:
            out.append(i)
    return tuple(out)
