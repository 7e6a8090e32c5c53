"""One model of an LLM call (docs/traces.md): what every trace, call log and request log records.

A source that records LLM calls (OpenTelemetry spans and log records, OpenLLMetry attributes,
LangSmith runs, Langfuse observations, request/response logs) only maps its records to
:class:`Call` and :class:`Search` objects; :func:`memdiag.transcript.calls.interpret.interpret`
turns them into the transcript and its observed windows and retrievals, with rules that do not
depend on the framework (which calls are the human's turns, which content of a request was
injected, which agent the human talks to).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memdiag.transcript.events import Record
from memdiag.transcript.model import RawMessage

# framework markers a reader may put on a call; the interpreter's own rules decide without them
SUMMARIZATION = "summarization"  # LangChain's `lc_source: summarization`, a summarizer node


@dataclass(frozen=True, slots=True)
class Usage:
    """What the provider reported for a call."""

    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Call:
    """One LLM call: the input messages as sent, the output, and who made it.

    ``where`` is the record's path inside the file (errors, ``window.source``). ``agent`` names
    the agent that made the call as the source nests it (``travel-agent/researcher``); None
    when the source names none. ``nested`` says the source saw the call run under a tool (an
    agent called as a tool, a tool that calls a model).
    """

    where: str
    inputs: tuple[RawMessage, ...]
    outputs: tuple[RawMessage, ...]
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    session: str | None = None  # the conversation (gen_ai.conversation.id, a session id)
    user: str | None = None
    agent: str | None = None
    parent: str | None = None  # the id of the span or run the call ran under
    id: str | None = None
    start: Any = None  # the source's time, as it wrote it
    markers: frozenset[str] = frozenset()
    nested: bool = False
    thread: str | None = None  # a thread id, where the source has one beside its session

    @property
    def conversation(self) -> str | None:
        """The conversation the call belongs to: its session, else its thread."""
        return self.session if self.session is not None else self.thread


@dataclass(frozen=True, slots=True)
class Search:
    """A recorded long-term memory search (a retriever run, a ``search_memory`` span)."""

    where: str
    query: str
    records: tuple[Record, ...]
    session: str | None = None
    agent: str | None = None
    nested: bool = False
    start: Any = None


CallItem = Call | Search

__all__ = ["SUMMARIZATION", "Call", "CallItem", "Search", "Usage"]
