"""The transcript data model (docs/reference.md#concepts–§2): messages, sessions, turns, recorded
summaries.

Every input format is parsed into a list of :class:`RawMessage` / :class:`RawSummary` /
:class:`RawSession` records (one per source line or element), and :func:`build` turns that
stream into an immutable :class:`Transcript` with ids, sessions and turn numbers assigned.
Benchmark readers (LoCoMo, LongMemEval) put their questions in the same stream, as
:class:`Probe` items (or :class:`ReadProblem` for items that could not be read): the dataset
is parsed once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

from memdiag.transcript.events import RawRetrieval, RawWindow, RetrievalEvent, WindowEvent, resolve

ROLES = ("system", "user", "assistant", "tool")

# A transcript's messages and turns are frozen records, but one is made per message: a frozen
# dataclass's __init__ sets each field through object.__setattr__, about five times the cost of
# a plain one (0.1 s of a 50,000-message load). So they are frozen for the type checker, which
# rejects every assignment, and plain slots classes with the same equality and hash at run time.
_T = TypeVar("_T")
if TYPE_CHECKING:
    from typing_extensions import dataclass_transform

    @dataclass_transform(frozen_default=True)
    def record(cls: type[_T]) -> type[_T]: ...

else:

    def record(cls):
        return dataclass(slots=True, unsafe_hash=True)(cls)


@record
class Message:
    """One message of the transcript, with its place in sessions and turns."""

    index: int  # position in Transcript.messages
    id: str  # given id, or m<index+1>
    role: str  # system | user | assistant | tool
    content: str  # the text that is sent to the model (text blocks joined)
    session: str
    # global turn this message belongs to (0: before the first user message); a user message
    # the agent wrote in (metadata ``injected``) belongs to the turn it arrives in
    turn: int
    session_turn: int  # turn number inside its session (0: before its first user message)
    line: int = 0  # source line (1-based) or element number, for error messages
    ts: str | None = None
    name: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_call_id: str | None = None
    # docs/reference.md#transcript-input: an observed failure on an assistant message
    forgot: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # non-text blocks, extra fields

    @property
    def tool_call_ids(self) -> tuple[str, ...]:
        return tuple(str(c.get("id")) for c in self.tool_calls if c.get("id") is not None)


@dataclass(frozen=True, slots=True)
class SummaryEvent:
    """A summary the agent really produced (`{"type": "summary"}`)."""

    content: str
    after_index: int  # index of the last message before the event (-1: before any)
    replaces_through: int  # index of the last message it covers
    session: str
    line: int = 0
    # what the source tells of it (a coding agent's compaction: line, time, trigger, tokens
    # before and after; docs/coding-agents.md)
    meta: dict[str, Any] = field(default_factory=dict)


@record
class Turn:
    """One message of the human (a user message not ``injected``) and what answers it."""

    number: int  # 1.. across the transcript
    session: str
    session_turn: int  # 1.. inside its session
    user_index: int  # index of the user message
    end: int  # one past the last message index of this turn


@dataclass(frozen=True, slots=True)
class Probe:
    """A benchmark question (a LoCoMo QA item, a LongMemEval question) over the message ids
    that the format's reader gives."""

    id: str
    question: str
    answer: str | None  # None: an adversarial LoCoMo question without an answer
    evidence_ids: tuple[str, ...]  # messages holding the answer
    category: Any  # LoCoMo's category number, LongMemEval's question_type
    at: int | None  # turn of the question; None: asked after the conversation (LoCoMo)
    after_turn: int | None = None  # LoCoMo: the last turn of the sample
    at_id: str | None = None  # LongMemEval: message id of the question
    sample_id: str | None = None  # LoCoMo
    adversarial_answer: str | None = None  # LoCoMo
    unresolved_evidence: tuple[str, ...] = ()  # LoCoMo evidence that names no message
    evidence_sessions: tuple[str, ...] = ()  # LongMemEval: answer_session_ids
    question_date: Any = None  # LongMemEval

    def as_dict(self) -> dict[str, Any]:
        return {
            f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
            for f in fields(self)
        }


@dataclass(frozen=True, slots=True)
class ReadProblem:
    """Where a strict read stops: a record skipped with --skip-invalid, or a benchmark item
    that could not be read as a probe."""

    message: str
    line: int | None = None


@dataclass(frozen=True, slots=True)
class Transcript:
    path: str
    format: str
    messages: tuple[Message, ...]
    turns: tuple[Turn, ...]
    sessions: tuple[str, ...]  # in order of first appearance
    summaries: tuple[SummaryEvent, ...] = ()
    session_ts: dict[str, str] = field(default_factory=dict)
    skipped: int = 0  # lines skipped with --skip-invalid
    warnings: tuple[str, ...] = ()
    probes: tuple[Probe, ...] = ()  # a benchmark's questions (LoCoMo, LongMemEval)
    probe_problems: tuple[ReadProblem, ...] = ()  # what keeps the probes from being complete
    # observed requests (docs/reference.md#observed-windows), by `before`
    windows: tuple[WindowEvent, ...] = ()
    retrievals: tuple[RetrievalEvent, ...] = ()  # recorded memory searches, by `before`
    # what the source can and cannot tell (a framework's state without its system prompt, a
    # checkpoint's state that is not the model's input): said to the user, not problems
    notes: tuple[str, ...] = ()

    def window_at(self, number: int) -> WindowEvent | None:
        """The observed request of turn ``number`` that produced its final reply, if recorded."""
        found = None
        for w in self.windows:
            if self.messages[w.before].turn == number:
                found = w
        return found

    def message(self, message_id: str) -> Message:
        for m in self.messages:
            if m.id == message_id:
                return m
        raise KeyError(message_id)

    def turn(self, number: int) -> Turn:
        if not 1 <= number <= len(self.turns):
            raise IndexError(number)
        return self.turns[number - 1]

    def checked_probes(self) -> tuple[Probe, ...]:
        """The benchmark's probes; InputError naming the first item that could not be read."""
        if self.probe_problems:
            from memdiag.errors import InputError

            first = self.probe_problems[0]
            raise InputError(first.message, path=self.path, line=first.line)
        return self.probes


# --- the raw stream that format readers produce -------------------------------------------


@dataclass(slots=True)
class RawMessage:
    role: str
    content: str
    line: int = 0
    id: str | None = None
    session: str | None = None
    ts: str | None = None
    name: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_call_id: str | None = None
    forgot: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class RawSession:
    id: str
    line: int = 0
    ts: str | None = None


@dataclass(slots=True)
class RawSummary:
    content: str
    replaces_through: str | None = None  # message id; None: everything before the event
    line: int = 0
    meta: dict[str, Any] = field(default_factory=dict)


# a reader may yield the probes of a benchmark, and why some could not be read, along its messages
# and what a trace recorded of each request and memory search (docs/reference.md#observed-windows)
RawItem = RawMessage | RawSession | RawSummary | Probe | ReadProblem | RawWindow | RawRetrieval

DEFAULT_SESSION = "s1"


def opens_turn(m: RawMessage | Message) -> bool:
    """Turns are the human's (docs/reference.md#concepts): a user message opens one, unless the
    agent wrote it in (metadata ``injected``: a background task's notification, an
    interruption marker); that one stays in the window, part of the turn it arrives in."""
    return m.role == "user" and not m.metadata.get("injected")


def build(
    items: Iterable[RawItem],
    *,
    path: str,
    format: str,
    skipped: int = 0,
    warnings: Sequence[str] = (),
    notes: Sequence[str] = (),
) -> Transcript:
    """Assign ids, sessions and turns to a raw stream. Raises InputError on dangling references."""
    from memdiag.errors import InputError

    messages: list[Message] = []
    opened: list[tuple[int, str, int, int]] = []  # (number, session, session turn, user index)
    turn_session: str | None = None  # the session of the last turn opened
    sessions: list[str] = []
    known_sessions: set[str] = set()  # sessions is ordered; the set keeps lookups O(1)
    session_ts: dict[str, str] = {}
    pending_summaries: list[RawSummary] = []
    summary_after: list[int] = []
    pending_events: list[tuple[RawWindow | RawRetrieval, int]] = []
    session: str | None = None
    turn = 0
    session_turn = 0
    warn = list(warnings)
    items = list(items)
    # system messages before any session information belong to the first session named later
    default_session = next(
        (
            i.id if isinstance(i, RawSession) else str(i.session)
            for i in items
            if isinstance(i, RawSession) or (isinstance(i, RawMessage) and i.session is not None)
        ),
        DEFAULT_SESSION,
    )

    def enter_session(sid: str, ts: str | None) -> None:
        nonlocal session, session_turn
        if sid != session:
            if sid in known_sessions:
                warn.append(f"session {sid!r} resumes after another session; counted as one")
            else:
                sessions.append(sid)
                known_sessions.add(sid)
                session_turn = 0
            session = sid
        if ts and sid not in session_ts:
            session_ts[sid] = ts

    probes: list[Probe] = []
    probe_problems: list[ReadProblem] = []
    by_id: dict[str, int] = {}  # message id -> index (a repeated id is an error)
    for item in items:
        if not isinstance(item, RawMessage):  # one test for the common item, a message
            if isinstance(item, Probe):
                probes.append(item)
            elif isinstance(item, ReadProblem):
                probe_problems.append(item)
            elif isinstance(item, RawSession):
                enter_session(item.id, item.ts)
            elif isinstance(item, RawSummary):
                pending_summaries.append(item)
                summary_after.append(len(messages) - 1)
            else:  # RawWindow, RawRetrieval
                pending_events.append((item, len(messages)))
            continue
        if item.session is not None:
            enter_session(str(item.session), item.ts)
        elif session is None:
            enter_session(default_session, item.ts)
        assert session is not None
        index = len(messages)
        mid = item.id if item.id is not None else f"m{index + 1}"
        if mid in by_id:
            raise InputError(f"duplicate message id {mid!r}", path=path, line=item.line)
        by_id[mid] = index
        if opens_turn(item):
            turn += 1
            session_turn += 1
            opened.append((turn, session, session_turn, index))
            turn_session = session
        in_turn = turn_session == session
        messages.append(
            Message(  # positional, in field order: the cheaper call, once per message
                index,
                mid,
                item.role,
                item.content,
                session,
                turn if in_turn else 0,
                session_turn if in_turn else 0,
                item.line,
                item.ts,
                item.name,
                item.tool_calls,
                item.tool_call_id,
                item.forgot,
                item.metadata,
            )
        )
    # a turn ends where the next one starts or its session ends
    turns = _turns(opened, messages)

    summaries = []
    for raw, after in zip(pending_summaries, summary_after, strict=True):
        if raw.replaces_through is None:
            through = after
        elif raw.replaces_through in by_id:
            through = by_id[raw.replaces_through]
        else:
            raise InputError(
                f"field 'replaces_through': no message with id {raw.replaces_through!r}",
                path=path,
                line=raw.line,
            )
        if through > after:
            raise InputError(
                f"field 'replaces_through': {raw.replaces_through!r} comes after the summary",
                path=path,
                line=raw.line,
            )
        owner = messages[after].session if after >= 0 else (sessions[0] if sessions else "s1")
        summaries.append(SummaryEvent(raw.content, after, through, owner, raw.line, raw.meta))
    windows, retrievals = resolve(pending_events, messages, path, by_id)

    return Transcript(
        path=path,
        format=format,
        messages=tuple(messages),
        turns=tuple(turns),
        sessions=tuple(sessions),
        summaries=tuple(summaries),
        session_ts=session_ts,
        skipped=skipped,
        warnings=tuple(warn),
        notes=tuple(notes),
        probes=tuple(probes),
        probe_problems=tuple(probe_problems),
        windows=windows,
        retrievals=retrievals,
    )


def _turns(opened: list[tuple[int, str, int, int]], messages: list[Message]) -> list[Turn]:
    """The turns opened at those user messages, each up to the next one or its session's end."""
    out = []
    last = len(opened) - 1
    for k, (number, session, session_turn, user) in enumerate(opened):
        limit = opened[k + 1][3] if k < last else len(messages)
        end = user + 1
        while end < limit and messages[end].session == session:
            end += 1
        out.append(Turn(number, session, session_turn, user, end))
    return out
